"""worker-startup: a spawn Pool replaces its worker after every task
(maxtasksperchild=1): each of 12 tasks of 10 ms pays an interpreter's start-up."""
import multiprocessing
import time


def job(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
    return seconds


if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2, maxtasksperchild=1) as pool:
        pool.map(job, [0.01] * 12, chunksize=1)
