"""End-to-end: `report TRACE.pftrace` (trace/pftrace_read.c) says what the recording said.

A run recorded once to .pftrace prints its report live; the report read back from the
file must be the same: line for line for a program without a pool (py_work.py), and for
a Pool's run (examples/why/straggler.py) the same findings in the same order and the
same pools, their tasks and workers. A .pftrace holds the line a function was at when a
slice opened, not its first line (trace/perfetto.c), so a pool task's "where" may name
another line of the same function: that is the one difference allowed.

The file may be anything: cut at half it still reports (or says it is no trace), random
bytes are no trace (65), and 200 mutations of a real .pftrace never crash the reader
(run under ASan+UBSan when build/asan/pytrace-sample exists).
"""
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tracefile import BUILD, ROOT, TOOL, run_tool

WORK = os.path.join(ROOT, "tests", "fixtures", "py_work.py")
STRAGGLER = os.path.join(ROOT, "examples", "why", "straggler.py")
ASAN_TOOL = os.path.join(BUILD, "asan", "pytrace-sample")


def report_block(text):
    """The report's lines, from its header to the end of its last section."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("pytrace-sample report:"))
    out = []
    for line in lines[start:]:
        if line.startswith("pytrace-sample: ") or line.startswith("  open it at"):
            break
        out.append(line)
    return out


def finding_kinds(block):
    return [m.group(1) for l in block for m in [re.match(r" ?\d+\.\s+\d+%\s+([a-z-]+):", l)]
            if m]


def pool_lines(block):
    """(pid, tasks, workers) of each pool the text report shows."""
    return [tuple(int(g) for g in m.groups()) for l in block
            for m in [re.match(r"pool of process (\d+): (\d+) tasks on (\d+) workers", l)] if m]


def without_lines(block):
    """The block with the line numbers of "where" (file:N) taken out."""
    return [re.sub(r"(\.py):\d+\)", r"\1:N)", l) for l in block]


def crashed(r):
    return (r.returncode < 0 or r.returncode not in (0, 65) or
            "Sanitizer" in r.stderr or "runtime error" in r.stderr)


class ReportPftrace(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.work = os.path.join(cls.dir, "work.pftrace")
        r = run_tool(["-o", cls.work, "--", sys.executable, WORK])
        cls.work_status, cls.work_live = r.returncode, r.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir)

    def setUp(self):
        self.assertEqual(self.work_status, 0, self.work_live)

    def test_report_agrees_with_live(self):
        r = run_tool(["report", self.work])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")  # whole: no packet skipped, no slice left open
        self.assertEqual(report_block(r.stdout), report_block(self.work_live))
        top = report_block(r.stdout)
        top = top[top.index("top functions by self time (on CPU):") + 1]
        self.assertTrue(top.endswith(" leaf"), top)
        # Found by its content whatever its name, and the JSON form of the same.
        renamed = os.path.join(self.dir, "work.trace")
        shutil.copy(self.work, renamed)
        j = run_tool(["report", "--json", renamed])
        self.assertEqual(j.returncode, 0, j.stderr)
        self.assertEqual([f["kind"] for f in json.loads(j.stdout)["findings"]],
                         finding_kinds(report_block(self.work_live)))

    def test_pool_report_agrees_with_live(self):
        if os.geteuid() != 0:
            self.skipTest("a Pool's messages are read with the eBPF reader: needs root")
        out = os.path.join(self.dir, "straggler.pftrace")
        live = run_tool(["-o", out, "--", sys.executable, STRAGGLER])
        self.assertEqual(live.returncode, 0, live.stderr)
        block = report_block(live.stderr)
        self.assertEqual([(t, w) for _, t, w in pool_lines(block)], [(7, 2)], block)
        r = run_tool(["report", "--json", out])
        self.assertEqual(r.returncode, 0, r.stderr)
        report = json.loads(r.stdout)
        self.assertEqual([f["kind"] for f in report["findings"]], finding_kinds(block))
        self.assertEqual([(p["pid"], p["tasks"], len(p["workers"])) for p in report["pools"]],
                         pool_lines(block))
        self.assertEqual([p["done"] for p in report["pools"]], [7])
        text = run_tool(["report", out])
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertEqual(without_lines(report_block(text.stdout)), without_lines(block))

    def test_cut_short_still_reports(self):
        data = open(self.work, "rb").read()
        tool = ASAN_TOOL if os.path.exists(ASAN_TOOL) else TOOL
        for cut in (len(data) // 2, len(data) - 1, 64, 1):
            path = os.path.join(self.dir, "cut-%d.pftrace" % cut)
            with open(path, "wb") as f:
                f.write(data[:cut])
            r = subprocess.run([tool, "report", path], capture_output=True, text=True,
                               timeout=120)
            self.assertFalse(crashed(r), (cut, r.returncode, r.stderr[-3000:]))
            if cut == len(data) // 2:
                # Half a run: what it holds, said to be cut short.
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("pytrace-sample report:", r.stdout)
                self.assertIn("cut short", r.stderr)

    def test_not_a_trace(self):
        rng = random.Random(28)
        noise = bytes(rng.randrange(256) for _ in range(8192))
        for name, data in (("noise.pftrace", noise), ("noise0a.pftrace", b"\x0a" + noise),
                           ("noise.bin", b"\x0a" + noise), ("empty.pftrace", b"")):
            path = os.path.join(self.dir, name)
            with open(path, "wb") as f:
                f.write(data)
            r = run_tool(["report", path])
            self.assertEqual(r.returncode, 65, (name, r.stderr))
            self.assertIn("not a", r.stderr)
        r = run_tool(["report", os.path.join(self.dir, "missing.pftrace")])
        self.assertEqual(r.returncode, 66, r.stderr)
        # A JSON trace named .pftrace is read as the JSON it is.
        path = os.path.join(self.dir, "json.pftrace")
        with open(path, "w") as f:
            f.write('{"traceEvents":[{"ph":"X","name":"f","pid":1,"tid":1,"ts":1,"dur":5}]}')
        r = run_tool(["report", path])
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_mutations_never_crash(self):
        data = open(self.work, "rb").read()
        tool = ASAN_TOOL if os.path.exists(ASAN_TOOL) else TOOL
        rng = random.Random(2028)
        path = os.path.join(self.dir, "mutant.pftrace")
        statuses = {}
        for i in range(200):
            b = bytearray(data)
            how = i % 4
            if how == 0:  # bytes overwritten
                for _ in range(rng.randint(1, 8)):
                    b[rng.randrange(len(b))] = rng.randrange(256)
            elif how == 1:  # cut anywhere
                del b[rng.randrange(len(b)):]
            elif how == 2:  # bytes inserted
                at = rng.randrange(len(b))
                b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            else:  # bytes removed
                at = rng.randrange(len(b))
                del b[at:at + rng.randint(1, 64)]
            with open(path, "wb") as f:
                f.write(b)
            args = [tool, "report"] + (["--json"] if i % 2 else []) + [path]
            r = subprocess.run(args, capture_output=True, text=True, errors="replace",
                               timeout=120)
            if crashed(r):
                keep = os.path.join(self.dir, "..", "pytrace-mutant-%d.pftrace" % i)
                shutil.copy(path, keep)
                self.fail("mutation %d (%s): status %d, kept as %s:\n%s" %
                          (i, how, r.returncode, keep, r.stderr[-3000:]))
            statuses[r.returncode] = statuses.get(r.returncode, 0) + 1
        self.assertGreater(statuses.get(0, 0), 0, statuses)


if __name__ == "__main__":
    unittest.main()
