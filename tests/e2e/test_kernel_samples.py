"""The eBPF backend reads a Python thread's stack at the instant of each sample: at 10 kHz
the trace's slices of two functions that follow each other with no wait between them
start and end where the fixture's own clock says, within a few sampling periods. (Read
from user space, as the perf backend does, a stack is read after its sample, when the
drainer gets a CPU: test_outside_samples.py.)"""
import os
import unittest

from pythons import interpreters
from tracefile import ROOT, BpfTestCase, Trace, match_spans, run_tool

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_alternate.py")
HZ = 10000
PERIOD_NS = 1000000000 // HZ


class KernelSamples(BpfTestCase):
    def check(self, python):
        out = os.path.join(self.dir, "alt.json")
        p = run_tool(["-q", "--backend", "bpf", "-F", str(HZ), "-o", out, "--", python,
                      FIXTURE])
        self.assertEqual(p.returncode, 0, p.stderr)
        spans = [line.split()[1:] for line in p.stdout.splitlines()
                 if line.startswith("span ")]
        self.assertEqual(len(spans), 300, p.stdout)
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        other = trace.other
        # Most samples read by the kernel (the first ones, before the runtime is found,
        # are read from outside: 13 % of them with the tool under ASan on a busy machine),
        # hardly any lost (one in 6456 was, once).
        self.assertGreater(other["kernel_samples"], 0.5 * other["samples"], other)
        self.assertLessEqual(other["kernel_samples_lost"] + other["kernel_events_lost"],
                             0.001 * other["samples"], other)
        # The first calls may come before the drainer (every 20 ms while no process is
        # known to run Python) has told the kernel about the runtime: then their samples
        # are read from outside, late (on 3.8 in CI, the first 4 calls; with the tool
        # under ASan on a busy machine, 15). The tool counts the samples it read from
        # outside: calls within that many sampling periods of the first are not judged,
        # nor the first 10.
        outside = other["samples"] - other["kernel_samples"]
        ready_ns = int(spans[0][2]) + outside * PERIOD_NS
        judged = [s for i, s in enumerate(spans) if i >= 10 and int(s[2]) >= ready_ns]
        self.assertGreater(len(judged), 200, (outside, other))
        missing, errors = match_spans(trace, judged)
        # Once in a full suite one 1 ms call was missing (cause not found).
        self.assertLessEqual(len(missing), 3, (missing, other))
        # Measured here: median 71 us, 90th percentile 91 us, worst 220 us (read from
        # outside: 90th percentile 136-157 us). A thread preempted at a boundary shows
        # the wait under the function it was in, which read its clock only after: such a
        # boundary is off by the wait (1.7 ms once, in a full suite), which
        # Trace.edge_error takes off, as the trace shows it.
        self.assertLess(errors[len(errors) * 9 // 10], 3 * PERIOD_NS, errors)
        self.assertLess(errors[-1], 10000000, errors)


def make_test(python):
    def test(self):
        self.check(python)
    return test


for _label, _python in interpreters():
    setattr(KernelSamples, "test_sample_time_" + _label.replace(".", "_").replace("-", "_"),
            make_test(_python))


if __name__ == "__main__":
    unittest.main()
