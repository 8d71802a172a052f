"""A target whose mapped executable is a FIFO, on the host and in its own mount namespace
(issue 31): opened blocking, such a path hung the tool as root for good (990 s in
open(), deaf to -d, Ctrl-C and SIGTERM). The tool must go on, end at -d, and still show
the target's Python frames (its CPython is in libpython, which is a regular file)."""
import os
import shutil
import subprocess
import tempfile
import time
import unittest

from pythons import interpreters
from tracefile import TOOL, Trace

SCRIPT = """import time
def spin(t):
    end = time.monotonic() + t
    while time.monotonic() < end:
        pass
spin(4)
"""


def shared_python():
    """A pyenv CPython that runs from libpython (its executable holds no runtime)."""
    for label, path in interpreters():
        if label.startswith("pyenv-3.12"):
            return os.path.realpath(path)
    return None


class FifoAtMappedPath(unittest.TestCase):
    def test_fifo_executable_does_not_hang_the_tool(self):
        python = shared_python()
        if os.geteuid() != 0:
            self.skipTest("needs root for a mount namespace (unshare -m)")
        if not python:
            self.skipTest("no pyenv CPython 3.12")
        d = tempfile.mkdtemp()
        target = None
        try:
            real, exe, fifo = (os.path.join(d, n) for n in ("real", "py", "fifo"))
            shutil.copy(python, real)
            os.mkfifo(exe)   # the host sees a FIFO at the path the target maps
            os.mkfifo(fifo)
            script = os.path.join(d, "s.py")
            with open(script, "w") as f:
                f.write(SCRIPT)
            # In its namespace the target runs the real binary at that path; 0.3 s
            # later a FIFO is mounted over it there too.
            target = subprocess.Popen(
                ["unshare", "-m", "--propagation", "private", "sh", "-c",
                 "mount --bind %s %s; (sleep 0.3; mount --bind %s %s) & exec %s %s" %
                 (real, exe, fifo, exe, exe, script)])
            deadline = time.monotonic() + 10
            pid = None
            while time.monotonic() < deadline and pid is None:
                for entry in os.listdir("/proc"):
                    if entry.isdigit():
                        try:
                            with open("/proc/%s/cmdline" % entry, "rb") as f:
                                if f.read().startswith(exe.encode() + b"\0"):
                                    pid = int(entry)
                        except OSError:
                            pass
                time.sleep(0.05)
            self.assertIsNotNone(pid, "the target did not start (the machine's fault)")
            time.sleep(0.6)  # the FIFO is in place in its namespace by now
            out = os.path.join(d, "out.json")
            start = time.monotonic()
            p = subprocess.run([TOOL, "-q", "-d", "1.5", "-o", out, "-p", str(pid)],
                               capture_output=True, text=True, timeout=120)
            took = time.monotonic() - start
            self.assertEqual(p.returncode, 0, p.stderr)
            # -d 1.5 and start-up; a blocking open was a hang of many minutes.
            self.assertLess(took, 30, "the tool took %.1f s on a FIFO at a mapped path "
                            "(the tool's fault)" % took)
            trace = Trace(out)
            names = {s.name for s in trace.slices}
            self.assertIn("spin", names, "no Python frames: %s" % sorted(names)[:20])
            # The refusal is counted, the process named by its command line.
            self.assertGreaterEqual(trace.other["target_files_refused"], 1, trace.other)
            self.assertIn(script, trace.process_names.get(pid, ""), trace.process_names)
        finally:
            if target:
                target.kill()
                target.wait()
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
