#!/usr/bin/env python3
"""Runs the end-to-end tests and prints "e2e: N passed, N failed, N skipped".

Skipped tests print their reason: a skip must say why.
"""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
suite = unittest.defaultTestLoader.discover(here, pattern="test_*.py")
result = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
for test, reason in result.skipped:
    print("skipped %s: %s" % (test.id(), reason))
failed = len(result.failures) + len(result.errors) + len(result.unexpectedSuccesses)
skipped = len(result.skipped)
passed = result.testsRun - failed - skipped
print("e2e: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
sys.exit(1 if failed or not result.testsRun else 0)
