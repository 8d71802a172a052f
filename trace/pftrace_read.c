/*
 * Reads a written Perfetto trace (.pftrace, as trace/perfetto.c writes it) back into a
 * summary, as json_read.c reads a JSON one: each thread track's SLICE_BEGIN/SLICE_END
 * pairs, ordered as trace processor orders a track (by time, the file's order at equal
 * times), become slices again, with their names, categories, source file and line and
 * pool message args; the descriptors name the processes and threads; the statistics
 * instant brings the notes. Findings tracks (no process or thread), counter tracks and
 * instants are skipped.
 *
 * The file may be anything: packets are read one at a time, each length checked against
 * what is left of the file before anything is allocated for it; varints have at most 10
 * bytes; nothing recurses (a packet's messages are at most 4 deep, each level its own
 * function). A packet that does not parse is skipped; a file cut short (a full disk)
 * gives what its whole packets hold, slices left open ending at their thread's last
 * event. One interned state for the whole file (our writer writes one sequence).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/frames.h"
#include "../common/hashmap.h"
#include "../common/log.h"
#include "pb_in.h"
#include "read_feed.h"
#include "perfetto.h"
#include "trace.h"

/* Caps on what one file can make us hold (each well past what our writer writes). */
#define PFR_MAX_PACKET (64u << 20)  /* bytes in one packet: ours have a few KiB */
#define PFR_MAX_TRACKS (1u << 18)   /* track descriptors (uuids) */
#define PFR_MAX_INTERNED (1u << 21) /* interned entries held at once, all tables */
#define PFR_MAX_STRINGS (1u << 21)  /* distinct names and files the slices keep */
#define PFR_MAX_EVENTS (1u << 23)   /* slice begins and ends: 4M slices, ~640 MB */
#define PFR_MAX_PROBES 64	    /* steps past a hash taken by another string */
#define PFR_MAX_CLOCKS 8	    /* clocks of a snapshot */

enum { PKT_TIMESTAMP_CLOCK_ID = 58, CLOCK_PRIMARY_DEFAULT = 6 /* BOOTTIME */ };

/* The tables of the interned data. */
enum pfr_table { T_CATEGORIES, T_NAMES, T_ARG_NAMES, T_ARG_STRINGS, T_PLACES, T_COUNT };

/* An interned entry: a name, or a source location's file and line. */
struct pfr_interned {
	const char *kept; /* its copy in the reader's strings, once a slice took it */
	uint32_t line;
	char s[];
};

struct pfr_track {
	uint32_t pid, tid;
	bool thread;
};

enum {
	F_OFF_CPU = 1,
	F_NO_GIL = 2,
	F_MESSAGE = 4,
	F_JOB = 8,
	F_TASK = 16,
	F_ENDED = 32,
};

/* A SLICE_BEGIN (a slice, once its end is found: @dur) or a SLICE_END. */
struct pfr_event {
	uint64_t ts, dur; /* ns on the trace's clock */
	const char *name, *file;
	int64_t job, task;
	uint32_t pid, tid, line;
	uint32_t first_line; /* written when it is not the line run; 0: that one */
	uint32_t order;	     /* in the file */
	uint8_t type, flags;
};

struct pfr_clock {
	uint64_t id, ts, mult;
};

struct pfr_reader {
	struct trace_summary *summary;
	const char *path;
	struct hashmap *tables[T_COUNT]; /* iid -> struct pfr_interned */
	size_t ninterned;
	struct hashmap *tracks;	 /* uuid -> struct pfr_track */
	struct hashmap *strings; /* hash_string() (+ probe) -> a name or file, owned */
	size_t nstrings;
	struct pfr_event *events;
	size_t count, cap;
	struct pfr_clock clocks[PFR_MAX_CLOCKS];
	unsigned nclocks;
	uint64_t primary_ts;	/* the snapshot's time of the trace's clock */
	uint64_t default_clock; /* the packets' when they name none; 0: the trace's */
	size_t packets, bad_packets, unended;
	bool has_content; /* a descriptor, event or clock snapshot parsed */
	bool capped;	  /* something past a cap was dropped */
	int err;
};

