"""gil-contention: 4 threads of one process compute at once; only one runs Python at a
time, however many CPUs there are."""
import threading
import time


def crunch(seconds):
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += sum(i * i for i in range(500))
    return n


if __name__ == "__main__":
    threads = [threading.Thread(target=crunch, args=(0.3,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
