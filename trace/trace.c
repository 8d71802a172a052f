/* The trace stage's front: routes observations to the coalescer and slices to a writer. */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "coalesce.h"
#include "folded.h"
#include "json.h"
#include "names.h"
#include "out.h"

#ifndef PYTRACE_VERSION
#define PYTRACE_VERSION "unknown"
#endif

struct trace_note {
	char *key;
	uint64_t value;
};

struct trace {
	struct trace_opts opts;
	enum trace_format format;
	struct out_file *out;
	struct coalescer *coalescer; /* JSON formats */
	struct folded *folded;	     /* collapsed stacks */
	struct names *names;
	struct trace_note *notes;
	size_t nnotes;
	struct trace_stats stats;
	uint64_t lost_to_write_errors;
	bool wrote_event;
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

enum trace_format trace_format__from_path(const char *path)
{
	if (ends_with(path, ".gz"))
		return TRACE_FORMAT_JSON_GZ;
	if (ends_with(path, ".folded") || ends_with(path, ".collapsed"))
		return TRACE_FORMAT_FOLDED;
	return TRACE_FORMAT_JSON;
}

/*
 * Microseconds after the origin, the origin itself at 1 us. Whole microseconds on
 * purpose: viewers add ts + dur in doubles, and decimal fractions there round a child's
 * end past its parent's (20530.578 > 20530.577999999998), which DevTools drops as a
 * partial overlap. Flooring start and end alike keeps every nesting exact.
 */
static uint64_t to_us(const struct trace *trace, uint64_t t_ns)
{
	t_ns = t_ns > trace->opts.origin_ns ? t_ns - trace->opts.origin_ns : 0;
	return t_ns / 1000 + 1;
}

/* Starts an event object; false when the output already failed (the event is lost). */
static bool begin_event(struct trace *trace, const char *ph, uint32_t pid, uint32_t tid)
{
	if (out_file__error(trace->out)) {
		trace->lost_to_write_errors++;
		return false;
	}
	out_file__printf(trace->out, "%s{\"ph\":\"%s\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu32,
			 trace->wrote_event ? ",\n" : "\n", ph, pid, tid);
	trace->wrote_event = true;
	return true;
}

/* Ends an event; false when a write failed inside it (it will be cut, so it is lost). */
static bool end_event(struct trace *trace)
{
	out_file__puts(trace->out, "}");
	if (out_file__error(trace->out)) {
		trace->lost_to_write_errors++;
		return false;
	}
	out_file__mark(trace->out);
	return true;
}

static int write_slice(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	const struct frame_info *f = frame_table__get(trace->opts.frames, s->func);
	uint64_t start_us = to_us(trace, s->start_ns), end_us = to_us(trace, s->end_ns);

	if (end_us <= start_us) {
		trace->stats.slices_empty++; /* shorter than the microsecond grid */
		return 0;
	}
	if (names__seen(trace->names, s->pid, s->tid, s->start_ns))
		return -ENOMEM;
	if (!begin_event(trace, "X", s->pid, s->tid))
		return 0;
	out_file__printf(trace->out, ",\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"name\":", start_us,
			 end_us - start_us);
	json_put_string(trace->out, f ? f->name : "[bad frame id]");
	out_file__printf(trace->out, ",\"cat\":\"%s\",\"args\":{\"file\":",
			 f ? frame_kind__name(f->kind) : "unknown");
	json_put_string(trace->out, f ? f->file : "");
	out_file__printf(trace->out, ",\"line\":%" PRIu32, s->line ? s->line : (f ? f->line : 0));
	if (f && f->line)
		out_file__printf(trace->out, ",\"first_line\":%" PRIu32, f->line);
	out_file__printf(trace->out, ",\"samples\":%" PRIu32, s->samples);
	if (s->waits)
		out_file__printf(trace->out, ",\"waits\":%" PRIu32, s->waits);
	out_file__puts(trace->out, "}");
	if (end_event(trace))
		trace->stats.slices++;
	return 0;
}

static void trace__destroy(struct trace *trace)
{
	size_t i;

	coalescer__free(trace->coalescer);
	folded__free(trace->folded);
	names__free(trace->names);
	for (i = 0; i < trace->nnotes; i++)
		free(trace->notes[i].key);
	free(trace->notes);
	free(trace);
}

struct trace *trace__open(const struct trace_opts *opts)
{
	struct coalesce_opts copts = {
		.period_ns = opts->period_ns,
		.gap_ns = opts->gap_ns,
		.max_depth = opts->max_depth,
	};
	struct trace *trace;
	int err = -ENOMEM;