/* The reader's one copy of @s (NULL past the caps, or on ENOMEM: then r->err). */
static const char *keep_string(struct pfr_reader *r, const char *s)
{
	uint64_t h = hash_string(s);
	char *known, *copy;
	int probes;

	for (probes = 0; (known = hashmap__get(r->strings, h)) && strcmp(known, s); probes++) {
		if (probes == PFR_MAX_PROBES) {
			r->capped = true;
			return NULL;
		}
		h++; /* another string with this hash: probe on */
	}
	if (known)
		return known;
	if (r->nstrings >= PFR_MAX_STRINGS) {
		r->capped = true;
		return NULL;
	}
	copy = strdup(s);
	if (!copy || hashmap__set(r->strings, h, copy)) {
		free(copy);
		r->err = -ENOMEM;
		return NULL;
	}
	r->nstrings++;
	return copy;
}

static void clear_interned(struct pfr_reader *r)
{
	int t;

	for (t = 0; t < T_COUNT; t++) {
		size_t cursor = 0;
		uint64_t key;
		void *value;

		while (hashmap__next(r->tables[t], &cursor, &key, &value))
			free(value);
		hashmap__free(r->tables[t]);
		r->tables[t] = hashmap__new();
		if (!r->tables[t])
			r->err = -ENOMEM;
	}
	r->ninterned = 0;
}

static void intern(struct pfr_reader *r, enum pfr_table t, uint64_t iid, struct pb_in s,
		   uint32_t line)
{
	struct pfr_interned *old = hashmap__get(r->tables[t], iid), *e;
	const uint8_t *nul = memchr(s.p, 0, in_len(s));
	size_t len = nul ? (size_t)(nul - s.p) : in_len(s); /* at most a packet's */

	if (!old && r->ninterned >= PFR_MAX_INTERNED) {
		r->capped = true;
		return;
	}
	e = malloc(sizeof(*e) + len + 1);
	if (!e || hashmap__set(r->tables[t], iid, e)) {
		free(e);
		r->err = -ENOMEM;
		return;
	}
	e->kept = NULL;
	e->line = line;
	memcpy(e->s, s.p, len);
	e->s[len] = '\0';
	if (old)
		free(old);
	else
		r->ninterned++;
}

/* One entry of interned data: iid and name (or file and line). false when malformed. */
static bool read_entry(struct pfr_reader *r, enum pfr_table t, struct pb_in in)
{
	struct pb_in name = { in.p, in.p };
	uint64_t iid = 0, line = 0;
	struct pb_field f;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, INTERNED_IID))
			iid = f.v;
		else if (is_bytes(&f, INTERNED_NAME)) /* also SRC_FILE_NAME and str */
			name = f.bytes;
		else if (t == T_PLACES && is_varint(&f, SRC_LINE_NUMBER))
			line = f.v;
	}
	if (got < 0)
		return false;
	intern(r, t, iid, name, (uint32_t)line);
	return true;
}

static void read_interned(struct pfr_reader *r, struct pb_in in)
{
	struct pb_field f;

	while (!r->err && next_field(&in, &f) > 0) {
		int t = f.num == INTERNED_CATEGORIES	       ? T_CATEGORIES
			: f.num == INTERNED_EVENT_NAMES	       ? T_NAMES
			: f.num == INTERNED_ANNOTATION_NAMES   ? T_ARG_NAMES
			: f.num == INTERNED_ANNOTATION_STRINGS ? T_ARG_STRINGS
			: f.num == INTERNED_SOURCE_LOCATIONS   ? T_PLACES
							       : -1;

		if (t >= 0 && f.wire == WIRE_BYTES && !read_entry(r, (enum pfr_table)t, f.bytes))
			return;
	}
}

