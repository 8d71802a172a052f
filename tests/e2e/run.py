#!/usr/bin/env python3
"""Runs the end-to-end tests and prints "LABEL: N passed, N failed, N skipped".

usage: run.py [LABEL [MODULE ...]]   (default: "e2e" and every test_*.py)
Skipped tests print their reason: a skip must say why.
"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
label = sys.argv[1] if len(sys.argv) > 1 else "e2e"
if len(sys.argv) > 2:
    suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[2:])
else:
    suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
for test, reason in result.skipped:
    print("skipped %s: %s" % (test.id(), reason))
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
passed = result.testsRun - failed - skipped
print("%s: %d passed, %d failed, %d skipped" % (label, passed, failed, skipped))
sys.exit(1 if failed or not result.testsRun else 0)
