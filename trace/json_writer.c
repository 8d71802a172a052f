/* The Trace Event JSON writer: one Complete event per slice, instants, names, otherData. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "json.h"

void json_writer__header(struct trace *trace)
{
	out_file__puts(trace->out, "{\"traceEvents\":[");
}

/*
 * Starts an event object; false when the output already failed (the event is lost).
 * --flat: every thread is a thread of one process, the first one written.
 */
static bool begin_event_of(struct trace *trace, const char *ph, uint32_t pid, uint32_t tid)
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
/* An event of a traced thread's: --flat puts it in the one process. */
static bool begin_event(struct trace *trace, const char *ph, uint32_t pid, uint32_t tid)
{
	if (trace->opts.flat) {
		if (!trace->flat_pid)
			trace->flat_pid = pid;
		pid = trace->flat_pid;
	}
	return begin_event_of(trace, ph, pid, tid);
}

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

/* Whether @name is one of the keys a slice's args carry already. */
static bool own_key(const char *name)
{
	static const char *const keys[] = { "file", "line", "first_line", "samples", "waits" };
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		if (!strcmp(name, keys[i]))
			return true;
	}
	return false;
}

/*
 * A call's arguments, each under the parameter's name (one that would take the place of
 * the slice's own file, line ... as "arg:NAME"). Floats that JSON can't hold are text.
 */
static void put_call_args(struct trace *trace, uint32_t id)
{
	uint32_t i, n;
	const struct arg_item *items =
		args_table__get(frame_table__args(trace->opts.frames), id, &n);
	char name[80];

	for (i = 0; i < n; i++) {
		const struct arg_item *a = &items[i];

		snprintf(name, sizeof(name), "%s%s", own_key(a->name) ? "arg:" : "", a->name);
		out_file__puts(trace->out, ",");
		json_put_string(trace->out, name);
		out_file__puts(trace->out, ":");
		switch (a->kind) {
		case ARG_INT:
			out_file__printf(trace->out, "%" PRId64, a->i);
			break;
		case ARG_BOOL:
			out_file__puts(trace->out, a->i ? "true" : "false");
			break;
		case ARG_FLOAT:
			if (isfinite(a->f))
				out_file__printf(trace->out, "%.17g", a->f);
			else
				json_put_string(trace->out, isnan(a->f) ? "nan"
							    : a->f > 0	? "inf"
									: "-inf");
			break;
		case ARG_NONE:
			out_file__puts(trace->out, "null");
			break;
		default:
			json_put_string(trace->out, a->text);
			break;
		}
	}
}

int json_writer__slice(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	const struct frame_info *f = frame_table__get(trace->opts.frames, s->func);
	uint64_t start_us = trace_to_us(trace, s->start_ns), end_us = trace_to_us(trace, s->end_ns);

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
	put_call_args(trace, s->args);
	out_file__puts(trace->out, "}");
	if (end_event(trace))
		trace->stats.slices++;
	return 0;
}

/*
 * Flow events bind (in DevTools, by equal ts, pid, tid and cat; in Perfetto, to the
 * enclosing slice) to the message's marker slice, written at that start.
 */
void json_writer__flow(struct trace *trace, const char *phase, uint64_t id,
		       const struct flow_point *p)
{
	if (!begin_event(trace, phase, p->pid, p->tid))
		return;
	out_file__printf(trace->out,
			 ",\"ts\":%" PRIu64 ",\"id\":%" PRIu64 ",\"name\":\"%s\",\"cat\":\"%s\"%s",
			 p->ts_us, id, p->m.executor ? "executor task" : "pool task",
			 frame_kind__name(FRAME_MESSAGE), phase[0] == 'f' ? ",\"bp\":\"e\"" : "");
	end_event(trace);
}

