"""End-to-end: a Python process in a container of its own, as Docker, Podman and
Kubernetes make them: its own root (Debian sid's unpacked root, .sid/root, under chroot)
and its own pid and mount namespaces (unshare -pfm). Its files are read through its root,
its threads found by their ids in its namespace, and it is named with both pids.

Launched and attached, with eBPF and with perf alone: the split of a CPU-bound thread
(it measures its own CPU time, as in test_report) and a Pool's jobs with their arguments.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest

from pythons import SID_ROOT, SID_VERSIONS, sid_python
from test_report import ns, report_block, thread_line
from tracefile import ROOT, Trace, run_tool

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
MS = 1000000
# The container: private mounts, /dev and a /proc of its own inside the root, then the
# root. It is pid 1 of its namespace, like a container's entry point.
ENTER = ('mount --rbind /dev "$0/dev" && mount -t proc proc "$0/proc" && '
         'exec chroot "$0" "$@"')
# A thread that runs long enough to be attached to: says its id in its namespace and is
# ready, spins until the file "stop" appears in its folder (2 s at most after it
# started), then prints the split as py_split.py does.
LONG = '''
import os, sys, threading, time
here = os.path.dirname(os.path.abspath(__file__))
def splitter():
    print("ready %d" % threading.get_native_id(), flush=True)
    end = time.monotonic() + 20
    while time.monotonic() < end and not os.path.exists(os.path.join(here, "stop")):
        pass
t = threading.Thread(target=splitter, name="splitter")
t.start()
t.join()
'''


def container(argv):
    return ["unshare", "-pfm", "--propagation", "private", "sh", "-c", ENTER,
            SID_ROOT] + argv


class Containers(unittest.TestCase):
    def setUp(self):
        if not shutil.which("unshare") or not shutil.which("chroot"):
            self.skipTest("unshare(1) or chroot(1) missing (util-linux, coreutils)")
        if not all(sid_python(v) for v in SID_VERSIONS):
            if os.environ.get("CI"):
                raise RuntimeError("CI: Debian sid's root is missing from .sid/")
            self.skipTest("no Debian sid root in .sid/ (run `make deps`)")
        if os.geteuid() != 0:
            self.skipTest("containers (unshare -p, chroot) need root; CI runs as root")
        # The fixtures where the container sees them: /tmp/NAME inside its root.
        self.inside = tempfile.mkdtemp(dir=os.path.join(SID_ROOT, "tmp"))
        self.name = "/tmp/" + os.path.basename(self.inside)
        for f in ("py_split.py", "py_pool_args.py"):
            shutil.copy(os.path.join(FIXTURES, f), self.inside)
        with open(os.path.join(self.inside, "long.py"), "w") as f:
            f.write(LONG)
        self.out = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.inside)
        shutil.rmtree(self.out)

    def trace_path(self):
        return os.path.join(self.out, "t%d.json" % len(os.listdir(self.out)))

    def splitter(self, trace):
        """(pid, tid) of the thread named splitter, in our ids."""
        found = [k for k, v in trace.thread_names.items() if v == "splitter"]
        self.assertEqual(len(found), 1, trace.thread_names)
        return found[0]

    def check_named_both_ways(self, trace, pid):
        name = trace.process_names.get(pid, "")
        self.assertIn("(pid 1 in its namespace)", name, trace.process_names)
        self.assertNotEqual(pid, 1)

    def launch_split(self, version, backend):
        out = self.trace_path()
        python = "/usr/bin/python" + version
        r = run_tool(["--backend", backend, "-o", out, "--"] +
                     container([python, self.name + "/py_split.py"]))
        self.assertEqual(r.returncode, 0, r.stderr)
        _, inner_tid, cpu_ns, _ = r.stdout.split()
        trace = Trace(out)
        pid, tid = self.splitter(trace)
        self.assertNotEqual(tid, int(inner_tid), "its namespace's id, not ours")
        self.check_named_both_ways(trace, pid)
        spins = [s for s in trace.slices if s.tid == tid and s.name == "spin"]
        self.assertTrue(spins, "no Python frames on the splitter: %s" %
                        sorted({s.name for s in trace.slices if s.tid == tid}))
        # Its on-CPU time, as the thread measured it itself (test_report's 5 %).
        block = report_block(r.stderr)
        line = thread_line(block, tid)
        on_cpu = re.search(r"on-CPU " + r"([\d.]+) (ms|s)", line)
        self.assertTrue(on_cpu, line)
        self.assertLess(abs(ns(*on_cpu.groups()) - int(cpu_ns)), 0.05 * int(cpu_ns),
                        (line, cpu_ns))
        self.assertTrue(any("in its namespace)" in l for l in block
                            if l.startswith("process %d " % pid)), block)

    def test_launched_split_bpf_3_14(self):
        self.launch_split("3.14", "bpf")

    def test_launched_split_perf_3_14(self):
        self.launch_split("3.14", "perf")

    def test_launched_split_bpf_3_15(self):
        self.launch_split("3.15", "bpf")

    def test_launched_split_perf_3_15(self):
        self.launch_split("3.15", "perf")

    def attach(self, backend):
        out = self.trace_path()
        proc = subprocess.Popen(container(["/usr/bin/python3.14", self.name + "/long.py"]),
                                stdout=subprocess.PIPE, text=True)
        try:
            ready = proc.stdout.readline()
            self.assertTrue(ready.startswith("ready "), ready)
            with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                pid = int(f.read().split()[0])  # unshare's child: pid 1 inside
            r = run_tool(["--backend", backend, "-d", "1", "-o", out, "-p", str(pid)])
            # dump reads it too, and names it with both pids.
            d = run_tool(["dump", "-p", str(pid)])
        finally:
            open(os.path.join(self.inside, "stop"), "w").close()
            proc.communicate(timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        trace = Trace(out)
        tpid, tid = self.splitter(trace)
        self.assertEqual(tpid, pid)
        self.check_named_both_ways(trace, pid)
        names = {s.name for s in trace.slices if s.tid == tid}
        self.assertIn("splitter", names, "no Python frames on the splitter: %s" % names)
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertIn("Process %d: /usr/bin/python3.14 %s/long.py (pid 1 in its namespace)"
                      % (pid, self.name), d.stdout)
        self.assertIn('Thread %d (splitter) "splitter"' % tid, d.stdout)
        self.assertRegex(d.stdout, r"\n    splitter \(%s/long.py:\d+\)" % self.name)

    def test_attached_bpf(self):
        self.attach("bpf")

    def test_attached_perf(self):
        self.attach("perf")

    def pool(self, backend):
        """Eight jobs (i, 1, 2) on a forkserver Pool: one `proc` slice per job with its
        arguments, within the job's own clock readings, and its task number."""
        out = self.trace_path()
        r = run_tool(["-q", "--backend", backend, "-o", out, "--"] +
                     container(["/usr/bin/python3.14", self.name + "/py_pool_args.py", "pool",
                                "forkserver", "distinct"]))
        self.assertEqual(r.returncode, 0, r.stderr)
        jobs = {}
        for line in r.stdout.splitlines():
            if line.startswith("job "):
                _, _, a, _, _, t0, t1 = (int(x) for x in line.split()[1:])
                jobs[a] = (t0, t1)
        self.assertEqual(sorted(jobs), list(range(8)), r.stdout)
        trace = Trace(out)
        self.assertEqual(trace.nesting_errors, [])
        # The same allowance as test_pool_args gives each backend (see it for why).
        allowed = 2 * MS if backend == "bpf" else 14 * MS
        tasks, missed = [], []
        for a, (t0, t1) in sorted(jobs.items()):
            # Its pieces: with its arguments, lying mostly inside its own clock readings
            # (perf: a stack read late can put a job's frames inside a neighbour's loop).
            mine = [s for s in trace.slices if s.name == "proc" and
                    s.args.get("init_t") == a and
                    min(s.end_ns, t1) - max(s.start_ns, t0) > (s.end_ns - s.start_ns) / 2]
            where = "job %d [%d, %d]: %s" % (a, t0, t1, [(s.start_ns - t0, s.end_ns - t1)
                                                         for s in mine])
            if not mine:
                missed.append(where)
                continue
            for s in mine:
                self.assertGreater(s.start_ns, t0 - allowed - 0.02 * (t1 - t0), where)
                self.assertLess(s.end_ns, t1 + allowed + 0.02 * (t1 - t0), where)
                self.assertIn("in its namespace)", trace.process_names.get(s.pid, ""))
            # perf: a job read in pieces (see test_pool_args) may have a piece whose
            # loop was read before its task was: its task is any piece's.
            loops = [p for p in trace.slices if p.name == "worker" and
                     any(p.tid == m.tid and p.start_ns <= m.start_ns and
                         p.end_ns >= m.end_ns for m in mine)]
            found = {p.args.get("pool_task") for p in loops} - {None}
            self.assertEqual(len(found), 1, "pool_task of %s: %s" % (
                [(p, p.args) for p in loops], where))
            tasks.append(found.pop())
        # eBPF reads every stack at its instant: every job, exactly. perf reads from
        # outside, after the sample: a 20 ms job that is a new worker's first can go
        # unread (seen in 1 of 4 suite runs, not alone); one such miss is allowed.
        self.assertLessEqual(len(missed), 0 if backend == "bpf" else 1, missed)
        self.assertEqual(len(set(tasks)), len(tasks), tasks)
        self.assertTrue(set(tasks) <= set(range(8)), tasks)

    def test_pool_bpf(self):
        self.pool("bpf")

    def test_pool_perf(self):
        self.pool("perf")


if __name__ == "__main__":
    unittest.main()
