/*
 * The analysis stage: why a run was slow. Fed the same slices as the report (every slice
 * of the trace, with its wait reasons and pool task markers, while it is written or read
 * back from a file), it finds the pools and their tasks and names causes ("findings"),
 * each with the share of the run it explains, its evidence, where to look and what to
 * try. No part of it runs in the sampler.
 *
 * The share of a finding is the part of the work threads' time it takes (a work thread
 * is one that ran pool tasks, or ran or wanted to run a quarter of its life at least;
 * the pool's idle helper threads and a parent waiting for results are not): about the
 * time the program would save if the cause went away, when its workers are what takes
 * the time. A pool's findings take its workers' time over the run instead, and the GIL's
 * the time its process would save running its threads at once. The rules and their thresholds are in
 * analyze/findings.c and docs/findings.md.
 */
#ifndef PYTRACE_ANALYZE_ANALYZE_H
#define PYTRACE_ANALYZE_ANALYZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct trace_summary_slice;

enum finding_kind {
	FINDING_IMBALANCE,	  /* idle workers while the last tasks run */
	FINDING_SERIALIZATION,	  /* pickling and pipe transfer of tasks and results */
	FINDING_TASK_OVERHEAD,	  /* many tasks, each handed over at a cost like its work */
	FINDING_WORKER_STARTUP,	  /* workers' start (interpreter, imports) before a task */
	FINDING_GIL_CONTENTION,	  /* threads of one process waiting for the GIL */
	FINDING_OVERSUBSCRIPTION, /* more runnable threads than CPUs */
	FINDING_CPU_STARVED,	  /* runnable, with fewer of ours than CPUs: others took them */
	FINDING_LOCK_CONTENTION,  /* waits for a lock held by another thread or process */
	FINDING_IO_WAIT,	  /* waits for reads, writes, polls, the disk */
	FINDING_SLEEP,		  /* the work sleeps */
	FINDING_KIND_COUNT,
};

/* The fixed vocabulary: "imbalance", "serialization", "task-overhead", ... */
const char *finding_kind__name(enum finding_kind kind);

#define FINDING_TEXT 320

struct finding {
	enum finding_kind kind;
	double share;		   /* 0..1 */
	uint64_t start_ns, end_ns; /* the time it concerns */
	char title[FINDING_TEXT];
	char evidence[FINDING_TEXT];
	char where[FINDING_TEXT];
	char hint[FINDING_TEXT];
};

/* Findings with a smaller share are not reported: 5 % of the work threads' time. */
#define FINDING_MIN_SHARE 0.05

/* p50, p90 and max of a set of durations, in ns. */
struct pool_spread {
	uint64_t p50, p90, max;
};

struct pool_worker {
	uint32_t pid, tid; /* tid: a thread pool's worker thread; else the process's pid */
	uint32_t tasks;
	uint64_t busy_ns;    /* in tasks: from taking one to sending its result */
	uint64_t idle_ns;    /* from its first task to the pool's end, not in a task */
	uint64_t startup_ns; /* from its first slice to its first wait for a task, or its first
				task when it never waited for one */
	uint64_t life_ns;    /* from its first slice to its last */
};

#define POOL_MAX_WORKERS 256

struct pool_view {
	bool executor;		   /* a ProcessPoolExecutor's; else a multiprocessing Pool's */
	bool threads;		   /* a ThreadPoolExecutor's: its workers are threads of @pid */
	uint32_t pid;		   /* the process that sent its tasks (0: not seen) */
	uint32_t tasks, done;	   /* tasks seen; with their result sent */
	uint64_t start_ns, end_ns; /* first task sent (or taken) to last result */
	struct pool_spread run, queue, result;
	uint32_t nworkers;
	double concurrency; /* workers alive at once, on average over the pool's time */
	struct pool_worker workers[POOL_MAX_WORKERS];
	uint32_t workers_not_shown;
};

struct analysis;

/* NULL with errno set. Free with analysis__free() (accepts NULL). */
struct analysis *analysis__new(void);
void analysis__free(struct analysis *a);

/* CPUs of the machine the run was on (0: this machine's). */
void analysis__cpus(struct analysis *a, unsigned cpus);
/* The profiler's own CPU time during the run (0: not known). */
void analysis__tool_cpu(struct analysis *a, uint64_t ns);

/*
 * The feed, as the report's (trace/trace.h): @name must live as long as @a (the report
 * passes its interned names); @file (NULL: not known) is only looked at. 0 or -ENOMEM.
 */
int analysis__open(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth, const char *name,
		   const char *file);
int analysis__close(struct analysis *a, const struct trace_summary_slice *sl, const char *name);

/* Computes the pools and findings from what was fed (again after more is fed). 0 or -ENOMEM. */
int analysis__finish(struct analysis *a);

/* After analysis__finish(): findings ranked, largest share first; the pools seen. */
size_t analysis__findings(const struct analysis *a, const struct finding **findings);
size_t analysis__npools(const struct analysis *a);
const struct pool_view *analysis__pool(const struct analysis *a, size_t i);

/* The findings and pools for a terminal (names escaped), at most @max findings. */
void analysis__print(const struct analysis *a, FILE *f, size_t max);
/* {"findings": [...], "pools": [...]}, one JSON object and a newline. */
void analysis__print_json(const struct analysis *a, FILE *f);

#endif
