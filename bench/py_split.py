"""CPU-bound Python with a known split of time between three functions, for benchmarks.

usage: py_split.py ROUNDS
Each round runs the same loop 60000 times in a(), 30000 in b(), 10000 in c(): fixed work,
so a profiler's cost shows as a longer run; about 6:3:1 of the time.
Prints "wall_ns W cpu_ns C" and "split a FA b FB c FC": the fraction of the three
functions' time each really took, measured by the script itself.
"""
import sys
import time


def burn(n):
    x = 0
    for i in range(n):
        x += i * i
    return x


def a():
    burn(60000)


def b():
    burn(30000)


def c():
    burn(10000)


def main():
    rounds = int(sys.argv[1])
    spent = {"a": 0, "b": 0, "c": 0}
    w0, c0 = time.monotonic_ns(), time.process_time_ns()
    for _ in range(rounds):
        for name, f in (("a", a), ("b", b), ("c", c)):
            t = time.perf_counter_ns()
            f()
            spent[name] += time.perf_counter_ns() - t
    cpu = time.process_time_ns() - c0
    print("wall_ns %d cpu_ns %d" % (time.monotonic_ns() - w0, cpu))
    total = sum(spent.values())
    print("split " + " ".join("%s %.4f" % (k, v / total) for k, v in spent.items()))


main()
