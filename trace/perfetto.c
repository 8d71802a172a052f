/*
 * The Perfetto writer: TracePackets of TrackEvents (protos/perfetto/trace in Perfetto's
 * tree; the fields we use are in trace/perfetto_subset.proto), one packet per record.
 *
 * One packet sequence. Its first packet clears the incremental state, defines clock 64
 * as the JSON's microseconds (1 at opts.origin_ns on CLOCK_MONOTONIC, which it makes
 * the trace's clock) and interns the categories and argument names; later packets
 * need that state. A process and each thread get a track; a slice is a SLICE_BEGIN and
 * a SLICE_END on its thread's track, its name (the frame id) interned on first use.
 *
 * Trace processor orders a track's events by time, keeping the file's order at equal
 * times, so a track's begins and ends must be written parents first and ends children
 * first, although the coalescer delivers slices as they close, parents last. So the
 * begins of the open slices are held (O(depth) per thread) and written when the slice,
 * or one under it, closes non-empty; ends closed at one instant are held until the next
 * thing happens on the thread, then written deepest first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "internal.h"
#include "pb.h"
#include "perfetto.h"

static const char *const arg_names[] = { NULL,	    "samples", "waits", "child_pid",
					 "program", "status",  "why",	"first_line" };

static uint64_t track_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

static void free_track(void *value)
{
	struct pf_track *t = value;

	free(t->named);
	free(t->open);
	free(t->lost_ends);
	free(t);
}

static void free_string(void *value)
{
	struct pf_string *s = value;

	free(s->s);
	free(s);
}

void pftrace__free(struct pftrace *pf)
{
	if (!pf)
		return;
	hashmap__free_all(pf->tracks, free_track);
	hashmap__free_all(pf->strings, free_string);
	hashmap__free(pf->places);
	free(pf->named_frames);
	pb_buf__release(&pf->packet);
	pb_buf__release(&pf->interned);
	free(pf);
}

struct pftrace *pftrace__new(void)
{
	struct pftrace *pf = calloc(1, sizeof(*pf));

	if (!pf)
		return NULL;
	pf->tracks = hashmap__new();
	pf->strings = hashmap__new();
	pf->places = hashmap__new();
	if (!pf->tracks || !pf->strings || !pf->places) {
		pftrace__free(pf);
		errno = ENOMEM;
		return NULL;
	}
	pf->next_uuid = 1;
	pf->next_string_iid = 1;
	pf->next_place_iid = 1;
	return pf;
}

/* Starts a packet on our sequence that needs its incremental state. */
struct pb_buf *pf_packet_begin(struct pftrace *pf, uint64_t ts_us)
{
	pb_buf__reset(&pf->packet);
	pb_buf__reset(&pf->interned);
	pf->interned_start = 0;
	if (ts_us)
		pb_uint(&pf->packet, PKT_TIMESTAMP, ts_us);
	pb_uint(&pf->packet, PKT_SEQUENCE_ID, PF_SEQUENCE);
	pb_uint(&pf->packet, PKT_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
	return &pf->packet;
}

/* Interned data the packet brings, collected aside and appended by pf_packet_end(). */
static struct pb_buf *interned(struct pftrace *pf)
{
	return &pf->interned;
}

/* Writes the packet as one record; false when it is lost (the output failed). */
bool pf_packet_end(struct trace *trace)
{
	struct pftrace *pf = trace->pftrace;
	struct pb_buf *p = &pf->packet;
	uint8_t head[16];
	size_t n = 0, len;

	if (pf->interned.len)
		pb_bytes(p, PKT_INTERNED_DATA, pf->interned.data, pf->interned.len);
	if (p->err || pf->interned.err || out_file__error(trace->out)) {
		trace->lost_to_write_errors++;
		return false;
	}
	head[n++] = TRACE_PACKET << 3 | 2;
	for (len = p->len; len >= 0x80; len >>= 7)
		head[n++] = (uint8_t)(len | 0x80);
	head[n++] = (uint8_t)len;
	out_file__write(trace->out, head, n);
	out_file__write(trace->out, p->data, p->len);
	if (out_file__error(trace->out)) {
		trace->lost_to_write_errors++;
		return false;
	}
	out_file__mark(trace->out);
	return true;
}

static void intern_entry(struct pb_buf *b, uint32_t field, uint64_t iid, const char *name)
{
	size_t m = pb_begin(b, field);

	pb_uint(b, INTERNED_IID, iid);
	pb_string(b, INTERNED_NAME, name);
	pb_end(b, m);
}

/*
 * The first packet: clears the incremental state, defines the clock and makes clock 64
 * every later packet's default, and interns the categories and argument names.
 */
void pftrace__header(struct trace *trace)
{
	struct pftrace *pf = trace->pftrace;
	struct pb_buf *p = &pf->packet, *in = &pf->interned;
	size_t m, c;
	int k;

	pb_buf__reset(p);
	pb_buf__reset(in);
	pb_uint(p, PKT_SEQUENCE_ID, PF_SEQUENCE);
	pb_uint(p, PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
	m = pb_begin(p, PKT_CLOCK_SNAPSHOT);
	c = pb_begin(p, CLOCK_SNAPSHOT_CLOCKS);
	pb_uint(p, CLOCK_ID, CLOCK_MONOTONIC);
	pb_uint(p, CLOCK_TIMESTAMP, trace->opts.origin_ns);
	pb_end(p, c);
	c = pb_begin(p, CLOCK_SNAPSHOT_CLOCKS);
	pb_uint(p, CLOCK_ID, CLOCK_JSON_US);
	pb_uint(p, CLOCK_TIMESTAMP, 1);
	pb_uint(p, CLOCK_UNIT_MULTIPLIER_NS, 1000);
	pb_end(p, c);
	pb_uint(p, CLOCK_SNAPSHOT_PRIMARY, CLOCK_MONOTONIC);
	pb_end(p, m);
	m = pb_begin(p, PKT_DEFAULTS);
	pb_uint(p, DEFAULTS_CLOCK_ID, CLOCK_JSON_US);
	pb_end(p, m);
	for (k = 0; k < FRAME_KIND_COUNT; k++)
		intern_entry(in, INTERNED_CATEGORIES, (uint64_t)k + 1, frame_kind__name(k));
	intern_entry(in, INTERNED_CATEGORIES, PF_CATEGORY_PROCESS, "process");
	for (k = 1; k <= ARG_LAST; k++)
		intern_entry(in, INTERNED_ANNOTATION_NAMES, (uint64_t)k, arg_names[k]);
	pf_packet_end(trace);
}

struct pf_track *pf_find_track(struct pftrace *pf, uint32_t pid, uint32_t tid)
{
	struct pf_track *t = hashmap__get(pf->tracks, track_key(pid, tid));

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->uuid = pf->next_uuid++;
	if (hashmap__set(pf->tracks, track_key(pid, tid), t)) {
		free(t);
		return NULL;
	}
	return t;
}

/* Writes @t's descriptor when it has none yet, or its name changed. 0 or -ENOMEM. */
static int describe(struct trace *trace, struct pf_track *t)
{
	const char *name = names__get(trace->names, t->pid, t->tid);
	const char *cmdline = t->tid ? NULL : names__cmdline(trace->names, t->pid);
	struct pb_buf *p;
	size_t m, d;

	if (t->described && (name == t->named || (name && t->named && !strcmp(name, t->named))))
		return 0;
	free(t->named);
	t->named = name ? strdup(name) : NULL;
	if (name && !t->named)
		return -ENOMEM;
	p = pf_packet_begin(trace->pftrace, 0);
	m = pb_begin(p, PKT_TRACK_DESCRIPTOR);
	pb_uint(p, TD_UUID, t->uuid);
	if (t->tid) {
		d = pb_begin(p, TD_THREAD);
		pb_int(p, THD_PID, t->pid);
		pb_int(p, THD_TID, t->tid);
		if (name)
			pb_string(p, THD_THREAD_NAME, name);
	} else {
		d = pb_begin(p, TD_PROCESS);
		pb_int(p, PD_PID, t->pid);
		if (name)
			pb_string(p, PD_PROCESS_NAME, name);
		if (cmdline)
			pb_string(p, PD_CMDLINE, cmdline);
	}
	pb_end(p, d);
	pb_end(p, m);
	t->described = pf_packet_end(trace);
	return 0;
}

/* The thread's track, described along with its process's. NULL on ENOMEM. */
struct pf_track *pf_thread_track(struct trace *trace, uint32_t pid, uint32_t tid)
{
	struct pf_track *proc = pf_find_track(trace->pftrace, pid, 0);
	struct pf_track *t = pf_find_track(trace->pftrace, pid, tid);

	if (!proc || !t || describe(trace, proc) || describe(trace, t))
		return NULL;
	return t;
}

/* An argument that is a string: interned, unless its hash is taken by another. */
static void put_string_arg(struct trace *trace, uint32_t name_iid, const char *s)
{
	struct pftrace *pf = trace->pftrace;
	struct pb_buf *p = &pf->packet;
	uint64_t h = hash_string(s);
	struct pf_string *e = hashmap__get(pf->strings, h);
	size_t m = pb_begin(p, TE_DEBUG_ANNOTATIONS);

	pb_uint(p, DA_NAME_IID, name_iid);
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e)
			e->s = strdup(s);
		if (!e || !e->s || hashmap__set(pf->strings, h, e)) {
			if (e)
				free_string(e);
			e = NULL; /* written in full */
		} else {
			e->iid = pf->next_string_iid++;
			intern_entry(interned(pf), INTERNED_ANNOTATION_STRINGS, e->iid, s);
		}
	}
	if (e && !strcmp(e->s, s))
		pb_uint(p, DA_STRING_VALUE_IID, e->iid);
	else
		pb_string(p, DA_STRING_VALUE, s);
	pb_end(p, m);
}

