"""imbalance: a Pool of 2 maps 6 jobs of 0.2 s and one of 1.6 s; the long one is sent
last, so one worker runs it alone while the other waits for the pool to end."""
import multiprocessing
import time


def job(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(200))
    return n


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        pool.map(job, [0.2] * 6 + [1.6], chunksize=1)
