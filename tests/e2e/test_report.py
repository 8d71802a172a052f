"""End-to-end: the report printed at the end of a recording and by `report TRACE`.

A fixture that knows its own busy/wait split (py_split.py: a thread that spins 200 ms and
sleeps 300 ms in ten rounds, measuring both) must be reported within 5 %; the report of
the written trace must say the same as the one printed while recording, gzip'd or not.
"""
import os
import re
import shutil
import sys
import tempfile
import unittest

from tracefile import ROOT, run_tool

SPLIT = os.path.join(ROOT, "tests", "fixtures", "py_split.py")
MS = r"([\d.]+) (ms|s)"


def ns(value, unit):
    return float(value) * (1e6 if unit == "ms" else 1e9)


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


def thread_line(block, tid):
    for line in block:
        if re.match(r"\s*(thread|process) %d " % tid, line):
            return line
    raise AssertionError("no line for %d in:\n%s" % (tid, "\n".join(block)))


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, name, *extra):
        out = os.path.join(self.dir, name)
        r = run_tool(list(extra) + ["-o", out, "--", sys.executable, SPLIT])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, tid, cpu_ns, sleep_ns = r.stdout.split()
        return out, r.stderr, int(tid), int(cpu_ns), int(sleep_ns)

    def test_busy_wait_split_within_5_percent(self):
        out, err, tid, cpu_ns, sleep_ns = self.record("split.json")
        line = thread_line(report_block(err), tid)
        on_cpu = re.search(r"on-CPU " + MS, line)
        slept = re.search(r"\bsleep " + MS, line)
        self.assertTrue(on_cpu and slept, line)
        self.assertLess(abs(ns(*on_cpu.groups()) - cpu_ns), 0.05 * cpu_ns, (line, cpu_ns))
        self.assertLess(abs(ns(*slept.groups()) - sleep_ns), 0.05 * sleep_ns,
                        (line, sleep_ns))
        top = report_block(err)[report_block(err).index(
            "top functions by self time (on CPU):") + 1]
        self.assertTrue(top.endswith(" spin"), top)  # the busiest function comes first

    def test_report_of_written_trace_agrees(self):
        for name in ("split.json", "split.json.gz"):
            out, err, tid, _, _ = self.record(name)
            r = run_tool(["report", out])
            self.assertEqual(r.returncode, 0, r.stderr)
            # The same slices: the same figures, the same longest waits.
            self.assertEqual(report_block(r.stdout), report_block(err), name)

    def test_perfetto_recording_prints_it_too(self):
        _, err, tid, _, _ = self.record("split.pftrace")
        thread_line(report_block(err), tid)

    def test_quiet_silences_it(self):
        _, err, _, _, _ = self.record("split.json", "-q")
        self.assertNotIn("pytrace-sample report", err)

    def test_exit_statuses(self):
        r = run_tool(["report", os.path.join(self.dir, "missing.json")])
        self.assertEqual(r.returncode, 66, r.stderr)
        self.assertIn("No such file", r.stderr)
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "w") as f:
            f.write('{"not": "a trace"}')
        r = run_tool(["report", bad])
        self.assertEqual(r.returncode, 65, r.stderr)
        self.assertIn("not a Trace Event JSON trace", r.stderr)
        for args in (["report"], ["report", "a.json", "b.json"], ["report", "-q"]):
            self.assertEqual(run_tool(args).returncode, 64, args)


if __name__ == "__main__":
    unittest.main()