static void put_uint_arg(struct pb_buf *p, uint32_t name_iid, uint64_t v)
{
	size_t m = pb_begin(p, TE_DEBUG_ANNOTATIONS);

	pb_uint(p, DA_NAME_IID, name_iid);
	pb_uint(p, DA_UINT_VALUE, v);
	pb_end(p, m);
}

static void put_int_arg(struct pb_buf *p, uint32_t name_iid, int64_t v)
{
	size_t m = pb_begin(p, TE_DEBUG_ANNOTATIONS);

	pb_uint(p, DA_NAME_IID, name_iid);
	pb_int(p, DA_INT_VALUE, v);
	pb_end(p, m);
}

/* A call's arguments, each a debug annotation under the parameter's name. */
static void put_call_args(struct pb_buf *p, const struct args_table *table, uint32_t id)
{
	uint32_t i, n;
	const struct arg_item *items = args_table__get(table, id, &n);

	for (i = 0; i < n; i++) {
		size_t m = pb_begin(p, TE_DEBUG_ANNOTATIONS);

		pb_string(p, DA_NAME, items[i].name);
		switch (items[i].kind) {
		case ARG_INT:
			pb_int(p, DA_INT_VALUE, items[i].i);
			break;
		case ARG_BOOL:
			pb_uint(p, DA_BOOL_VALUE, items[i].i != 0);
			break;
		case ARG_FLOAT:
			pb_double(p, DA_DOUBLE_VALUE, items[i].f);
			break;
		case ARG_NONE:
			pb_string(p, DA_STRING_VALUE, "None");
			break;
		default:
			pb_string(p, DA_STRING_VALUE, items[i].text);
			break;
		}
		pb_end(p, m);
	}
}