static void read_clocks(struct pfr_reader *r, struct pb_in in)
{
	struct pfr_clock clocks[PFR_MAX_CLOCKS];
	uint64_t primary = CLOCK_PRIMARY_DEFAULT;
	unsigned n = 0, i;
	struct pb_field f, g;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		struct pb_in c;

		if (is_varint(&f, CLOCK_SNAPSHOT_PRIMARY))
			primary = f.v;
		if (!is_bytes(&f, CLOCK_SNAPSHOT_CLOCKS) || n == PFR_MAX_CLOCKS)
			continue;
		c = f.bytes;
		clocks[n] = (struct pfr_clock){ .mult = 1 };
		while ((got = next_field(&c, &g)) > 0) {
			if (is_varint(&g, CLOCK_ID))
				clocks[n].id = g.v;
			else if (is_varint(&g, CLOCK_TIMESTAMP))
				clocks[n].ts = g.v;
			else if (is_varint(&g, CLOCK_UNIT_MULTIPLIER_NS))
				clocks[n].mult = g.v;
		}
		if (got < 0)
			return;
		n++;
	}
	if (got < 0)
		return;
	memcpy(r->clocks, clocks, n * sizeof(*clocks));
	r->nclocks = n;
	r->primary_ts = 0;
	for (i = 0; i < n; i++)
		if (clocks[i].id == primary)
			r->primary_ts = clocks[i].ts * clocks[i].mult;
	r->has_content = true;
}

/* @ts of @clock in ns on the trace's clock (unsigned: wraps, never undefined). */
static uint64_t to_trace_ns(const struct pfr_reader *r, uint64_t clock, uint64_t ts)
{
	unsigned i;

	for (i = 0; clock && i < r->nclocks; i++)
		if (r->clocks[i].id == clock)
			return r->primary_ts + (ts - r->clocks[i].ts) * r->clocks[i].mult;
	return ts;
}

static void read_defaults(struct pfr_reader *r, struct pb_in in)
{
	struct pb_field f;

	while (next_field(&in, &f) > 0)
		if (is_varint(&f, DEFAULTS_CLOCK_ID))
			r->default_clock = f.v;
}

/* A process or thread descriptor's pid, tid and name; false when malformed. */
static bool read_who(struct pb_in in, bool thread, struct pfr_track *t, struct pb_in *name)
{
	struct pb_field f;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, thread ? THD_PID : PD_PID))
			t->pid = (uint32_t)f.v;
		else if (thread && is_varint(&f, THD_TID))
			t->tid = (uint32_t)f.v;
		else if (is_bytes(&f, thread ? THD_THREAD_NAME : PD_PROCESS_NAME))
			*name = f.bytes;
	}
	return got == 0;
}

static void read_descriptor(struct pfr_reader *r, struct pb_in in)
{
	struct pfr_track got_track = { 0 }, *t;
	struct pb_in process = { 0 }, thread = { 0 }, name = { 0 };
	bool has_process = false, has_thread = false;
	uint64_t uuid = 0;
	struct pb_field f;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, TD_UUID))
			uuid = f.v;
		else if (is_bytes(&f, TD_PROCESS))
			process = f.bytes, has_process = true;
		else if (is_bytes(&f, TD_THREAD))
			thread = f.bytes, has_thread = true;
	}
	if (got < 0 || (has_thread && !read_who(thread, true, &got_track, &name)) ||
	    (!has_thread && has_process && !read_who(process, false, &got_track, &name)))
		return;
	r->has_content = true;
	got_track.thread = has_thread;
	t = hashmap__get(r->tracks, uuid);
	if (!t && hashmap__count(r->tracks) >= PFR_MAX_TRACKS) {
		r->capped = true;
		return;
	}
	if (!t && (!(t = malloc(sizeof(*t))) || hashmap__set(r->tracks, uuid, t))) {
		free(t);
		r->err = -ENOMEM;
		return;
	}
	*t = got_track;
	if (name.p && (has_thread ? t->tid != 0 : has_process)) {
		char *s = bytes_dup(name);

		r->err = s ? trace_summary__name(r->summary, t->pid, has_thread ? t->tid : 0, s)
			   : -ENOMEM;
		free(s);
	}
}

