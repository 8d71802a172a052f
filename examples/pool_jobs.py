"""A multiprocessing.Pool of 4 workers runs 8 jobs of different lengths: each job waits
`init_t` tenths of a second, then computes for `interval_t` twentieths of a second and
sleeps a little, `count` times. Two of the jobs start late and run long, so the pool
ends with idle workers waiting for the slowest: the kind of run that is slow for no
obvious reason. Record it with

    pytrace-sample -o pool.json -- python3 examples/pool_jobs.py

and open pool.json in https://ui.perfetto.dev: one row per worker, each job a `proc`
slice under the pool's `worker` loop, its sleeps as waits inside it.
"""
import multiprocessing
import time


def compute(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(200))
    return n


def proc(init_t, interval_t, count):
    time.sleep(init_t / 10)
    total = 0
    for _ in range(count):
        total += compute(interval_t / 20)
        time.sleep(0.01)
    return total


if __name__ == "__main__":
    jobs = [(0, 1, 5), (0, 1, 5), (2, 1, 5), (5, 1, 5)] * 2
    started = time.monotonic()
    with multiprocessing.Pool(4) as pool:
        pool.starmap(proc, jobs, 1)
    print("%d jobs in %.2f s" % (len(jobs), time.monotonic() - started))
