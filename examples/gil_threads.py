"""Three threads share one interpreter: two compute at once (and so take turns with the
GIL), one waits on a socket-like queue. Record it with

    pytrace-sample -o gil.json -- python3 examples/gil_threads.py

Each computing thread is off the CPU about half of the time although the machine has
cores to spare: the waits inside `crunch` are the GIL.
"""
import queue
import threading
import time


def crunch(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:
        n += sum(i * i for i in range(500))
    return n


def listen(inbox):
    while True:
        item = inbox.get()
        if item is None:
            return
        time.sleep(0.02)


def main():
    inbox = queue.Queue()
    listener = threading.Thread(target=listen, args=(inbox,), name="listener")
    workers = [threading.Thread(target=crunch, args=(1.0,), name="crunch-%d" % i)
               for i in (1, 2)]
    listener.start()
    for w in workers:
        w.start()
    for i in range(20):
        inbox.put(i)
        time.sleep(0.03)
    inbox.put(None)
    for w in workers + [listener]:
        w.join()


if __name__ == "__main__":
    main()
