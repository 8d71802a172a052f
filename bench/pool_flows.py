#!/usr/bin/env python3
"""What drawing a process pool's tasks as arrows costs (eBPF, as root): interleaved runs.

Two workloads, each timed by itself (its own CPU time, workers included, from
getrusage, and its wall time):
- writes: a Python loop of 16-byte os.write()s to /dev/null (not pickles): what every
  read and write of a traced Python process pays for being looked at;
- pool: multiprocessing.Pool(2).imap() over tiny tasks with chunksize 1, 4 messages a
  task: what each message pays (the kernel's stack read at it, its marker and flow).
Each runs bare, under `pytrace-sample --no-flows` and under `pytrace-sample` (flows on),
in rotated order each round; prints medians with min-max of the workload's CPU time,
the tool's own CPU time (the whole tree's from wait4() less the workload's) and the
trace's size.

usage: sudo bench/pool_flows.py [--runs N] [--writes N] [--tasks N] [--tool PATH]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITES = (
    "import os, resource, sys, time\n"
    "n = int(sys.argv[1]); fd = os.open('/dev/null', os.O_WRONLY); b = b'x' * 16\n"
    "t = time.monotonic()\n"
    "for _ in range(n): os.write(fd, b)\n"
    "r = resource.getrusage(resource.RUSAGE_SELF)\n"
    "print('cpu %f wall %f' % (r.ru_utime + r.ru_stime, time.monotonic() - t))\n"
)
POOL = (
    "import multiprocessing, resource, sys, time\n"
    "def f(x): return x\n"
    "if __name__ == '__main__':\n"
    "    n = int(sys.argv[1]); t = time.monotonic()\n"
    "    with multiprocessing.get_context('fork').Pool(2) as p:\n"
    "        assert sum(p.imap(f, range(n), 1)) == n * (n - 1) // 2\n"
    "        p.close(); p.join()\n"
    "    r, c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
    "    print('cpu %f wall %f' % (r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime,\n"
    "                             time.monotonic() - t))\n"
)


def run(argv, trace):
    """(workload cpu s, wall s, tool cpu s, trace bytes) of one run."""
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    m = re.search(r"cpu ([\d.]+) wall ([\d.]+)", out)
    if os.waitstatus_to_exitcode(status) or not m:
        raise SystemExit("failed: %s\n%s" % (" ".join(argv), out))
    cpu, wall = float(m.group(1)), float(m.group(2))
    size = os.path.getsize(trace) if trace and os.path.exists(trace) else 0
    total = ru.ru_utime + ru.ru_stime
    return cpu, wall, (total - cpu) if trace else 0.0, size


def fmt(values, scale=1.0, unit=""):
    v = sorted(x * scale for x in values)
    return "%.3g%s (%.3g-%.3g)" % (statistics.median(v), unit, v[0], v[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--writes", type=int, default=300000)
    ap.add_argument("--tasks", type=int, default=5000)
    ap.add_argument("--tool", default=os.path.join(ROOT, "pytrace-sample"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: the arrows are drawn with eBPF")
    tmp = tempfile.mkdtemp()
    trace = os.path.join(tmp, "t.json")
    configs = [("bare", None), ("no flows", ["--no-flows"]), ("flows", [])]
    print("workload   config     workload cpu          tool cpu              trace")
    for name, code, n in (("writes", WRITES, args.writes), ("pool", POOL, args.tasks)):
        cmd = [sys.executable, "-c", code, str(n)]
        results = {c: [] for c, _ in configs}
        for r in range(args.runs):
            for i in range(len(configs)):
                label, extra = configs[(i + r) % len(configs)]
                if extra is None:
                    results[label].append(run(cmd, None))
                else:
                    argv = [args.tool, "-q", "--force", "--backend", "bpf", "-o", trace] + \
                        extra + ["--"] + cmd
                    results[label].append(run(argv, trace))
        for label, _ in configs:
            rows = results[label]
            print("%-10s %-10s %-21s %-21s %s" % (
                name, label, fmt([x[0] for x in rows], 1, " s"),
                fmt([x[2] for x in rows], 1, " s") if label != "bare" else "-",
                fmt([x[3] for x in rows], 1e-6, " MB") if label != "bare" else "-"))
    print("(%d runs each; writes: %d, pool tasks: %d)" % (args.runs, args.writes, args.tasks))


if __name__ == "__main__":
    main()
