"""The tool's two threads share nothing unguarded. The drainer reads the kernel's buffers
and the target's memory; the other thread hands records out, names their frames and
writes the trace. What a record carries must not change under the second while the
first goes on (arguments decoded, type names read, waits classified, processes named):
the tool built with ThreadSanitizer (build/tsan) records tests/fixtures/py_shared.py,
which takes those paths, and reports no data race.

A report is the tool's fault whatever the machine's load: TSan reports two accesses that
no lock or atomic orders; load can make it miss one, not invent one. The trace is
checked for what the run must have exercised, so that a run that took none of the paths
can't pass."""
import os
import shutil
import subprocess
import tempfile
import unittest

from pythons import interpreters
from tracefile import ROOT, Trace

TSAN_TOOL = os.path.join(ROOT, os.environ.get("PYTRACE_BUILD", "build"), "tsan",
                         "pytrace-sample")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_shared.py")
# Oldest and newest layouts: built-in tables (3.8), and the runtime's own description
# (3.13, read again by the names reader from what the records say).
VERSIONS = ("3.8", "3.13")


def first_report(stderr):
    at = stderr.find("WARNING: ThreadSanitizer")
    return stderr[at:at + 4000] if at >= 0 else ""


class ThreadSafety(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def check(self, python, backend):
        if backend == "bpf" and os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        self.assertTrue(os.access(TSAN_TOOL, os.X_OK),
                        "%s not built: `make check` builds it" % TSAN_TOOL)
        out = os.path.join(self.dir, "t.json")
        env = dict(os.environ, TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0")
        p = subprocess.run([TSAN_TOOL, "-q", "--backend", backend, "-o", out, "--",
                            python, FIXTURE], capture_output=True, text=True, timeout=300,
                           env=env)
        if "FATAL: ThreadSanitizer" in p.stderr:
            self.fail("ThreadSanitizer could not run on this machine (not the tool's "
                      "fault): " + p.stderr[:2000])
        report = first_report(p.stderr)
        self.assertFalse(report, "a data race between the tool's threads (the tool's "
                         "fault, whatever the machine's load):\n" + report)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertIn("done", p.stdout)
        trace = Trace(out)
        # The paths were taken: arguments decoded with type names read while the run
        # went on, waits handed out. (Not Python's thread names: under TSan the tool
        # hands records out seconds late, often after the threads ended, and a thread
        # that ended before it was read keeps its comm; cli/pynames.c reads them with a
        # reader of its own, sharing nothing: tests/e2e/test_trace_names.py.)
        kinds = {s.args.get("item") for s in trace.named("work")}
        self.assertGreaterEqual(len([k for k in kinds if k and k.startswith("<Kind")]), 5,
                                sorted(k for k in kinds if k))
        labels = {s.args.get("label") for s in trace.named("work")}
        self.assertTrue(any(v and v.startswith("'label-") for v in labels), labels)
        self.assertGreater(trace.other["off_cpu_spans"], 0, trace.other)


def _add_tests():
    for label, python in interpreters():
        if not label.startswith("pyenv-") or \
                not any(label[6:].startswith(v + ".") for v in VERSIONS):
            continue
        for backend in ("bpf", "perf"):
            name = "test_%s_%s" % (backend, label.replace(".", "_").replace("-", "_"))
            setattr(ThreadSafety, name,
                    lambda self, python=python, backend=backend: self.check(python, backend))


_add_tests()

if __name__ == "__main__":
    unittest.main()
