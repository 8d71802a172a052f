"""lock-contention: 2 workers each compute 8 pieces of work while holding one shared
lock: one waits while the other works."""
import multiprocessing
import time

lock = None


def init(shared):
    global lock
    lock = shared


def job(seconds):
    n = 0
    for _ in range(8):
        with lock:
            end = time.process_time() + seconds / 8
            while time.process_time() < end:
                n += sum(i * i for i in range(200))
    return n


if __name__ == "__main__":
    with multiprocessing.Pool(2, initializer=init, initargs=(multiprocessing.Lock(),)) as pool:
        pool.map(job, [0.6] * 4, chunksize=1)
