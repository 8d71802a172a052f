/*
 * The coalescer keeps, per thread, the stack of open slices. A frame continues the open
 * slice at its depth when it and every frame above it have the same function, call site
 * and arguments; the first difference closes the open slices from there down, at the new
 * observation's start, and opens new ones. Memory is O(depth) per live thread.
 */
#include "coalesce.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"

/* Frames past this are ignored: a bound on memory for garbage stacks, far past any cap. */
#define COALESCE_HARD_DEPTH 65536

struct open_slice {
	uint32_t func, line;
	uint64_t callsite;
	uint32_t args;
	uint64_t start_ns;
	uint32_t samples, waits;
};

struct held_obs {
	struct trace_frame *frames;
	uint32_t nframes, capacity;
	enum trace_obs_kind kind;
	uint64_t start, end;
	bool valid;
};

struct thread_stack {
	uint32_t pid, tid;
	struct open_slice *open;
	uint32_t depth, capacity;
	struct held_obs held;
	bool seen;
	enum trace_obs_kind last_kind;
	uint64_t last_start, last_end;
};

struct coalescer {
	struct coalesce_opts opts;
	struct slice_sink sink;
	struct hashmap *threads; /* (pid << 32 | tid) -> struct thread_stack */
	struct trace_stats stats;
};

static uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

struct coalescer *coalescer__new(const struct coalesce_opts *opts, struct slice_sink sink)
{
	struct coalescer *c;

