#!/usr/bin/env python3
"""The findings on the gallery of examples/why: records each program under pytrace-sample
REPEAT times and prints, per program, the cause it was written with, the first finding
(cpu-starved, the machine's, set aside as the suite does) and its share, min/median/max
over the runs, with cpu-starved's share beside it: the figures docs/findings.md quotes.

usage: bench/findings_gallery.py [--repeat N] [--python PATH]   (as root, for eBPF)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOL = os.path.join(ROOT, "pytrace-sample")
WHY = os.path.join(ROOT, "examples", "why")
GALLERY = [("straggler.py", "imbalance"), ("tiny_tasks.py", "task-overhead"),
           ("big_args.py", "serialization"), ("gil_threads.py", "gil-contention"),
           ("oversubscribed.py", "oversubscription"), ("shared_lock.py", "lock-contention"),
           ("spawn_startup.py", "worker-startup"), ("thread_straggler.py", "imbalance"),
           ("io_wait.py", "io-wait"), ("rate_limited.py", "sleep"),
           ("balanced.py", "(none)")]


def findings(python, script, d):
    out = os.path.join(d, script + ".json")
    subprocess.run([TOOL, "-q", "--force", "-o", out, "--", python, os.path.join(WHY, script)],
                   check=True, stdout=subprocess.DEVNULL)
    p = subprocess.run([TOOL, "report", "--json", out], check=True, capture_output=True,
                       text=True)
    return json.loads(p.stdout)["findings"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    print("%-18s %-17s %-34s %s" % ("example", "written for", "first finding: share min/med/max",
                                    "cpu-starved med"))
    with tempfile.TemporaryDirectory() as d:
        for script, cause in GALLERY:
            firsts, starved = [], []
            for _ in range(args.repeat):
                fs = findings(args.python, script, d)
                mine = [f for f in fs if f["kind"] != "cpu-starved"]
                firsts.append((mine[0]["kind"], mine[0]["share"]) if mine else ("(none)", 0))
                starved.append(sum(f["share"] for f in fs if f["kind"] == "cpu-starved"))
            kinds = sorted({k for k, _ in firsts})
            shares = sorted(s for _, s in firsts)
            print("%-18s %-17s %-34s %.0f %%" % (
                script, cause, "%s: %.0f/%.0f/%.0f %%" % (
                    "/".join(kinds), 100 * shares[0], 100 * statistics.median(shares),
                    100 * shares[-1]), 100 * statistics.median(starved)))


if __name__ == "__main__":
    main()
