"""Short-lived code is named: module and class bodies are freed right after they ran,
often before the tool named their frames from outside. An import-heavy start-up
(tests/fixtures/py_imports.py: 30 modules, each body and a class body in it computing
3 ms, half of them without any function) must show each module's body as `<module>`
with its file, and each class body by its name, with no "[unreadable Python frame]"
while the fixture imports: as root on every interpreter; without root (stacks read from
outside ~1 ms after their sample) a few can still be missed, within stated bounds, and
the test says how many."""
import collections
import os
import subprocess
import unittest

from pythons import interpreters, per_interpreter
from tracefile import ROOT, BpfTestCase, Trace, run_tool

IMPORTS = os.path.join(ROOT, "tests", "fixtures", "py_imports.py")
COUNT = 30
UNREADABLE = "[unreadable Python frame]"


def under(s, ancestor):
    """Whether slice @s is nested in @ancestor."""
    p = s.parent
    while p is not None and p is not ancestor:
        p = p.parent
    return p is ancestor


class ShortLivedCode(BpfTestCase):
    def check(self, python, backend):
        out = os.path.join(self.dir, "imports.json")
        p = run_tool(["-q", "--backend", backend, "-o", out, "--", python, IMPORTS,
                      str(COUNT)])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        imports = [line.split()[1:] for line in p.stdout.splitlines()
                   if line.startswith("module ")]
        self.assertEqual(len(imports), COUNT, p.stdout)
        first, last = int(imports[0][2]), int(imports[-1][3])
        unreadable = [s for s in trace.slices if s.name == UNREADABLE]
        during = [s for s in unreadable if s.end_ns > first and s.start_ns < last]
        missed, misnamed = [], []
        for name, path, t0, t1 in imports:
            t0, t1 = int(t0), int(t1)
            bodies = [s for s in trace.slices if s.name == "<module>" and
                      s.args.get("file", "").endswith(os.path.basename(os.path.dirname(path)) +
                                                      "/" + os.path.basename(path)) and
                      s.end_ns > t0 and s.start_ns < t1]
            classes = {s.name for s in trace.slices if any(under(s, b) for b in bodies) and
                       s.parent in bodies and s.cat == "python"} - {"<listcomp>"}
            if not bodies:
                missed.append(name)
            elif classes != {"Shape%d" % int(name[-2:])}:
                misnamed.append((name, sorted(classes)))
        where = ("%d of %d imports without their module's body %s; class bodies missing or "
                 "named as another %s; %d unreadable frames while importing, %d in all: %s" %
                 (len(missed), COUNT, missed[:5], misnamed[:5], len(during), len(unreadable),
                  [(s, s.ancestors()[:3]) for s in during[:5]]))
        # Known gap (docs/limits.md#short-lived-code): before 3.12, a class body made where an earlier code object
        # was freed, its name's and file's strings where that one's were, is the same
        # code object to the tool and gets its name. This fixture's modules share one
        # shape: seen for 0-1 of its 30 class bodies a run. 3.12 and 3.13 number their
        # code objects (co_version), which tells them apart: none there.
        minor = int(subprocess.run([python, "-c", "import sys; print(sys.version_info[1])"],
                                   capture_output=True, text=True, check=True).stdout)
        gap = 0 if minor in (12, 13) else 2
        if backend == "bpf":
            self.assertEqual(missed, [], where)
            self.assertEqual(during, [], where)
            self.assertLessEqual(len(misnamed), gap, where)
        else:
            # Read from outside ~1 ms late: a 3 ms body can end before its stack is
            # read (a tenth of the imports may miss one), and a walk can catch a frame
            # as it is set up or left, its code not (or no longer) its own: one sample
            # shown unreadable, seen under up to 4 of the 30 module bodies a run; a
            # fifth of them may have one.
            self.assertLessEqual(len(missed), COUNT // 10, where)
            self.assertLessEqual(len(during), COUNT // 5, where)
            self.assertLessEqual(len(misnamed), COUNT // 5 + gap, where)
        if during or missed or misnamed:
            print("note: %s: %s" % (self.id(), where))


per_interpreter(ShortLivedCode)


POOL = os.path.join(ROOT, "tests", "fixtures", "py_pool.py")


class PoolStartUp(BpfTestCase):
    """The issue's case: a Pool's workers start (spawn: a new interpreter each, which
    imports its way to the job; forkserver: forked from a server that did), with eBPF.
    A stack read from outside before the kernel knew a new process can find a module's
    body gone; the kernel names it at its next sample, and that name must reach the
    code found gone (before, 22 unreadable frames in 20 runs of Debian's 3.11 with spawn
    and 3.10 with forkserver)."""

    def test_no_unreadable_frame(self):
        found = []
        for label, python in interpreters():
            for method in ("spawn", "forkserver"):
                out = os.path.join(self.dir, "pool.json")
                p = run_tool(["-q", "--force", "-o", out, "--", python, POOL, method])
                self.assertEqual(p.returncode, 0, p.stderr)
                trace = Trace(out)
                found += [(label, method, s, s.ancestors()[:4]) for s in trace.slices
                          if s.name == UNREADABLE]
        # 0 in 62 runs once fixed, and 1 in 20 runs of a build between. The remaining
        # rare case (not found) is one stack in a run (its frames nested, at a worker's
        # exit once): 0-1 over the 14 runs here in each of 9 idle runs of this test (this
        # build and the one before), 3 once beside a CPU hog, each in a run of its own.
        # The bug fixed gave 22 in 20 runs of two of these: allowed, 3 stacks over all
        # the runs, at most 1 in each.
        stacks = {(label, method, s.start_ns) for label, method, s, _ in found}
        per_run = collections.Counter((label, method) for label, method, _ in stacks)
        self.assertLessEqual(len(stacks), 3, found)
        self.assertLessEqual(max(per_run.values(), default=0), 1, found)
        if found:
            print("note: %s: %s" % (self.id(), found))


if __name__ == "__main__":
    unittest.main()
