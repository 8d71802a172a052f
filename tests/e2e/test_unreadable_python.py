"""End-to-end: a process that runs a CPython the tool can't read is never silent.

Two copies of Debian's static python3.11 made unreadable as real builds are: one whose
Py_Version says 3.7 (a version the tool has no layout for), one whose _PyRuntime symbol
is renamed in .dynstr (a static build without its symbols). Each must get one line on
stderr and a "not_read" instant in the trace saying which pid, which version and what
the trace shows instead; a readable 3.11 gets neither.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from tracefile import Trace, run_tool

PYTHON = "/usr/bin/python3.11"
SPIN = "import time\nend = time.monotonic() + 0.3\nwhile time.monotonic() < end: pass\n"


def dynsym_value(path, name):
    out = subprocess.run(["readelf", "-Ws", "--dyn-syms", path], capture_output=True,
                         text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 8 and f[7] == name:
            return int(f[1], 16)
    raise AssertionError("no %s in %s" % (name, path))


def file_offset(path, vaddr):
    """The file offset of address @vaddr, from the section headers."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+\S+\s+PROGBITS\s+([0-9a-f]+)\s+([0-9a-f]+)\s+"
                     r"([0-9a-f]+)", line)
        if m:
            addr, off, size = (int(x, 16) for x in m.groups())
            if addr <= vaddr < addr + size:
                return off + vaddr - addr
    raise AssertionError("address %x in no section of %s" % (vaddr, path))


class Unreadable(unittest.TestCase):
    def setUp(self):
        if not os.path.exists(PYTHON) or not shutil.which("readelf"):
            self.skipTest("needs Debian's %s and readelf (binutils)" % PYTHON)
        self.dir = tempfile.mkdtemp()
        self.script = os.path.join(self.dir, "spin.py")
        with open(self.script, "w") as f:
            f.write(SPIN)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def copy(self, patch):
        """A copy of python3.11, named so, its bytes changed by @patch(bytearray)."""
        os.mkdir(os.path.join(self.dir, "bin"))
        path = os.path.join(self.dir, "bin", "python3.11")
        with open(PYTHON, "rb") as f:
            data = bytearray(f.read())
        patch(data)
        with open(path, "wb") as f:
            f.write(data)
        os.chmod(path, 0o755)
        return path

    def record(self, python, backend="perf"):
        out = os.path.join(self.dir, "t-%s.json" % backend)
        r = run_tool(["-q", "--backend", backend, "-o", out, "--", python, "-S", "-E",
                      self.script])
        self.assertEqual(r.returncode, 0, r.stderr)
        trace = Trace(out)
        notes = [e for e in trace.instants if e["name"] == "not_read"]
        return r.stderr, trace, notes

    def check_said(self, err, notes, words):
        lines = [l for l in err.splitlines() if words in l]
        self.assertEqual(len(lines), 1, err)
        # Named by its script, as a Python process is, though its Python is not read
        # (by its command line when it runs code from -c).
        self.assertRegex(lines[0],
                         r"^pytrace-sample: warning: process \d+ \((spin\.py|.*python3\.11 .*)\): ")
        self.assertIn("native frames only", lines[0])
        pid = int(re.search(r"process (\d+)", lines[0]).group(1))
        self.assertEqual([(n["pid"], words in n["args"]["why"]) for n in notes], [(pid, True)])

    def test_unknown_version(self):
        def as_3_7(data):
            at = file_offset(PYTHON, dynsym_value(PYTHON, "Py_Version"))
            version = struct.unpack_from("<I", data, at)[0]
            self.assertEqual(version >> 16, 0x030b, "Py_Version is not 3.11's")
            struct.pack_into("<I", data, at, 0x030700f0)
        for backend in ("perf", "bpf") if os.geteuid() == 0 else ("perf",):
            err, trace, notes = self.record(self.copy(as_3_7), backend)
            self.check_said(err, notes, "CPython 3.7: a version this tool can't read")
            shutil.rmtree(os.path.join(self.dir, "bin"))

    def test_stripped(self):
        def rename(data):
            at = data.find(b"\0_PyRuntime\0")
            self.assertGreater(at, 0)
            data[at + 10] = ord("X")  # "_PyRuntimX": no longer found by name
        python = self.copy(rename)
        err, trace, notes = self.record(python)
        self.check_said(err, notes, "CPython 3.11 without its symbols")
        # Attached to, and dumped: the same words.
        target = subprocess.Popen([python, "-S", "-E", "-c", "import sys; sys.stdin.read()"],
                                  stdin=subprocess.PIPE)
        try:
            out = os.path.join(self.dir, "attached.json")
            r = run_tool(["-q", "-d", "0.3", "-o", out, "-p", str(target.pid)])
            d = run_tool(["dump", "-p", str(target.pid)])
        finally:
            target.stdin.close()
            target.wait(timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_said(r.stderr, [e for e in Trace(out).instants if e["name"] == "not_read"],
                        "CPython 3.11 without its symbols")
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertIn("  not read: CPython 3.11 without its symbols", d.stdout)

    def test_readable_says_nothing(self):
        err, trace, notes = self.record(PYTHON)
        self.assertEqual(notes, [])
        self.assertNotIn("native frames only", err)
        self.assertTrue(any(s.name == "<module>" for s in trace.slices), "no Python frames")


if __name__ == "__main__":
    unittest.main()
