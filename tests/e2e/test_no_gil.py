"""On-CPU samples say whether the thread held the GIL: with eBPF the kernel reads the
GIL's `locked` flag and `last_holder` at each sample, in the sampled thread itself, and a
sample of a Python thread running without it gets a leaf marker "running without the
GIL" (category no-gil). Two threads compute at once (tests/fixtures/py_no_gil.py):
"crc" almost only inside zlib.crc32, C code that lets the GIL go, "crunch" in pure
Python, which holds the GIL whenever it runs. Each measures its own CPU time, and "crc"
the part of it spent inside crc32 calls.

Compared by samples (the markers' sample counts against the thread's), not by slice
time: a slice starts at its first sample, so the time between a thread's switch-in and
its first sample (under a period, at each of the hundreds of GIL waits) is never a
marker's, whatever the tool read. The perf backend does not read the GIL's state (a
stack read from outside comes late): no sample may claim it."""
import os
import re
import unittest

from pythons import per_interpreter
from tracefile import ROOT, BpfTestCase, Trace, run_tool, union_ns

MS = 1000000

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_no_gil.py")


def samples(trace, tid, cat=None):
    """On-CPU samples of thread @tid: all of them (its root slices'), or its @cat ones."""
    return sum(s.args.get("samples", 0) for s in trace.slices
               if s.tid == tid and (s.cat == cat if cat else s.parent is None))


class NoGil(BpfTestCase):
    def record(self, python, backend):
        out = os.path.join(self.dir, "no_gil.json")
        p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, FIXTURE])
        self.assertEqual(p.returncode, 0, p.stderr)
        ran = {m.group(1): [int(x) for x in m.group(2).split()]
               for m in re.finditer(r"^(crc|fight) ([\d ]+)$", p.stdout, re.M)}
        self.assertEqual(sorted(ran), ["crc", "fight"], p.stdout)
        return Trace(out), ran

    def check_bpf(self, python):
        trace, ran = self.record(python, "bpf")
        tid, _, _, cpu, in_c = ran["crc"]
        total, free = samples(trace, tid), samples(trace, tid, "no-gil")
        # The thread's own share of CPU time inside crc32 (over 99 %), less 5 points:
        # samples in Python between calls and in the GIL's code are a few of hundreds.
        self.assertGreater(total, 100, "crc thread: %d samples of %.0f ms of CPU"
                           % (total, cpu / 1e6))
        self.assertGreaterEqual(free / total, in_c / cpu - 0.05,
                                "crc thread: %d of %d samples without the GIL in the trace; it "
                                "measured %.1f of its %.1f ms of CPU inside crc32, which lets "
                                "the GIL go" % (free, total, in_c / 1e6, cpu / 1e6))
        for marker in (s for s in trace.slices if s.tid == tid and s.cat == "no-gil"):
            self.assertIn("crc", marker.ancestors(), marker)
            self.assertEqual(marker.children, [], marker)
        tid = ran["fight"][0]
        total, free = samples(trace, tid), samples(trace, tid, "no-gil")
        # Pure Python runs holding the GIL; a sample may catch it taking the GIL back
        # after a wait (on the CPU, not yet holding it): a few, never a share.
        self.assertGreater(total, 100, "crunch thread: %d samples" % total)
        self.assertLessEqual(free, 0.02 * total + 2,
                             "crunch thread: %d of %d samples without the GIL, in pure Python"
                             % (free, total))

    def check(self, python, backend):
        getattr(self, "check_" + backend)(python)

    def check_perf(self, python):
        trace, _ = self.record(python, "perf")
        claimed = [s for s in trace.slices if s.cat == "no-gil"]
        self.assertEqual(claimed, [], "the perf backend does not read the GIL's state")


per_interpreter(NoGil)

HELD = os.path.join(ROOT, "tests", "fixtures", "py_gil_held.py")
HOLDING = "holding the GIL: "
USLEEP_NS = 200 * MS  # the fixture's usleep()


class BlockedHoldingGil(BpfTestCase):
    """A wait the thread spent holding the GIL (usleep() through ctypes.PyDLL, which
    keeps it: every other thread of the interpreter waits too) is labelled so with eBPF
    ("holding the GIL: sleep"), read in the kernel as the thread switched out; the same
    thread's time.sleep(), which lets the GIL go, is not. The perf backend never says
    it."""

    def check(self, python, backend):
        out = os.path.join(self.dir, "held.json")
        p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, HELD])
        self.assertEqual(p.returncode, 0, p.stderr)
        spans = {m.group(1): [int(x) for x in m.groups()[1:]]
                 for m in re.finditer(r"^(held|free) (\d+) (\d+) (\d+)$", p.stdout, re.M)}
        self.assertEqual(sorted(spans), ["free", "held"], p.stdout)
        trace = Trace(out)
        holding = [s for s in trace.slices if s.cat == "off-cpu" and s.name.startswith(HOLDING)]
        tid, start, end = spans["held"]
        if backend == "perf":
            self.assertEqual(holding, [], "the perf backend does not read the GIL's state")
            return
        # Another wait of the thread may hold the GIL too (seen: "holding the GIL:
        # blocked", a page fault's wait, say): the sleep is checked, not the others.
        mine = [(s.start_ns, s.end_ns) for s in holding if s.tid == tid and
                s.name == HOLDING + "sleep"]
        got = union_ns(mine, start, end)
        # usleep(200 ms) sleeps that long at least; the span the fixture measured is
        # longer by what follows it before the clock read (taking the GIL back from the
        # other thread, a few ms, labelled as a GIL wait). Less 1 ms: the microseconds
        # from the call to the switch-out, and the trace's microsecond grid.
        want = USLEEP_NS - MS
        waits = [(round((s.start_ns - start) / MS, 1), round(s.dur / 1000, 1), s.name)
                 for s in trace.slices if s.tid == tid and s.cat == "off-cpu" and
                 s.end_ns > start and s.start_ns < end]
        self.assertGreaterEqual(got, want, "%.1f ms of a 200 ms usleep() holding the GIL are "
                                "labelled so (in %.1f ms measured around it); the thread's "
                                "waits then (ms from the start, ms, name): %s"
                                % (got / MS, (end - start) / MS, waits))
        _, mid, end = spans["free"]
        wrong = union_ns([(s.start_ns, s.end_ns) for s in holding if s.tid == tid],
                         mid + MS, end - MS)
        self.assertEqual(wrong, 0, "time.sleep() lets the GIL go, yet %.1f ms of it are "
                         "labelled as holding it" % (wrong / MS))


per_interpreter(BlockedHoldingGil)


if __name__ == "__main__":
    unittest.main()