/* The frame's name as an interned event name, its iid the frame id. */
static int intern_frame(struct pftrace *pf, uint32_t func, const char *name)
{
	if (func >= pf->named_cap * 8) {
		size_t cap = pf->named_cap ? pf->named_cap : 64;
		uint8_t *grown;

		while (func >= cap * 8)
			cap *= 2;
		grown = realloc(pf->named_frames, cap);
		if (!grown)
			return -ENOMEM;
		memset(grown + pf->named_cap, 0, cap - pf->named_cap);
		pf->named_frames = grown;
		pf->named_cap = cap;
	}
	if (pf->named_frames[func / 8] & (1u << (func % 8)))
		return 0;
	pf->named_frames[func / 8] |= (uint8_t)(1u << (func % 8));
	intern_entry(interned(pf), INTERNED_EVENT_NAMES, func, name);
	return 0;
}

/*
 * The iid of the source location (file, line) of a frame at a line, interned
 * with the packet on first use; 0 on ENOMEM. The iid stands in the map as a pointer.
 */
static uint64_t intern_place(struct pftrace *pf, uint32_t func, uint32_t line,
			     const struct frame_info *f)
{
	uint64_t key = (uint64_t)func << 32 | line;
	uintptr_t iid = (uintptr_t)hashmap__get(pf->places, key);
	struct pb_buf *in = interned(pf);
	size_t m;

	if (iid)
		return iid;
	iid = (uintptr_t)pf->next_place_iid;
	if (hashmap__set(pf->places, key, (void *)iid))
		return 0;
	pf->next_place_iid++;
	m = pb_begin(in, INTERNED_SOURCE_LOCATIONS);
	pb_uint(in, SRC_IID, iid);
	pb_string(in, SRC_FILE_NAME, f->file);
	pb_uint(in, SRC_LINE_NUMBER, line);
	pb_end(in, m);
	return iid;
}

