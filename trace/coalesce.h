/* Internal to trace/: per-thread stacks of open slices, closed into nested slices. */
#ifndef PYTRACE_TRACE_COALESCE_H
#define PYTRACE_TRACE_COALESCE_H

#include "trace.h"

struct slice {
	uint32_t pid, tid;
	uint32_t depth; /* 0 at the root */
	uint32_t func;
	uint32_t line; /* line executing when the slice opened */
	uint64_t callsite;
	uint32_t args;		   /* the call's arguments (frame table's args id), 0: none; when it
			  opens it may be TRACE_ARGS_UNKNOWN, and known when it closes */
	uint64_t start_ns, end_ns; /* end_ns > start_ns */
	uint32_t samples;	   /* on-CPU observations it covered */
	uint32_t waits;		   /* off-CPU observations it covered */
};

/*
 * Where closed slices go. Slices closed at one instant are delivered shallowest first,
 * so a parent precedes a child with the same start and duration. @open, when not NULL,
 * hears of each slice as it opens (end_ns, samples and waits 0), parents first, and then
 * @slice hears of its end even when empty (end_ns == start_ns); one too deep is neither.
 */
struct slice_sink {
	int (*slice)(void *ctx, const struct slice *slice);
	int (*open)(void *ctx, const struct slice *slice);
	void *ctx;
};

struct coalesce_opts {
	uint64_t period_ns;
	uint64_t gap_ns;    /* 0: 2 * period_ns */
	uint32_t max_depth; /* 0: TRACE_DEFAULT_MAX_DEPTH */
};

struct coalescer;

/* NULL with errno set. Free with coalescer__free(). */
struct coalescer *coalescer__new(const struct coalesce_opts *opts, struct slice_sink sink);

/* Frees without closing open slices. Accepts NULL. */
void coalescer__free(struct coalescer *c);

/* Feeds one observation; slices it closes reach the sink before it returns. */
int coalescer__observe(struct coalescer *c, const struct trace_obs *obs);

/* Closes the open slices of one thread at @t_ns (clipped to what was seen) and forgets it. */
int coalescer__end_thread(struct coalescer *c, uint32_t pid, uint32_t tid, uint64_t t_ns);

/* Closes every thread's open slices where its last observation ended. */
int coalescer__end_all(struct coalescer *c);

/* Adds the coalescer's counters to @stats. */
void coalescer__stats(const struct coalescer *c, struct trace_stats *stats);

#endif
