"""`pytrace-sample dump` against every installed interpreter: exact names, files, lines.

The fixture (tests/fixtures/py_park.py) parks threads in nested functions, a method, a
closure, a lambda, a generator, a coroutine, a non-ASCII function and a 300-deep
recursion, and writes its own view of each thread's stack; the dump must match it.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

from pythons import interpreters
from tracefile import ROOT, run_tool

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "py_park.py")


def parse_dump(text):
    """{tid: [(name, file, line), ...]} from dump's output, innermost first."""
    threads, current = {}, None
    for line in text.splitlines():
        m = re.match(r"  Thread (\d+) ", line)
        if m:
            current = threads.setdefault(m.group(1), [])
            continue
        m = re.match(r"    (.*) \((.*):(\d+)\)$", line)
        if m and current is not None:
            current.append([m.group(1), m.group(2), int(m.group(3))])
    return threads


class DumpMatchesInterpreter(unittest.TestCase):
    pass


def make_test(label, python):
    def test(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "expected.json")
            target = subprocess.Popen([python, FIXTURE, out], stdin=subprocess.PIPE,
                                      stdout=subprocess.DEVNULL)
            try:
                deadline = time.time() + 30
                while not os.path.exists(out) and time.time() < deadline:
                    time.sleep(0.05)
                with open(out, encoding="utf-8") as f:
                    expected = json.load(f)
                p = run_tool(["dump", "-p", str(target.pid)])
                self.assertEqual(p.returncode, 0, p.stderr)
                got = parse_dump(p.stdout)
                for tid, stack in expected["threads"].items():
                    self.assertIn(tid, got, p.stdout[:2000])
                    self.assertEqual(got[tid], stack, "thread %s" % tid)
                self.assertIn("Python 3.", p.stdout)
            finally:
                target.stdin.close()
                target.kill()
                target.wait()
    return test


for _label, _python in interpreters():
    setattr(DumpMatchesInterpreter, "test_dump_" + _label.replace(".", "_").replace("-", "_"),
            make_test(_label, _python))


class DumpErrors(unittest.TestCase):
    def test_non_python_target_says_so(self):
        target = subprocess.Popen(["sleep", "30"])
        try:
            p = run_tool(["dump", "-p", str(target.pid)])
            self.assertEqual(p.returncode, 0)
            self.assertIn("not a Python process", p.stdout)
        finally:
            target.kill()
            target.wait()

    def test_no_such_pid(self):
        p = run_tool(["dump", "-p", "4000000"])
        self.assertEqual(p.returncode, 66)
        self.assertIn("no such process: 4000000", p.stderr)


if __name__ == "__main__":
    unittest.main()
