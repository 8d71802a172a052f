/*
 * The trace stage: turns per-thread observations (stacks with times) into nested slices
 * and streams them to a writer: Trace Event JSON, gzip'd JSON, Perfetto's protobuf or
 * collapsed stacks.
 *
 * Times are nanoseconds on one clock (CLOCK_MONOTONIC from the kernel). Observations of
 * one thread must come in time order; threads may interleave freely.
 */
#ifndef PYTRACE_TRACE_TRACE_H
#define PYTRACE_TRACE_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "../common/frames.h"

enum trace_format {
	TRACE_FORMAT_AUTO, /* from the output name: .json.gz, .gz, .folded, .pftrace, .svg,
			    * .pb.gz, else JSON */
	TRACE_FORMAT_JSON,
	TRACE_FORMAT_JSON_GZ,
	TRACE_FORMAT_FOLDED,
	TRACE_FORMAT_PERFETTO, /* Perfetto's TrackEvent protobuf (.pftrace) */
	TRACE_FORMAT_SVG,      /* an interactive flame graph of the whole run */
	TRACE_FORMAT_PPROF,    /* pprof's profile.proto, gzip'd (.pb.gz) */
};

#define TRACE_DEFAULT_MAX_DEPTH 512

struct trace_summary;

struct trace_opts {
	const char *path; /* destination; written through a temporary */
	enum trace_format format;
	uint64_t period_ns;		  /* an on-CPU sample covers [t, t + period_ns) */
	uint64_t gap_ns;		  /* silence that closes every slice; 0: 2 periods */
	uint64_t origin_ns;		  /* earliest time; written as ts = 1 (whole us) */
	uint32_t max_depth;		  /* slices this deep or deeper are cut; 0: 512 */
	const struct frame_table *frames; /* borrowed; names every frame id */
	struct trace_summary *summary;	  /* borrowed; fed every slice written, or NULL */
	bool flat;			  /* JSON: one process, a row per thread (--flat) */
	uint64_t max_bytes;		  /* --max-size: past it, slices, events and flows are
					   * counted, not written; 0: no limit */
};

enum trace_obs_kind {
	TRACE_ON_CPU,  /* a sample at t_start_ns; covers one period or until the next one */
	TRACE_OFF_CPU, /* a wait with exact ends; its leaf frame is the reason marker */
	TRACE_MESSAGE, /* a message sent or received, exact ends; its leaf frame says which */
};

/*
 * A process pool's task or result, written or read (TRACE_MESSAGE): the trace joins the
 * four messages of one task (handed out, taken by a worker, its result sent and
 * received) with a flow, drawn as arrows.
 */
struct trace_message {
	bool executor; /* a ProcessPoolExecutor's (task: its work id); else a Pool's */
	bool result;   /* the task's result; else the task itself */
	bool sent;     /* written; else read */
	int64_t job, task;
};

struct trace_obs {
	uint32_t pid, tid;
	enum trace_obs_kind kind;
	uint64_t t_start_ns;
	uint64_t t_end_ns; /* off-CPU only */
	uint32_t nframes;
	const struct trace_frame *frames; /* root first; borrowed for the call */
	struct trace_message message;	  /* TRACE_MESSAGE */
};

enum trace_event_kind {
	TRACE_EVENT_FORK, /* @value: the child's pid */
	TRACE_EVENT_EXEC, /* @text: the new program */
	TRACE_EVENT_EXIT, /* @value: exit status, or 128 + signal; -1 unknown */
	TRACE_EVENT_NOTE, /* @text: what the trace can't show of this process, and why */
};

struct trace_event {
	enum trace_event_kind kind;
	uint32_t pid, tid;
	uint64_t t_ns;
	int64_t value;
	const char *text; /* may be NULL */
};

/*
 * A cause of slowness the analysis found (analyze/), drawn on a row of its own: the
 * findings are a process of their own, TRACE_FINDINGS_PID (past any real pid), one
 * thread per finding, ranked.
 */
#define TRACE_FINDINGS_PID 4194305u /* PID_MAX_LIMIT + 1 */

