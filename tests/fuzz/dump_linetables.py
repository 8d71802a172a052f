#!/usr/bin/env python3
"""Writes seeds for fuzz_line_table: real line tables of a few functions.

Run with each interpreter (3.8 to 3.13): python3.N dump_linetables.py DIR. Each seed is
the harness's input: the minor version, firstlineno and a lasti (4 bytes each, little
endian), then co_lnotab (3.8, 3.9) or co_linetable (3.10: PEP 626, 3.11+: locations).
"""
import os
import struct
import sys


def sample(n):
    total = 0
    for i in range(n):
        if i % 3:
            total += i
        else:
            total -= 1
    return total


def nested(xs):
    return [(lambda v: v * 2)(x) for x in xs if x]


class Shape:
    def area(self, w, h,
             scale=1):
        try:
            return w * h * scale
        except TypeError:
            return None


def main():
    out = sys.argv[1]
    minor = sys.version_info[1]
    if sys.version_info[0] != 3 or minor < 8:
        return  # not a version the reader reads
    os.makedirs(out, exist_ok=True)
    for fn in (sample, nested, Shape.area, main):
        code = fn.__code__
        table = code.co_lnotab if minor < 10 else code.co_linetable
        lasti = len(code.co_code) // 2 & ~1
        seed = struct.pack("<BII", minor, code.co_firstlineno, lasti) + table
        name = "py3%d-%s" % (minor, fn.__name__)
        with open(os.path.join(out, name), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    main()
