/* The readers' last step: their slices nested again per thread and fed to the summary. */
#include "read_feed.h"

#include <errno.h>
#include <stdlib.h>

/* By thread, then start; longer first at one start; then as written. */
static int by_thread_time(const void *a, const void *b)
{
	const struct read_slice *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->dur != y->dur)
		return x->dur > y->dur ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int close_slice(struct trace_summary *summary, const struct read_slice *s, uint32_t depth,
		       uint64_t origin_ns, uint64_t unit_ns)
{
	struct trace_summary_slice sl = {
		.pid = s->pid,
		.tid = s->tid,
		.depth = depth,
		.name = s->name,
		.off_cpu = s->off_cpu,
		.no_gil = s->no_gil,
		.message = s->message,
		.job = s->job,
		.task = s->task,
		.file = s->file,
		.line = s->line,
		.start_ns = origin_ns + s->ts * unit_ns,
		.end_ns = origin_ns + (s->ts + s->dur) * unit_ns,
	};

	return trace_summary__close(summary, &sl);
}

int read_feed(struct trace_summary *summary, struct read_slice *slices, size_t n,
	      uint64_t origin_ns, uint64_t unit_ns)
{
	const struct read_slice **stack = calloc(n + 1, sizeof(*stack));
	size_t i, depth = 0;
	int err = 0;

	if (!stack)
		return -ENOMEM;
	/* A trace without slices has no array, and qsort() must not be given NULL. */
	if (n)
		qsort(slices, n, sizeof(*slices), by_thread_time);
	for (i = 0; i <= n && !err; i++) {
		const struct read_slice *s = i < n ? &slices[i] : NULL;

		while (depth && !err &&
		       (!s || stack[depth - 1]->pid != s->pid || stack[depth - 1]->tid != s->tid ||
			stack[depth - 1]->ts + stack[depth - 1]->dur <= s->ts)) {
			depth--;
			err = close_slice(summary, stack[depth], (uint32_t)depth, origin_ns,
					  unit_ns);
		}
		if (!s || err)
			break;
		err = trace_summary__open(summary, s->pid, s->tid, (uint32_t)depth, s->name,
					  s->file);
		stack[depth++] = s;
	}
	free(stack);
	return err;
}
