"""Reading pytrace-sample's traces the way a viewer would, for the end-to-end tests."""
import gzip
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("PYTRACE_BUILD", os.path.join(ROOT, "build"))
TOOL = os.environ.get("PYTRACE_TOOL", os.path.join(ROOT, "pytrace-sample"))
FINDINGS_PID = 4194305  # trace/trace.h's TRACE_FINDINGS_PID


def union_ns(spans, t0, t1):
    """ns of [t0, t1] inside any of the (start, end) @spans, overlaps counted once."""
    total, reach = 0, t0
    for a, b in sorted((max(a, t0), min(b, t1)) for a, b in spans if b > t0 and a < t1):
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total


class Slice:
    def __init__(self, ev, origin_ns):
        self.name = ev["name"]
        self.cat = ev["cat"]
        self.pid = ev["pid"]
        self.tid = ev["tid"]
        self.ts = ev["ts"]
        self.dur = ev["dur"]
        self.args = ev.get("args", {})
        # Back to the kernel's CLOCK_MONOTONIC: ts 1 us is the origin.
        self.start_ns = (self.ts - 1) * 1000 + origin_ns
        self.end_ns = self.start_ns + self.dur * 1000
        self.parent = None
        self.children = []
        self.depth = 0

    def ancestors(self):
        s, out = self.parent, []
        while s:
            out.append(s.name)
            s = s.parent
        return out

    def __repr__(self):
        return "%s[%d:%d %d+%d d%d]" % (self.name, self.pid, self.tid, self.ts, self.dur,
                                       self.depth)


class Trace:
    def __init__(self, path):
        raw = open(path, "rb").read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        self.doc = json.loads(raw.decode("utf-8"))
        self.events = self.doc["traceEvents"]
        self.other = self.doc.get("otherData", {})
        origin = self.other.get("origin_ns", 0)
        # The findings' rows (a process of their own past any real pid) apart from the
        # traced processes'.
        self.findings = [Slice(e, origin) for e in self.events
                         if e["ph"] == "X" and e.get("cat") == "finding"]
        self.slices = [Slice(e, origin) for e in self.events
                       if e["ph"] == "X" and e.get("cat") != "finding"]
        self.instants = [e for e in self.events if e["ph"] == "i"]
        self.process_names = {e["pid"]: e["args"]["name"] for e in self.events
                              if e["ph"] == "M" and e["name"] == "process_name" and
                              e["pid"] != FINDINGS_PID}
        self.thread_names = {(e["pid"], e["tid"]): e["args"]["name"] for e in self.events
                             if e["ph"] == "M" and e["name"] == "thread_name" and
                             e["pid"] != FINDINGS_PID}
        self.nesting_errors = self._build_trees()

    def _build_trees(self):
        """Nests slices per thread as a viewer does; returns partial overlaps found."""
        errors = []
        by_thread = {}
        for s in self.slices:
            by_thread.setdefault((s.pid, s.tid), []).append(s)
        for slices in by_thread.values():
            slices.sort(key=lambda s: (s.ts, -s.dur))
            stack = []
            for s in slices:
                while stack and stack[-1].ts + stack[-1].dur <= s.ts:
                    stack.pop()
                if stack and s.ts + s.dur > stack[-1].ts + stack[-1].dur:
                    errors.append((stack[-1], s))
                if stack:
                    s.parent = stack[-1]
                    s.depth = stack[-1].depth + 1
                    stack[-1].children.append(s)
                stack.append(s)
        return errors

    def named(self, name, pid=None):
        return [s for s in self.slices if s.name == name and (pid is None or s.pid == pid)]

    def pids_with(self, name):
        return {s.pid for s in self.slices if s.name == name}

    def preempted(self, tid, t0, t1):
        """ns the trace shows thread @tid runnable but off the CPU between t0 and t1 (ns,
        CLOCK_MONOTONIC): time in which a fixture's clock reading and the work it timed
        can drift apart on a busy machine, through no fault of the tool."""
        if t1 <= t0:
            return 0
        return sum(max(0, min(s.end_ns, t1) - max(s.start_ns, t0)) for s in self.slices
                   if s.tid == tid and s.cat == "off-cpu" and s.name.startswith("preempted"))

    def off_cpu(self, tid, t0, t1):
        """ns the trace shows thread @tid off the CPU, for any reason, between t0 and t1."""
        if t1 <= t0:
            return 0
        return union_ns([(s.start_ns, s.end_ns) for s in self.slices
                         if s.tid == tid and s.cat == "off-cpu"], t0, t1)

    def edge_error(self, tid, edge, clock):
        """How far a slice's edge is from the fixture's clock reading, less the time the
        trace shows the thread off the CPU between the two: a thread that is not running
        can't read its clock (preempted on a busy machine, or waiting for a page or the
        GIL on its way into the timed code), so only on-CPU time there is the tool's."""
        lo, hi = min(edge, clock), max(edge, clock)
        return max(0, hi - lo - self.off_cpu(tid, lo, hi))

    def losses(self):
        """What the tool itself says it could not record (a machine too busy to drain)."""
        return {k: v for k, v in self.other.items()
                if k in ("lost_records", "lost_samples", "throttled", "kernel_samples_lost",
                         "kernel_events_lost") and v}

    def instant(self, name, pid=None):
        return [e for e in self.instants if e["name"] == name and
                (pid is None or e["pid"] == pid)]


def match_spans(trace, spans):
    """Each of @spans, (name, tid, start_ns, end_ns) as a fixture timed its calls, matched
    with the trace's slices of that name that overlap it: ([(name, start) of those with
    none], the edge errors of the others (Trace.edge_error of the earliest start and
    latest end), sorted)."""
    missing, errors = [], []
    for name, tid, start, end in spans:
        tid, start, end = int(tid), int(start), int(end)
        found = [s for s in trace.named(name) if s.end_ns > start and s.start_ns < end]
        if not found:
            missing.append((name, start))
            continue
        errors.append(max(trace.edge_error(tid, min(s.start_ns for s in found), start),
                          trace.edge_error(tid, max(s.end_ns for s in found), end)))
    return missing, sorted(errors)


def run_tool(args, **kwargs):
    """Runs pytrace-sample; returns the CompletedProcess (text output)."""
    return subprocess.run([TOOL] + args, capture_output=True, text=True, timeout=120,
                          **kwargs)


def runqueue_waits(pid):
    """{tid: ns spent runnable but waiting for a CPU} of each thread of @pid, from the
    kernel's schedstat; {} once it is gone."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
                out[tid] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            pass
    return out


def run_tool_watched(args):
    """Runs pytrace-sample like run_tool and watches how long its threads waited for a
    CPU (polled every 10 ms): (CompletedProcess, the longest wait of one thread in ns,
    the run's wall time in ns). A tool that loses records while a thread of it waited
    for a CPU for a good part of the run was starved by the machine."""
    start = time.monotonic_ns()
    proc = subprocess.Popen([TOOL] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    waits = {}
    while proc.poll() is None:
        waits.update(runqueue_waits(proc.pid))
        time.sleep(0.01)
    out, err = proc.communicate(timeout=120)
    wall = time.monotonic_ns() - start
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done, max(waits.values(), default=0), wall


class BpfTestCase(unittest.TestCase):
    """A test of the eBPF reader: skipped, saying why, without root; self.dir is a fresh
    temporary folder."""

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)