struct trace_finding {
	uint32_t rank; /* 1: the largest share */
	const char *kind;
	double share;
	uint64_t start_ns, end_ns;
	const char *title, *evidence, *where, *hint;
};

struct trace_stats {
	uint64_t observations;
	uint64_t slices;	       /* written */
	uint64_t stacks;	       /* distinct stacks written (the aggregated formats) */
	uint64_t slices_too_deep;      /* cut by max_depth */
	uint64_t slices_empty;	       /* under a microsecond, not written */
	uint64_t reordered;	       /* observations older than their thread's last, clamped */
	uint64_t hidden;	       /* replaced by another at the same instant */
	uint64_t events;	       /* instant events written */
	uint64_t flows;		       /* tasks drawn with arrows (flows written) */
	uint64_t lost_to_write_errors; /* events not written because the output failed */
	uint64_t bytes;		       /* before compression */
	uint64_t over_budget;	       /* slices, events and flows not written past max_bytes */
	uint64_t over_budget_from_ns;  /* when the first of them was; 0: none */
};

struct trace;

/*
 * The format @path's ending names: .pb.gz/.pprof, .gz, .folded/.collapsed, .svg,
 * .pftrace/.perfetto-trace, else JSON.
 */
enum trace_format trace_format__from_path(const char *path);

/* Whether @format holds stacks summed over the run (folded, SVG, pprof), not a timeline. */
bool trace_format__aggregated(enum trace_format format);

/*
 * Creates the temporary output next to opts->path and writes the header, so an
 * unwritable destination fails here, before any sampling. NULL with errno set.
 */
struct trace *trace__open(const struct trace_opts *opts);

int trace__observe(struct trace *trace, const struct trace_obs *obs);

/*
 * Ends every slice still open, so that the summary has them all before the findings
 * are asked of it; only trace__finding() and trace__close() may follow. 0 or -errno.
 */
int trace__end_slices(struct trace *trace);
/* Writes @f (JSON, .pftrace; the aggregated formats have no timeline). 0 or -errno. */
int trace__finding(struct trace *trace, const struct trace_finding *f);

/*
 * Holding a process back: from trace__hold() on, what comes for @pid (observations,
 * events, thread ends) is kept in order, not written, until trace__show() writes it
 * and lets the rest through, or trace__fold() drops it (@keep_holding: all but its
 * events, an exec's program ending, and goes on holding what comes next). Bounded (1 MiB a process, 32 MiB in all): past that the
 * process is shown. Names are not held. 0 or -ENOMEM.
 */
int trace__hold(struct trace *trace, uint32_t pid);
bool trace__holds(const struct trace *trace, uint32_t pid);
int trace__show(struct trace *trace, uint32_t pid);
void trace__fold(struct trace *trace, uint32_t pid, bool keep_holding);
/* Shows every process still held. */
int trace__show_all(struct trace *trace);
int trace__event(struct trace *trace, const struct trace_event *event);

/* Names shown for a process (its command line) and a thread (its comm); latest wins. */
/* The process's whole command line, written beside its name (JSON args, pftrace cmdline). */
int trace__process_cmdline(struct trace *trace, uint32_t pid, const char *cmdline);
int trace__name_process(struct trace *trace, uint32_t pid, const char *name);
int trace__name_thread(struct trace *trace, uint32_t pid, uint32_t tid, const char *name);
/* The name given to a process (@tid 0) or thread, or NULL; borrowed until it is renamed. */
const char *trace__name(const struct trace *trace, uint32_t pid, uint32_t tid);

/* Closes every open slice of a thread that ended at @t_ns (clipped to what was seen). */
int trace__end_thread(struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t_ns);

/* Records a named counter (lost samples, unreadable frames ...) in the trace's metadata. */
int trace__note(struct trace *trace, const char *key, uint64_t value);

/* Statistics so far. */
void trace__stats(const struct trace *trace, struct trace_stats *stats);

