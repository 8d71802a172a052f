"""No big cause: a Pool with one worker per CPU maps 4 equal jobs per worker of 0.1 s of
computing each, with small arguments: the workers are busy to the end."""
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
    workers = os.cpu_count()
    with multiprocessing.Pool(workers) as pool:
        pool.map(job, [0.1] * (4 * workers), chunksize=1)
