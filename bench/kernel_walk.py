#!/usr/bin/env python3
"""What the eBPF reader costs in the kernel per sample, reading arguments or not.

Runs a Python program under pytrace-sample --backend bpf, with and without --no-args,
REPEAT times each, interleaved, with the kernel's BPF statistics on
(kernel.bpf_stats_enabled): while the tool runs, polls `bpftool prog show` for its
programs' run counts and run times, and prints per program the median nanoseconds per
run. on_sample runs at every sample (it walks the Python stack, and reads arguments with
it), on_switch at every context switch of a traced thread.

Two programs: bench/py_split.py (a shallow CPU-bound stack, 4 frames of 1 argument or
none) and a 22-frame recursion whose every frame has 3 arguments (an int, a str and a
list). Issue 10's budget: reading arguments adds at most 25 % kernel time per sample.

With --depths D,D,...: instead, the cost per sample of walking stacks D frames deep
(tests/fixtures/py_deep.py computing at the bottom of a recursion, 2 arguments a frame),
with arguments; --tool PATH measures another build the same way (before and after).

usage: bench/kernel_walk.py [--repeat N] [--hz HZ] [--python PATH] [--depths D,...]
                            [--tool PATH]   (as root)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "pytrace-sample")
SPLIT = os.path.join(ROOT, "bench", "py_split.py")
DEEP_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_deep.py")
DEEP = """
import sys
def down(n, name, items):
    if n:
        return down(n - 1, name, items)
    x = 0
    for i in range(3000000):
        x += i
    return x
down(20, "a name of some length", [1, 2, 3])
"""
PROGRAMS = ("on_sample", "on_switch")


def bpf_progs():
    """{id: (name, run_cnt, run_time_ns)} of the loaded programs we know by name."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    progs = {}
    for p in json.loads(out.stdout or "[]"):
        if p.get("name") in PROGRAMS:
            progs[p["id"]] = (p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0))
    return progs


def run_once(cmd, no_args, hz, tmp, tool_path=TOOL):
    """ns per run of each program over one traced run of @cmd."""
    before = set(bpf_progs())
    out = os.path.join(tmp, "t.json")
    args = [tool_path, "-q", "--backend", "bpf", "-F", str(hz), "-o", out, "--force"]
    tool = subprocess.Popen(args + (["--no-args"] if no_args else []) + ["--"] + cmd,
                            stdout=subprocess.DEVNULL)
    last = {}
    while tool.poll() is None:
        for pid, v in bpf_progs().items():
            if pid not in before:
                last[pid] = v
        time.sleep(0.05)
    os.unlink(out)
    per = {}
    for name, cnt, ns in last.values():
        c, t = per.get(name, (0, 0))
        per[name] = (c + cnt, t + ns)
    return {name: t / c for name, (c, t) in per.items() if c}


def depths(args, tmp):
    """ns per sample of on_sample at each depth, medians of --repeat runs, interleaved."""
    wanted = [int(d) for d in args.depths.split(",")]
    runs = {d: [] for d in wanted}
    for _ in range(args.repeat):
        for d in wanted:
            r = run_once([args.python, DEEP_FIXTURE, str(d), "0.5"], False, args.hz, tmp,
                         args.tool)
            if "on_sample" in r:
                runs[d].append(r["on_sample"])
    print("on_sample per run, %s, %d Hz, %s:" % (args.tool, args.hz, args.python))
    for d in wanted:
        if runs[d]:
            print("  %5d frames deep: %9.0f ns (min %.0f, max %.0f)"
                  % (d, statistics.median(runs[d]), min(runs[d]), max(runs[d])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--hz", type=int, default=1000)
    ap.add_argument("--python", default="/root/.pyenv/versions/3.12.1/bin/python3")
    ap.add_argument("--depths", help="comma-separated stack depths to time instead")
    ap.add_argument("--tool", default=TOOL, help="the pytrace-sample to time")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/kernel_walk.py: needs root (eBPF, kernel.bpf_stats_enabled)")
    subprocess.run(["make", "-s", "-C", ROOT, "pytrace-sample"], check=True)
    tmp = tempfile.mkdtemp()
    deep = os.path.join(tmp, "deep.py")
    with open(deep, "w") as f:
        f.write(DEEP)
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        if args.depths:
            depths(args, tmp)
            return
        for label, cmd in (("py_split.py (4 frames)", [args.python, SPLIT, "100"]),
                           ("recursion (22 frames, 3 arguments each)", [args.python, deep])):
            runs = {False: [], True: []}
            for _ in range(args.repeat):
                for no_args in (True, False):
                    runs[no_args].append(run_once(cmd, no_args, args.hz, tmp))
            print("%s, %d Hz, %s:" % (label, args.hz, args.python))
            for prog in PROGRAMS:
                without = [r[prog] for r in runs[True] if prog in r]
                with_ = [r[prog] for r in runs[False] if prog in r]
                if not without or not with_:
                    continue
                a, b = statistics.median(without), statistics.median(with_)
                print("  %-10s %8.0f ns/run --no-args, %8.0f ns/run with arguments (%+.0f %%)"
                      % (prog, a, b, 100 * (b / a - 1)))
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)
    print("(medians of %d runs each, interleaved; kernel.bpf_stats_enabled counts each run's"
          " time in the program)" % args.repeat)


if __name__ == "__main__":
    main()
