#!/usr/bin/env python3
"""What recording many short-lived interpreters costs the profiler.

Records tests/fixtures/py_spawn_pool.py (a "spawn" pool that starts a fresh interpreter
for every task) with TASKS tasks, REPEAT times, and prints the medians of:
- peak RSS: ru_maxrss from wait4 of the profiler (the largest of it, the processes it
  reaped, and this script at the fork: all ~20 MB, so above that it is the profiler's);
- tail: from the fixture's last line (printed just before it exits, CLOCK_MONOTONIC)
  to the profiler's exit, i.e. how long it keeps working after the command is done;
- profiler CPU: wait4's user+sys less the CPU the fixture reports for itself and the
  workers it reaped;
- the trace's size and its number of processes, to show nothing was dropped.

usage: bench/spawn_pool.py [--tasks N[,N...]] [--repeat N] [--python PATH] [--tool PATH]
                           [-- TOOL_ARGS...]
(as root for the default eBPF backend; --backend perf works unprivileged)
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "pytrace-sample")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_spawn_pool.py")


def count_processes(path):
    """Processes with slices in the trace, counted in a child: loading a big trace here
    would grow this process, and a child forked from it starts with its memory counted
    in its ru_maxrss (the memory a process had before its exec counts too)."""
    code = ("import json, sys; d = json.load(open(sys.argv[1])); "
            "print(len({e['pid'] for e in d['traceEvents'] if e.get('ph') == 'X'}))")
    return int(subprocess.run([sys.executable, "-c", code, path], check=True,
                              capture_output=True, text=True).stdout)


def record(tool, python, tasks, tool_args, tmp):
    path = os.path.join(tmp, "t.json")
    cmd = [tool, "-q", "-o", path, "--force"] + tool_args + ["--", python, FIXTURE, str(tasks)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode()
    _, status, ru = os.wait4(p.pid, 0)
    exit_ns = time.monotonic_ns()
    p.returncode = os.waitstatus_to_exitcode(status)
    done = [line.split() for line in out.splitlines() if line.startswith("done ")]
    if p.returncode or not done:
        raise SystemExit("failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), out, err))
    r = {
        "rss_mb": ru.ru_maxrss / 1024,
        "tail_s": (exit_ns - int(done[0][1])) / 1e9,
        "cpu_s": max(ru.ru_utime + ru.ru_stime - float(done[0][2]), 0.0),
        "trace_mb": os.path.getsize(path) / 1e6,
        "processes": count_processes(path),
    }
    os.unlink(path)
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("--tasks", default="50,200", help="comma-separated task counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--tool", default=TOOL, help="the pytrace-sample binary (another build)")
    ap.add_argument("tool_args", nargs="*", help="extra pytrace-sample options (after --)")
    args = ap.parse_args()
    print("| tasks | peak RSS (MB) | tail (s) | profiler CPU (s) | trace (MB) | processes |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for tasks in [int(t) for t in args.tasks.split(",")]:
            runs = [record(args.tool, args.python, tasks, args.tool_args, tmp) for _ in range(args.repeat)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print("| %d | %.0f (%.0f-%.0f) | %.2f (%.2f-%.2f) | %.2f | %.1f | %d |" % (
                tasks, med["rss_mb"], min(r["rss_mb"] for r in runs),
                max(r["rss_mb"] for r in runs), med["tail_s"], min(r["tail_s"] for r in runs),
                max(r["tail_s"] for r in runs), med["cpu_s"], med["trace_mb"],
                med["processes"]), flush=True)


if __name__ == "__main__":
    main()
