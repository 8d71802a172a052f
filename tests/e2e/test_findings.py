"""The findings on the gallery of examples/why: each program, written with one known
cause, must get that cause as its first finding, on 3.12 and on sid's 3.14 (forkserver
pools), launched and attached with -p; the balanced one must get nothing big.

A busy machine is the machine's fault, said as such: "cpu-starved" (runnable threads
waiting while this run wanted fewer CPUs than there are) is set aside before the first
finding is judged, and reported in the failure message."""
import json
import os
import subprocess
import sys
import tempfile
import shutil
import time
import unittest

from pythons import interpreters
from tracefile import ROOT, TOOL, Trace, run_tool

WHY = os.path.join(ROOT, "examples", "why")
MACHINE = ("cpu-starved",)
# cpu-starved past this share of the run: the machine's, and nothing else can be judged.
STARVED = 0.5

# example -> the first finding it must get
GALLERY = {
    "straggler.py": "imbalance",
    "tiny_tasks.py": "task-overhead",
    "big_args.py": "serialization",
    "gil_threads.py": "gil-contention",
    "oversubscribed.py": "oversubscription",
    "shared_lock.py": "lock-contention",
    "spawn_startup.py": "worker-startup",
    "thread_straggler.py": "imbalance",
    "io_wait.py": "io-wait",
    "rate_limited.py": "sleep",
}


def pythons():
    """3.12 (fork pools) and sid's 3.14 (forkserver pools), those this machine has."""
    found = interpreters()
    out = [next(((l, p) for l, p in found if l.startswith("pyenv-3.12")), None),
           next(((l, p) for l, p in found if l == "sid-3.14"), None)]
    return [x for x in out if x]


def report_json(trace):
    p = subprocess.run([TOOL, "report", "--json", trace], capture_output=True, text=True,
                       timeout=120)
    if p.returncode != 0:
        raise AssertionError("report --json failed (%d): %s" % (p.returncode, p.stderr))
    return json.loads(p.stdout)


