/* Internal to trace/: collapsed stacks ("a;b;c 12"), aggregated per thread and stack. */
#ifndef PYTRACE_TRACE_FOLDED_H
#define PYTRACE_TRACE_FOLDED_H

#include "names.h"
#include "out.h"
#include "trace.h"

struct folded;

struct folded *folded__new(uint64_t period_ns);
void folded__free(struct folded *folded);

/* Counts @obs: 1 for an on-CPU sample, its length in periods (at least 1) for a wait. */
int folded__add(struct folded *folded, const struct trace_obs *obs);

/*
 * Writes one line per distinct (process, thread, stack): "proc (pid);thread (tid);f;g N".
 * ';' and line breaks inside names are replaced so the format stays parseable.
 */
void folded__write(const struct folded *folded, struct out_file *out,
		   const struct frame_table *frames, const struct names *names);

#endif