/* A debug annotation's name and its integer value (@has_value: it has one). */
static bool read_annotation(const struct pfr_reader *r, struct pb_in in, const char **iname,
			    struct pb_in *name, uint64_t *value, bool *has_value)
{
	struct pb_field f;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, DA_NAME_IID)) {
			const struct pfr_interned *e = hashmap__get(r->tables[T_ARG_NAMES], f.v);

			*iname = e ? e->s : NULL;
		} else if (is_bytes(&f, DA_NAME)) {
			*name = f.bytes;
		} else if (is_varint(&f, DA_UINT_VALUE) || is_varint(&f, DA_INT_VALUE)) {
			*value = f.v; /* int64: two's complement */
			*has_value = true;
		}
	}
	return got == 0;
}

static bool annotation_is(const char *iname, struct pb_in name, const char *s)
{
	return iname ? !strcmp(iname, s) : name.p && bytes_eq(name, s);
}

/* The args that matter of an event: a slice's pool message, or the statistics' notes. */
static void read_annotations(struct pfr_reader *r, struct pb_in in, struct pfr_event *ev,
			     bool statistics)
{
	struct pb_field f;

	while (next_field(&in, &f) > 0) {
		struct pb_in name = { 0 };
		const char *iname = NULL;
		uint64_t v = 0;
		bool has = false;

		if (!is_bytes(&f, TE_DEBUG_ANNOTATIONS) ||
		    !read_annotation(r, f.bytes, &iname, &name, &v, &has) || !has)
			continue;
		if (statistics && annotation_is(iname, name, "cpus")) {
			trace_summary__cpus(r->summary, (unsigned)v);
		} else if (statistics && annotation_is(iname, name, "tool_cpu_ns")) {
			trace_summary__tool_cpu(r->summary, v);
		} else if (!statistics && annotation_is(iname, name, "first_line")) {
			ev->first_line = (uint32_t)v; /* the function's, beside the line run */
		} else if (!statistics && annotation_is(iname, name, "pool_job")) {
			ev->job = (int64_t)v;
			ev->flags |= F_JOB;
		} else if (!statistics && (annotation_is(iname, name, "pool_task") ||
					   annotation_is(iname, name, "work_id"))) {
			ev->task = (int64_t)v;
			ev->flags |= F_TASK;
		}
	}
}

/* The slice flags of a category. */
static uint8_t category_flags(const struct pfr_reader *r, uint64_t iid)
{
	const struct pfr_interned *e = hashmap__get(r->tables[T_CATEGORIES], iid);

	if (!e)
		return 0;
	return !strcmp(e->s, frame_kind__name(FRAME_OFF_CPU))	? F_OFF_CPU
	       : !strcmp(e->s, frame_kind__name(FRAME_NO_GIL))	? F_NO_GIL
	       : !strcmp(e->s, frame_kind__name(FRAME_MESSAGE)) ? F_MESSAGE
								: 0;
}

/* The categories, written one per field or packed. */
static uint8_t read_categories(const struct pfr_reader *r, const struct pb_field *f)
{
	struct pb_in packed = f->bytes;
	uint8_t flags = 0;
	uint64_t iid;

	if (f->wire == WIRE_VARINT)
		return category_flags(r, f->v);
	while (f->wire == WIRE_BYTES && get_varint(&packed, &iid))
		flags |= category_flags(r, iid);
	return flags;
}

static void add_event(struct pfr_reader *r, const struct pfr_event *ev)
{
	if (r->count == PFR_MAX_EVENTS) {
		r->capped = true;
		return;
	}
	if (r->count == r->cap) {
		size_t cap = r->cap ? 2 * r->cap : 4096;
		struct pfr_event *grown = realloc(r->events, cap * sizeof(*grown));

		if (!grown) {
			r->err = -ENOMEM;
			return;
		}
		r->events = grown;
		r->cap = cap;
	}
	r->events[r->count] = *ev;
	r->events[r->count].order = (uint32_t)r->count;
	r->count++;
}

/* The name and place of a SLICE_BEGIN. */
static void name_begin(struct pfr_reader *r, struct pfr_event *ev, uint64_t name_iid,
		       struct pb_in name, uint64_t place_iid)
{
	struct pfr_interned *e = name_iid ? hashmap__get(r->tables[T_NAMES], name_iid) : NULL;
	struct pfr_interned *p = place_iid ? hashmap__get(r->tables[T_PLACES], place_iid) : NULL;
	char *inline_name;

