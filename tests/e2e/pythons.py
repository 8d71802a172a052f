"""The CPython interpreters installed here that the tests run against."""
import glob
import os


def interpreters():
    """(label, path) of every pyenv CPython 3.8+ and Debian's static python3.11."""
    found = []
    for path in sorted(glob.glob("/root/.pyenv/versions/3.*/bin/python3")):
        version = path.split("/")[-3]
        minor = int(version.split(".")[1])
        if minor >= 8:
            found.append(("pyenv-" + version, path))
    if os.path.exists("/usr/bin/python3.11"):
        found.append(("debian-3.11", "/usr/bin/python3.11"))
    return found


def per_interpreter(cls, backends=("bpf", "perf")):
    """Adds to @cls a test_BACKEND_LABEL for each backend and interpreter, calling
    cls.check(python, backend); the label's dots and dashes made underscores, so that
    one can be run by its name."""
    for label, python in interpreters():
        for backend in backends:
            name = "test_%s_%s" % (backend, label.replace(".", "_").replace("-", "_"))
            setattr(cls, name, _bound(python, backend))


def _bound(python, backend):
    def test(self):
        self.check(python, backend)
    return test
