"""oversubscription: a Pool of 4 workers per CPU computes: the workers wait, runnable,
for a CPU most of the time."""
import multiprocessing
import os
import time


def job(seconds):
    end = time.process_time() + seconds
    n = 0
    while time.process_time() < end:
        n += sum(i * i for i in range(200))
    return n


if __name__ == "__main__":
    workers = 4 * os.cpu_count()
    with multiprocessing.Pool(workers) as pool:
        pool.map(job, [0.15] * workers, chunksize=1)
