"""End-to-end: the man page says what `--help` says, and `make install` / `make uninstall`
put it and the binary where PREFIX and DESTDIR say, and take them away again.

The page is committed (docs/pytrace-sample.1) and written from the help by
tools/gen-man.py: a help changed without `make man` fails here.
"""
import difflib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

from tracefile import ROOT, TOOL

PAGE = os.path.join(ROOT, "docs", "pytrace-sample.1")
GEN_MAN = os.path.join(ROOT, "tools", "gen-man.py")


def run(argv, **kw):
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, **kw)


def make(*args):
    """`make -C ROOT ARGS...` on its own, not as part of the make that runs the tests
    (no jobserver or flags of theirs), with the built binary taken as it is."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS",
                                                             "MAKELEVEL", "DESTDIR")}
    return run(["make", "--no-print-directory", "-C", ROOT, "-o", "pytrace-sample"]
               + list(args), env=env)


def files_under(top):
    return sorted(os.path.relpath(os.path.join(d, f), top)
                  for d, _, names in os.walk(top) for f in names)


class ManPage(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_page_is_generated_from_current_help(self):
        fresh = os.path.join(self.dir, "pytrace-sample.1")
        r = run([sys.executable, GEN_MAN, TOOL, fresh])
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(PAGE) as f, open(fresh) as g:
            committed, made = f.readlines(), g.readlines()
        if committed != made:
            diff = difflib.unified_diff(committed, made, "docs/pytrace-sample.1",
                                        "from %s --help" % TOOL)
            self.fail("docs/pytrace-sample.1 is not what the help of %s makes: run make man"
                      "\n%s" % (TOOL, "".join(list(diff)[:60])))

    def test_every_long_option_of_help_in_page(self):
        r = run([TOOL, "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        names = sorted(set(re.findall(r"(?<![\w-])--([A-Za-z][\w-]*)", r.stdout)))
        self.assertIn("output", names)
        with open(PAGE) as f:
            page = f.read()
        for name in names:
            # As roff writes it: every hyphen a minus sign, nothing more to the name.
            roff = re.escape("\\-\\-" + name.replace("-", "\\-")) + r"(?!\w|\\-)"
            self.assertTrue(re.search(roff, page),
                            "--%s is in --help but not in %s: run make man" % (name, PAGE))


class Install(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.vars = ["PREFIX=/usr", "DESTDIR=" + self.dir]
        self.bin = os.path.join(self.dir, "usr", "bin", "pytrace-sample")
        self.man = os.path.join(self.dir, "usr", "share", "man", "man1", "pytrace-sample.1")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def assert_file(self, path, same_as, mode):
        self.assertTrue(os.path.isfile(path), "%s not installed: %s" % (
            os.path.relpath(path, self.dir), files_under(self.dir)))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), mode, path)
        with open(path, "rb") as f, open(same_as, "rb") as g:
            self.assertTrue(f.read() == g.read(), "%s differs from %s" % (path, same_as))

    def render_warnings(self, page):
        """What man and groff, whichever are installed, say while rendering @page."""
        said = []
        if shutil.which("man"):
            env = dict(os.environ, MANWIDTH="80", MANPAGER="cat", PAGER="cat", LC_ALL="C.UTF-8")
            r = run(["man", "--warnings", "-l", page], env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("EXIT STATUS", r.stdout)
            self.assertIn("pytrace-sample report [--json] TRACE", r.stdout)
            said += ["man: " + l for l in r.stderr.splitlines()]
        if shutil.which("groff"):
            r = run(["groff", "-man", "-Tutf8", "-ww", "-z", page])
            self.assertEqual(r.returncode, 0, r.stderr)
            said += ["groff: " + l for l in r.stderr.splitlines()]
        return said

    def test_install_then_uninstall(self):
        r = make("install", *self.vars)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(files_under(self.dir), ["usr/bin/pytrace-sample",
                                                 "usr/share/man/man1/pytrace-sample.1"])
        self.assert_file(self.bin, os.path.join(ROOT, "pytrace-sample"), 0o755)
        self.assert_file(self.man, PAGE, 0o644)

        r = make("uninstall", *self.vars)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(files_under(self.dir), [])

    def test_installed_page_renders_without_warnings(self):
        if not shutil.which("man") and not shutil.which("groff"):
            self.skipTest("neither man nor groff is installed: nothing to render the page")
        r = make("install", *self.vars)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(self.render_warnings(self.man), [])


if __name__ == "__main__":
    unittest.main()
