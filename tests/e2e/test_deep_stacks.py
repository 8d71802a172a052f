"""Deep stacks: a recursion 300 calls deep has every frame from <module> to the innermost
for the whole of its work, with both backends on every interpreter; one 5,000 calls deep
(deeper than a walk keeps, 1,024 frames) keeps its root-most frames, the innermost being
the ones cut, and the trace counts the stacks and frames cut. The fixture computes at
the bottom of its recursion and says when, by its own clock."""
import os
import re
import unittest

from pythons import interpreters
from tracefile import ROOT, BpfTestCase, Trace, run_tool, union_ns

DEEP = os.path.join(ROOT, "tests", "fixtures", "py_deep.py")
MS = 1000000
PERIOD = 1 * MS  # the tool's default 1 kHz
KEPT = 1024      # frames a walk keeps (CPYTHON_MAX_FRAMES, PYTRACE_BPF_MAX_FRAMES)
JSON_DEPTH = 512  # slices a trace nests (TRACE_DEFAULT_MAX_DEPTH)


def covered(slices, t0, t1):
    """ns of [t0, t1] inside any of @slices (overlaps counted once)."""
    return union_ns([(s.start_ns, s.end_ns) for s in slices], t0, t1)


class DeepStacks(BpfTestCase):
    def record(self, python, backend, depth):
        out = os.path.join(self.dir, "deep.json")
        p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, DEEP, str(depth),
                      "0.3"])
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"^bottom (\d+) (\d+)$", p.stdout, re.M)
        self.assertIsNotNone(m, p.stdout)
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        return trace, int(m.group(1)), int(m.group(2))

    def check_coverage(self, trace, slices, start, end, what, hole=0):
        """@slices cover the bottom's span but for its edges: a sample's period at each
        end, and 2 % for the clocks' reads; time the thread spent off the CPU (waiting
        for one on a busy machine) is the machine's, and counts as covered. Holes between
        the slices up to @hole ns are allowed too, and then none longer, and as much
        again at the span's ends (a hole there has no slice after it, or before it)."""
        tid = trace.slices[0].pid
        got = covered(slices, start, end)
        off = trace.off_cpu(tid, start, end)
        spans = sorted((s.start_ns, s.end_ns) for s in slices if s.end_ns > start and
                       s.start_ns < end)
        holes = [b[0] - a[1] for a, b in zip(spans, spans[1:]) if b[0] > a[1]]
        if hole:
            self.assertTrue(all(h <= hole for h in holes),
                            "%s: holes of %s ms, %.1f ms allowed" %
                            (what, [round(h / MS, 1) for h in holes], hole / MS))
        want = (end - start) - 2 * PERIOD - 0.02 * (end - start) - sum(
            min(h, hole) for h in holes) - hole
        lost = trace.losses()
        self.assertGreaterEqual(got + off, want,
                                "%s covers %.1f ms of the bottom's %.1f ms (off the CPU "
                                "%.1f ms): %s; the tool %s" %
                                (what, got / MS, (end - start) / MS, off / MS,
                                 [s for s in slices][:8],
                                 "lost records %r" % lost if lost else "lost nothing"))

    def check_300(self, python, backend):
        trace, start, end = self.record(python, backend, 300)
        spins = [s for s in trace.named("spin") if s.end_ns > start and s.start_ns < end]
        self.assertTrue(spins, "no spin slice at the bottom")
        for s in spins:
            anc = s.ancestors()
            # dive() is called 301 times, under main and <module>: nothing cut, nothing
            # else in between.
            self.assertEqual(anc[-2:], ["main", "<module>"], (s, anc[:5], anc[-5:]))
            self.assertEqual(anc[:-2], ["dive"] * 301, (s, len(anc)))
        self.check_coverage(trace, spins, start, end, "spin under the whole stack")
        if backend == "bpf":
            # Read in the kernel at each sample: one slice for the one call. What a
            # split was, if any: the pieces (ms from the bottom's start), their
            # arguments, what the thread showed between them, the tool's counters.
            # Seen once: a first piece of one sample before the bottom's clock read,
            # a sample the kernel did not read, its stack read late from outside (its
            # deep frames' arguments read where the kernel's room for them ran out):
            # one such piece of one sample, at the start, is let through.
            tid = spins[0].tid
            if len(spins) == 2 and spins[0].args.get("samples") == 1 and \
                    spins[0].start_ns < start + PERIOD:
                print("note: %s: a first piece of one sample, read late: %s"
                      % (self.id(), spins[0]))
                spins = spins[1:]
            between = [(round((o.start_ns - start) / MS, 2), round(o.dur / 1000, 2), o.name)
                       for o in trace.slices if o.tid == tid and o.cat == "off-cpu" and
                       o.end_ns > start and o.start_ns < end]
            self.assertEqual(len(spins), 1, "spin in %d pieces: %s; off the CPU: %s; %s" % (
                len(spins), [(round((o.start_ns - start) / MS, 2), round(o.dur / 1000, 2),
                              o.args) for o in spins], between[:10], trace.other))
        other = trace.other
        self.assertEqual(other["python_cut_stacks"], 0, other)

    def check_5000(self, python, backend):
        trace, start, end = self.record(python, backend, 5000)
        other = trace.other
        cut = other["python_cut_stacks"]
        # Every sample at the bottom is of a stack 5,003 frames deep: 3,979 cut each
        # (the descent and the way back up cut fewer).
        self.assertGreaterEqual(cut, 10, other)
        self.assertGreater(other["python_cut_frames"] / cut, 1000, other)
        self.assertEqual(other["python_rootless_stacks"], 0, other)
        # The root-most frames are the ones kept: <module> and main over the bottom.
        # Without root a walk of this stack takes up to ~3.5 ms (3.8-3.10), and samples
        # between two reads more than 10 ms apart get no stack (docs/cost-and-fidelity.md: the window
        # within which what two reads share stands between them): holes up to that
        # window and two walks are allowed there, not longer ones, and as much at the
        # bottom's end: the fixture unwinds and exits right after it, so the last samples
        # have no read after them to stand between (seen: 11.7 ms under a CPU hog).
        hole = 10 * MS + 2 * 3500000 if backend == "perf" else 0
        roots = [s for s in trace.named("<module>") if s.depth == 0]
        self.check_coverage(trace, roots, start, end, "<module>", hole)
        mains = [s for s in trace.named("main") if s.ancestors() == ["<module>"]]
        self.check_coverage(trace, mains, start, end, "main under <module>", hole)
        # Nested as deep as a trace goes (its cap, counted), root first. At the middle
        # of the bottom with eBPF; without root, anywhere over it (a sample there may
        # have no Python stack: seen once, native frames only, 101 deep).
        mid = (start + end) // 2
        tid = trace.slices[0].pid
        chain = [s for s in trace.slices if s.tid == tid and s.cat != "off-cpu" and
                 (s.start_ns <= mid < s.end_ns if backend == "bpf" else
                  s.start_ns < end and s.end_ns > start)]
        self.assertGreater(other["slices_too_deep"], 0, other)
        deepest = max(chain, key=lambda s: s.depth, default=None)
        self.assertIsNotNone(deepest)
        self.assertEqual(deepest.depth, JSON_DEPTH - 1, chain[-3:])
        anc = deepest.ancestors()
        self.assertEqual(anc[-2:], ["main", "<module>"])
        self.assertEqual(set([deepest.name] + anc[:-2]), {"dive"})


class SaysSo(BpfTestCase):
    def test_cut_stacks_are_told(self):
        """Without -q, the end of a recording says what a deep stack lost."""
        out = os.path.join(self.dir, "deep.json")
        p = run_tool(["-o", out, "--", interpreters()[0][1], DEEP, "5000", "0.2"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr, r"\d+ Python stacks deeper than %d frames kept their "
                         r"root-most %d" % (KEPT, KEPT))
        self.assertRegex(p.stderr, r"\d+ slices deeper than %d levels were left out, the "
                         r"root-most kept" % JSON_DEPTH)


def make_test(python, backend, depth):
    def test(self):
        getattr(self, "check_%d" % depth)(python, backend)
    return test


for _label, _python in interpreters():
    for _backend in ("bpf", "perf"):
        for _depth in (300, 5000):
            setattr(DeepStacks, "test_%s_%d_%s" % (_backend, _depth,
                                                   _label.replace(".", "_").replace("-", "_")),
                    make_test(_python, _backend, _depth))


if __name__ == "__main__":
    unittest.main()
