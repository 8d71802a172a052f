/* The trace stage's front: routes observations to the coalescer and slices to a writer. */
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/args.h"
#include "../common/log.h"
#include "internal.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/*
 * Microseconds after the origin, the origin itself at 1 us. Whole microseconds on
 * purpose: viewers add ts + dur in doubles, and decimal fractions there round a child's
 * end past its parent's (20530.578 > 20530.577999999998), which DevTools drops as a
 * partial overlap. Flooring start and end alike keeps every nesting exact.
 */
uint64_t trace_to_us(const struct trace *trace, uint64_t t_ns)
{
	t_ns = t_ns > trace->opts.origin_ns ? t_ns - trace->opts.origin_ns : 0;
	return t_ns / 1000 + 1;
}

bool trace_over_budget(struct trace *trace, uint64_t t_ns)
{
	if (!trace->opts.max_bytes || out_file__size(trace->out) < trace->opts.max_bytes)
		return false;
	if (!trace->stats.over_budget_from_ns || t_ns < trace->stats.over_budget_from_ns)
		trace->stats.over_budget_from_ns = t_ns;
	trace->stats.over_budget++;
	return true;
}

enum trace_format trace_format__from_path(const char *path)
{
	if (ends_with(path, ".pb.gz") || ends_with(path, ".pprof"))
		return TRACE_FORMAT_PPROF;
	if (ends_with(path, ".gz"))
		return TRACE_FORMAT_JSON_GZ;
	if (ends_with(path, ".svg"))
		return TRACE_FORMAT_SVG;
	if (ends_with(path, ".folded") || ends_with(path, ".collapsed"))
		return TRACE_FORMAT_FOLDED;
	if (ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace"))
		return TRACE_FORMAT_PERFETTO;
	return TRACE_FORMAT_JSON;
}

bool trace_format__aggregated(enum trace_format format)
{
	return format == TRACE_FORMAT_FOLDED || format == TRACE_FORMAT_SVG ||
	       format == TRACE_FORMAT_PPROF;
}

/* The summary hears of a slice on the microsecond grid, as the writers write it. */
static int summarize(struct trace *trace, const struct slice *s)
{
	const struct frame_info *f = frame_table__get(trace->opts.frames, s->func);
	uint64_t start_us = trace_to_us(trace, s->start_ns), end_us = trace_to_us(trace, s->end_ns);
	struct trace_summary_slice sl = {
		.pid = s->pid,
		.tid = s->tid,
		.depth = s->depth,
		.name = f ? f->name : "[bad frame id]",
		.off_cpu = f && f->kind == FRAME_OFF_CPU,
		.no_gil = f && f->kind == FRAME_NO_GIL,
		.start_ns = trace->opts.origin_ns + (start_us - 1) * 1000,
		.end_ns = trace->opts.origin_ns + (end_us - 1) * 1000,
	};

	if (s->end_ns <= s->start_ns || end_us <= start_us)
		return 0;
	if (f) {
		sl.file = f->file;
		sl.line = f->line;
	}
	if (f && f->kind == FRAME_MESSAGE) {
		uint32_t n = 0, i;
		const struct arg_item *items =
			s->args ? args_table__get(frame_table__args(trace->opts.frames), s->args,
						  &n)
				: NULL;

		sl.message = true;
		for (i = 0; items && i < n; i++) {
			if (!strcmp(items[i].name, "pool_job"))
				sl.job = items[i].i;
			else if (!strcmp(items[i].name, "pool_task") ||
				 !strcmp(items[i].name, "work_id"))
				sl.task = items[i].i;
		}
	}
	return trace_summary__close(trace->opts.summary, &sl);
}

static int on_slice(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	/*
	 * The aggregated formats write no slices: theirs feed the summary alone. Past
	 * --max-size a JSON slice is counted, not written; Perfetto's writer decides itself
	 * (a slice whose begin went out must end).
	 */
	bool written = !trace->folded && (trace->pftrace || !trace_over_budget(trace, s->start_ns));
	int err = !written	   ? 0
		  : trace->pftrace ? pftrace__slice(trace, s)
				   : json_writer__slice(trace, s);

	/* Only while a message's marker is still to come: not a look at every slice. */
	if (written && trace->flows && flows__unbound(trace->flows)) {
		const struct frame_info *f = frame_table__get(trace->opts.frames, s->func);
		uint64_t start_us = trace_to_us(trace, s->start_ns);

		if (f && f->kind == FRAME_MESSAGE && trace_to_us(trace, s->end_ns) > start_us)
			flows__bind(trace->flows, s->pid, s->tid, s->start_ns, start_us);
	}

	if (!err && trace->opts.summary)
		err = summarize(trace, s);
	return err;
}

static int on_open(void *ctx, const struct slice *s)
{
	struct trace *trace = ctx;
	int err = trace->pftrace ? pftrace__open_slice(trace, s) : 0;

	if (!err && trace->opts.summary) {
		const struct frame_info *f = frame_table__get(trace->opts.frames, s->func);

		err = trace_summary__open(trace->opts.summary, s->pid, s->tid, s->depth,
					  f ? f->name : "[bad frame id]", f ? f->file : NULL);
	}
	return err;
}

static void trace__destroy(struct trace *trace)
{
	size_t i;

	coalescer__free(trace->coalescer);
	flows__free(trace->flows);
	folded__free(trace->folded);
	pftrace__free(trace->pftrace);
	hold__free(trace->hold);
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
	if (trace_format__aggregated(trace->format)) {
		trace->folded = folded__new(opts->period_ns);
		if (!trace->folded)
			goto out_destroy;
		/* pprof labels a sample with its pool task and has a place for lines. */
		if (trace->format == TRACE_FORMAT_PPROF)
			folded__split_detail(trace->folded);
	}
	/* A timeline's slices, or the summary's alone beside an aggregated format. */
	if (!trace->folded || opts->summary) {
		struct slice_sink sink = { .slice = on_slice, .ctx = trace };

		if (trace->format == TRACE_FORMAT_PERFETTO) {
			trace->pftrace = pftrace__new();
			if (!trace->pftrace)
				goto out_destroy;
		}
		if (trace->pftrace || opts->summary)
			sink.open = on_open;
		if (!trace->folded) {
			trace->flows = flows__new();
			if (!trace->flows)
				goto out_destroy;
		}
		trace->coalescer = coalescer__new(&copts, sink);
		if (!trace->coalescer)
			goto out_destroy;
	}
	trace->out = out_file__open(opts->path, trace->format == TRACE_FORMAT_JSON_GZ ||
							trace->format == TRACE_FORMAT_PPROF);
	if (!trace->out) {
		err = -errno;
		goto out_destroy;
	}
	if (trace->pftrace)
		pftrace__header(trace);
	else if (!trace->folded)
		json_writer__header(trace);
	return trace;

out_destroy:
	trace__destroy(trace);
	errno = -err;
	return NULL;
}

int trace__hold(struct trace *trace, uint32_t pid)
{
	return hold__start(trace, pid);
}

bool trace__holds(const struct trace *trace, uint32_t pid)
{
	return hold__holds(trace, pid);
}

int trace__show(struct trace *trace, uint32_t pid)
{
	return hold__release(trace, pid);
}

void trace__fold(struct trace *trace, uint32_t pid, bool keep_holding)
{
	hold__forget(trace, pid, keep_holding);
}

int trace__show_all(struct trace *trace)
{
	return hold__release_all(trace);
}

int trace__observe(struct trace *trace, const struct trace_obs *obs)
{
	int held;

	if (obs->nframes && !obs->frames)
		return -EINVAL;
	if (trace->hold && (held = hold__observe(trace, obs)) <= 0)
		return held;
	if (trace->folded) {
		int err;

		/*
		 * One line per distinct stack sampled or waited in; messages are not stacks,
		 * but start and end the pool tasks pprof's samples are labelled with.
		 */
		if (obs->kind != TRACE_MESSAGE) {
			if (!trace->coalescer)
				trace->stats.observations++;
			if (names__seen(trace->names, obs->pid, obs->tid, obs->t_start_ns))
				return -ENOMEM;
			err = folded__add(trace->folded, obs);
		} else {
			err = folded__message(trace->folded, obs);
		}
		if (err)
			return err;
		return trace->coalescer ? coalescer__observe(trace->coalescer, obs) : 0;
	}
	if (trace->pftrace &&
	    !(trace->opts.max_bytes && out_file__size(trace->out) >= trace->opts.max_bytes)) {
		int err = pftrace__observe(trace, obs);

		if (err)
			return err;
	}
	if (trace->flows && obs->kind == TRACE_MESSAGE &&
	    flows__mark(trace->flows, obs->pid, obs->tid, obs->t_start_ns, &obs->message))
		return -ENOMEM;
	return coalescer__observe(trace->coalescer, obs);
}

/* Writes one task's chain of messages as a flow: "s", then "t"s, then "f". */
static int write_flow(void *ctx, const struct flow_point *const *points, uint32_t n)
{
	struct trace *trace = ctx;
	uint64_t id;
	uint32_t i;

	if (n && trace_over_budget(trace, points[0]->t_ns))
		return 0;
	id = ++trace->stats.flows;

	for (i = 0; i < n; i++) {
		if (trace->pftrace) {
			int err = pftrace__flow(trace, id, points[i], i + 1 == n);

			if (err)
				return err;
		} else {
			json_writer__flow(trace,
					  i == 0       ? "s"
					  : i + 1 == n ? "f"
						       : "t",
					  id, points[i]);
		}
	}
	return 0;
}

int trace__chown(struct trace *trace, uid_t uid, gid_t gid)
{
	return out_file__chown(trace->out, uid, gid);
}

int trace__event(struct trace *trace, const struct trace_event *ev)
{
	int held;

	if (ev->kind > TRACE_EVENT_NOTE)
		return -EINVAL;
	if (trace->hold && (held = hold__event(trace, ev)) <= 0)
		return held;
	if (trace->folded || trace_over_budget(trace, ev->t_ns))
		return 0;
	if (names__seen(trace->names, ev->pid, ev->tid, ev->t_ns))
		return -ENOMEM;
	if (trace->pftrace)
		return pftrace__event(trace, ev);
	return json_writer__event(trace, ev);
}

int trace__process_cmdline(struct trace *trace, uint32_t pid, const char *cmdline)
{
	return names__set_cmdline(trace->names, pid, cmdline);
}

int trace__name_process(struct trace *trace, uint32_t pid, const char *name)
{
	if (trace->opts.summary && trace_summary__name(trace->opts.summary, pid, 0, name))
		return -ENOMEM;
	return names__set(trace->names, pid, 0, name);
}

const char *trace__name(const struct trace *trace, uint32_t pid, uint32_t tid)
{
	return names__get(trace->names, pid, tid);
}

int trace__name_thread(struct trace *trace, uint32_t pid, uint32_t tid, const char *name)
{
	if (!tid)
		return -EINVAL;
	if (trace->opts.summary && trace_summary__name(trace->opts.summary, pid, tid, name))
		return -ENOMEM;
	return names__set(trace->names, pid, tid, name);
}

int trace__end_thread(struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t_ns)
{
	int err;

	if (trace->hold && (err = hold__end_thread(trace, pid, tid, t_ns)) <= 0)
		return err;
	if (trace->folded)
		folded__end_thread(trace->folded, pid, tid);
	if (!trace->coalescer)
		return 0;
	err = coalescer__end_thread(trace->coalescer, pid, tid, t_ns);
	if (trace->pftrace) {
		int r = pftrace__end_thread(trace, pid, tid);

		err = err ? err : r;
	}
	return err;
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

int trace__end_slices(struct trace *trace)
{
	trace->slices_ended = true;
	return trace->coalescer ? coalescer__end_all(trace->coalescer) : 0;
}

int trace__finding(struct trace *trace, const struct trace_finding *f)
{
	if (trace->folded || f->end_ns <= f->start_ns || trace_over_budget(trace, f->start_ns))
		return 0;
	trace->findings++;
	if (trace->pftrace)
		return pftrace__finding(trace, f);
	json_writer__finding(trace, f);
	return 0;
}

int trace__close(struct trace *trace, struct trace_stats *stats)
{
	struct trace_stats local;
	int err = 0, r;

	if (!trace->slices_ended)
		err = trace__end_slices(trace);
	if (trace->flows) {
		r = flows__join(trace->flows, write_flow, trace);
		err = err ? err : (r < 0 ? r : 0);
		if (flows__dropped(trace->flows))
			trace__note(trace, "flow_messages_not_kept", flows__dropped(trace->flows));
	}
	if (trace->stats.over_budget) {
		trace__note(trace, "max_size_bytes", trace->opts.max_bytes);
		trace__note(trace, "not_written_past_max_size", trace->stats.over_budget);
		trace__note(trace, "max_size_reached_ns", trace->stats.over_budget_from_ns);
	}
	r = recover_output(trace);
	err = err ? err : r;
	if (trace->folded) {
		trace->stats.stacks = folded__count(trace->folded);
		r = trace->format == TRACE_FORMAT_SVG ? svg__write(trace)
		    : trace->format == TRACE_FORMAT_PPROF
			    ? pprof__write(trace)
			    : (folded__write(trace->folded, trace->out, trace->opts.frames,
					     trace->names),
			       0);
		err = err ? err : r;
	} else {
		r = trace->pftrace ? pftrace__flush(trace) : json_writer__metadata(trace);
		err = err ? err : r;
	}
	r = recover_output(trace);
	err = err ? err : r;
	trace__stats(trace, &local);
	if (trace->pftrace)
		pftrace__footer(trace, &local);
	else if (!trace->folded)
		json_writer__footer(trace, &local);
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
