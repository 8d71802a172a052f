"""GIL waits: two threads computing in pure Python at once each wait for the GIL about
half the time; the trace must label those waits as GIL waits (not lock waits), and
their total must match what each thread measured of itself: its wall time less its own
CPU time less the time the trace shows it preempted (waiting for a CPU, not the GIL),
on every interpreter and both backends. A thread blocked on a threading.Lock must stay
a lock wait."""
import os
import re
import subprocess
import unittest

from pythons import interpreters
from tracefile import ROOT, BpfTestCase, Trace, run_tool

FIGHT = os.path.join(ROOT, "tests", "fixtures", "py_gil_fight.py")
MS = 1000000


def gil_ns(trace, tid, t0, t1):
    return sum(max(0, min(s.end_ns, t1) - max(s.start_ns, t0)) for s in trace.slices
               if s.tid == tid and s.cat == "off-cpu" and s.name.startswith("GIL"))


class Gil(BpfTestCase):
    def check(self, python, backend):
        out = os.path.join(self.dir, "gil.json")
        p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, FIGHT])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        fights = [tuple(int(x) for x in m.groups())
                  for m in re.finditer(r"^fight (\d+) (\d+) (\d+) (\d+)$", p.stdout, re.M)]
        self.assertEqual(len(fights), 2, p.stdout)
        lost = trace.losses()
        for tid, start, end, cpu in fights:
            preempted = trace.preempted(tid, start, end)
            waiting = (end - start) - cpu - preempted
            gil = gil_ns(trace, tid, start, end)
            # Two threads, one GIL: each waits for it a good part of the second.
            self.assertGreater(waiting, 100 * MS, (tid, end - start, cpu, preempted))
            # 20 % (the bound) and 2 ms for the ends of the measured span; the
            # tool's own losses can only leave waits unlabelled.
            slack = 0.2 * waiting + 2 * MS
            if lost:
                print("note: %s: the tool lost records (%r)" % (self.id(), lost))
                slack += waiting
            self.assertLess(abs(gil - waiting), slack,
                            "thread %d: GIL waits %.1f ms in the trace, %.1f ms waited by its "
                            "own clocks (wall %.1f, CPU %.1f, preempted %.1f per the trace)"
                            % (tid, gil / MS, waiting / MS, (end - start) / MS, cpu / MS,
                               preempted / MS))
        # The main thread meanwhile waits in Thread.join(), on a lock: a lock wait.
        pid = trace.slices[0].pid
        t0, t1 = min(f[1] for f in fights), max(f[2] for f in fights)
        joined = sum(max(0, min(s.end_ns, t1) - max(s.start_ns, t0)) for s in trace.slices
                     if s.tid == pid and s.cat == "off-cpu" and s.name.startswith("lock wait"))
        self.assertGreater(joined, (t1 - t0) // 2,
                           "main thread: %.1f ms of lock waits in %.1f ms of join"
                           % (joined / MS, (t1 - t0) / MS))


def make_test(python, backend):
    def test(self):
        self.check(python, backend)
    return test


for _label, _python in interpreters():
    for _backend in ("bpf", "perf"):
        setattr(Gil, "test_%s_%s" % (_backend, _label), make_test(_python, _backend))


if __name__ == "__main__":
    unittest.main()
