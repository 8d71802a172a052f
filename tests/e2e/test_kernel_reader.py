"""The eBPF reader at switch-outs: with it, even a 0.3 ms wait carries the exact Python stack
it waited with, read by the kernel at the switch; without privilege it cannot load and
asking for it fails clearly."""
import os
import shutil
import subprocess
import tempfile
import unittest

from pythons import interpreters
from tracefile import ROOT, TOOL, BpfTestCase, Trace, run_tool, run_tool_watched

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_short_waits.py")
SANITIZED = os.sep + "asan" + os.sep in TOOL
PINGPONG = os.path.join(ROOT, "tests", "fixtures", "py_pingpong.py")


class KernelReader(BpfTestCase):
    def check_short_waits(self, python):
        out = os.path.join(self.dir, "short.json")
        p = run_tool(["-q", "--backend", "bpf", "-o", out, "--", python, FIXTURE])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        self.assertGreater(trace.other["kernel_switch_stacks"], 0)
        # Voluntary waits (time.sleep: "sleep", or "poll" where 3.8-3.10 use select).
        waits = sorted((s for s in trace.slices if s.cat == "off-cpu" and
                        s.name in ("sleep", "poll")), key=lambda s: s.ts)
        self.assertGreater(len(waits), 250, len(waits))
        # The kernel reads waits once user space has told it where the runtime is (from
        # the mapping of libpython): from then on every wait is exact. How soon that is
        # depends on the machine: the sanitizer build on a loaded machine missed the
        # first 39 (the counters say so: every switch-out before the first it read has
        # nothing queued), so what comes before the first exact wait is the start, if
        # it is not most of the run. In 3 of about 20 full suites one or two mid-run
        # waits were not exact (not seen alone, 55 runs): at most 1 % is allowed.
        exact = [bool(s.parent and s.parent.name == "short_wait") for s in waits]
        self.assertIn(True, exact[:len(waits) // 2],
                      ("the kernel read none of the first half of the waits",
                       {k: v for k, v in trace.other.items() if "kernel" in k}))
        start = exact.index(True)
        if start > 20:
            print("note: %s: the kernel read waits from the %dth on (a slow start)"
                  % (self.id(), start + 1))
        wrong = [(s.ts, s.ancestors()[:3]) for s, ok in zip(waits[start:], exact[start:])
                 if not ok]
        self.assertLessEqual(len(wrong), 3,
                             (wrong, {k: v for k, v in trace.other.items() if "kernel" in k}))


    def check_many_switches(self, python):
        """Every switch-out of a thread handing a token back and forth is read, and perf's
        buffers keep up: the kernel drops perf's per-switch stack copy once it read the
        switch whole (with it, 260 thousand records were lost in one such run)."""
        out = os.path.join(self.dir, "pingpong.json")
        # A rate test: ~50 thousand stacks a second, each a list of arguments per frame
        # to decode and keep. The sanitizer build (run.sh's second pass, 3-5 times slower
        # per record) drains too slowly for that with arguments (1-5 % lost in suites,
        # 0.3 % alone) and is run without them: its memory checks of the argument path
        # are the other tests'; the rate with arguments is the optimized build's.
        extra = ["--no-args"] if SANITIZED else []
        p, starved, wall = run_tool_watched(["-q", "--backend", "bpf", "-o", out] + extra +
                                            ["--", python, PINGPONG])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        other = trace.other
        waits = [s for s in trace.slices if s.cat == "off-cpu" and "futex" in s.name]
        lost = other["lost_records"] + other["lost_samples"] + other["kernel_events_lost"]
        # Each round blocks one thread or the other at least once: each such switch is
        # a wait, or counted lost (a suite run beside other work once lost 37,849 records
        # and showed 9,044 waits; what a loss may be is checked below).
        self.assertGreater(len(waits) + lost, 10000, other)
        # Alone, nothing is lost. With perf's per-switch stack copy kept, ~250 thousand
        # were lost: 1 % tells them apart. On a machine busy enough that a thread of the
        # tool (its drainer) waits for a CPU for a tenth of the run, the buffers can fill
        # (1,042 lost records in one run with five other builds going on): that is the
        # machine's fault, said as such, and then only a loss of a tenth fails.
        machine = starved > wall // 10
        if machine and lost > 0.01 * len(waits):
            print("note: %s: the machine kept a thread of the tool from a CPU for %d of %d "
                  "ms; it lost %d records" % (self.id(), starved // 1000000, wall // 1000000,
                                              lost))
        # The sanitizer build drains 3-5 times slower: starved too, its rate is the
        # machine's (14 thousand lost with one core kept busy, its drainer off a CPU
        # for 296 of 1733 ms); its memory checks are what it is run for. Not starved,
        # it is held to a tenth, not to the optimized build's 1 %: sid's 3.14 and 3.15
        # lost more than 1 % in two suite runs with the drainer off a CPU 9 % of the run.
        if not (machine and SANITIZED):
            self.assertLessEqual(lost, (0.1 if machine or SANITIZED else 0.01) * len(waits),
                                 "the tool lost %d records for %d waits, its threads waited "
                                 "at most %d of %d ms for a CPU (%s): %r"
                                 % (lost, len(waits), starved // 1000000, wall // 1000000,
                                    "machine starved it" if machine else "tool fault", other))
        # The worker threads' waits are under ping or pong, but for their start and end
        # and the switches the tool itself counts as unread or lost (once 0.85 % in a
        # full suite). The main thread only starts and joins them.
        workers = [w for w in waits if w.tid != w.pid]
        outside = [w for w in workers
                   if "ping" not in w.ancestors() and "pong" not in w.ancestors()]
        unread = other["kernel_switch_misses"] + other["kernel_read_errors"] + lost
        self.assertLessEqual(len(outside), 0.01 * len(workers) + unread,
                             ("%d of %d waits without ping or pong" % (len(outside),
                                                                       len(workers)),
                              outside[:10], other))


def make_test(python):
    def test(self):
        self.check_short_waits(python)
    return test


def make_switch_test(python):
    def test(self):
        self.check_many_switches(python)
    return test


for _label, _python in interpreters():
    _name = _label.replace(".", "_").replace("-", "_")
    setattr(KernelReader, "test_short_waits_" + _name, make_test(_python))
    setattr(KernelReader, "test_many_switches_" + _name, make_switch_test(_python))


class Unprivileged(unittest.TestCase):
    def test_bpf_backend_refused_without_privilege(self):
        if os.geteuid() != 0:
            self.skipTest("needs root to run the tool as 'nobody'")
        d = tempfile.mkdtemp()
        os.chmod(d, 0o777)
        try:
            p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                TOOL, "--backend", "bpf", "-o", os.path.join(d, "x.json"),
                                "--", "true"], capture_output=True, text=True, timeout=60)
            self.assertEqual(p.returncode, 77, p.stderr)
            self.assertIn("eBPF", p.stderr)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