	if (!opts->period_ns || !sink.slice) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->opts = *opts;
	if (!c->opts.gap_ns)
		c->opts.gap_ns = 2 * c->opts.period_ns;
	if (!c->opts.max_depth)
		c->opts.max_depth = TRACE_DEFAULT_MAX_DEPTH;
	c->sink = sink;
	c->threads = hashmap__new();
	if (!c->threads) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

static void thread_stack__free(struct thread_stack *ts)
{
	if (!ts)
		return;
	free(ts->open);
	free(ts->held.frames);
	free(ts);
}

static void free_thread_value(void *ts)
{
	thread_stack__free(ts);
}

void coalescer__free(struct coalescer *c)
{
	if (!c)
		return;
	hashmap__free_all(c->threads, free_thread_value);
	free(c);
}

/* Closes the open slices at depth >= @depth, at @t_ns, shallowest first. */
static int close_from(struct coalescer *c, struct thread_stack *ts, uint32_t depth, uint64_t t_ns)
{
	int err = 0;
	uint32_t i;

	for (i = depth; i < ts->depth; i++) {
		const struct open_slice *o = &ts->open[i];
		struct slice s = {
			.pid = ts->pid,
			.tid = ts->tid,
			.depth = i,
			.func = o->func,
			.line = o->line,
			.callsite = o->callsite,
			.args = o->args,
			.start_ns = o->start_ns,
			.end_ns = t_ns,
			.samples = o->samples,
			.waits = o->waits,
		};

		if (i >= c->opts.max_depth) {
			c->stats.slices_too_deep++;
		} else if (t_ns <= o->start_ns) {
			c->stats.slices_empty++;
			if (c->sink.open) { /* its opening was heard: so is its end */
				int r = c->sink.slice(c->sink.ctx, &s);

				err = err ? err : r;
			}
		} else {
			int r = c->sink.slice(c->sink.ctx, &s);

			if (r && !err)
				err = r;
		}
	}
	if (depth < ts->depth)
		ts->depth = depth;
	return err;
}

static int reserve(struct thread_stack *ts, uint32_t depth)
{
	struct open_slice *grown;
	uint32_t capacity;

	if (depth <= ts->capacity)
		return 0;
	capacity = ts->capacity ? ts->capacity : 16;
	while (capacity < depth)
		capacity *= 2;
	grown = realloc(ts->open, capacity * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	ts->open = grown;
	ts->capacity = capacity;
	return 0;
}

static struct thread_stack *find_thread(struct coalescer *c, uint32_t pid, uint32_t tid)
{
	uint64_t key = thread_key(pid, tid);
	struct thread_stack *ts = hashmap__get(c->threads, key);

	if (ts)
		return ts;
	ts = calloc(1, sizeof(*ts));
	if (!ts)
		return NULL;
	ts->pid = pid;
	ts->tid = tid;
	if (hashmap__set(c->threads, key, ts)) {
		free(ts);
		return NULL;
	}
	return ts;
}

/* Whether frame @d is the function, from the call site, of the open slice at that depth. */
static bool same_site(const struct thread_stack *ts, const struct trace_frame *frames,
		      uint32_t nframes, uint32_t d)
{
	return d < ts->depth && d < nframes && ts->open[d].func == frames[d].func &&
	       ts->open[d].callsite == frames[d].callsite;
}

static bool args_may_match(uint32_t a, uint32_t b)
{
	return a == b || a == TRACE_ARGS_UNKNOWN || b == TRACE_ARGS_UNKNOWN;
}

/*
 * Whether the frame below @d is another call from the same call site than the one open
 * below it: another function, or the same with other arguments.
 */
static bool new_call_below(const struct thread_stack *ts, const struct trace_frame *frames,
			   uint32_t nframes, uint32_t d)
{
	if (d + 1 >= ts->depth || d + 1 >= nframes ||
	    ts->open[d + 1].callsite != frames[d + 1].callsite)
		return false;
	return ts->open[d + 1].func != frames[d + 1].func ||
	       !args_may_match(ts->open[d + 1].args, frames[d + 1].args);
}

/*
 * Number of leading frames that continue the open slices. A pool worker's loop whose
 * task is not known on one side (read before the loop was) continues unless the call
 * below it, from the same place, is another one: the loop calls each task's function
 * from there once, so another call there is another task (two tasks back to back with
 * no reading between them). Its other calls (sending the result) are the same task's.
 */
static uint32_t common_depth(const struct thread_stack *ts, const struct trace_frame *frames,
			     uint32_t nframes)
{
	uint32_t d = 0;

	while (same_site(ts, frames, nframes, d)) {
		if (ts->open[d].args != frames[d].args &&
		    (!args_may_match(ts->open[d].args, frames[d].args) ||
		     new_call_below(ts, frames, nframes, d)))
			break;
		d++;
	}
	return d;
}

/*
 * Before a new observation at @start: a silence longer than the gap closes everything
 * where the last observation ended; after an off-CPU span that ended before @start, its
 * reason marker (the leaf) ends exactly there, whatever comes next.
 */
static int close_stale(struct coalescer *c, struct thread_stack *ts, uint64_t start)
{
	if (!ts->seen)
		return 0;
	if (start > ts->last_end && start - ts->last_end > c->opts.gap_ns)
		return close_from(c, ts, 0, ts->last_end);
	if (ts->last_kind != TRACE_ON_CPU && start > ts->last_end && ts->depth)
		return close_from(c, ts, ts->depth - 1, ts->last_end);
	return 0;
}

/* Applies a held observation that is now known to cover time from @obs->start. */
static int apply(struct coalescer *c, struct thread_stack *ts, const struct held_obs *obs)
{
	int err, err2;
	uint32_t d, i;

	err = close_stale(c, ts, obs->start);
	if (reserve(ts, obs->nframes))
		return -ENOMEM;
	d = common_depth(ts, obs->frames, obs->nframes);
	for (i = 0; i < d; i++) {
		if (ts->open[i].args == TRACE_ARGS_UNKNOWN)
			ts->open[i].args = obs->frames[i].args;
	}
	err2 = close_from(c, ts, d, obs->start);
	for (i = d; i < obs->nframes; i++) {
		ts->open[i] = (struct open_slice){
			.func = obs->frames[i].func,
			.line = obs->frames[i].line,
			.callsite = obs->frames[i].callsite,
			.args = obs->frames[i].args,
			.start_ns = obs->start,
		};
	}
	ts->depth = obs->nframes;
	for (i = d; i < obs->nframes && c->sink.open && i < c->opts.max_depth; i++) {
		struct slice s = {
			.pid = ts->pid,
			.tid = ts->tid,
			.depth = i,
			.func = obs->frames[i].func,
			.line = obs->frames[i].line,
			.callsite = obs->frames[i].callsite,
			.args = obs->frames[i].args,
			.start_ns = obs->start,
		};
		int r = c->sink.open(c->sink.ctx, &s);

		err2 = err2 ? err2 : r;
	}
	for (i = 0; i < obs->nframes; i++) {
		if (obs->kind == TRACE_OFF_CPU)
			ts->open[i].waits++;
		else if (obs->kind == TRACE_ON_CPU)
			ts->open[i].samples++;
	}
	ts->seen = true;
	ts->last_kind = obs->kind;
	ts->last_start = obs->start;
	ts->last_end = obs->end;
	return err ? err : err2;
}

/* Applies the held observation, if any. */
static int apply_held(struct coalescer *c, struct thread_stack *ts)
{
	if (!ts->held.valid)
		return 0;
	ts->held.valid = false;
	return apply(c, ts, &ts->held);
}

static int hold(struct coalescer *c, struct thread_stack *ts, const struct trace_obs *obs,
		uint64_t start, uint32_t nframes)
{
	struct held_obs *h = &ts->held;

	if (nframes > h->capacity) {
		uint32_t capacity = h->capacity ? h->capacity : 16;
		struct trace_frame *grown;

		while (capacity < nframes)
			capacity *= 2;
		grown = realloc(h->frames, capacity * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		h->frames = grown;
		h->capacity = capacity;
	}
	if (nframes)
		memcpy(h->frames, obs->frames, nframes * sizeof(*h->frames));
	h->nframes = nframes;
	h->kind = obs->kind;
	h->start = start;
	if (obs->kind != TRACE_ON_CPU) /* exact ends */
		h->end = obs->t_end_ns > start ? obs->t_end_ns : start;
	else
		h->end = start + c->opts.period_ns;
	h->valid = true;
	return 0;
}

int coalescer__observe(struct coalescer *c, const struct trace_obs *obs)
{
	uint32_t nframes = obs->nframes < COALESCE_HARD_DEPTH ? obs->nframes : COALESCE_HARD_DEPTH;
	struct thread_stack *ts;
	uint64_t start = obs->t_start_ns, latest;
	int err = 0;

	if (nframes && !obs->frames)
		return -EINVAL;
	ts = find_thread(c, obs->pid, obs->tid);
	if (!ts)
		return -ENOMEM;
	c->stats.observations++;
	latest = ts->held.valid ? ts->held.start : ts->last_start;
	if ((ts->held.valid || ts->seen) && start < latest) {
		start = latest;
		c->stats.reordered++;
	}
	if (ts->held.valid && start == ts->held.start) {
		ts->held.valid = false; /* replaced at the same instant: it covered no time */
		c->stats.hidden++;
	}
	err = apply_held(c, ts);
	if (hold(c, ts, obs, start, nframes))
		return -ENOMEM;
	return err;
}

/* Where a thread's open slices end when nothing more will come: its last observation's end. */
static uint64_t final_time(const struct thread_stack *ts, uint64_t t_ns)
{
	if (t_ns < ts->last_start)
		return ts->last_start;
	return t_ns < ts->last_end ? t_ns : ts->last_end;
}

int coalescer__end_thread(struct coalescer *c, uint32_t pid, uint32_t tid, uint64_t t_ns)
{
	struct thread_stack *ts = hashmap__remove(c->threads, thread_key(pid, tid));
	int err, r;

	if (!ts)
		return 0;
	err = apply_held(c, ts);
	r = close_from(c, ts, 0, final_time(ts, t_ns));
	err = err ? err : r;
	thread_stack__free(ts);
	return err;
}

int coalescer__end_all(struct coalescer *c)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;
	int err = 0;

	while (hashmap__next(c->threads, &cursor, &key, &value)) {
		struct thread_stack *ts = value;
		int r = apply_held(c, ts);

		if (!r)
			r = close_from(c, ts, 0, ts->last_end);
		if (r && !err)
			err = r;
	}
	return err;
}

void coalescer__stats(const struct coalescer *c, struct trace_stats *stats)
{
	stats->observations += c->stats.observations;
	stats->slices_too_deep += c->stats.slices_too_deep;
	stats->slices_empty += c->stats.slices_empty;
	stats->reordered += c->stats.reordered;
	stats->hidden += c->stats.hidden;
}
