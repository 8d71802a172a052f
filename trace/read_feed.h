/*
 * Internal to trace/: what the readers of written traces (json_read.c, pftrace_read.c)
 * hand the summary: complete slices, in any order, nested again here.
 */
#ifndef PYTRACE_TRACE_READ_FEED_H
#define PYTRACE_TRACE_READ_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

struct read_slice {
	uint32_t pid, tid;
	uint64_t ts, dur; /* in the file's unit (see read_feed()) */
	const char *name; /* the reader's, borrowed */
	const char *file; /* the reader's, borrowed, or NULL */
	uint32_t line;
	int64_t job, task;
	bool off_cpu, no_gil, message;
	size_t order; /* in the file: ties keep it */
};

/*
 * Sorts @slices by thread, start (longer first) and file order, and feeds them to @s
 * opened and closed as the trace nests them: a slice closes before the next one of its
 * thread that starts at or after its end. Times become ns as @origin_ns + ts * @unit_ns.
 * 0 or -ENOMEM (or what the summary returns).
 */
int read_feed(struct trace_summary *s, struct read_slice *slices, size_t n, uint64_t origin_ns,
	      uint64_t unit_ns);

#endif
