"""End-to-end: `-o x.pb.gz` writes pprof's profile.proto, read back by `go tool pprof`.

A CPU-bound fixture (py_work.py: main -> middle -> leaf, spinning, then a sleep) must show
its hot function with most of its thread's time, at its own file and a line of its body,
every sample labelled with its pid, tid, process and thread. Under a process pool (eBPF
only: the perf backend sees no pool messages) each worker's samples carry the task they
ran in: a Pool's "job J task T" (py_pool_compute.py, which prints which worker pid ran
which task), a ProcessPoolExecutor's "work_id W" (py_pool_args.py ppe).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

from tracefile import ROOT, run_tool

FIXTURES = os.path.join(ROOT, "tests", "fixtures")
WORK = os.path.join(FIXTURES, "py_work.py")
POOL = os.path.join(FIXTURES, "py_pool_compute.py")
POOL_ARGS = os.path.join(FIXTURES, "py_pool_args.py")

# `go tool pprof -raw`'s lines: a sample's values and locations, its labels, a location.
SAMPLE_RE = re.compile(r"^\s+(\d+)\s+(\d+):((?: \d+)*)\s*$")
LABEL_RE = re.compile(r"(\w+):\[(.*?)\]")
LOCATION_RE = re.compile(
    r"^\s*(\d+): 0x[0-9a-f]+ (?:M=\d+ )?(?:\[F\] )?(.*) (\S*):(\d+) s=(\d+)(?:\(.*\))?$")


class Sample:
    def __init__(self, count, ns, locations):
        self.count = count
        self.ns = ns
        self.locations = locations  # leaf first
        self.labels = {}


class Profile:
    """What `go tool pprof -raw` prints of a profile: its samples and locations."""

    def __init__(self, text):
        self.samples = []
        self.locations = {}  # id -> (function, file, line, start line)
        section = None
        for line in text.splitlines():
            if line in ("Samples:", "Locations", "Mappings"):
                section = line
                continue
            if section == "Samples:":
                m = SAMPLE_RE.match(line)
                if m:
                    self.samples.append(Sample(int(m.group(1)), int(m.group(2)),
                                               [int(x) for x in m.group(3).split()]))
                elif self.samples and LABEL_RE.search(line):
                    self.samples[-1].labels.update(LABEL_RE.findall(line))
            elif section == "Locations":
                m = LOCATION_RE.match(line)
                if m:
                    self.locations[int(m.group(1))] = (m.group(2), m.group(3),
                                                       int(m.group(4)), int(m.group(5)))

    def functions(self, sample):
        return [self.locations[i][0] for i in sample.locations]

    def has(self, sample, name):
        return name in self.functions(sample)


def pprof(*args):
    p = subprocess.run(["go", "tool", "pprof"] + list(args), capture_output=True, text=True,
                       timeout=120)
    if p.returncode:
        raise AssertionError("go tool pprof %s failed: %s" % (" ".join(args), p.stderr))
    return p.stdout


class Pprof(unittest.TestCase):
    def setUp(self):
        if not shutil.which("go"):
            self.skipTest("go is not installed: run `make deps` (golang-go) for `go tool "
                          "pprof`")
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, argv, *options, name="x.pb.gz"):
        out = os.path.join(self.dir, name)
        r = run_tool(["-q"] + list(options) + ["-o", out, "--"] + argv)
        self.assertEqual(r.returncode, 0, r.stderr)
        raw = pprof("-raw", out)
        return out, r.stdout, Profile(raw)

    def test_hot_function_with_its_file_line_and_labels(self):
        out, _, prof = self.record([sys.executable, WORK])
        self.assertTrue(prof.samples, "no samples")
        for s in prof.samples:
            for key in ("pid", "tid", "process", "thread"):
                self.assertIn(key, s.labels, (key, s.labels))
        # The fixture's own thread: the one whose samples run leaf.
        hot = [s for s in prof.samples if prof.has(s, "leaf")]
        self.assertTrue(hot, "leaf is in no sample")
        tid = hot[0].labels["tid"]
        thread = [s for s in prof.samples if s.labels["tid"] == tid]
        self.assertEqual(thread[0].labels["thread"], "MainThread")
        share = sum(s.ns for s in hot) / sum(s.ns for s in thread)
        self.assertGreater(share, 0.3, "leaf's share of its thread: %.2f" % share)
        self.assertTrue(all(s.count * 1000000 == s.ns for s in prof.samples))
        # Its location: the fixture's file, a line of its loop, def leaf at line 6.
        leaf = {prof.locations[i] for s in hot for i in s.locations
                if prof.locations[i][0] == "leaf"}
        lines = {line for _, _, line, _ in leaf}
        self.assertTrue(all(f == WORK and start == 6 for _, f, _, start in leaf), leaf)
        self.assertTrue(lines & {8, 9} and lines <= {7, 8, 9, 10}, lines)
        # Leaf first: leaf below middle below main in each hot stack.
        for s in hot:
            names = prof.functions(s)
            self.assertLess(names.index("leaf"), names.index("middle"), names)
            self.assertLess(names.index("middle"), names.index("main"), names)
        # pprof's own report puts it near the top by cumulative time.
        top = pprof("-top", "-cum", "-nodecount=40", out)
        self.assertRegex(top, r"(?m)\d+% +leaf$")

    def test_pool_tasks_label_the_workers_samples(self):
        if os.geteuid() != 0:
            self.skipTest("pool messages need the eBPF reader, which needs root")
        _, stdout, prof = self.record([sys.executable, POOL], "--backend", "bpf")
        # "job K PID START END": which worker process ran task K.
        ran = {int(f[1]): f[2] for f in (l.split() for l in stdout.splitlines())
               if f and f[0] == "job"}
        self.assertEqual(sorted(ran), list(range(8)), stdout)
        tasks = {}
        for s in prof.samples:
            if "pool_task" in s.labels:
                tasks.setdefault(s.labels["pool_task"], []).append(s)
        jobs = {re.fullmatch(r"job (\d+) task (\d+)", t).group(1) for t in tasks}
        self.assertEqual(len(jobs), 1, sorted(tasks))
        job = jobs.pop()
        self.assertEqual(sorted(tasks), sorted("job %s task %d" % (job, k) for k in ran))
        for k, pid in ran.items():
            samples = tasks["job %s task %d" % (job, k)]
            self.assertEqual({s.labels["pid"] for s in samples}, {pid}, k)
            # 150 ms of computing, 10 ms asleep: most of it inside compute.
            busy = sum(s.ns for s in samples if prof.has(s, "compute"))
            self.assertGreater(busy, 100 * 1000000, k)
        # A worker's computing is all inside some task.
        workers = set(ran.values())
        computing = [s for s in prof.samples
                     if s.labels["pid"] in workers and prof.has(s, "compute")]
        labelled = sum(s.ns for s in computing if "pool_task" in s.labels)
        self.assertGreater(labelled, 0.95 * sum(s.ns for s in computing))

    def test_executor_work_ids_label_the_workers_samples(self):
        if os.geteuid() != 0:
            self.skipTest("pool messages need the eBPF reader, which needs root")
        _, stdout, prof = self.record(
            [sys.executable, POOL_ARGS, "ppe", "fork", "compute"], "--backend", "bpf")
        # "job PID TID ...": the worker threads that ran the jobs, in submission order.
        ran = [l.split()[1:3] for l in stdout.splitlines() if l.startswith("job ")]
        self.assertEqual(len(ran), 8, stdout)
        by_work = {}
        for s in prof.samples:
            if "pool_task" in s.labels:
                by_work.setdefault(s.labels["pool_task"], []).append(s)
        self.assertEqual(sorted(by_work), sorted("work_id %d" % i for i in range(8)))
        for i, (pid, tid) in enumerate(ran):
            samples = by_work["work_id %d" % i]
            self.assertEqual({(s.labels["pid"], s.labels["tid"]) for s in samples},
                             {(pid, tid)}, i)
            self.assertTrue(any(prof.has(s, "spin") for s in samples), i)


if __name__ == "__main__":
    unittest.main()
