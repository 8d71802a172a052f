"""Wrappers folded into what they start: a Python program launched through `env`, a
shell that forks and waits, `timeout` and (when pyenv is installed) pyenv's shim shows as
the Python program alone, its wrappers counted; --all-processes shows them all. A tree of
programs none of which is Python keeps every process (tests/e2e/test_perf_tree.py)."""
import os
import shutil
import sys
import tempfile
import unittest

from tracefile import ROOT, Trace, run_tool

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_work.py")
PYENV_SHIM = os.path.expanduser("~/.pyenv/shims/python3")


class Wrappers(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, command, *options):
        out = os.path.join(self.dir, "t.json")
        r = run_tool(["--force", "-o", out] + list(options) + ["--"] + command)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r, Trace(out)

    def chain(self):
        # env execs sh; sh forks timeout (the "; true" keeps it from exec'ing); timeout
        # forks Python and waits.
        return ["env", "WRAPPED=1", "sh", "-c",
                "timeout 120 %s %s; true" % (sys.executable, FIXTURE)]

    def test_chain_folded(self):
        r, trace = self.record(self.chain())
        pids = {s.pid for s in trace.slices}
        self.assertEqual(len(pids), 1, trace.process_names)
        pid = pids.pop()
        self.assertEqual(trace.process_names.get(pid), "py_work.py", trace.process_names)
        self.assertTrue(trace.named("leaf"), "the Python program's own frames are missing")
        self.assertEqual(trace.other.get("wrapper_processes_folded"), 2, trace.other)
        line = [l for l in r.stderr.splitlines() if "wrapper processes folded" in l]
        self.assertEqual(len(line), 1, r.stderr)
        self.assertIn("sh", line[0])
        self.assertIn("timeout", line[0])

    def test_all_processes_shows_them(self):
        r, trace = self.record(self.chain(), "--all-processes")
        names = set(trace.process_names.values())
        self.assertTrue(any(n.startswith("timeout 120") for n in names), names)
        self.assertTrue(any(n.startswith("sh -c") for n in names), names)
        self.assertIn("py_work.py", names)
        self.assertNotIn("wrapper_processes_folded", trace.other)
        self.assertNotIn("wrapper processes folded", r.stderr)

    @unittest.skipUnless(os.path.exists(PYENV_SHIM), "pyenv's shims are not installed here")
    def test_pyenv_shim_folded(self):
        # The shim is a bash script that runs pyenv's helpers (a dozen processes) before
        # it execs the interpreter in its own process.
        r, trace = self.record([PYENV_SHIM, FIXTURE])
        pids = {s.pid for s in trace.slices}
        self.assertEqual(len(pids), 1, trace.process_names)
        self.assertEqual(trace.process_names.get(pids.pop()), "py_work.py")
        self.assertGreater(trace.other.get("wrapper_processes_folded", 0), 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
