#!/usr/bin/env python3
"""Overhead of the perf backend against `perf record --call-graph dwarf`, same run.

For each rate (100, 1000, 10000 Hz) runs bench/cpu_bound (fixed work, one thread) bare,
under pytrace-sample and under perf record, REPEAT times each, interleaved, and prints
medians: target slowdown (its own wall time against the bare run), profiler CPU (the
profiler's CPU time minus the target's, per second of target wall time, so 1.0 is one
core), achieved sampling rate (samples per second of target CPU) and lost records.

usage: bench/perf_overhead.py [--repeat N] [--rounds N]    (needs root for perf record
of kernel-mode samples; pytrace-sample runs as the caller)
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "pytrace-sample")
TARGET = os.path.join(ROOT, "build", "bench", "cpu_bound")


def run(cmd):
    """Runs @cmd; returns (target wall s, target cpu s, profiler cpu s, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate()
    m = re.search(r"wall_ns (\d+) cpu_ns (\d+)", out)
    if p.returncode or not m:
        raise SystemExit("failed: %s\n%s%s" % (" ".join(cmd), out, err))
    return int(m.group(1)) / 1e9, int(m.group(2)) / 1e9, out, err


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(cmd):
    before = children_cpu()
    wall, cpu, out, err = run(cmd)
    total = children_cpu() - before  # the profiler and the target it waited for
    return {"wall": wall, "cpu": cpu, "prof_cpu": max(total - cpu, 0.0), "out": out, "err": err}


def ours(hz, rounds, tmp):
    path = os.path.join(tmp, "t.json")
    r = measure([TOOL, "-q", "-F", str(hz), "-o", path, "--", TARGET, str(rounds)])
    other = json.load(open(path))["otherData"]
    r["samples"] = other["samples"]
    r["lost"] = other["lost_records"] + other["lost_samples"]
    os.unlink(path)
    return r


def perf_record_stats(path):
    """(samples, lost events) of a perf.data file."""
    stats = subprocess.run(["perf", "report", "-i", path, "--stats"], capture_output=True,
                           text=True).stdout
    m = re.search(r"SAMPLE events:\s+(\d+)", stats)
    lost = re.search(r"LOST events:\s+(\d+)", stats)
    return (int(m.group(1)) if m else 0), (int(lost.group(1)) if lost else 0)


def perf_record(hz, rounds, tmp):
    path = os.path.join(tmp, "perf.data")
    r = measure(["perf", "record", "-q", "-F", str(hz), "--call-graph", "dwarf", "-o", path,
                 "--", TARGET, str(rounds)])
    r["samples"], r["lost"] = perf_record_stats(path)
    os.unlink(path)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2000)
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", ROOT, "pytrace-sample", "build/bench/cpu_bound"],
                   check=True)
    tmp = tempfile.mkdtemp()
    rows = []
    for hz in (100, 1000, 10000):
        runs = {"bare": [], "pytrace-sample": [], "perf record": []}
        for _ in range(args.repeat):
            runs["bare"].append(measure([TARGET, str(args.rounds)]))
            runs["pytrace-sample"].append(ours(hz, args.rounds, tmp))
            runs["perf record"].append(perf_record(hz, args.rounds, tmp))
        base = statistics.median(r["wall"] for r in runs["bare"])
        for name in ("pytrace-sample", "perf record"):
            rs = runs[name]
            wall = statistics.median(r["wall"] for r in rs)
            prof = statistics.median(r["prof_cpu"] / r["wall"] for r in rs)
            rate = statistics.median(r["samples"] / r["cpu"] for r in rs)
            lost = max(r["lost"] for r in rs)
            rows.append((hz, name, base, wall, wall / base - 1, prof, rate, lost))
    print("%6s  %-15s %9s %9s %9s %11s %10s %6s" % ("Hz", "profiler", "bare s", "traced s",
                                                    "slowdown", "prof. CPU", "rate Hz", "lost"))
    for hz, name, base, wall, slow, prof, rate, lost in rows:
        print("%6d  %-15s %9.3f %9.3f %8.1f%% %9.1f%% %10.0f %6d" % (
            hz, name, base, wall, 100 * slow, 100 * prof, rate, lost))
    print("(medians of %d runs; prof. CPU = profiler CPU / target wall time; rate = samples"
          " per second of target CPU)" % args.repeat)


if __name__ == "__main__":
    main()
