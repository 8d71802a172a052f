/* Internal to analyze/: what the feed keeps (feed.c) for the rules (findings.c, pools.c). */
#ifndef PYTRACE_ANALYZE_INTERNAL_H
#define PYTRACE_ANALYZE_INTERNAL_H

#include "analyze.h"

/* What a wait was, for the rules: by its reason and where it waited. */
enum an_wait {
	AN_WAIT_GIL,
	AN_WAIT_PREEMPTED,
	AN_WAIT_LOCK,
	AN_WAIT_IO,
	AN_WAIT_SLEEP,
	AN_WAIT_IDLE,	/* waiting for work or for others: a worker between tasks, a
			   parent waiting for results, a pool's helper threads */
	AN_WAIT_SERIAL, /* a pipe write of a task or result */
	AN_WAIT_OTHER,
	AN_WAIT_COUNT,
};

#define AN_MAX_DEPTH 4096
#define AN_MAX_THREADS 65536
#define AN_MAX_TASKS 1000000
#define AN_MAX_NAMES 1000000
#define AN_STACK_TEXT 256

/* Flags of an open frame, by its name. */
#define AN_FRAME_IDLE 1	  /* waits under it are waits for work or others */
#define AN_FRAME_SERIAL 2 /* pickling or pipe transfer */
#define AN_FRAME_IMPORT 4 /* an import */

struct an_task {
	bool executor;
	bool threads; /* a ThreadPoolExecutor's: job is -1 - its worker's tid, task a count */
	int64_t job, task;
	uint32_t pool_pid, worker_pid, worker_tid;
	int32_t worker; /* its worker's index in its pool's view; -1: none (pools.c) */
	/* 0: not seen */
	uint64_t sent_ns, received_ns, result_sent_ns, result_received_ns;
	/* The job's function: the shallowest frame of the task that is not the pool's. */
	const char *fn;
	char fn_file[128];
	uint32_t fn_line, fn_depth;
	uint32_t loop_depth; /* of the worker's loop when it took the task */
};

/* The longest wait of a kind, with its stack. */
struct an_longest {
	uint64_t ns, start_ns;
	uint32_t pid, tid;
	char stack[AN_STACK_TEXT];
};

struct an_thread {
	uint32_t pid, tid;
	uint64_t first_ns, last_ns, covered_ns;
	uint64_t wait_ns[AN_WAIT_COUNT];
	/*
	 * Pickling and pipe transfer: the outermost such frames' time, and the waits under
	 * them but pipe writes. Kept apart, as a frame can close before a wait in it that
	 * ends at the same instant (slices closing at once come parents first).
	 */
	uint64_t serial_gross_ns, serial_waits_ns;
	uint64_t import_ns;    /* in imports before its first task */
	struct an_task *task;  /* taken and not yet answered */
	uint32_t thread_tasks; /* work items a ThreadPoolExecutor's worker thread began */
	bool took_task;
	uint64_t first_idle_ns;	      /* its first wait for work; 0: none */
	uint64_t startup_runnable_ns; /* waiting for a CPU before then: the machine's time */
	const char **names;	      /* open frames by depth */
	uint8_t *flags;
	uint32_t cap;
};

/* A pool: its view and its tasks, in the order they were taken. */
struct an_pool {
	struct pool_view view;
	struct an_task **tasks;
	size_t ntasks;
};

#define AN_MAX_POOLS 64

struct analysis {
	unsigned cpus;
	uint64_t tool_cpu_ns;
	struct hashmap *threads;    /* (pid << 32 | tid) -> struct an_thread */
	struct hashmap *tasks;	    /* task_key() -> struct an_task */
	struct hashmap *name_flags; /* a name's pointer -> its AN_FRAME_* flags + 1 */
	uint64_t first_ns, last_ns;
	uint64_t kind_first[AN_WAIT_COUNT], kind_last[AN_WAIT_COUNT];
	struct an_longest longest[AN_WAIT_COUNT];
	bool dropped;	 /* a table was full: the figures are of what fit */
	bool pool_loops; /* a pool worker's loop was seen (its task markers may not be) */
	bool finished;
	struct finding *findings;
	size_t nfindings;
	struct an_pool *pools;
	size_t npools;
};

/* The work threads' time: the denominator of every share (see analyze.h). */
uint64_t an_work_time(const struct analysis *a);
/* Whether @t is a work thread (see analyze.h). */
bool an_is_work_thread(const struct an_thread *t);
/* Thread @t's time on a CPU: the time its slices cover less its waits. */
uint64_t an_thread_cpu(const struct an_thread *t);

/* pools.c: the pools from the tasks seen; findings.c: the rules. 0 or -ENOMEM. */
int an_find_pools(struct analysis *a);
int an_find_causes(struct analysis *a);

/* Adds a finding when its share is worth saying; 0 or -ENOMEM. */
int an_add_finding(struct analysis *a, const struct finding *f);

/* qsort()'s order of uint64_t values. */
int an_by_u64(const void *x, const void *y);

/* "12.3 ms", "1.23 s" */
const char *an_fmt_ns(char *buf, size_t size, uint64_t ns);

#endif