int json_writer__event(struct trace *trace, const struct trace_event *ev)
{
	static const char *const names[] = {
		[TRACE_EVENT_FORK] = "fork",
		[TRACE_EVENT_EXEC] = "exec",
		[TRACE_EVENT_EXIT] = "exit",
		[TRACE_EVENT_NOTE] = "not_read",
	};

	if (!begin_event(trace, "i", ev->pid, ev->tid))
		return 0;
	out_file__printf(trace->out, ",\"ts\":%" PRIu64, trace_to_us(trace, ev->t_ns));
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
	case TRACE_EVENT_NOTE:
		out_file__puts(trace->out, "\"why\":");
		json_put_string(trace->out, ev->text);
		break;
	}
	out_file__puts(trace->out, "}");
	if (end_event(trace))
		trace->stats.events++;
	return 0;
}

/* One metadata event: NAME (process_name ...) with {"ARG": @text or @number}. */
static void write_meta(struct trace *trace, uint32_t pid, uint32_t tid, const char *name,
		       const char *arg, const char *text, size_t number)
{
	if (!begin_event(trace, "M", pid, tid))
		return;
	out_file__printf(trace->out, ",\"ts\":0,\"name\":\"%s\",\"args\":{\"%s\":", name, arg);
	if (text)
		json_put_string(trace->out, text);
	else
		out_file__printf(trace->out, "%zu", number);
	out_file__puts(trace->out, "}");
	end_event(trace);
}

/*
 * --flat: one process whose threads are all the traced threads, process by process in
 * order of first appearance, each named "THREAD (pid PID, tid TID) PROCESS".
 */
static int write_flat_metadata(struct trace *trace, struct name_entry **sorted, size_t count)
{
	size_t i, j, rank = 0, processes = 0;
	char text[512];

	for (i = 0; i < count; i++) {
		const struct name_entry *p = sorted[i];

		if (p->tid)
			continue;
		processes++;
		for (j = 0; j < count; j++) {
			const struct name_entry *t = sorted[j];

			if (!t->tid || t->pid != p->pid)
				continue;
			snprintf(text, sizeof(text),
				 "%.120s (pid %" PRIu32 ", tid %" PRIu32 ") %.200s",
				 t->name ? t->name : "thread", t->pid, t->tid,
				 p->name ? p->name : "");
			write_meta(trace, t->pid, t->tid, "thread_name", "name", text, 0);
			write_meta(trace, t->pid, t->tid, "thread_sort_index", "sort_index", NULL,
				   rank++);
		}
	}
	snprintf(text, sizeof(text), "pytrace-sample: %zu processes, one row per thread (--flat)",
		 processes);
	write_meta(trace, trace->flat_pid, trace->flat_pid, "process_name", "name", text, 0);
	return 0;
}

/* process_name/thread_name and sort indices, in order of first appearance. */
int json_writer__metadata(struct trace *trace)
{
	struct name_entry **sorted;
	size_t count, i, rank[2] = { 0, 0 };

	sorted = names__sorted(trace->names, &count);
	if (!sorted)
		return -ENOMEM;
	if (trace->opts.flat && trace->flat_pid) {
		write_flat_metadata(trace, sorted, count);
		free(sorted);
		return 0;
	}
	for (i = 0; i < count; i++) {
		const struct name_entry *e = sorted[i];
		const char *what = e->tid ? "thread" : "process";
		char fallback[32], name[32], sort[32];

		snprintf(fallback, sizeof(fallback), "%s %" PRIu32, what, e->tid ? e->tid : e->pid);
		snprintf(name, sizeof(name), "%s_name", what);
		snprintf(sort, sizeof(sort), "%s_sort_index", what);
		if (!e->tid && e->cmdline && begin_event(trace, "M", e->pid, e->pid)) {
			/* The name, and the whole command line it was made from. */
			out_file__puts(trace->out,
				       ",\"ts\":0,\"name\":\"process_name\",\"args\":{\"name\":");
			json_put_string(trace->out, e->name ? e->name : fallback);
			out_file__puts(trace->out, ",\"cmdline\":");
			json_put_string(trace->out, e->cmdline);
			out_file__puts(trace->out, "}");
			end_event(trace);
		} else {
			write_meta(trace, e->pid, e->tid ? e->tid : e->pid, name, "name",
				   e->name ? e->name : fallback, 0);
		}
		write_meta(trace, e->pid, e->tid ? e->tid : e->pid, sort, "sort_index", NULL,
			   rank[e->tid != 0]++);
	}
	free(sorted);
	return 0;
}

