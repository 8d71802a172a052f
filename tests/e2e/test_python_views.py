"""What a user sees of one Python process, on every installed interpreter: by default
Python frames only, exactly main > middle > leaf, with the sleep as an exact wait; with
--native, the native frames around them and each interpreter frame replaced by the
Python frames it ran."""
import os
import shutil
import tempfile
import unittest

from pythons import interpreters
from tracefile import ROOT, Trace, run_tool

WORK = os.path.join(ROOT, "tests", "fixtures", "py_work.py")


def record(python, extra):
    d = tempfile.mkdtemp()
    try:
        out = os.path.join(d, "t.json")
        p = run_tool(["-q", "-o", out] + extra + ["--", python, WORK])
        return p, Trace(out)
    finally:
        shutil.rmtree(d)


class Views(unittest.TestCase):
    pass


def make_default(python):
    def test(self):
        p, trace = record(python, [])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(trace.nesting_errors, [])
        longest = max(trace.named("leaf"), key=lambda s: s.dur)
        self.assertEqual(list(reversed(longest.ancestors())), ["<module>", "main", "middle"])
        self.assertEqual(longest.cat, "python")
        self.assertTrue(longest.args["file"].endswith("py_work.py"))
        start, end = [int(x) for x in p.stdout.split()[1:3]]
        # The wait is exact: its ends are the fixture's clock readings, but for what the
        # trace shows the thread preempted between a reading and the wait (a busy machine).
        waits = [s for s in trace.slices if s.cat == "off-cpu" and s.parent and
                 s.parent.name == "sleeper" and s.dur >= 150000 and
                 trace.edge_error(s.tid, s.start_ns, start) < 2000000 and
                 trace.edge_error(s.tid, s.end_ns, end) < 2000000]
        self.assertEqual(len(waits), 1, ((start, end), [
            (s.name, s.start_ns - start, s.end_ns - end, s.dur) for s in trace.slices
            if s.cat == "off-cpu" and s.end_ns > start - 20000000 and
            s.start_ns < end + 20000000]))
        self.assertIn(waits[0].name, ("sleep", "poll"))  # 3.8-3.10 sleep with select()
        if os.geteuid() == 0:
            # As root the kernel reads them at each sample (the first few, before the
            # runtime is found, are read from outside).
            self.assertGreater(trace.other["kernel_samples"], 0.5 * trace.other["samples"],
                               trace.other)
    return test


def make_native(python):
    def test(self):
        p, trace = record(python, ["--native"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(trace.nesting_errors, [])
        longest = max(trace.named("leaf"), key=lambda s: s.dur)
        chain = list(reversed(longest.ancestors()))
        if "/.sid/" in python:
            # Debian's builds are stripped (their debug symbols are in an archive not
            # reachable here): the eval loop has no name, so no native frame can be
            # placed among the Python ones. The trace says so and keeps the Python ones.
            for name in ("<module>", "main", "middle"):
                self.assertIn(name, chain)
            self.assertGreater(trace.other["native_interleave_mismatches"], 0, trace.other)
            return
        # A few stacks at start-up and shutdown (a frame half made) are usual.
        self.assertLess(trace.other["native_interleave_mismatches"],
                        0.1 * trace.other["samples"], trace.other)
        # Native frames around the Python ones, in call order.
        self.assertIn("Py_RunMain", chain)
        for name in ("<module>", "main", "middle"):
            self.assertIn(name, chain)
        self.assertLess(chain.index("Py_RunMain"), chain.index("<module>"))
        self.assertLess(chain.index("<module>"), chain.index("main"))
        self.assertLess(chain.index("main"), chain.index("middle"))
        # The interpreter loop itself gave way to the Python frames it ran.
        self.assertNotIn("_PyEval_EvalFrameDefault", chain[chain.index("<module>"):])
        cats = {s.cat for s in trace.slices}
        self.assertTrue({"python", "native"} <= cats)
        if os.geteuid() == 0:
            # The kernel's reading joined to perf's sample, which kept its stack copy;
            # that sample is not also read from outside (every one was, once: at 20 kHz
            # the drainer fell seconds behind), only those before the kernel read any.
            self.assertGreater(trace.other["kernel_samples"], 0.5 * trace.other["samples"],
                               trace.other)
            self.assertLess(trace.other["python_walks"], 0.5 * trace.other["samples"],
                            trace.other)
    return test


for _label, _python in interpreters():
    _name = _label.replace(".", "_").replace("-", "_")
    setattr(Views, "test_python_frames_" + _name, make_default(_python))
    setattr(Views, "test_native_interleaved_" + _name, make_native(_python))


if __name__ == "__main__":
    unittest.main()