/*
 * Closes every open slice, writes metadata and the footer, renames the file into place
 * and frees @trace. After a write error (a full disk) it still tries to end the file at
 * the last complete event; returns 0 or a negative errno, filling @stats when not NULL.
 */
int trace__close(struct trace *trace, struct trace_stats *stats);
/* The output file will be @uid:@gid's (given by descriptor, before it is in place). */
int trace__chown(struct trace *trace, uid_t uid, gid_t gid);

/* Discards the output and frees. Accepts NULL. */
void trace__abort(struct trace *trace);

/*
 * While being written, a trace is a temporary next to @path, PATH.pytrace-PID-XXXXXX.tmp
 * (PID: the writer's). Removes those in @path's folder left by writers that died
 * (killed): whose pid is gone and which no one holds. Returns how many, or -errno.
 */
int trace_remove_stale_temps(const char *path);

/*
 * The end-of-run report (trace/summary.c), computed from the slices a trace holds: fed
 * by a trace while it writes (trace_opts.summary), or read back from a written JSON
 * trace (trace_summary__read_json). Slices of a thread come as opened and closed:
 * a slice opens at a depth under the open ones above it, and closes before anything
 * opens at its depth again.
 */
struct trace_summary_slice {
	uint32_t pid, tid, depth;
	const char *name;  /* the function, or the reason of a wait */
	bool off_cpu;	   /* a wait: an off-CPU reason marker */
	bool no_gil;	   /* the marker of time on a CPU without the GIL */
	bool message;	   /* a pool's task or result marker: @name says which */
	int64_t job, task; /* a message's: pool_job and pool_task, or 0 and work_id */
	const char *file;  /* the function's source, or NULL */
	uint32_t line;	   /* its first line, 0 when unknown */
	uint64_t start_ns, end_ns;
};

/* NULL with errno set. Free with trace_summary__free() (accepts NULL). */
struct trace_summary *trace_summary__new(void);
void trace_summary__free(struct trace_summary *s);
/* A process's (@tid 0) or thread's name; latest wins. 0 or -ENOMEM. */
int trace_summary__name(struct trace_summary *s, uint32_t pid, uint32_t tid, const char *name);
/* A slice opens: its function's @name and source @file (NULL: not known). 0 or -ENOMEM. */
int trace_summary__open(struct trace_summary *s, uint32_t pid, uint32_t tid, uint32_t depth,
			const char *name, const char *file);
int trace_summary__close(struct trace_summary *s, const struct trace_summary_slice *slice);
/* The report, short enough for a terminal, findings first. 0 or -ENOMEM. */
int trace_summary__print(const struct trace_summary *s, FILE *f);
/* The findings and pools as one JSON object (analyze/analyze.h). 0 or -ENOMEM. */
int trace_summary__print_json(const struct trace_summary *s, FILE *f);
/* The CPUs of the machine the run was on, for the findings (0: this one's). */
void trace_summary__cpus(struct trace_summary *s, unsigned cpus);
/* The CPU time the profiler itself took: one of the programs the run shared CPUs with. */
void trace_summary__tool_cpu(struct trace_summary *s, uint64_t ns);

struct analysis;
/* The analysis of what was fed, finished (analyze/analyze.h); NULL on ENOMEM. */
const struct analysis *trace_summary__analysis(struct trace_summary *s);

/*
 * Feeds the slices and names of the Trace Event JSON file at @path (gzip'd or not) to
 * @s. -ENOENT (or another open error) when it can't be read, -EINVAL when it is not a
 * trace, -ENOMEM.
 */
int trace_summary__read_json(struct trace_summary *s, const char *path);
/*
 * The same from the Perfetto trace at @path (.pftrace, as trace/perfetto.c writes it):
 * its thread tracks' slices, the processes' and threads' names, the statistics' notes.
 * Hostile input is bounded (trace/pftrace_read.c); a file cut short gives what its whole
 * packets hold. -ENOENT (or another open error), -EINVAL when it is not a trace, -ENOMEM.
 */
int trace_summary__read_pftrace(struct trace_summary *s, const char *path);

#endif
