/* Internal to trace/: collapsed stacks ("a;b;c 12"), aggregated per thread and stack. */
#ifndef PYTRACE_TRACE_FOLDED_H
#define PYTRACE_TRACE_FOLDED_H

#include "names.h"
#include "out.h"
#include "trace.h"

struct folded;

/* One distinct (process, thread, stack) and how often it was seen. */
struct folded_stack {
	struct folded_stack *next_same_hash;
	uint32_t pid, tid;
	uint64_t weight; /* periods: 1 per on-CPU sample, a wait's length in periods */
	uint32_t nframes;
	uint32_t funcs[]; /* frame ids, root first */
};

struct folded *folded__new(uint64_t period_ns);
void folded__free(struct folded *folded);

/* Counts @obs: 1 for an on-CPU sample, its length in periods (at least 1) for a wait. */
int folded__add(struct folded *folded, const struct trace_obs *obs);

/* The sampling period the weights count. */
uint64_t folded__period_ns(const struct folded *folded);
/* How many distinct stacks it holds. */
uint64_t folded__count(const struct folded *folded);
/*
 * Every stack in turn, in no set order: start with *@cursor = 0 and *@stack = NULL;
 * false at the end.
 */
bool folded__next(const struct folded *folded, size_t *cursor, const struct folded_stack **stack);

/*
 * Writes one line per distinct (process, thread, stack): "proc (pid);thread (tid);f;g N".
 * ';' and line breaks inside names are replaced so the format stays parseable.
 */
void folded__write(const struct folded *folded, struct out_file *out,
		   const struct frame_table *frames, const struct names *names);

#endif
