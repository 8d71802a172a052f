"""Reading pytrace-sample's Perfetto traces (.pftrace) for the end-to-end tests.

Decodes with `protoc --decode` against trace/perfetto_subset.proto (the fields the writer
uses, numbered as in Perfetto's protos), then rebuilds what trace processor would: the
interned state of the sequence, the tracks, and per track the slices from its
SLICE_BEGIN/SLICE_END events ordered by time, equal times in file order. Timestamps are
kept in clock 64's unit, the JSON's microseconds, so slices compare with the JSON's.
"""
import codecs
import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTO_DIR = os.path.join(ROOT, "trace")
PROTO = os.path.join(PROTO_DIR, "perfetto_subset.proto")

TOKEN = re.compile(r'\s*(?:(?P<close>\})|(?P<key>[A-Za-z_0-9]+)\s*(?P<open>\{)?:?\s*'
                   r'(?P<value>"(?:[^"\\]|\\.)*"|[^\s{}]+)?)')


def decode_text(path):
    """protoc's text for the file at @path."""
    with open(path, "rb") as f:
        r = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I", PROTO_DIR,
                            PROTO], stdin=f, capture_output=True, timeout=300)
    if r.returncode:
        raise ValueError("protoc could not decode %s: %s" % (path, r.stderr.decode()))
    return r.stdout.decode("utf-8")


def parse_text(text):
    """Text format to nested dicts: each field name -> list of values."""
    root, stack, pos = {}, [], 0
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line == "}":
            cur = stack.pop()
            continue
        if line.endswith("{"):
            child = {}
            cur.setdefault(line[:-1].strip(), []).append(child)
            stack.append(cur)
            cur = child
            continue
        key, value = line.split(":", 1)
        value = value.strip()
        if value.startswith('"'):
            value = codecs.escape_decode(value[1:-1].encode("latin-1"))[0].decode("utf-8")
        elif re.fullmatch(r"-?\d+", value):
            value = int(value)
        elif re.fullmatch(r"-?[\d.eE+-]+|inf|-inf|nan", value):
            value = float(value)
        cur.setdefault(key, []).append(value)
    del pos
    assert not stack, "unbalanced text"
    return root


def one(msg, key, default=None):
    v = msg.get(key)
    return v[0] if v else default


class PfSlice:
    def __init__(self, pid, tid, ts, name, cat, args):
        self.pid, self.tid, self.ts, self.name, self.cat = pid, tid, ts, name, cat
        self.args = args
        self.dur = None
        self.depth = 0

    def key(self):
        """What the JSON's Complete event for this slice must have too."""
        return (self.pid, self.tid, self.ts, self.dur, self.name, self.cat,
                self.args.get("file"), self.args.get("line"), self.args.get("samples", 0),
                self.args.get("waits", 0))


