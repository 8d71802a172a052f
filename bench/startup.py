#!/usr/bin/env python3
"""Start-up and tail of `pytrace-sample -- CMD` against bare CMD, interleaved runs.

CMD is build/bench/stamp (or, with --python, `python3 -c` doing the same), which prints
CLOCK_MONOTONIC when its main code starts and when it is about to exit. For each run:
- start: from just before the launcher starts the process (bare CMD, or the tool) to
  CMD's first stamp: how late the command starts;
- tail: from CMD's last stamp to the launcher's wait4() returning: how long the tool
  takes after the command ended (bare: the exit itself);
- cpu before: the tool's CPU time when CMD starts, read by CMD from /proc/PPID/schedstat
  (the main thread's: all of the tool's for the C stamp, which starts before the tool
  starts another thread; with --python, when the first line runs, so the main thread's
  work during the interpreter's start-up too, not the drainer thread's);
- cpu: user + system time of the whole tree from wait4()'s rusage (the tool and CMD).
Configurations run in turn (bare, --backend bpf, --backend perf, rotated each round so
none always goes first); prints medians with min-max. Needs root for --backend bpf.

usage: bench/startup.py [--runs N] [--python] [--sleep-ms MS] [--tool PATH ...]
(several --tool: each is run with each backend, in the same rounds: before and after)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAMP = os.path.join(ROOT, "build", "bench", "stamp")
PY_STAMP = (
    "import time; s = time.monotonic_ns(); import os, sys; ms = int(sys.argv[1]); "
    "p = int(open('/proc/%d/schedstat' % os.getppid()).read().split()[0]); "
    "time.sleep(ms / 1000); "
    "print('start_ns %d end_ns %d parent_cpu_ns %d' % (s, time.monotonic_ns(), p))"
)


def command(args):
    if args.python:
        return [sys.executable, "-c", PY_STAMP, str(args.sleep_ms)]
    return [STAMP, str(args.sleep_ms)]


def run_once(argv, out_path):
    """Returns (start s, tail s, cpu before start s, cpu s) of one run of @argv."""
    with open(out_path, "w+") as out:
        t0 = time.monotonic_ns()
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        t1 = time.monotonic_ns()
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read()
    m = re.search(r"start_ns (\d+) end_ns (\d+) parent_cpu_ns (-?\d+)", text)
    if p.returncode or not m:
        raise SystemExit("failed (status %d): %s\n%s" % (p.returncode, " ".join(argv), text))
    start, end = int(m.group(1)), int(m.group(2))
    before = int(m.group(3)) / 1e9
    return (start - t0) / 1e9, (t1 - end) / 1e9, before, ru.ru_utime + ru.ru_stime


def fmt(values, scale=1000):
    v = [x * scale for x in values]
    return "%7.1f (%.1f-%.1f)" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=11, help="runs of each configuration")
    ap.add_argument("--python", action="store_true", help="CMD is python3 -c, not the C stamp")
    ap.add_argument("--sleep-ms", type=int, default=0, help="CMD sleeps this long")
    ap.add_argument("--tool", action="append", help="pytrace-sample to run (default: ./pytrace-sample)")
    ap.add_argument("--backends", default="bpf,perf", help="comma-separated")
    args = ap.parse_args()
    if not args.python and not os.access(STAMP, os.X_OK):
        raise SystemExit("build it first: make build/bench/stamp")
    cmd = command(args)
    with tempfile.TemporaryDirectory() as tmp:
        trace, out = os.path.join(tmp, "t.json"), os.path.join(tmp, "out")
        tools = args.tool or [os.path.join(ROOT, "pytrace-sample")]
        configs = [("bare", cmd)]
        for t, tool in enumerate(tools):
            for backend in args.backends.split(","):
                name = backend if len(tools) == 1 else "%d:%s" % (t + 1, backend)
                configs.append(
                    (name, [tool, "-q", "--backend", backend, "-o", trace, "--force", "--"] + cmd)
                )
        results = {name: [] for name, _ in configs}
        run_once(configs[-1][1], out)  # warm-up: page cache, kernel BTF
        for i in range(args.runs):
            for name, argv in configs[i % len(configs):] + configs[: i % len(configs)]:
                results[name].append(run_once(argv, out))
    print("CMD: %s; %d runs each, median (min-max), ms" % (" ".join(cmd), args.runs))
    for t, tool in enumerate(tools if len(tools) > 1 else []):
        print("%d: %s" % (t + 1, tool))
    row = "%-8s %-22s %-22s %-22s %-22s"
    print(row % ("", "start", "tail", "tool cpu before start", "cpu (tool + CMD)"))
    for name, _ in configs:
        cols = list(zip(*results[name]))
        before = "-" if name == "bare" else fmt(cols[2])
        print(row % (name, fmt(cols[0]), fmt(cols[1]), before, fmt(cols[3])))


if __name__ == "__main__":
    main()