void json_writer__footer(struct trace *trace, const struct trace_stats *stats)
{
	size_t i;

	out_file__printf(
		trace->out,
		"\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"tool\":\"pytrace-sample "
		"%s\",\"clock\":\"CLOCK_MONOTONIC\",\"origin_ns\":%" PRIu64
		",\"period_ns\":%" PRIu64 ",\"observations\":%" PRIu64 ",\"slices\":%" PRIu64
		",\"slices_too_deep\":%" PRIu64 ",\"slices_empty\":%" PRIu64
		",\"reordered\":%" PRIu64 ",\"hidden\":%" PRIu64 ",\"flows\":%" PRIu64
		",\"events_lost_to_write_errors\":%" PRIu64,
		PYTRACE_VERSION, trace->opts.origin_ns, trace->opts.period_ns, stats->observations,
		stats->slices, stats->slices_too_deep, stats->slices_empty, stats->reordered,
		stats->hidden, stats->flows, stats->lost_to_write_errors);
	for (i = 0; i < trace->nnotes; i++) {
		out_file__puts(trace->out, ",");
		json_put_string(trace->out, trace->notes[i].key);
		out_file__printf(trace->out, ":%" PRIu64, trace->notes[i].value);
	}
	out_file__puts(trace->out, "}}\n");
}

/*
 * A finding: a slice ("kind: title") over the time it concerns, on its own row of the
 * findings' process (never folded by --flat), with its share, evidence, where to look
 * and what to try in its args; the row and the process named, the process shown first.
 */
void json_writer__finding(struct trace *trace, const struct trace_finding *f)
{
	uint64_t start_us = trace_to_us(trace, f->start_ns), end_us = trace_to_us(trace, f->end_ns);
	char row[64], *name;

	if (trace->findings == 1) {
		if (begin_event_of(trace, "M", TRACE_FINDINGS_PID, 0)) {
			out_file__puts(trace->out, ",\"ts\":0,\"name\":\"process_name\",\"args\":"
						   "{\"name\":\"pytrace-sample findings\"}");
			end_event(trace);
		}
		if (begin_event_of(trace, "M", TRACE_FINDINGS_PID, 0)) {
			out_file__puts(trace->out, ",\"ts\":0,\"name\":\"process_sort_index\","
						   "\"args\":{\"sort_index\":-1}");
			end_event(trace);
		}
	}
	snprintf(row, sizeof(row), "%" PRIu32 ". %s %.0f%%", f->rank, f->kind, f->share * 100);
	if (begin_event_of(trace, "M", TRACE_FINDINGS_PID, f->rank)) {
		out_file__puts(trace->out,
			       ",\"ts\":0,\"name\":\"thread_name\",\"args\":{\"name\":");
		json_put_string(trace->out, row);
		out_file__puts(trace->out, "}");
		end_event(trace);
	}
	if (end_us <= start_us || !begin_event_of(trace, "X", TRACE_FINDINGS_PID, f->rank))
		return;
	out_file__printf(trace->out, ",\"ts\":%" PRIu64 ",\"dur\":%" PRIu64 ",\"name\":", start_us,
			 end_us - start_us);
	if (asprintf(&name, "%s: %s", f->kind, f->title) < 0)
		name = NULL;
	json_put_string(trace->out, name ? name : f->kind);
	free(name);
	out_file__puts(trace->out, ",\"cat\":\"finding\",\"args\":{\"kind\":");
	json_put_string(trace->out, f->kind);
	out_file__printf(trace->out, ",\"share\":%.4f,\"evidence\":", f->share);
	json_put_string(trace->out, f->evidence);
	out_file__puts(trace->out, ",\"where\":");
	json_put_string(trace->out, f->where);
	out_file__puts(trace->out, ",\"hint\":");
	json_put_string(trace->out, f->hint);
	out_file__puts(trace->out, "}");
	end_event(trace);
}