	if (e && !e->kept)
		e->kept = keep_string(r, e->s);
	if (e) {
		ev->name = e->kept;
	} else if (name.p) {
		inline_name = bytes_dup(name);
		if (!inline_name)
			r->err = -ENOMEM;
		else
			ev->name = keep_string(r, inline_name);
		free(inline_name);
	}
	if (!ev->name)
		ev->name = "[unknown]";
	if (p && p->s[0] && !p->kept)
		p->kept = keep_string(r, p->s);
	if (p) {
		ev->file = p->kept;
		ev->line = p->line;
	}
}

static void read_event(struct pfr_reader *r, struct pb_in in, uint64_t ts)
{
	struct pfr_event ev = { .ts = ts };
	uint64_t type = 0, uuid = 0, name_iid = 0, place_iid = 0;
	struct pb_in name = { 0 }, all = in;
	const struct pfr_track *t;
	bool has_uuid = false;
	struct pb_field f;
	int got;

	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, TE_TYPE))
			type = f.v;
		else if (is_varint(&f, TE_TRACK_UUID))
			uuid = f.v, has_uuid = true;
		else if (is_varint(&f, TE_NAME_IID))
			name_iid = f.v;
		else if (is_bytes(&f, TE_NAME))
			name = f.bytes;
		else if (is_varint(&f, TE_SOURCE_LOCATION_IID))
			place_iid = f.v;
		else if (f.num == TE_CATEGORY_IIDS)
			ev.flags |= read_categories(r, &f);
	}
	if (got < 0 || !has_uuid)
		return;
	r->has_content = true;
	if (type == TYPE_INSTANT && name.p && bytes_eq(name, "statistics")) {
		read_annotations(r, all, &ev, true);
		return;
	}
	t = hashmap__get(r->tracks, uuid);
	/* Process tracks, counters and the findings' tracks hold no thread's slices. */
	if (!t || !t->thread || t->pid == TRACE_FINDINGS_PID ||
	    (type != TYPE_SLICE_BEGIN && type != TYPE_SLICE_END))
		return;
	ev.type = (uint8_t)type;
	ev.pid = t->pid;
	ev.tid = t->tid;
	read_annotations(r, all, &ev, false);
	if (type == TYPE_SLICE_BEGIN)
		name_begin(r, &ev, name_iid, name, place_iid);
	if (ev.first_line)
		ev.line = ev.first_line;
	add_event(r, &ev);
}

/* One TracePacket. */
static void read_packet(struct pfr_reader *r, struct pb_in in)
{
	struct pb_in event = { 0 }, descriptor = { 0 }, interned = { 0 }, clocks = { 0 };
	struct pb_in defaults = { 0 };
	uint64_t ts = 0, flags = 0, clock = 0;
	bool has_clock = false;
	struct pb_field f;
	int got;

	r->packets++;
	while ((got = next_field(&in, &f)) > 0) {
		if (is_varint(&f, PKT_TIMESTAMP))
			ts = f.v;
		else if (is_varint(&f, PKT_TIMESTAMP_CLOCK_ID))
			clock = f.v, has_clock = true;
		else if (is_varint(&f, PKT_SEQUENCE_FLAGS))
			flags = f.v;
		else if (is_bytes(&f, PKT_TRACK_EVENT))
			event = f.bytes;
		else if (is_bytes(&f, PKT_TRACK_DESCRIPTOR))
			descriptor = f.bytes;
		else if (is_bytes(&f, PKT_INTERNED_DATA))
			interned = f.bytes;
		else if (is_bytes(&f, PKT_CLOCK_SNAPSHOT))
			clocks = f.bytes;
		else if (is_bytes(&f, PKT_DEFAULTS))
			defaults = f.bytes;
	}
	if (got < 0) {
		r->bad_packets++;
		return;
	}
	if (flags & SEQ_INCREMENTAL_STATE_CLEARED) {
		clear_interned(r);
		r->default_clock = 0;
	}
	/* The packet's interned data comes before its event needs it. */
	if (defaults.p)
		read_defaults(r, defaults);
	if (clocks.p)
		read_clocks(r, clocks);
	if (interned.p && !r->err)
		read_interned(r, interned);
	if (descriptor.p && !r->err)
		read_descriptor(r, descriptor);
	if (event.p && !r->err)
		read_event(r, event, to_trace_ns(r, has_clock ? clock : r->default_clock, ts));
}