	if (!opts->path || !opts->frames || !opts->period_ns) {
		errno = EINVAL;
		return NULL;
	}
	trace = calloc(1, sizeof(*trace));
	if (!trace)
		return NULL;
	trace->opts = *opts;
	trace->format = opts->format ? opts->format : trace_format__from_path(opts->path);
	trace->names = names__new();
	if (!trace->names)
		goto out_destroy;
	if (trace->format == TRACE_FORMAT_FOLDED) {
		trace->folded = folded__new(opts->period_ns);
		if (!trace->folded)
			goto out_destroy;
	} else {
		struct slice_sink sink = { .slice = write_slice, .ctx = trace };

		trace->coalescer = coalescer__new(&copts, sink);
		if (!trace->coalescer)
			goto out_destroy;
	}
	trace->out = out_file__open(opts->path, trace->format == TRACE_FORMAT_JSON_GZ);
	if (!trace->out) {
		err = -errno;
		goto out_destroy;
	}
	if (trace->format != TRACE_FORMAT_FOLDED)
		out_file__puts(trace->out, "{\"traceEvents\":[");
	return trace;

out_destroy:
	trace__destroy(trace);
	errno = -err;
	return NULL;
}

int trace__observe(struct trace *trace, const struct trace_obs *obs)
{
	if (obs->nframes && !obs->frames)
		return -EINVAL;
	if (trace->folded) {
		trace->stats.observations++;
		if (names__seen(trace->names, obs->pid, obs->tid, obs->t_start_ns))
			return -ENOMEM;
		return folded__add(trace->folded, obs);
	}
	return coalescer__observe(trace->coalescer, obs);
}

int trace__event(struct trace *trace, const struct trace_event *ev)
{
	static const char *const names[] = {
		[TRACE_EVENT_FORK] = "fork",
		[TRACE_EVENT_EXEC] = "exec",
		[TRACE_EVENT_EXIT] = "exit",
	};

	if (ev->kind > TRACE_EVENT_EXIT)
		return -EINVAL;
	if (trace->folded)
		return 0;
	if (names__seen(trace->names, ev->pid, ev->tid, ev->t_ns))
		return -ENOMEM;
	if (!begin_event(trace, "i", ev->pid, ev->tid))
		return 0;
	out_file__printf(trace->out, ",\"ts\":%" PRIu64, to_us(trace, ev->t_ns));
	out_file__printf(trace->out, ",\"s\":\"t\",\"cat\":\"process\",\"name\":\"%s\",\"args\":{",
			 names[ev->kind]);
	switch (ev->kind) {
	case TRACE_EVENT_FORK:
		out_file__printf(trace->out, "\"child_pid\":%" PRId64, ev->value);
		break;
	case TRACE_EVENT_EXEC:
		out_file__puts(trace->out, "\"program\":");
		json_put_string(trace->out, ev->text);
		break;
	case TRACE_EVENT_EXIT:
		if (ev->value >= 0)
			out_file__printf(trace->out, "\"status\":%" PRId64, ev->value);
		else
			out_file__puts(trace->out, "\"status\":null");
		break;
	}
	out_file__puts(trace->out, "}");
	if (end_event(trace))
		trace->stats.events++;
	return 0;
}

int trace__name_process(struct trace *trace, uint32_t pid, const char *name)
{
	return names__set(trace->names, pid, 0, name);
}

int trace__name_thread(struct trace *trace, uint32_t pid, uint32_t tid, const char *name)
{
	if (!tid)
		return -EINVAL;
	return names__set(trace->names, pid, tid, name);
}

int trace__end_thread(struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t_ns)
{
	if (!trace->coalescer)
		return 0;
	return coalescer__end_thread(trace->coalescer, pid, tid, t_ns);
}

int trace__note(struct trace *trace, const char *key, uint64_t value)
{
	struct trace_note *grown;
	size_t i;

	for (i = 0; i < trace->nnotes; i++) {
		if (!strcmp(trace->notes[i].key, key)) {
			trace->notes[i].value = value;
			return 0;
		}
	}
	grown = realloc(trace->notes, (trace->nnotes + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	trace->notes = grown;
	grown[trace->nnotes].key = strdup(key);
	if (!grown[trace->nnotes].key)
		return -ENOMEM;
	grown[trace->nnotes++].value = value;
	return 0;
}

void trace__stats(const struct trace *trace, struct trace_stats *stats)
{
	*stats = trace->stats;
	stats->lost_to_write_errors = trace->lost_to_write_errors;
	if (trace->coalescer)
		coalescer__stats(trace->coalescer, stats);
	stats->bytes = out_file__bytes(trace->out);
}

/* process_name/thread_name and sort indices, in order of first appearance. */
static int write_metadata(struct trace *trace)
{
	struct name_entry **sorted;
	size_t count, i, rank[2] = { 0, 0 };

	sorted = names__sorted(trace->names, &count);
	if (!sorted)
		return -ENOMEM;
	for (i = 0; i < count; i++) {
		const struct name_entry *e = sorted[i];
		const char *what = e->tid ? "thread" : "process";
		char fallback[32];

		if (!e->name)
			snprintf(fallback, sizeof(fallback), "%s %" PRIu32, what,
				 e->tid ? e->tid : e->pid);
		if (begin_event(trace, "M", e->pid, e->tid ? e->tid : e->pid)) {
			out_file__printf(
				trace->out,
				",\"ts\":0,\"name\":\"%s_name\",\"args\":{\"name\":", what);
			json_put_string(trace->out, e->name ? e->name : fallback);
			out_file__puts(trace->out, "}");
			end_event(trace);
		}
		if (begin_event(trace, "M", e->pid, e->tid ? e->tid : e->pid)) {
			out_file__printf(
				trace->out,
				",\"ts\":0,\"name\":\"%s_sort_index\",\"args\":{\"sort_index\":%zu}",
				what, rank[e->tid != 0]);
			end_event(trace);
		}
		rank[e->tid != 0]++;
	}
	free(sorted);
	return 0;
}

static void write_footer(struct trace *trace, const struct trace_stats *stats)
{
	size_t i;

	out_file__printf(
		trace->out,
		"\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"pytrace-sample "
		"%s\",\"clock\":\"CLOCK_MONOTONIC\",\"origin_ns\":%" PRIu64
		",\"period_ns\":%" PRIu64 ",\"observations\":%" PRIu64 ",\"slices\":%" PRIu64
		",\"slices_too_deep\":%" PRIu64 ",\"slices_empty\":%" PRIu64
		",\"reordered\":%" PRIu64 ",\"hidden\":%" PRIu64
		",\"events_lost_to_write_errors\":%" PRIu64,
		PYTRACE_VERSION, trace->opts.origin_ns, trace->opts.period_ns, stats->observations,
		stats->slices, stats->slices_too_deep, stats->slices_empty, stats->reordered,
		stats->hidden, stats->lost_to_write_errors);
	for (i = 0; i < trace->nnotes; i++) {
		out_file__puts(trace->out, ",");
		json_put_string(trace->out, trace->notes[i].key);
		out_file__printf(trace->out, ":%" PRIu64, trace->notes[i].value);
	}
	out_file__puts(trace->out, "}}\n");
}

/* After a write error, cuts the file back to its last complete record and goes on. */
static int recover_output(struct trace *trace)
{
	int err = out_file__error(trace->out);

	if (!err)
		return 0;
	pr_warn("writing the trace failed (%s); ending it at the last complete event",
		strerror(-err));
	out_file__recover(trace->out);
	return err;
}

int trace__close(struct trace *trace, struct trace_stats *stats)
{
	struct trace_stats local;
	int err = 0, r;

	if (trace->coalescer)
		err = coalescer__end_all(trace->coalescer);
	r = recover_output(trace);
	err = err ? err : r;
	if (trace->folded) {
		folded__write(trace->folded, trace->out, trace->opts.frames, trace->names);
	} else {
		r = write_metadata(trace);
		err = err ? err : r;
	}
	r = recover_output(trace);
	err = err ? err : r;
	trace__stats(trace, &local);
	if (!trace->folded)
		write_footer(trace, &local);
	r = out_file__commit(trace->out);
	trace->out = NULL;
	err = r ? r : err;
	if (stats)
		*stats = local;
	trace__destroy(trace);
	return err;
}

void trace__abort(struct trace *trace)
{
	if (!trace)
		return;
	out_file__abort(trace->out);
	trace__destroy(trace);
}