class Findings(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, python, script):
        out = os.path.join(self.dir, "%s-%s.json" % (script, os.path.basename(python)))
        p = run_tool(["-q", "-o", out, "--", python, os.path.join(WHY, script)])
        self.assertEqual(p.returncode, 0, p.stderr)
        report = report_json(out)
        self.check_track(out, report)
        return report

    def check_track(self, path, report):
        # The trace holds the findings too, one row each, ranked as the report (read
        # back from the file) ranks them, each over the time it concerns.
        trace = Trace(path)
        rows = sorted(trace.findings, key=lambda s: s.tid)
        self.assertEqual([(s.tid, s.args["kind"]) for s in rows],
                         [(i + 1, f["kind"]) for i, f in enumerate(report["findings"])],
                         (path, [(s.tid, s.name) for s in rows]))
        for s, f in zip(rows, report["findings"]):
            self.assertEqual(s.name, "%s: %s" % (f["kind"], f["title"]))
            for key in ("evidence", "where", "hint"):
                self.assertEqual(s.args[key], f[key])
            self.assertAlmostEqual(s.args["share"], f["share"], places=3)
            self.assertGreater(s.dur, 0)

    def starved(self, report, context):
        """True (and said) when other programs held the CPUs for half the run or more:
        then every other share is diluted past judging, the machine's fault."""
        share = sum(f["share"] for f in report["findings"] if f["kind"] in MACHINE)
        if share >= STARVED:
            print("note: %s: cpu-starved explains %.0f%% of the run: the machine was too "
                  "busy to judge the program's findings (%r)" % (
                      context, share * 100,
                      [(f["kind"], round(f["share"], 2)) for f in report["findings"]]))
        return share >= STARVED

    def first(self, report, expected, context):
        findings = report["findings"]
        shares = [(f["kind"], round(f["share"], 2)) for f in findings]
        mine = [f for f in findings if f["kind"] not in MACHINE]
        machine = [f for f in findings if f["kind"] in MACHINE]
        self.assertTrue(mine, "%s: no finding but the machine's %s (the tool's fault: "
                        "it named no cause)" % (context, shares))
        self.assertEqual(mine[0]["kind"], expected,
                         "%s: first finding %s, not %s (the tool's fault%s): %s" %
                         (context, mine[0]["kind"], expected,
                          "; the machine was busy too" if machine else "", shares))
        # Each says its evidence, where to look and what to try.
        for key in ("title", "evidence", "where", "hint"):
            self.assertTrue(mine[0][key], (key, mine[0]))
        self.assertGreaterEqual(mine[0]["share"], 0.1, (context, shares))
        return mine[0]

    def check(self, python, label, script):
        report = self.record(python, script)
        if self.starved(report, "%s on %s" % (script, label)):
            return
        f = self.first(report, GALLERY[script], "%s on %s" % (script, label))
        if script == "straggler.py":
            # The job that ran last, by name and line, and the pool seen whole.
            self.assertIn("job (%s:7), job" % os.path.join(WHY, script), f["where"])
            pools = report["pools"]
            self.assertEqual([(p["tasks"], p["done"], len(p["workers"])) for p in pools],
                             [(7, 7, 2)], pools)
            self.assertGreaterEqual(pools[0]["run"]["max_ns"], 1500 * 1000000, pools)
        if script == "thread_straggler.py":
            # A ThreadPoolExecutor's pool, seen from its work items alone: 8 tasks on its
            # 4 threads, the straggler named by its function and thread.
            pools = report["pools"]
            self.assertEqual([(p["kind"], p["tasks"], p["done"], len(p["workers"]))
                              for p in pools], [("thread_executor", 8, 8, 4)], pools)
            self.assertGreaterEqual(max(w["tasks"] for w in pools[0]["workers"]), 2,
                             pools)
            self.assertRegex(f["where"], r"^digest \(.*thread_straggler\.py:\d+\), task \d+ "
                             r"of thread \d+$")

    def test_balanced_raises_nothing_big(self):
        for label, python in pythons():
            with self.subTest(python=label):
                report = self.record(python, "balanced.py")
                # Read whole: one pool, 4 equal jobs per CPU, all done (else "nothing
                # big" would hold of an analysis that saw nothing).
                jobs = 4 * os.cpu_count()
                self.assertEqual([(p["tasks"], p["done"]) for p in report["pools"]],
                                 [(jobs, jobs)], report["pools"])
                if self.starved(report, "balanced.py on " + label):
                    continue
                big = [(f["kind"], round(f["share"], 2)) for f in report["findings"]
                       if f["share"] >= 0.25 and f["kind"] not in MACHINE]
                self.assertEqual(big, [], "balanced.py on %s: a finding claims a quarter of "
                                 "the run (the tool cried wolf): %s" %
                                 (label, [(f["kind"], f["share"]) for f in report["findings"]]))

    def test_without_markers_says_what_it_could_not_decide(self):
        """The perf backend reads no pool task markers: the pool's findings are said to be
        undecided, not silently missing, and none is claimed."""
        python = pythons()[0][1]
        out = os.path.join(self.dir, "perf.json")
        p = run_tool(["-q", "--backend", "perf", "-o", out, "--", python,
                      os.path.join(WHY, "straggler.py")])
        self.assertEqual(p.returncode, 0, p.stderr)
        report = report_json(out)
        self.assertEqual(report["pools"], [])
        self.assertEqual([u["kinds"] for u in report["undecided"]],
                         [["imbalance", "task-overhead", "worker-startup"]], report)
        self.assertNotIn("imbalance", [f["kind"] for f in report["findings"]])
        text = subprocess.run([TOOL, "report", out], capture_output=True, text=True,
                              timeout=120).stdout
        self.assertIn("not decided: pool workers ran, but the trace has no task markers", text)

    def check_attached(self, python, label, script):
        """With -p, attached 0.3 s after start to the program made to wait 0.6 s first:
        the same first finding (the program a file, which a forkserver's workers import
        by its path)."""
        with open(os.path.join(WHY, script)) as f:
            source = f.read()
        late = os.path.join(self.dir, "late_" + script)
        with open(late, "w") as f:
            f.write("import time\ntime.sleep(0.6)\n" + source)
        target = subprocess.Popen([python, late], stdout=subprocess.DEVNULL)
        try:
            time.sleep(0.3)
            out = os.path.join(self.dir, "attached-%s-%s.json" % (script, label))
            p = subprocess.run([TOOL, "-q", "-o", out, "-p", str(target.pid)],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stderr)
        finally:
            target.wait(timeout=120)
        report = report_json(out)
        self.check_track(out, report)
        if not self.starved(report, "%s attached on %s" % (script, label)):
            self.first(report, GALLERY[script], "%s attached on %s" % (script, label))

def _bound(python, label, script, attached=False):
    def test(self):
        if attached:
            self.check_attached(python, label, script)
        else:
            self.check(python, label, script)
    return test


for _label, _python in pythons():
    for _script in GALLERY:
        _name = "%s_%s" % (_script[:-3], _label.replace(".", "_").replace("-", "_"))
        setattr(Findings, "test_" + _name, _bound(_python, _label, _script))
        setattr(Findings, "test_attached_" + _name, _bound(_python, _label, _script, True))

if __name__ == "__main__":
    unittest.main()
