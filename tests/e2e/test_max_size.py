"""--max-size: a run of 20,000 tiny pool tasks (examples/why/tiny_tasks.py, ~60 MB of
JSON unbounded) kept to 1 MiB in each format: the file stays valid and says what it left
out, and the report at the end still counts every task (it is fed what the file is not)."""
import os
import re
import shutil
import sys
import tempfile
import unittest

from pftrace import PfTrace
from tracefile import ROOT, Trace, run_tool

TINY = os.path.join(ROOT, "examples", "why", "tiny_tasks.py")
BUDGET = 1 << 20
# Past the budget the file still gets its names and statistics: a few KB here.
SLACK = 64 << 10


class MaxSize(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, name):
        out = os.path.join(self.dir, name)
        r = run_tool(["--max-size", "1M", "-o", out, "--", sys.executable, TINY])
        self.assertEqual(r.returncode, 0, r.stderr)
        size = os.path.getsize(out)
        self.assertLessEqual(size, BUDGET + SLACK, "%s is %d bytes" % (name, size))
        self.assertGreater(size, BUDGET // 2, "%s is %d bytes: the budget unused" % (name, size))
        said = [l for l in r.stderr.splitlines() if "reached --max-size" in l]
        self.assertEqual(len(said), 1, r.stderr)
        return r, out

    def check_report_counts_all(self, stderr):
        # As root the pool's tasks come from their markers: all 20,000 counted.
        if os.geteuid() != 0:
            return
        pools = re.findall(r"^pool of process \d+: (\d+) tasks", stderr, re.M)
        self.assertEqual(pools, ["20000"], stderr[-3000:])

    def test_json(self):
        r, out = self.record("t.json")
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        self.assertGreater(trace.other["not_written_past_max_size"], 0)
        self.assertEqual(trace.other["max_size_bytes"], BUDGET)
        self.assertGreater(len(trace.slices), 1000)
        self.check_report_counts_all(r.stderr)

    def test_gzip(self):
        r, out = self.record("t.json.gz")
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        self.assertGreater(trace.other["not_written_past_max_size"], 0)

    def test_pftrace(self):
        r, out = self.record("t.pftrace")
        trace = PfTrace(out)
        self.assertEqual(trace.errors, [])
        self.assertGreater(trace.statistics["not_written_past_max_size"], 0)
        self.assertGreater(len(trace.slices), 1000)
        self.check_report_counts_all(r.stderr)

    def test_bad_sizes_refused(self):
        for bad in ("0", "-5M", "10", "512K", "1X", "2TB"):
            r = run_tool(["--max-size", bad, "-o", os.path.join(self.dir, "x.json"), "--",
                          "true"])
            self.assertEqual(r.returncode, 64, (bad, r.stderr))
            self.assertIn("bad size", r.stderr)


if __name__ == "__main__":
    unittest.main()
