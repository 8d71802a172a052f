#!/usr/bin/env python3
"""Independent reader for pytrace-sample's Trace Event files, used by the C tests.

Parses the file with Python's strict JSON parser (gzip'd or not; invalid UTF-8 is an
error), checks the shape every viewer relies on, and prints one canonical line per
event so tests can compare what a viewer would see. Exit status 1 on any problem.
"""
import gzip
import json
import sys


def fail(msg):
    print(msg)
    sys.exit(1)


def main():
    raw = open(sys.argv[1], "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        doc = json.loads(raw.decode("utf-8", errors="strict"))
    except (UnicodeDecodeError, ValueError) as e:
        fail("invalid: %s" % e)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("invalid: no traceEvents array")
    for ev in doc["traceEvents"]:
        ph = ev.get("ph")
        if not isinstance(ev.get("pid"), int) or not isinstance(ev.get("tid"), int):
            fail("invalid: pid/tid not integers: %r" % ev)
        name = json.dumps(ev.get("name"), ensure_ascii=True)
        if ph == "X":
            if ev["ts"] < 1 or ev["dur"] <= 0:
                fail("invalid: ts < 1 or dur <= 0: %r" % ev)
            if not isinstance(ev["ts"], int) or not isinstance(ev["dur"], int):
                fail("invalid: ts and dur must be whole microseconds: %r" % ev)
            a = ev.get("args", {})
            print("X %d %d %s %s %s %s line=%s samples=%s waits=%s file=%s" % (
                ev["pid"], ev["tid"], fmt(ev["ts"]), fmt(ev["dur"]), name, ev["cat"],
                a.get("line"), a.get("samples"), a.get("waits", 0),
                json.dumps(a.get("file"), ensure_ascii=True)))
        elif ph == "i":
            if ev["ts"] < 1:
                fail("invalid: ts < 1: %r" % ev)
            print("i %d %d %s %s %s" % (ev["pid"], ev["tid"], fmt(ev["ts"]), name,
                                        json.dumps(ev.get("args"), sort_keys=True)))
        elif ph == "M":
            print("M %d %d %s %s" % (ev["pid"], ev["tid"], name,
                                     json.dumps(list(ev["args"].values())[0],
                                                ensure_ascii=True)))
        else:
            fail("invalid: unexpected phase %r" % ph)
    for key, value in sorted(doc.get("otherData", {}).items()):
        print("otherData %s %s" % (key, value))


def fmt(us):
    return ("%.3f" % us).rstrip("0").rstrip(".")


main()
