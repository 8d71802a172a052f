"""imbalance in a thread pool: a ThreadPoolExecutor(4) hashes 8 blocks of data, one of
them eight times the others, submitted last; hashlib lets go of the GIL, so the threads
run at once, and three of them sit idle while the big block is hashed."""
import concurrent.futures
import hashlib
import time

BLOCK = b"x" * (8 << 20)


def digest(rounds):
    h = hashlib.sha256()
    for _ in range(rounds):
        h.update(BLOCK)
    return h.hexdigest()


if __name__ == "__main__":
    sizes = [4] * 7 + [32]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(digest, sizes))
    print("%d blocks in %.2f s" % (len(sizes), time.monotonic() - started))
