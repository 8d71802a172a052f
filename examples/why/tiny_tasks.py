"""task-overhead: a Pool of 2 maps 20,000 tasks of a few microseconds each, one at a
time (chunksize=1): handing each task over costs more than running it."""
import multiprocessing


def square(x):
    return x * x


if __name__ == "__main__":
    with multiprocessing.Pool(2) as pool:
        total = sum(pool.imap(square, range(20000), chunksize=1))
    print(total)