/* A varint from the file: 1, 0 at its end before any byte, -EINVAL when cut or too long. */
static int file_varint(FILE *f, uint64_t *v, uint64_t *pos)
{
	uint64_t x = 0;
	int i, c;

	for (i = 0; i < 10; i++) {
		if ((c = getc(f)) == EOF)
			return i ? -EINVAL : 0;
		(*pos)++;
		if (i == 9 && c > 1)
			return -EINVAL;
		x |= (uint64_t)(c & 0x7f) << (7 * i);
		if (!(c & 0x80)) {
			*v = x;
			return 1;
		}
	}
	return -EINVAL;
}

/*
 * The Trace's fields one at a time, each packet read whole into @buf. Stops, keeping what
 * came before, where the file is cut or stops being protobuf.
 */
static void read_trace(struct pfr_reader *r, FILE *f, uint64_t size)
{
	uint8_t *buf = NULL;
	size_t cap = 0;
	uint64_t pos = 0, tag, len;
	const char *stop = NULL;
	int got = 0;

	while (!r->err && !stop && (got = file_varint(f, &tag, &pos)) > 0) {
		uint32_t wire = (uint32_t)(tag & 7);

		if (!(tag >> 3)) {
			stop = "not protobuf past there";
			continue;
		}
		if (wire == WIRE_VARINT) {
			stop = file_varint(f, &len, &pos) > 0 ? NULL : "cut short";
			continue;
		}
		len = wire == WIRE_FIXED64 ? 8 : wire == WIRE_FIXED32 ? 4 : 0;
		if (wire == WIRE_BYTES && file_varint(f, &len, &pos) <= 0) {
			stop = "cut short";
			continue;
		}
		if (wire != WIRE_BYTES && !len) {
			stop = "not protobuf past there";
			continue;
		}
		if (pos > size || len > size - pos) {
			stop = "cut short";
			continue;
		}
		if (len > PFR_MAX_PACKET) {
			stop = "a packet past 64 MiB";
			continue;
		}
		if (!len)
			continue; /* an empty packet: nothing in it */
		if (len > cap) {
			uint8_t *grown = realloc(buf, len);

			if (!grown) {
				r->err = -ENOMEM;
				break;
			}
			buf = grown;
			cap = len;
		}
		if (fread(buf, 1, len, f) != len) {
			stop = "cut short";
			continue;
		}
		pos += len;
		if (tag == (TRACE_PACKET << 3 | WIRE_BYTES))
			read_packet(r, (struct pb_in){ buf, buf + len });
	}
	if (!stop && got < 0)
		stop = "cut short";
	if (stop && r->has_content)
		pr_warn("%s: %s after %zu packets: what they hold is reported", r->path, stop,
			r->packets);
	free(buf);
}

