#!/usr/bin/env python3
"""Python profiling on both backends against `perf record`, on the same fixed work.

For each rate (100, 1000, 10000 Hz) runs bench/py_split.py (one thread, a known 6:3:1
split of time between functions a, b and c, which it measures itself) bare, under
pytrace-sample with --backend perf and --backend bpf, and under `perf record
--call-graph dwarf`, REPEAT times each, interleaved. Prints the target's slowdown (fastest
runs: bare runs here vary by +-20 %) and medians of:
profiler CPU (per second of target wall time: 100 % is one core), achieved sampling rate
(samples per second of target CPU), lost records, and the split error: the largest
difference, in percentage points, between the share of time the trace gives a, b or c
and the share the script measured (perf record has no Python frames: no split).

Issue 5's targets for the eBPF backend: at 1 kHz under 1 % slowdown and 1 % of a core,
99 % of the rate, nothing lost; at 10 kHz under 5 % of a core. With bpf the kernel reads
Python stacks at each sample and perf's record (and its stack copy) is dropped; with perf
they are read from user space about 1 ms after each sample.

usage: bench/python_split.py [--repeat N] [--rounds N] [--python PATH]   (as root)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from perf_overhead import ROOT, TOOL, measure, perf_record_stats  # noqa: E402

FIXTURE = os.path.join(ROOT, "bench", "py_split.py")


def true_split(out):
    for line in out.splitlines():
        if line.startswith("split "):
            parts = line.split()[1:]
            return {parts[i]: float(parts[i + 1]) for i in range(0, len(parts), 2)}
    raise SystemExit("no split printed:\n" + out)


def startup_cpu(backend, hz, cmd, tmp):
    """Profiler CPU for one round of the fixture: loading, attaching, writing."""
    path = os.path.join(tmp, "s.json")
    r = measure([TOOL, "-q", "--backend", backend, "-F", str(hz), "-o", path, "--"]
                + cmd[:-1] + ["1"])
    os.unlink(path)
    return r["prof_cpu"]


def ours(backend, hz, cmd, tmp):
    path = os.path.join(tmp, "t.json")
    r = measure([TOOL, "-q", "--backend", backend, "-F", str(hz), "-o", path, "--"] + cmd)
    r["startup"] = startup_cpu(backend, hz, cmd, tmp)
    doc = json.load(open(path))
    other = doc["otherData"]
    r["samples"] = other["samples"]
    r["lost"] = other["lost_records"] + other["lost_samples"]
    spent = {"a": 0, "b": 0, "c": 0}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e.get("cat") == "python" and e["name"] in spent:
            spent[e["name"]] += e["dur"]
    total = sum(spent.values())
    want = true_split(r["out"])
    r["split_err"] = max(abs(spent[k] / total - want[k]) for k in spent) if total else 1.0
    os.unlink(path)
    return r


def perf_record(hz, cmd, tmp):
    path = os.path.join(tmp, "perf.data")
    r = measure(["perf", "record", "-q", "-F", str(hz), "--call-graph", "dwarf", "-o", path,
                 "--"] + cmd)
    r["samples"], r["lost"] = perf_record_stats(path)
    r["split_err"] = None
    r["startup"] = measure(["perf", "record", "-q", "-F", str(hz), "--call-graph", "dwarf",
                            "-o", path, "--"] + cmd[:-1] + ["1"])["prof_cpu"]
    os.unlink(path)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3")
    args = ap.parse_args()
    subprocess.run(["make", "-s", "-C", ROOT, "pytrace-sample"], check=True)
    cmd = [args.python, FIXTURE, str(args.rounds)]
    tmp = tempfile.mkdtemp()
    names = ("pytrace perf", "pytrace bpf", "perf record")
    rows = []
    for hz in (100, 1000, 10000):
        runs = {n: [] for n in ("bare",) + names}
        for _ in range(args.repeat):
            runs["bare"].append(measure(cmd))
            runs["pytrace perf"].append(ours("perf", hz, cmd, tmp))
            runs["pytrace bpf"].append(ours("bpf", hz, cmd, tmp))
            runs["perf record"].append(perf_record(hz, cmd, tmp))
        # This VM's bare runs vary by +-20 %: the fastest run of each is the least disturbed.
        base = min(r["wall"] for r in runs["bare"])
        for name in names:
            rs = runs[name]
            wall = min(r["wall"] for r in rs)
            errs = [r["split_err"] for r in rs if r["split_err"] is not None]
            rows.append((hz, name, wall / base - 1,
                         statistics.median(r["prof_cpu"] / r["wall"] for r in rs),
                         statistics.median(max(r["prof_cpu"] - r["startup"], 0) / r["wall"]
                                           for r in rs),
                         statistics.median(r["samples"] / r["cpu"] for r in rs),
                         max(r["lost"] for r in rs),
                         statistics.median(errs) if errs else None))
    print("%6s  %-13s %9s %10s %10s %9s %6s %10s" % (
        "Hz", "profiler", "slowdown", "prof. CPU", "steady CPU", "rate Hz", "lost", "split err"))
    for hz, name, slow, prof, steady, rate, lost, err in rows:
        print("%6d  %-13s %8.1f%% %9.1f%% %9.1f%% %9.0f %6d %10s" % (
            hz, name, 100 * slow, 100 * prof, 100 * steady, rate, lost,
            "-" if err is None else "%.1f pp" % (100 * err)))
    print("(%d runs each, %s; slowdown: fastest traced run against fastest bare run; other"
          " columns medians; prof. CPU = profiler CPU / target wall time; steady CPU = the"
          " same less what the profiler spends on one round of the fixture (start-up,"
          " attach, writing); rate = samples per second of target CPU)"
          % (args.repeat, args.python))


if __name__ == "__main__":
    main()
