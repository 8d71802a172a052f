"""The reader's CPython layouts against each installed interpreter's own headers.

tests/cpython/offsets_probe.c is compiled against every installed version's internal
headers and prints offsetof() of each field the reader uses; the built-in tables
(3.8-3.12) and the offsets decoded from a live 3.13, 3.14 or 3.15 process's
_Py_DebugOffsets must agree with it field by field (3.14 and 3.15: Debian sid's real
builds and their own headers).
"""
import glob
import os
import subprocess
import tempfile
import time
import unittest

from pythons import PYENV_VERSIONS, interpreters, sid_include
from tracefile import BUILD, ROOT

PROBE = os.path.join(ROOT, "tests", "cpython", "offsets_probe.c")
DUMP = os.path.join(BUILD, "tests", "cpython", "layout_dump")


def parse(text):
    return {k: int(v) for k, v in (line.split() for line in text.splitlines() if line)}


def probe(inc):
    """offsetof() of every field, from the headers in @inc (a python3.X folder)."""
    with tempfile.TemporaryDirectory() as d:
        exe = os.path.join(d, "probe")
        flags = ["-I" + inc, "-I" + os.path.join(inc, "internal")]
        # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: give it
        # that one folder, not the rest of sid's /usr/include (its libc's headers).
        multiarch = os.path.join(os.path.dirname(inc), "x86_64-linux-gnu",
                                 os.path.basename(inc))
        if os.path.isdir(multiarch):
            os.makedirs(os.path.join(d, "inc", "x86_64-linux-gnu"))
            os.symlink(multiarch, os.path.join(d, "inc", "x86_64-linux-gnu",
                                               os.path.basename(inc)))
            flags.append("-I" + os.path.join(d, "inc"))
        subprocess.run(["cc", "-o", exe, PROBE] + flags, check=True, capture_output=True)
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
        theirs = probe(os.path.join(version_dir, "include", "python3.%d" % minor))
        ours = parse(subprocess.run([DUMP, str(minor)], check=True, capture_output=True,
                                    text=True).stdout)
        self.compare(ours, theirs)
    return test


def make_decoded_test(inc, python, minor):
    def test(self):
        theirs = probe(inc)
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


for _dir in sorted(glob.glob(os.path.join(PYENV_VERSIONS, "3.*"))):
    _minor = int(os.path.basename(_dir).split(".")[1])
    if not os.path.isdir(os.path.join(_dir, "include", "python3.%d" % _minor, "internal")):
        continue
    if 8 <= _minor <= 12:
        setattr(Offsets, "test_builtin_3_%d" % _minor, make_builtin_test(_dir, _minor))
    elif _minor >= 13:
        setattr(Offsets, "test_decoded_3_%d" % _minor,
                make_decoded_test(os.path.join(_dir, "include", "python3.%d" % _minor),
                                  os.path.join(_dir, "bin", "python3"), _minor))
# Debian sid's real builds, read from their own _Py_DebugOffsets, against their headers.
for _label, _python in interpreters():
    if _label.startswith("sid-"):
        _version = _label[4:]
        _inc = sid_include(_version)
        if not _inc:
            raise RuntimeError("sid's python%s has no headers in .sid/ (run make deps)"
                               % _version)
        setattr(Offsets, "test_decoded_sid_%s" % _version.replace(".", "_"),
                make_decoded_test(_inc, _python, int(_version.split(".")[1])))

if not [n for n in dir(Offsets) if n.startswith(("test_builtin_", "test_decoded_"))]:
    def _no_interpreter(self):
        self.skipTest("no CPython with its internal headers found (pyenv's under %s, or "
                      ".sid/): no offset was checked" % PYENV_VERSIONS)
    Offsets.test_no_interpreter = _no_interpreter


if __name__ == "__main__":
    unittest.main()
