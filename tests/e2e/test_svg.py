"""End-to-end: -o x.svg writes a flame graph of the whole run that a browser can open.

A fixture with a known shape (py_work.py: main -> middle -> leaf on the CPU, main ->
sleeper -> a 200 ms sleep) is recorded to an SVG, which must be well-formed XML whose
frames nest as the program's calls did, under a process and a thread level, with the
hot function among the widest and a script that loads nothing from outside.
"""
import os
import re
import shutil
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

from tracefile import ROOT, run_tool

WORK = os.path.join(ROOT, "tests", "fixtures", "py_work.py")
SVG_NS = "http://www.w3.org/2000/svg"
DRAW_WIDTH = 1180.0  # the graph's 1200 less its margins


class Frame:
    def __init__(self, g):
        title = g.find("{%s}title" % SVG_NS).text
        self.label = title.split("\n")[0]
        self.title = title
        self.start = int(g.get("data-s"))
        self.weight = int(g.get("data-w"))
        self.depth = int(g.get("data-d"))
        self.width = float(g.find("{%s}rect" % SVG_NS).get("width"))

    def contains(self, other):
        return (self.depth < other.depth and self.start <= other.start and
                other.start + other.weight <= self.start + self.weight)

    def __repr__(self):
        return "%s[d%d %d+%d]" % (self.label, self.depth, self.start, self.weight)


class Svg(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def record(self, name, *extra):
        out = os.path.join(self.dir, name)
        r = run_tool(["-q"] + list(extra) + ["-o", out, "--", sys.executable, WORK])
        self.assertEqual(r.returncode, 0, r.stderr)
        _, t0, t1 = r.stdout.split()  # "sleep T0 T1": the fixture's own clock
        self.slept_ns = int(t1) - int(t0)
        return out

    def frames(self, path):
        root = ET.parse(path).getroot()  # raises unless well-formed
        self.assertEqual(root.tag, "{%s}svg" % SVG_NS)
        return root, [Frame(g) for g in root.iter("{%s}g" % SVG_NS) if g.get("class") == "f"]

    def test_flame_graph_of_a_run(self):
        path = self.record("work.svg")
        root, frames = self.frames(path)
        top = [f for f in frames if f.depth == 0]
        self.assertEqual([f.label for f in top], ["all"])
        total = top[0].weight
        self.assertGreater(total, 100)  # 0.3 s of CPU and 0.2 s of sleep, in 1 ms periods

        # The hot function, nested as called, under its thread and process.
        leaves = sorted((f for f in frames if f.label == "leaf"), key=lambda f: -f.weight)
        self.assertTrue(leaves, [f.label for f in frames])
        leaf = leaves[0]
        self.assertGreater(leaf.weight / total, 0.2, (leaf, total))
        self.assertAlmostEqual(leaf.width, DRAW_WIDTH * leaf.weight / total, delta=0.02)
        chain = sorted((f for f in frames if f.contains(leaf)), key=lambda f: f.depth)
        self.assertEqual([f.depth for f in chain], list(range(leaf.depth)), chain)
        self.assertEqual([f.label for f in chain[-3:]], ["<module>", "main", "middle"])
        process = re.fullmatch(r".* \(pid (\d+)\)", chain[1].label)
        thread = re.fullmatch(r".* \(tid (\d+)\)", chain[2].label)
        self.assertTrue(process and thread, chain)
        self.assertEqual(process.group(1), thread.group(1))  # the main thread
        self.assertIn("py_work.py:", leaf.title)
        self.assertRegex(leaf.title, r"\n\d+ samples \([\d.]+ m?s\), [\d.]+%$")

        # The sleep: an off-CPU marker under sleeper, as wide as the wait was long.
        title = next(e for e in root.iter("{%s}text" % SVG_NS) if e.get("id") == "title")
        period_ms = float(re.match(r"Flame graph: \d+ samples of ([\d.]+) ms", title.text)[1])
        sleeps = [f for f in frames if f.label == "sleep" and
                  any(p.label == "sleeper" and p.contains(f) for p in frames)]
        self.assertEqual(len(sleeps), 1, frames)
        periods = self.slept_ns / (period_ms * 1e6)
        self.assertLess(abs(sleeps[0].weight - periods), 0.05 * periods + 2, sleeps[0])

        # Self-contained: one inline script, nothing fetched from anywhere.
        scripts = list(root.iter("{%s}script" % SVG_NS))
        self.assertEqual(len(scripts), 1)
        self.assertIn("function zoom", scripts[0].text)
        self.assertFalse(any(k.endswith("href") for e in root.iter() for k in e.attrib))
        text = open(path, encoding="utf-8").read()
        self.assertEqual(set(re.findall(r"https?://[^\s\"'<>]*", text)), {SVG_NS})

    def test_format_option(self):
        path = self.record("work.data", "--format", "svg")
        _, frames = self.frames(path)
        self.assertIn("leaf", {f.label for f in frames})


if __name__ == "__main__":
    unittest.main()
