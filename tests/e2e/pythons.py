"""The CPython interpreters the tests run against: pyenv's 3.8+, Debian's static
python3.11, and Debian sid's real 3.14 and 3.15 (tools/fetch-pythons.sh, run by
`make deps`, puts them in .sid/)."""
import glob
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SID_ROOT = os.path.join(ROOT, ".sid", "root")
SID_VERSIONS = ("3.14", "3.15")
# pyenv's versions: $PYENV_ROOT, else ~/.pyenv (root's in CI).
PYENV_VERSIONS = os.path.join(os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv"),
                              "versions")
_warned = []


def sid_python(version):
    """Sid's python@version patched to run here, or None when not fetched."""
    path = os.path.join(SID_ROOT, "usr", "bin", "python%s-host" % version)
    return path if os.access(path, os.X_OK) else None


def sid_include(version):
    """The folder of sid's python@version headers, or None."""
    path = os.path.join(SID_ROOT, "usr", "include", "python" + version)
    return path if os.path.isdir(os.path.join(path, "internal")) else None


def _sid():
    found = []
    for version in SID_VERSIONS:
        path = sid_python(version)
        if path:
            found.append(("sid-" + version, path))
        elif os.environ.get("CI"):
            # CI fetched them in `make deps`: without them it would test less and pass.
            raise RuntimeError("CI: Debian sid's python%s is missing from .sid/ "
                               "(tools/fetch-pythons.sh failed?)" % version)
        elif not _warned:
            _warned.append(version)
            print("pythons: skipping Debian sid's real 3.14 and 3.15: not in .sid/ "
                  "(run `make deps`, which needs Debian's archive)", file=sys.stderr)
    return found


def interpreters():
    """(label, path) of every pyenv CPython 3.8+, Debian's static python3.11 and sid's."""
    found = []
    for path in sorted(glob.glob(os.path.join(PYENV_VERSIONS, "3.*", "bin", "python3"))):
        version = path.split("/")[-3]
        minor = int(version.split(".")[1])
        if minor >= 8:
            found.append(("pyenv-" + version, path))
    if os.path.exists("/usr/bin/python3.11"):
        found.append(("debian-3.11", "/usr/bin/python3.11"))
    return found + _sid()


def per_interpreter(cls, backends=("bpf", "perf")):
    """Adds to @cls a test_BACKEND_LABEL for each backend and interpreter, calling
    cls.check(python, backend); the label's dots and dashes made underscores, so that
    one can be run by its name."""
    found = interpreters()
    for label, python in found:
        for backend in backends:
            name = "test_%s_%s" % (backend, label.replace(".", "_").replace("-", "_"))
            setattr(cls, name, _bound(python, backend))
    if not found:
        # Not a silent pass: the tally shows a skip (and CI fails on it).
        def test_no_interpreter(self):
            self.skipTest("no CPython found (pyenv's under %s, /usr/bin/python3.11, .sid/): "
                          "nothing of this test ran" % PYENV_VERSIONS)
        cls.test_no_interpreter = test_no_interpreter


def _bound(python, backend):
    def test(self):
        self.check(python, backend)
    return test
