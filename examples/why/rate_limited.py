"""sleep: a loop that works 20 ms on each item, then sleeps 30 ms to stay under a rate
limit it does not need: most of the run is the sleeps."""
import time


def work(item):
    end = time.thread_time() + 0.02
    n = 0
    while time.thread_time() < end:
        n += sum(i * i for i in range(200)) + item
    return n


if __name__ == "__main__":
    total = 0
    for item in range(20):
        total += work(item)
        time.sleep(0.03)
    print(total)