class PfTrace:
    """A .pftrace as a viewer sees it. errors lists what breaks Perfetto's rules."""

    def __init__(self, path):
        self.packets = parse_text(decode_text(path)).get("packet", [])
        self.errors = []
        self.tracks = {}  # uuid -> descriptor dict (the last one written)
        self.slices, self.instants, self.counters = [], [], {}
        self.findings = []  # slices of the findings' tracks (neither process nor thread)
        # flow id -> [(pid, tid, ts, name of the innermost open slice, terminating)]
        self.flows = {}
        self.clocks = None
        self.statistics = {}
        self._read()

    def _error(self, i, what):
        if len(self.errors) < 20:
            self.errors.append("packet %d: %s" % (i, what))

    def _read(self):
        interned = {}
        events = {}  # track uuid -> [(ts, order, event)]
        cleared = False
        for i, p in enumerate(self.packets):
            flags = one(p, "sequence_flags", 0)
            if one(p, "trusted_packet_sequence_id") != 1:
                self._error(i, "not on sequence 1")
            if i == 0:
                if not flags & 1:
                    self._error(i, "the first packet does not clear the incremental state")
                cleared = True
                interned = {}
                self.clocks = one(p, "clock_snapshot")
                defaults = one(p, "trace_packet_defaults", {})
                if one(defaults, "timestamp_clock_id") != 64:
                    self._error(i, "timestamps are not on clock 64 by default")
            elif flags != 2:
                self._error(i, "sequence_flags %r, not SEQ_NEEDS_INCREMENTAL_STATE" % flags)
            elif not cleared:
                self._error(i, "needs incremental state before it was cleared")
            for kind, entries in one(p, "interned_data", {}).items():
                table = interned.setdefault(kind, {})
                for e in entries:
                    iid = one(e, "iid")
                    if iid in table:
                        self._error(i, "%s iid %d interned twice" % (kind, iid))
                    table[iid] = e
            td = one(p, "track_descriptor")
            if td:
                self.tracks[one(td, "uuid")] = td
            te = one(p, "track_event")
            if te:
                uuid = one(te, "track_uuid")
                if uuid not in self.tracks:
                    self._error(i, "event on track %r before its descriptor" % uuid)
                events.setdefault(uuid, []).append((one(p, "timestamp"), i, te, interned))
                self._resolve(i, te, interned)
        for uuid, evs in events.items():
            evs.sort(key=lambda e: (e[0], e[1]))  # trace processor's order
            self._build(uuid, evs)

    def _lookup(self, i, interned, kind, iid):
        e = interned.get(kind, {}).get(iid)
        if e is None:
            self._error(i, "%s iid %r used but not interned" % (kind, iid))
        return e

    def _resolve(self, i, te, interned):
        """Names an event's interned fields: te['_name'], te['_cat'], te['_args']."""
        te["_name"] = one(te, "name")
        if "name_iid" in te:
            e = self._lookup(i, interned, "event_names", one(te, "name_iid"))
            te["_name"] = one(e, "name") if e else None
        cats = [self._lookup(i, interned, "event_categories", c) for c in te.get("category_iids", [])]
        te["_cat"] = ",".join(one(c, "name") for c in cats if c)
        args = {}
        if "source_location_iid" in te:
            loc = self._lookup(i, interned, "source_locations", one(te, "source_location_iid"))
            if loc:
                args["file"] = one(loc, "file_name", "")
                args["line"] = one(loc, "line_number", 0)
        for a in te.get("debug_annotations", []):
            name = one(a, "name")
            if "name_iid" in a:
                e = self._lookup(i, interned, "debug_annotation_names", one(a, "name_iid"))
                name = one(e, "name") if e else None
            value = None
            for k in ("uint_value", "int_value", "string_value", "bool_value", "double_value"):
                if k in a:
                    value = one(a, k)
            if "string_value_iid" in a:
                e = self._lookup(i, interned, "debug_annotation_string_values",
                                 one(a, "string_value_iid"))
                value = one(e, "str") if e else None
            args[name] = value
        te["_args"] = args

    def _build(self, uuid, evs):
        td = self.tracks.get(uuid, {})
        thread = one(td, "thread", {})
        pid, tid = one(thread, "pid"), one(thread, "tid")
        stack = []
        for ts, i, te, _ in evs:
            kind = one(te, "type")
            if kind == "TYPE_SLICE_BEGIN":
                s = PfSlice(pid, tid, ts, te["_name"], te["_cat"], dict(te["_args"]))
                s.depth = len(stack)
                stack.append(s)
            elif kind == "TYPE_SLICE_END":
                if not stack:
                    self._error(i, "SLICE_END on track %d with nothing open" % uuid)
                    continue
                s = stack.pop()
                s.dur = ts - s.ts
                s.args.update(te["_args"])
                (self.slices if thread or "process" in td else self.findings).append(s)
            elif kind == "TYPE_INSTANT":
                if te["_name"] == "statistics":
                    self.statistics = te["_args"]
                else:
                    self.instants.append((pid, tid, ts, te["_name"], te["_args"]))
                inside = stack[-1].name if stack else None
                for key, ending in (("flow_ids", False), ("terminating_flow_ids", True)):
                    for fid in te.get(key, []):
                        self.flows.setdefault(fid, []).append((pid, tid, ts, inside, ending))
            elif kind == "TYPE_COUNTER":
                self.counters.setdefault(uuid, []).append(
                    (ts, one(te, "double_counter_value")))
        for s in stack:
            self._error(0, "slice %s on track %d never ends" % (s.name, uuid))

    def process_names(self):
        return {one(one(td, "process"), "pid"): one(one(td, "process"), "process_name")
                for td in self.tracks.values() if "process" in td}

    def thread_names(self):
        out = {}
        for td in self.tracks.values():
            t = one(td, "thread")
            if t:
                out[(one(t, "pid"), one(t, "tid"))] = one(t, "thread_name")
        return out

    def cpu_tracks(self):
        """{pid: [(ts_us, percent)]} of each process's CPU counter."""
        pids = {one(td, "uuid"): one(one(td, "process"), "pid")
                for td in self.tracks.values() if "process" in td}
        out = {}
        for uuid, values in self.counters.items():
            td = self.tracks[uuid]
            out[pids.get(one(td, "parent_uuid"))] = sorted(values)
        return out
