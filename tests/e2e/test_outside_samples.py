"""Without eBPF (`--backend perf`, the path of users without root) a Python stack is read
from outside by the drainer thread, which the kernel wakes at every sample: at 10 kHz
the calls of tests/fixtures/py_alternate.py (2 ms and 1 ms of computing, no wait
between) are in the trace, their edges within a few periods of the fixture's own clock.

Before the drainer was woken at every sample it read a drain's stacks up to a ms after
their samples; those over two periods late kept only what the reads around them shared,
and 278-288 of these 290 calls were missing."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from pythons import interpreters
from tracefile import ROOT, TOOL, Trace, match_spans, run_tool, run_tool_watched

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_alternate.py")
GENEXPR = os.path.join(ROOT, "tests", "fixtures", "py_genexpr.py")
HZ = 10000
PERIOD_NS = 1000000000 // HZ
MS = 1000000


class OutsideSamples(unittest.TestCase):
    def check(self, python):
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "alt.json")
            p, waited, wall = run_tool_watched(["-q", "--backend", "perf", "-F", str(HZ), "-o",
                                                out, "--", python, FIXTURE])
            self.assertEqual(p.returncode, 0, p.stderr)
            trace = Trace(out)
        finally:
            shutil.rmtree(d)
        spans = [line.split()[1:] for line in p.stdout.splitlines()
                 if line.startswith("span ")]
        self.assertEqual(len(spans), 300, p.stdout)
        self.assertEqual(trace.nesting_errors, [])
        other = trace.other
        self.assertGreater(other["sample_python_walks"], 0.5 * other["samples"], other)
        self.assertLessEqual(other["prompt_python_walks"], other["sample_python_walks"], other)
        # The first calls run while the tool finds the runtime and loads symbols (the
        # rest of it then competes with the drainer): not judged.
        judged = spans[10:]
        missing, errors = match_spans(trace, judged)
        # Measured here: 0-13 of 290 calls missing on an idle machine, up to 32 (Debian's
        # 3.11) with a CPU hog on the other core, 103 once in a full suite (before the
        # drainer stopped copying the unused part of each sample's stack copy, which
        # took most of its time); edges: 90th percentile 136-351 us. Without the
        # wake-up at every sample, 278-288 are missing: the bound is between the two.
        # A call goes missing when the stacks around it came over two periods late:
        # the drainer had no CPU in time, or was not woken. Which, is told by the share
        # of stacks read within a period and by how long the tool's threads waited for
        # a CPU (on an idle machine here, up to ~40 % of the run: the tool and the
        # target are three threads on two cores).
        prompt = other["prompt_python_walks"] / max(other["sample_python_walks"], 1)
        who = ("%.0f %% of stacks read within a period of their sample, %s; a thread of "
               "the tool waited %.0f ms in all for a CPU in a %.0f ms run" % (
                   100 * prompt, "so the tool's fault (the drainer not woken at samples?)"
                   if prompt < 0.1 else "so likely the machine's (a CPU hog?)",
                   waited / MS, wall / MS))
        self.assertLessEqual(len(missing), len(judged) * 2 // 5,
                             "%d of %d calls missing, %s; %s" % (len(missing), len(judged), who,
                                                                 {k: other[k] for k in (
                                                                     "samples",
                                                                     "sample_python_walks",
                                                                     "prompt_python_walks",
                                                                     "late_python_walks")}))
        self.assertLess(errors[len(errors) * 9 // 10], 5 * PERIOD_NS,
                        "edges: %s; %s" % (errors[::max(len(errors) // 20, 1)], who))


class GeneratorFrames(unittest.TestCase):
    """A stack read from outside while a generator expression yields must not end at the
    generator's frame: CPython clears a generator frame's link to its caller at every
    yield (3.11+), so a read of the frame just after one found no caller, and the
    stack was that one frame. Before the check, the workers of examples/pool_jobs.py
    (3.12, --backend perf) had 169 slices rooted at the generator in one run, each one
    cutting every slice around it; 3.8-3.10 were already guarded by their frames' own
    f_executing / f_state."""

    def check(self, python):
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "gen.json")
            p = run_tool(["-q", "--backend", "perf", "-F", "2000", "-o", out, "--", python,
                          GENEXPR])
            self.assertEqual(p.returncode, 0, p.stderr)
            trace = Trace(out)
        finally:
            shutil.rmtree(d)
        self.assertEqual(trace.nesting_errors, [])
        gens = [s for s in trace.slices
                if s.name.endswith("<genexpr>") and s.args.get("file") == GENEXPR]
        # Not a bound on the tool: a run whose stacks were all read late shows no
        # generator at all, and then proves nothing.
        self.assertGreater(len(gens), 5, "too few stacks read inside the generator (%s)" %
                           {k: trace.other.get(k) for k in ("samples", "sample_python_walks",
                                                             "late_python_walks")})
        rootless = [s for s in gens if "work" not in s.ancestors()]
        # Before the check: 154-261 of 348-590 (3.11-3.13), work() in 130-198 pieces.
        # After: none in 12 runs on 3.11-3.13 (Debian's too). Allowed: 2. With a build
        # that checked the frame state only, 3.13 had one in a run (a read can straddle
        # a yield where the generator's page and its caller's were read a moment apart),
        # and 3.9, which neither check concerns, one in another: cause not found. sid's
        # 3.15 marks a generator running before it links it to its caller: 1-9 such
        # stacks kept per run (3 failed CI once) until a running generator with no
        # previous frame was refused on 3.12+; none in 13 runs since.
        self.assertLessEqual(len(rootless), 2, "%d of %d generator slices outside work(): "
                             "stacks read as the generator yielded (the tool's fault): %s" %
                             (len(rootless), len(gens), rootless[:5]))


class HighRates(unittest.TestCase):
    def test_hundred_khz_leaves_the_target_running(self):
        """At 100 kHz the drainer is woken every 10th sample, not at every one: a wake-up
        costs the target ~40 us of CPU on this VM, more than a 10 us period, and with
        one at every sample py_alternate.py's 0.45 s of work had not ended after 16
        minutes (3.8 s with the cap, 4 s with no wake-ups at all). The bound is far
        from either: it tells a target that runs from one that does not."""
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "alt.json")
            start = time.monotonic()
            p = subprocess.Popen([TOOL, "-q", "--backend", "perf", "-F", "100000", "-o", out,
                                  "--", interpreters()[0][1], FIXTURE],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                stdout, stderr = p.communicate(timeout=90)
            except subprocess.TimeoutExpired:
                # Ctrl-C: the tool stops sampling and writes; the target then ends.
                p.send_signal(signal.SIGINT)
                p.communicate(timeout=60)
                self.fail("the target did not end in 90 s under 100 kHz sampling (the "
                          "tool's fault: its sampling cost more than the target's period)")
            took = time.monotonic() - start
            self.assertEqual(p.returncode, 0, stderr)
            self.assertEqual(len([l for l in stdout.splitlines() if l.startswith("span ")]),
                             300, stdout)
            other = Trace(out).other
        finally:
            shutil.rmtree(d)
        # The drainer, woken every 10th sample, reads most stacks over two periods late.
        self.assertGreater(other["sample_python_walks"], 0, other)
        print("note: %s: %.1f s, %d samples" % (self.id(), took, other["samples"]))


def make_test(python):
    def test(self):
        self.check(python)
    return test


for _label, _python in interpreters():
    setattr(OutsideSamples, "test_outside_sample_time_" +
            _label.replace(".", "_").replace("-", "_"), make_test(_python))
    setattr(GeneratorFrames, "test_generator_roots_" +
            _label.replace(".", "_").replace("-", "_"), make_test(_python))


if __name__ == "__main__":
    unittest.main()
