"""serialization: a Pool of 2 gets 16 tasks, each with 16 MB of data to sum a few bytes
of: pickling, the pipe and unpickling take the time, not the work."""
import multiprocessing


def head_sum(data):
    return sum(data[:100])


if __name__ == "__main__":
    blobs = [bytes(16 << 20) for _ in range(16)]
    with multiprocessing.Pool(2) as pool:
        print(sum(pool.map(head_sum, blobs, chunksize=1)))
