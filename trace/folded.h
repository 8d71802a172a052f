/* Internal to trace/: collapsed stacks ("a;b;c 12"), aggregated per thread and stack. */
#ifndef PYTRACE_TRACE_FOLDED_H
#define PYTRACE_TRACE_FOLDED_H

#include "names.h"
#include "out.h"
#include "trace.h"

struct folded;

/*
 * One distinct (process, thread, stack) and how often it was seen; split further by the
 * line each frame ran and the thread's pool task only after folded__split_detail().
 */
struct folded_stack {
	struct folded_stack *next_same_hash;
	uint32_t pid, tid;
	uint64_t weight; /* periods: 1 per on-CPU sample, a wait's length in periods */
	/*
	 * The pool task the thread was running: a Pool's job and task, or with @executor a
	 * ProcessPoolExecutor's work id in @task; -1 and -1 when none or not split.
	 */
	int64_t job, task;
	bool executor;
	const uint32_t *lines; /* the line each frame ran (0: unknown), root first; or NULL */
	uint32_t nframes;
	uint32_t funcs[]; /* frame ids, root first */
};

struct folded *folded__new(uint64_t period_ns);
void folded__free(struct folded *folded);

/*
 * Keys stacks also by what pprof shows beside them: the line each frame was running
 * (folded_stack.lines) and the pool task its thread was in (folded__message()). Only for
 * pprof: the folded and SVG outputs would get one line per task. Call before any add.
 */
void folded__split_detail(struct folded *folded);

/*
 * A pool message @obs a thread wrote or read: a worker reading a task is running it from
 * then on, its sending the result ends it. Ignored unless split. 0 or -ENOMEM. At most
 * FOLDED_MAX_TASK_THREADS threads are in a task at once; others' tasks go untracked.
 */
#define FOLDED_MAX_TASK_THREADS 65536
int folded__message(struct folded *folded, const struct trace_obs *obs);
/* The thread ended: its task with it (a new thread may take its tid). */
void folded__end_thread(struct folded *folded, uint32_t pid, uint32_t tid);
/* Tasks a thread started that were not tracked, the map of threads being full. */
uint64_t folded__tasks_untracked(const struct folded *folded);

/* The earliest and the latest time its stacks cover; false when it holds none. */
bool folded__span(const struct folded *folded, uint64_t *first_ns, uint64_t *last_ns);

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