/* By thread, then time, then as written: trace processor's order of a track. */
static int by_thread_time_order(const void *a, const void *b)
{
	const struct pfr_event *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * Pairs each thread's ends with its begins, innermost first, giving the begins their
 * durations; begins left open (a file cut short) end at their thread's last event.
 */
static int pair_ends(struct pfr_reader *r)
{
	size_t *open = calloc(r->count + 1, sizeof(*open));
	size_t i, depth = 0;

	if (!open)
		return -ENOMEM;
	if (r->count) /* qsort() must not be given NULL */
		qsort(r->events, r->count, sizeof(*r->events), by_thread_time_order);
	for (i = 0; i < r->count; i++) {
		struct pfr_event *e = &r->events[i];
		bool last = i + 1 == r->count || e[1].pid != e->pid || e[1].tid != e->tid;

		if (e->type == TYPE_SLICE_BEGIN) {
			open[depth++] = i;
		} else if (depth) {
			struct pfr_event *b = &r->events[open[--depth]];

			b->dur = e->ts - b->ts;
			b->flags |= F_ENDED;
			if ((e->flags & F_JOB) && !(b->flags & F_JOB))
				b->job = e->job, b->flags |= F_JOB;
			if ((e->flags & F_TASK) && !(b->flags & F_TASK))
				b->task = e->task, b->flags |= F_TASK;
		}
		for (; last && depth; depth--) {
			struct pfr_event *b = &r->events[open[depth - 1]];

			b->dur = e->ts - b->ts;
			b->flags |= F_ENDED;
			r->unended++;
		}
	}
	free(open);
	return 0;
}

/*
 * Keeps the slices (begins that ended, not empty) and feeds them as json_read.c does:
 * nested again by time per thread, opened and closed in order (read_feed.c).
 */
static int feed(struct pfr_reader *r)
{
	struct read_slice *slices = calloc(r->count + 1, sizeof(*slices));
	size_t i, n = 0;
	int err;

	if (!slices)
		return -ENOMEM;
	for (i = 0; i < r->count; i++) {
		const struct pfr_event *e = &r->events[i];

		if (e->type != TYPE_SLICE_BEGIN || !(e->flags & F_ENDED) || !e->dur)
			continue;
		slices[n++] = (struct read_slice){
			.pid = e->pid,
			.tid = e->tid,
			.ts = e->ts,
			.dur = e->dur,
			.name = e->name,
			.file = e->file,
			.line = e->line,
			.job = e->job,
			.task = e->task,
			.off_cpu = e->flags & F_OFF_CPU,
			.no_gil = e->flags & F_NO_GIL,
			.message = e->flags & F_MESSAGE,
			.order = e->order,
		};
	}
	err = read_feed(r->summary, slices, n, 0, 1);
	free(slices);
	return err;
}

static void free_reader(struct pfr_reader *r)
{
	int t;

	for (t = 0; t < T_COUNT; t++)
		hashmap__free_all(r->tables[t], free);
	hashmap__free_all(r->tracks, free);
	hashmap__free_all(r->strings, free);
	free(r->events);
}

int trace_summary__read_pftrace(struct trace_summary *s, const char *path)
{
	struct pfr_reader r = { .summary = s, .path = path };
	FILE *f = fopen(path, "rb");
	struct stat st;
	int err = 0, t, first;

	if (!f)
		return errno ? -errno : -ENOMEM;
	/* A trace's first field is a packet's (a JSON trace starts with '{'). */
	errno = 0;
	first = getc(f);
	if (first != (TRACE_PACKET << 3 | WIRE_BYTES)) {
		err = !ferror(f) ? -EINVAL : errno ? -errno : -EIO; /* EISDIR: a folder */
		goto out_free;
	}
	ungetc(first, f);
	r.tracks = hashmap__new();
	r.strings = hashmap__new();
	for (t = 0; t < T_COUNT; t++) {
		r.tables[t] = hashmap__new();
		if (!r.tables[t])
			r.err = -ENOMEM;
	}
	if (!r.tracks || !r.strings || r.err) {
		err = -ENOMEM;
		goto out_free;
	}
	/* A pipe has no size: then the caps alone bound what is read. */
	read_trace(&r, f,
		   !fstat(fileno(f), &st) && S_ISREG(st.st_mode) ? (uint64_t)st.st_size
								 : UINT64_MAX);
	err = r.err;
	if (!err && !r.has_content)
		err = -EINVAL;
	if (!err)
		err = pair_ends(&r);
	if (!err)
		err = feed(&r);
	if (!err && r.bad_packets)
		pr_warn("%s: %zu packets did not parse: skipped", path, r.bad_packets);
	if (!err && r.unended)
		pr_warn("%s: %zu slices never ended (the file was cut short?): each ends at its "
			"thread's last event",
			path, r.unended);
	if (!err && r.capped)
		pr_warn("%s: more than this reader holds (its caps: trace/pftrace_read.c): the "
			"rest was left out",
			path);
out_free:
	free_reader(&r);
	fclose(f);
	return err;
}
