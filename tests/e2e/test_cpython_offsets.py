"""The reader's CPython layouts against each installed interpreter's own headers.

tests/cpython/offsets_probe.c is compiled against every installed version's internal
headers and prints offsetof() of each field the reader uses; the built-in tables
(3.8-3.12) and the offsets decoded from a live 3.13 process's _Py_DebugOffsets must
agree with it field by field.
"""
import glob
import os
import subprocess
import tempfile
import time
import unittest

from tracefile import BUILD, ROOT

PROBE = os.path.join(ROOT, "tests", "cpython", "offsets_probe.c")
DUMP = os.path.join(BUILD, "tests", "cpython", "layout_dump")


def parse(text):
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}


def probe(version_dir, minor):
    inc = os.path.join(version_dir, "include", "python3.%d" % minor)
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "probe")
        subprocess.run(["cc", "-o", exe, PROBE, "-I" + inc, "-I" + os.path.join(inc, "internal")],
                       check=True, capture_output=True)
        return parse(subprocess.run([exe], check=True, capture_output=True, text=True).stdout)


class Offsets(unittest.TestCase):
    def compare(self, ours, theirs):
        self.assertGreater(len(ours), 15)
        for name, value in ours.items():
            if name == "minor":
                continue
            self.assertIn(name, theirs)
            self.assertEqual(value, theirs[name], name)


def make_builtin_test(version_dir, minor):
    def test(self):
        theirs = probe(version_dir, minor)
        ours = parse(subprocess.run([DUMP, str(minor)], check=True, capture_output=True,
                                    text=True).stdout)
        self.compare(ours, theirs)
    return test


def make_decoded_test(version_dir, minor):
    def test(self):
        theirs = probe(version_dir, minor)
        python = os.path.join(version_dir, "bin", "python3")
        target = subprocess.Popen([python, "-c", "import time; time.sleep(30)"])
        try:
            time.sleep(0.5)
            out = subprocess.run([DUMP, "--pid", str(target.pid)], check=True,
                                 capture_output=True, text=True).stdout
        finally:
            target.kill()
            target.wait()
        ours = parse(out)
        self.assertEqual(ours["minor"], minor)
        self.compare(ours, theirs)
    return test


for _dir in sorted(glob.glob("/root/.pyenv/versions/3.*")):
    _minor = int(os.path.basename(_dir).split(".")[1])
    if not os.path.isdir(os.path.join(_dir, "include", "python3.%d" % _minor, "internal")):
        continue
    if 8 <= _minor <= 12:
        setattr(Offsets, "test_builtin_3_%d" % _minor, make_builtin_test(_dir, _minor))
    elif _minor >= 13:
        setattr(Offsets, "test_decoded_3_%d" % _minor, make_decoded_test(_dir, _minor))


if __name__ == "__main__":
    unittest.main()
