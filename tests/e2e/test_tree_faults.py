"""Faults of following a process tree (issue 14): a double-forked daemon followed to its
end (D4), every short child's exit in the trace (D6), and a program attached to while
blocked shows the Python stack it is blocked in (D13)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from tracefile import BUILD, ROOT, Trace, run_tool, TOOL

FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def python_names(s):
    """The names of the Python frames above slice @s, innermost first."""
    out = []
    while s.parent:
        s = s.parent
        if s.cat == "python":
            out.append(s.name.split(".")[-1])
    return out


class TreeFaults(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def check_daemon(self, command):
        """@command (output file last) double-forks a daemon that times its own work."""
        out = os.path.join(self.dir, "daemon.json")
        done = os.path.join(self.dir, "daemon.txt")
        p = run_tool(["-o", out, "--"] + command + [done])
        self.assertEqual(p.returncode, 0, p.stderr)
        # The tool ended after the daemon did: it wrote its file first.
        self.assertTrue(os.path.exists(done), "the tool ended before the daemon: " + p.stderr)
        self.assertNotIn("Ctrl-C", p.stderr)  # nobody pressed it
        _, pid, t0, t1 = open(done).read().split()
        pid, t0, t1 = int(pid), int(t0), int(t1)
        trace = Trace(out)
        work = trace.named("daemon_work", pid)
        covered = sum(max(0, min(s.end_ns, t1) - max(s.start_ns, t0)) for s in work)
        # All of its work, but what the trace itself shows it preempted for.
        self.assertGreater(covered + trace.preempted(pid, t0, t1), 0.95 * (t1 - t0),
                           (work, trace.losses()))
        self.assertTrue(trace.instant("exit", pid))

    def test_double_forked_daemon_is_followed_to_its_end(self):
        self.check_daemon([sys.executable, os.path.join(FIXTURES, "py_daemon.py")])

    def test_native_daemon_is_followed_to_its_end(self):
        """The top exits within a few ms, the middle one too, before the first look at
        /proc: the tool used to take them for the whole tree and stop after ~0.5 s."""
        self.check_daemon([os.path.join(BUILD, "fixtures", "daemon")])

    def test_every_short_child_exits_in_the_trace(self):
        out = os.path.join(self.dir, "short.json")
        p = run_tool(["-q", "-o", out, "--", "sh", "-c",
                      "i=0; while [ $i -lt 300 ]; do /bin/true; i=$((i+1)); done"])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        children = {e["args"]["child_pid"] for e in trace.instant("fork")}
        self.assertGreaterEqual(len(children), 300)
        exited = {e["pid"] for e in trace.instant("exit")}
        missing = children - exited
        self.assertEqual(missing, set(), "%d of %d children have no exit event (%r)" %
                         (len(missing), len(children), trace.losses()))
        self.assertEqual(trace.other["exits_assumed"], 0)  # each had its own record
        statuses = {e["args"]["status"] for e in trace.instant("exit") if e["pid"] in children}
        if os.geteuid() == 0:
            # The kernel sends it: the shell reaps each child long before the tool looks.
            self.assertEqual(statuses, {0})

    def test_exit_statuses_of_reaped_children(self):
        if os.geteuid() != 0:
            self.skipTest("the exit codes of reaped children come from the eBPF reader")
        out = os.path.join(self.dir, "statuses.json")
        p = run_tool(["-q", "-o", out, "--", "sh", "-c",
                      "sh -c 'exit 3'; sh -c 'kill -9 $$'; true"])
        self.assertEqual(p.returncode, 0, p.stderr)
        trace = Trace(out)
        children = [e["args"]["child_pid"] for e in trace.instant("fork")]
        statuses = {e["pid"]: e["args"]["status"] for e in trace.instant("exit")}
        self.assertEqual([statuses.get(c) for c in children], [3, 137], trace.instant("exit"))

class AttachBlocked(unittest.TestCase):
    """`sudo pytrace-sample -p PID` on a program that seems hung: each blocked thread's
    Python stack, read once at attach (it can't change while blocked)."""

    def check(self, backend):
        if os.geteuid() != 0 and backend == "bpf":
            self.skipTest("the eBPF reader needs root")
        d = tempfile.mkdtemp()
        target = subprocess.Popen([sys.executable, os.path.join(FIXTURES, "py_longsleep.py"),
                                   "fork"], stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(target.stdout.readline(), "ready\n")
            time.sleep(0.2)  # the children are asleep too by now
            out = os.path.join(d, "blocked.json")
            p = subprocess.run([TOOL, "-q", "--backend", backend, "-d", "1", "-o", out,
                                "-p", str(target.pid)], capture_output=True, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            trace = Trace(out)
            self.assertEqual(trace.nesting_errors, [])
            waits = {}
            for s in trace.slices:
                if s.cat == "off-cpu" and s.tid == s.pid:
                    waits.setdefault(s.pid, []).append(s)
            self.assertEqual(len(waits), 3, waits)
            for pid, spans in waits.items():
                longest = max(spans, key=lambda s: s.dur)
                want = "longsleep" if pid == target.pid else "childsleep"
                # Blocked all along: one wait over the whole recording, under its function.
                self.assertGreater(longest.dur, 800000, spans)
                self.assertEqual(python_names(longest)[:1], [want], longest.ancestors())
                self.assertIn("<module>", python_names(longest))
            self.assertIsNone(target.poll())  # unharmed
        finally:
            target.kill()
            target.wait()
            shutil.rmtree(d)

    def test_perf(self):
        self.check("perf")

    def test_bpf(self):
        self.check("bpf")


if __name__ == "__main__":
    unittest.main()
