"""A `spawn` pool (a fresh interpreter per worker, as on macOS and Windows) maps a
function over 40 items in chunks of 5, then the parent sums the results: start-up cost,
chunking and the parent's share of the work in one picture. Record it with

    pytrace-sample -o spawn.json -- python3 examples/spawn_pool.py
"""
import multiprocessing
import time


def score(item):
    end = time.monotonic() + 0.005 * (1 + item % 4)
    n = 0
    while time.monotonic() < end:
        n += item
    return n


if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    started = time.monotonic()
    with ctx.Pool(3) as pool:
        results = list(pool.imap(score, range(40), chunksize=5))
    print("%d results in %.2f s" % (len(results), time.monotonic() - started))
