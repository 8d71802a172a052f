"""Arrows between a process pool's processes: each task from where the parent handed it
out, to the worker that ran it, to where the parent received its result.

The fixture (tests/fixtures/py_pool_args.py) prints, for each job, the pid and tid that
ran it and its own clock readings at entry and exit. With eBPF every task's four
messages (the task written by the parent's task handler, read by the worker, the result
written by the worker, read by the parent's result handler; for a ProcessPoolExecutor
its queue's feeder thread and its manager thread) are marker slices under the stack the
kernel read at each, joined by one flow. Checked on every interpreter, and in
DevTools' own trace engine (tests/viewer), which binds a flow event to the slice with
its exact ts, pid, tid and category. The perf backend draws no flows (docs/limits.md#arrows).
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

from pythons import interpreters
from test_pool_args import record
from tracefile import ROOT

VIEWER = os.path.join(ROOT, "tests", "viewer")
# Per kind of pool: its messages' markers in a task's order, the worker loop whose slice
# carries the task's number and that number's name, and the functions the parent's
# markers must be under: Pool's task and result handler threads; an executor's queue
# feeder thread and its manager thread (3.9+) or queue management thread (3.8).
# Unqualified names: 3.8-3.10 have no co_qualname.
KINDS = {
    "pool": (("pool task sent", "pool task received", "pool result sent",
              "pool result received"), "worker", "pool_task",
             {"pool task sent": ("_handle_tasks",),
              "pool result received": ("_handle_results",)}),
    "ppe": (("executor task sent", "executor task received", "executor result sent",
             "executor result received"), "_process_worker", "work_id",
            {"executor task sent": ("_feed",),
             "executor result received": ("wait_result_broken_or_wakeup",
                                          "_queue_management_worker")}),
}


def jobs_of(stdout):
    """(pid, tid, start_ns, end_ns) per job, as it timed itself."""
    return [tuple(int(x) for x in (f[1], f[2], f[6], f[7])) for f in
            (line.split() for line in stdout.splitlines()) if f and f[0] == "job"]


def devtools_flows(path):
    p = subprocess.run(["node", os.path.join(VIEWER, "flows_of.mjs"), path],
                       capture_output=True, text=True, cwd=VIEWER, timeout=120)
    if p.returncode:
        raise AssertionError("DevTools' engine failed on the trace: " + p.stderr[-2000:])
    return json.loads(p.stdout)


class PoolFlows(unittest.TestCase):
    def check(self, python, kind, method, work):
        if os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        viewer = []
        # Kept for the one who reads a failure (these fail rarely, under load), removed
        # when the checks pass.
        kept = os.path.join(tempfile.gettempdir(), "pytrace-flows-%s-%d.json" %
                            (self.id().split(".")[-1], os.getpid()))

        def look(path):
            viewer.extend(devtools_flows(path))
            shutil.copyfile(path, kept)

        p, trace = record(python, "bpf", kind, method, work, look=look)
        try:
            self.check_trace(p, trace, viewer, kind, work)
        except AssertionError as e:
            raise AssertionError("%s (trace kept at %s)" % (e, kept)) from None
        if os.path.exists(kept):
            os.remove(kept)

    def check_trace(self, p, trace, viewer, kind, work):
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(trace.nesting_errors, [])
        jobs = jobs_of(p.stdout)
        self.assertEqual(len(jobs), 6 if work == "equal" else 8, p.stdout)
        main_pid = min(s.pid for s in trace.slices)  # the launched script: the first pid
        markers = {(s.pid, s.tid, s.ts): s for s in trace.slices if s.cat == "message"}
        flows = {}
        for e in trace.events:
            if e["ph"] in "stf":
                self.assertEqual(e["cat"], "message", e)
                self.assertIn((e["pid"], e["tid"], e["ts"]), markers,
                              "a flow event bound to no marker slice: %r" % e)
                flows.setdefault(e["id"], []).append(markers[(e["pid"], e["tid"], e["ts"])])
        self.assertEqual(trace.other.get("flows"), len(jobs), trace.other)
        self.assertEqual(len(viewer), len(jobs), "DevTools resolved %d flows of %d: %s" % (
            len(viewer), len(jobs), viewer))
        if any(len(f) != 4 for f in viewer):
            # Those flows as the trace has them, with any slice of a point's thread that
            # starts within 2 us of it (DevTools binds a flow event by ts, pid, tid, cat).
            ours = [c for f in viewer if len(f) != 4 for c in flows.values()
                    if any((m.pid, m.tid, m.ts) == tuple(e[1:]) for m in c for e in f)]
            near = [[(m.name, m.tid, m.ts, m.dur, m.depth, [(o.name, o.ts, o.dur) for o in
                                                           trace.slices if o.tid == m.tid and
                                                           o is not m and
                                                           abs(o.ts - m.ts) <= 2])
                     for m in c] for c in ours]
            self.fail("DevTools bound %s of the 4 points of a flow (in the trace: %s): %s" % (
                [len(f) for f in viewer], near, viewer))
        points, loop, number, handlers = KINDS[kind]
        tasks = []
        for pid, tid, t0, t1 in jobs:
            where = "job on %d:%d [%d, %d]" % (pid, tid, t0, t1)
            # The worker's loop slice that ran this job, and its task number.
            loops = [s for s in trace.slices if s.tid == tid and s.name == loop and
                     number in s.args and s.start_ns <= t0 + 2000000 and
                     s.end_ns >= t1 - 2000000]
            self.assertEqual(len(loops), 1, (where, loops))
            task = loops[0].args[number]
            tasks.append(task)
            mine = [f for f in flows.values() if f[1].tid == tid and
                    f[1].args.get(number) == task and f[1].start_ns <= t0]
            self.assertEqual(len(mine), 1, "%s, task %d: flows %r" % (where, task, mine))
            chain = mine[0]
            self.assertEqual([m.name for m in chain], list(points), (where, chain))
            self.assertEqual({m.args.get(number) for m in chain}, {task}, where)
            self.assertEqual([m.pid for m in chain], [main_pid, pid, pid, main_pid], where)
            self.assertEqual(sorted(m.start_ns for m in chain),
                             [m.start_ns for m in chain], where)
            for m in chain:
                if m.name in handlers:
                    under = {a.split(".")[-1] for a in m.ancestors()}
                    self.assertTrue(under & set(handlers[m.name]), (where, m, m.ancestors()))
            # The result is sent from inside a slice of the task's loop (the one that
            # ran the job, or one after it with the same task number: a sample between
            # the job's return and the send whose stack the kernel failed to read can
            # end the first, 3 runs in 150 beside a CPU hog); the task is received
            # before the job's own first clock reading, on the thread that ran it.
            sent = chain[2]
            around = [s for s in trace.slices if s.tid == tid and s.name == loop and
                      s.args.get(number) == task and s.start_ns <= sent.start_ns < s.end_ns]
            self.assertTrue(around, (where, sent, loops[0]))
            self.assertLessEqual(chain[1].start_ns, t0, where)
            self.assertGreaterEqual(sent.start_ns, t1 - 1000, where)
        self.assertEqual(sorted(tasks), list(range(len(jobs))), tasks)


class PoolFlowsPerfetto(unittest.TestCase):
    def check(self, kind, method):
        """The .pftrace: each task's four points are instants with its flow id on its
        markers, in time order, the last ending the flow (trace processor links a
        flow's events in time order)."""
        if os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        p, trace = record(interpreters()[0][1], "bpf", kind, method, "equal", ext="pftrace")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(trace.errors, [])
        jobs = jobs_of(p.stdout)
        points = KINDS[kind][0]
        self.assertEqual(len(trace.flows), len(jobs), trace.flows)
        self.assertEqual(trace.statistics.get("flows"), len(jobs), trace.statistics)
        workers = {tid for _, tid, _, _ in jobs}
        for fid, events in trace.flows.items():
            events.sort(key=lambda e: e[2])
            self.assertEqual([e[3] for e in events], list(points), (fid, events))
            self.assertEqual([e[4] for e in events], [False, False, False, True], events)
            self.assertIn(events[1][1], workers, events)
            self.assertEqual(events[1][1], events[2][1], events)

    def test_pool(self):
        self.check("pool", "fork")

    def test_executor(self):
        self.check("ppe", "spawn")


class NoFlows(unittest.TestCase):
    def test_no_flows_reads_no_messages(self):
        """--no-flows: no marker, no flow; the tasks' slices as before."""
        if os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        p, trace = record(interpreters()[0][1], "bpf", "pool", "fork", "equal",
                          options=["--no-flows"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([s for s in trace.slices if s.cat == "message"], [])
        self.assertEqual([e for e in trace.events if e["ph"] in "stf"], [])
        self.assertEqual(trace.other.get("flows"), 0)
        self.assertEqual(sorted(s.args["pool_task"] for s in trace.slices
                                if s.name == "worker" and "pool_task" in s.args),
                         list(range(len(jobs_of(p.stdout)))))


def make(python, kind, method, work):
    def test(self):
        self.check(python, kind, method, work)
    return test


for _label, _python in interpreters():
    _name = _label.replace(".", "_").replace("-", "_")
    setattr(PoolFlows, "test_pool_fork_equal_" + _name, make(_python, "pool", "fork", "equal"))
    setattr(PoolFlows, "test_pool_spawn_compute_" + _name,
            make(_python, "pool", "spawn", "compute"))
    setattr(PoolFlows, "test_ppe_spawn_equal_" + _name, make(_python, "ppe", "spawn", "equal"))
setattr(PoolFlows, "test_pool_forkserver_sleep",
        make(interpreters()[0][1], "pool", "forkserver", "sleep"))
setattr(PoolFlows, "test_ppe_fork_compute", make(interpreters()[0][1], "ppe", "fork", "compute"))


if __name__ == "__main__":
    unittest.main()
