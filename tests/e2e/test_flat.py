"""End-to-end: --flat puts every traced thread in one process, a row per thread named
with its original pid and tid (the DevTools engine check is in tests/viewer)."""
import os
import re
import shutil
import sys
import tempfile
import unittest

from tracefile import ROOT, Trace, run_tool

POOL = os.path.join(ROOT, "tests", "fixtures", "py_pool.py")


class Flat(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_pool_in_one_process(self):
        out = os.path.join(self.dir, "flat.json")
        r = run_tool(["-q", "--flat", "-o", out, "--", sys.executable, POOL, "fork"])
        self.assertEqual(r.returncode, 0, r.stderr)
        jobs = {l.split()[1]: int(l.split()[2]) for l in r.stdout.splitlines()
                if l.startswith("job ")}
        self.assertEqual(len(jobs), 4, r.stdout)
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        self.assertEqual(len({s.pid for s in trace.slices}), 1)
        self.assertEqual(len(trace.process_names), 1)
        self.assertIn("--flat", list(trace.process_names.values())[0])
        for name, pid in jobs.items():
            job = [s for s in trace.slices if s.name == name]
            self.assertEqual(len(job), 1, name)
            row = trace.thread_names[(job[0].pid, job[0].tid)]
            self.assertRegex(row, r"\(pid %d, tid %d\)" % (pid, job[0].tid))
            self.assertIn("worker", job[0].ancestors())
        rows = {(s.pid, s.tid) for s in trace.slices}
        self.assertTrue(all(re.search(r"\(pid \d+, tid %d\)" % tid, trace.thread_names[(p, tid)])
                            for p, tid in rows))


if __name__ == "__main__":
    unittest.main()
