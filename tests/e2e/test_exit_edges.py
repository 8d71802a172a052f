"""A call's slice ends where the call returned, even when no Python runs after it: the
interpreter's shutdown (tests/fixtures/py_exit_after_call.py frees a large list with no
Python frame on the stack) must not be shown as the call going on. A stack read there
finds no Python frames; that is known, not unknown, and no older read may stand for it
(a pool worker's last job showed again 18-30 ms after it ended, under a CPU hog; this
call ran 3.3-3.9 ms past its return, and once came back 39 ms later)."""
import os
import shutil
import tempfile
import unittest

from pythons import per_interpreter
from tracefile import ROOT, Trace, run_tool

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_exit_after_call.py")
PERIOD_NS = 1000000  # the default 1 kHz
# The slice ends at the sample after its last, at most a period after the return; 1 ms
# more for the print that reads the clock after it. An older read standing for a sample
# in the shutdown lasts 3-4 periods of running.
LATE_NS = PERIOD_NS + 1000000


class ExitEdges(unittest.TestCase):
    def check(self, python, backend):
        if backend == "bpf" and os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "t.json")
            p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, FIXTURE])
            self.assertEqual(p.returncode, 0, p.stderr)
            trace = Trace(out)
        finally:
            shutil.rmtree(d)
        returned = int(p.stdout.split()[0])
        calls = trace.named("compute")
        self.assertTrue(calls, "no compute slice: %s" % trace.other)
        where = [(s.start_ns - returned, s.end_ns - returned, s.args.get("samples"))
                 for s in calls]
        # Nothing of it after it returned: no slice begun later, none ending late (on-CPU
        # time only: a thread preempted after it returned is the machine's).
        self.assertEqual([s for s in calls if s.start_ns > returned], [],
                         "the call shown again after it returned (the tool's fault): %s"
                         % where)
        last = max(calls, key=lambda s: s.end_ns)
        late = trace.edge_error(last.tid, last.end_ns, returned) \
            if last.end_ns > returned else 0
        self.assertLess(late, LATE_NS, "the call shown %d ns of running past its return "
                        "(the tool's fault): %s" % (late, where))


per_interpreter(ExitEdges)

if __name__ == "__main__":
    unittest.main()