/*
 * SLICE_BEGIN of an open slice: its name and category, and its file and line as an
 * interned source location (the JSON's file and line args; first_line is JSON only).
 * 1 when written, 0 when lost to a write error, or -ENOMEM.
 */
static int write_begin(struct trace *trace, const struct pf_track *t, const struct pf_open *o)
{
	const struct frame_info *f = frame_table__get(trace->opts.frames, o->func);
	struct pftrace *pf = trace->pftrace;
	struct pb_buf *p = pf_packet_begin(pf, trace_to_us(trace, o->start_ns));
	size_t m = pb_begin(p, PKT_TRACK_EVENT);

	pb_uint(p, TE_TYPE, TYPE_SLICE_BEGIN);
	pb_uint(p, TE_TRACK_UUID, t->uuid);
	if (f) {
		uint64_t place = intern_place(pf, o->func, o->line ? o->line : f->line, f);

		if (!place || intern_frame(pf, o->func, f->name))
			return -ENOMEM;
		pb_uint(p, TE_NAME_IID, o->func);
		pb_uint(p, TE_CATEGORY_IIDS, (uint64_t)f->kind + 1);
		pb_uint(p, TE_SOURCE_LOCATION_IID, place);
		/* The place is the line run; the function's own first line, where it differs
		 * (the JSON's first_line: what the report names a function by). */
		if (f->line && o->line && o->line != f->line)
			put_uint_arg(p, ARG_FIRST_LINE, f->line);
		put_call_args(p, frame_table__args(trace->opts.frames), o->args);
	} else {
		pb_string(p, TE_NAME, "[bad frame id]");
	}
	pb_end(p, m);
	return pf_packet_end(trace);
}

/* SLICE_END, with the counts known only now; false when lost to a write error. */
static bool write_end(struct trace *trace, const struct pf_track *t, uint64_t end_us,
		      uint32_t samples, uint32_t waits, uint32_t args)
{
	struct pb_buf *p = pf_packet_begin(trace->pftrace, end_us);
	size_t m = pb_begin(p, PKT_TRACK_EVENT);

	pb_uint(p, TE_TYPE, TYPE_SLICE_END);
	pb_uint(p, TE_TRACK_UUID, t->uuid);
	if (samples || !waits)
		put_uint_arg(p, ARG_SAMPLES, samples);
	if (waits)
		put_uint_arg(p, ARG_WAITS, waits);
	put_call_args(p, frame_table__args(trace->opts.frames), args);
	pb_end(p, m);
	return pf_packet_end(trace);
}

/*
 * Remembers the end of a slice whose begin is in the file but whose end was lost, so
 * that the file can still close it once the output recovered (pftrace__flush). Those
 * are slices open in the file when writes began to fail: at most a stack's depth.
 */
static void keep_lost_end(struct pf_track *t, uint64_t end_us)
{
	if (t->nlost == t->lost_capacity) {
		uint32_t capacity = t->lost_capacity ? 2 * t->lost_capacity : 16;
		uint64_t *grown = realloc(t->lost_ends, capacity * sizeof(*grown));

		if (!grown)
			return; /* the slice stays unended: the viewer shows it "did not end" */
		t->lost_ends = grown;
		t->lost_capacity = capacity;
	}
	t->lost_ends[t->nlost++] = end_us;
}

/*
 * Forgets the open slices at @depth and deeper, deepest first, writing the ends held for
 * those that were begun; with @closed_only, stops at the first one not closed yet.
 */
static void pop_to(struct trace *trace, struct pf_track *t, uint32_t depth, bool closed_only)
{
	while (t->depth > depth) {
		const struct pf_open *o = &t->open[t->depth - 1];

		if (closed_only && !o->closed)
			break;
		if (o->begun && o->closed &&
		    !write_end(trace, t, o->end_us, o->samples, o->waits, o->end_args))
			keep_lost_end(t, o->end_us);
		t->depth--;
	}
}

