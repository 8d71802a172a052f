"""Names in the trace as Python gives them: threading's thread names (three named
threads, one renamed after it started, a Pool's helper threads) and multiprocessing's
process names (the Pool's workers, fork and spawn), on every interpreter. The fixture
(tests/fixtures/py_names.py) writes its own view of both."""
import json
import os
import subprocess
import tempfile
import time
import unittest

from pythons import interpreters, per_interpreter
from tracefile import ROOT, TOOL, Trace

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_names.py")
SHORT = os.path.join(ROOT, "tests", "fixtures", "py_short_threads.py")


def record_names(python, method, d):
    out, view_path = os.path.join(d, "t.json"), os.path.join(d, "view.json")
    tool = subprocess.Popen([TOOL, "-q", "-o", out, "--", python, FIXTURE, view_path, method],
                            stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 90
        while not os.path.exists(view_path) and time.time() < deadline and tool.poll() is None:
            time.sleep(0.05)
        # The spinner keeps records coming: the names are read again every 0.5 s.
        time.sleep(1.2)
    finally:
        tool.stdin.close()
        tool.wait(timeout=120)
        err = tool.stderr.read()
        tool.stderr.close()
    with open(view_path, encoding="utf-8") as f:
        view = json.load(f)
    return tool.returncode, err, Trace(out), view


def make_test(python, method):
    def test(self):
        with tempfile.TemporaryDirectory() as d:
            status, err, trace, view = record_names(python, method, d)
        self.assertEqual(status, 0, err)
        pid = view["pid"]
        names = {e["tid"]: e["args"]["name"] for e in trace.events
                 if e.get("ph") == "M" and e["name"] == "thread_name" and e["pid"] == pid}
        for tid, name in view["threads"].items():
            self.assertEqual(names.get(int(tid)), name, (tid, names))
        # The main process by its script; its workers by the script, their number and
        # multiprocessing's name, as Python gives it ("ForkPoolWorker-2", "SpawnPoolWorker-1").
        script = os.path.basename(FIXTURE)
        self.assertEqual(view["process"], "MainProcess")
        self.assertEqual(trace.process_names[pid], script)
        for wpid, name in view["workers"].items():
            number = name.rsplit("-", 1)[1]
            self.assertEqual(trace.process_names[int(wpid)],
                             "%s worker %s (%s)" % (script, number, name))
        # The whole command line stays in the trace beside the short name.
        cmdlines = {e["pid"]: e["args"].get("cmdline") for e in trace.events
                    if e.get("ph") == "M" and e["name"] == "process_name"}
        self.assertIn(FIXTURE, cmdlines.get(pid) or "", cmdlines)
        self.assertIn(python, cmdlines.get(pid) or "", cmdlines)
    return test


class TraceNames(unittest.TestCase):
    pass


class ShortThreads(unittest.TestCase):
    """Threads that live 40 ms (spinning 20 of them) carry their threading names: read
    when their first record goes out, not at the next round 100 ms later, when they
    are gone. 3.8-3.13 showed the process's comm for all three before; 3.14+ name their
    OS threads themselves, so there a comm carries the name too."""

    def check(self, python, backend):
        if backend == "bpf" and os.geteuid() != 0:
            self.skipTest("the eBPF reader needs root (CAP_BPF and CAP_PERFMON)")
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "t.json")
            r = subprocess.run([TOOL, "-q", "--backend", backend, "-o", out, "--", python,
                                SHORT], capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            trace = Trace(out)
        threads = [l.split() for l in r.stdout.splitlines() if l.startswith("thread ")]
        self.assertEqual(len(threads), 3, r.stdout)
        named = {tid: name for (_, tid), name in trace.thread_names.items()}
        for _, tid, name in threads:
            self.assertEqual(named.get(int(tid)), name, (tid, named))


per_interpreter(ShortThreads)


for _label, _python in interpreters():
    for _method in ("fork", "spawn"):
        setattr(TraceNames, "test_%s_%s" % (_method, _label), make_test(_python, _method))


if __name__ == "__main__":
    unittest.main()