static int reserve_open(struct pf_track *t, uint32_t depth)
{
	struct pf_open *grown;
	uint32_t capacity;

	if (depth < t->capacity)
		return 0;
	capacity = t->capacity ? t->capacity : 16;
	while (capacity <= depth)
		capacity *= 2;
	grown = realloc(t->open, capacity * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	t->open = grown;
	t->capacity = capacity;
	return 0;
}

int pftrace__open_slice(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	struct pf_track *t = pf_find_track(trace->pftrace, s->pid, s->tid);

	if (!t || reserve_open(t, s->depth))
		return -ENOMEM;
	pop_to(trace, t, s->depth, false);
	if (s->depth > t->depth)
		return 0; /* under a slice never heard of: can't be placed */
	t->open[s->depth] = (struct pf_open){
		.func = s->func, .line = s->line, .args = s->args, .start_ns = s->start_ns
	};
	t->depth = s->depth + 1;
	return 0;
}

/*
 * A slice closed. Ends held from an earlier instant, deeper than it, are written first.
 * An empty one (under a microsecond) is dropped, like the JSON does; otherwise the
 * begins of it and the open slices above it are written, and its end is held until
 * the deeper slices closing at the same instant have written theirs.
 */
int pftrace__slice(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	uint64_t start_us = trace_to_us(trace, s->start_ns), end_us = trace_to_us(trace, s->end_ns);
	struct pf_track *t = pf_find_track(trace->pftrace, s->pid, s->tid);
	struct pf_open *o;
	uint32_t i;

	if (!t || reserve_open(t, s->depth))
		return -ENOMEM;
	pop_to(trace, t, s->depth + 1, true);
	if (s->depth >= t->depth || t->open[s->depth].closed ||
	    t->open[s->depth].start_ns != s->start_ns || t->open[s->depth].func != s->func)
		return 0; /* not the slice that opened there: can't be placed */
	o = &t->open[s->depth];
	if (!o->begun)
		o->args = s->args;
	else if (o->args != s->args)
		o->end_args = s->args; /* became known after its begin went out */
	o->closed = true;
	o->end_us = end_us;
	o->samples = s->samples;
	o->waits = s->waits;
	if (s->end_ns <= s->start_ns)
		return 0; /* counted by the coalescer */
	if (end_us <= start_us) {
		trace->stats.slices_empty++;
		return 0;
	}
	/* Past --max-size: a slice not begun yet is counted, not written (its end neither). */
	if (!o->begun && trace_over_budget(trace, s->start_ns))
		return 0;
	if (names__seen(trace->names, s->pid, s->tid, s->start_ns) ||
	    !pf_thread_track(trace, s->pid, s->tid))
		return -ENOMEM;
	for (i = 0; i <= s->depth; i++) {
		int r;

		if (t->open[i].begun)
			continue;
		r = write_begin(trace, t, &t->open[i]);
		if (r < 0)
			return r;
		t->open[i].begun = r;
	}
	trace->stats.slices++;
	return 0;
}

int pftrace__event(struct trace *trace, const struct trace_event *ev)
{
	static const char *const names[] = {
		[TRACE_EVENT_FORK] = "fork",
		[TRACE_EVENT_EXEC] = "exec",
		[TRACE_EVENT_EXIT] = "exit",
		[TRACE_EVENT_NOTE] = "not_read",
	};
	struct pf_track *t = pf_thread_track(trace, ev->pid, ev->tid);
	struct pb_buf *p;
	size_t m;

	if (!t)
		return -ENOMEM;
	p = pf_packet_begin(trace->pftrace, trace_to_us(trace, ev->t_ns));
	m = pb_begin(p, PKT_TRACK_EVENT);
	pb_uint(p, TE_TYPE, TYPE_INSTANT);
	pb_uint(p, TE_TRACK_UUID, t->uuid);
	pb_string(p, TE_NAME, names[ev->kind]);
	pb_uint(p, TE_CATEGORY_IIDS, PF_CATEGORY_PROCESS);
	switch (ev->kind) {
	case TRACE_EVENT_FORK:
		put_int_arg(p, ARG_CHILD_PID, ev->value);
		break;
	case TRACE_EVENT_EXEC:
		put_string_arg(trace, ARG_PROGRAM, ev->text ? ev->text : "");
		break;
	case TRACE_EVENT_EXIT:
		if (ev->value >= 0)
			put_int_arg(p, ARG_STATUS, ev->value);
		break;
	case TRACE_EVENT_NOTE:
		put_string_arg(trace, ARG_WHY, ev->text ? ev->text : "");
		break;
	}
	pb_end(p, m);
	if (pf_packet_end(trace))
		trace->stats.events++;
	return 0;
}

/*
 * One point of flow @id: an instant at its message's marker, which the flow (ended at
 * the @last) binds to; trace processor links a flow's events in time order.
 */
int pftrace__flow(struct trace *trace, uint64_t id, const struct flow_point *fp, bool last)
{
	struct pf_track *t = pf_thread_track(trace, fp->pid, fp->tid);
	struct pb_buf *p;
	size_t m;

	if (!t)
		return -ENOMEM;
	p = pf_packet_begin(trace->pftrace, fp->ts_us);
	m = pb_begin(p, PKT_TRACK_EVENT);
	pb_uint(p, TE_TYPE, TYPE_INSTANT);
	pb_uint(p, TE_TRACK_UUID, t->uuid);
	pb_string(p, TE_NAME, fp->m.executor ? "executor task" : "pool task");
	pb_uint(p, TE_CATEGORY_IIDS, (uint64_t)FRAME_MESSAGE + 1);
	pb_fixed64(p, last ? TE_TERMINATING_FLOW_IDS : TE_FLOW_IDS, id);
	pb_end(p, m);
	pf_packet_end(trace);
	return 0;
}

int pftrace__end_thread(struct trace *trace, uint32_t pid, uint32_t tid)
{
	struct pf_track *t = hashmap__get(trace->pftrace->tracks, track_key(pid, tid));

	if (!t)
		return 0;
	pop_to(trace, t, 0, false);
	free(t->open);
	t->open = NULL;
	t->capacity = 0;
	return 0;
}

int pftrace__flush(struct trace *trace)
{
	struct pftrace *pf = trace->pftrace;
	size_t cursor = 0;
	uint64_t key;
	void *value;
	int err = 0;

	while (hashmap__next(pf->tracks, &cursor, &key, &value)) {
		struct pf_track *t = value;
		uint32_t i;

		for (i = 0; i < t->nlost; i++)
			write_end(trace, t, t->lost_ends[i], 0, 0, 0);
		t->nlost = 0;
		pop_to(trace, t, 0, false);
		if (t->counting) {
			pf_end_bucket(trace, t, t->bucket + 2);
			t->counting = false;
		}
		if (t->described && describe(trace, t))
			err = -ENOMEM;
	}
	return err;
}

/* Statistics and notes as the arguments of an instant on a track of their own. */
void pftrace__footer(struct trace *trace, const struct trace_stats *stats)
{
	const struct {
		const char *name;
		uint64_t value;
	} counts[] = {
		{ "origin_ns", trace->opts.origin_ns },
		{ "period_ns", trace->opts.period_ns },
		{ "observations", stats->observations },
		{ "slices", stats->slices },
		{ "slices_too_deep", stats->slices_too_deep },
		{ "slices_empty", stats->slices_empty },
		{ "reordered", stats->reordered },
		{ "hidden", stats->hidden },
		{ "flows", stats->flows },
		{ "events_lost_to_write_errors", stats->lost_to_write_errors },
	};
	struct pftrace *pf = trace->pftrace;
	uint64_t uuid = pf->next_uuid++;
	struct pb_buf *p = pf_packet_begin(pf, 0);
	size_t m = pb_begin(p, PKT_TRACK_DESCRIPTOR), i, a;

	pb_uint(p, TD_UUID, uuid);
	pb_string(p, TD_NAME, "pytrace-sample " PYTRACE_VERSION);
	pb_end(p, m);
	pf_packet_end(trace);
	p = pf_packet_begin(pf, 1);
	m = pb_begin(p, PKT_TRACK_EVENT);
	pb_uint(p, TE_TYPE, TYPE_INSTANT);
	pb_uint(p, TE_TRACK_UUID, uuid);
	pb_string(p, TE_NAME, "statistics");
	for (i = 0; i < sizeof(counts) / sizeof(counts[0]) + trace->nnotes; i++) {
		bool note = i >= sizeof(counts) / sizeof(counts[0]);
		size_t k = note ? i - sizeof(counts) / sizeof(counts[0]) : i;

		a = pb_begin(p, TE_DEBUG_ANNOTATIONS);
		pb_string(p, DA_NAME, note ? trace->notes[k].key : counts[k].name);
		pb_uint(p, DA_UINT_VALUE, note ? trace->notes[k].value : counts[k].value);
		pb_end(p, a);
	}
	pb_end(p, m);
	pf_packet_end(trace);
}
