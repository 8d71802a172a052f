/* Internal to trace/: the state trace.c shares with its writers (json_writer.c, perfetto.c). */
#ifndef PYTRACE_TRACE_INTERNAL_H
#define PYTRACE_TRACE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "coalesce.h"
#include "flows.h"
#include "folded.h"
#include "names.h"
#include "out.h"
#include "trace.h"

#ifndef PYTRACE_VERSION
#define PYTRACE_VERSION "unknown"
#endif

struct trace_note {
	char *key;
	uint64_t value;
};

struct pftrace;
struct hold;

struct trace {
	struct trace_opts opts;
	enum trace_format format;
	struct out_file *out;
	struct coalescer *coalescer; /* JSON and Perfetto formats */
	struct folded *folded;	     /* collapsed stacks */
	struct pftrace *pftrace;     /* Perfetto's state: tracks, interned strings */
	struct names *names;
	struct flows *flows; /* pool messages, joined into flows at the end (not .folded) */
	struct hold *hold;   /* processes held back, or NULL */
	struct trace_note *notes;
	size_t nnotes;
	struct trace_stats stats;
	uint64_t lost_to_write_errors;
	bool wrote_event;
	bool slices_ended; /* trace__end_slices() was called */
	uint32_t findings; /* written */
	uint32_t flat_pid; /* --flat: the one process, the first pid written; 0 until then */
};

/*
 * Whole microseconds after the origin, the origin itself at 1 us: every writer puts its
 * times on this grid, so the formats agree on which slices are empty and how they nest.
 */
uint64_t trace_to_us(const struct trace *trace, uint64_t t_ns);

/*
 * Whether the file has reached --max-size: then what would be written at @t_ns is
 * counted instead (trace->stats.over_budget), and true is returned.
 */
bool trace_over_budget(struct trace *trace, uint64_t t_ns);

/* json_writer.c: Trace Event JSON. */
void json_writer__header(struct trace *trace);
int json_writer__slice(void *ctx, const struct slice *s);
int json_writer__event(struct trace *trace, const struct trace_event *ev);
int json_writer__metadata(struct trace *trace);
/* One point of flow @id: @phase "s", "t" or "f", bound to the marker slice at @p. */
void json_writer__flow(struct trace *trace, const char *phase, uint64_t id,
		       const struct flow_point *p);
void json_writer__footer(struct trace *trace, const struct trace_stats *stats);
void json_writer__finding(struct trace *trace, const struct trace_finding *f);

/* perfetto.c: Perfetto's TrackEvent protobuf. */
struct pftrace *pftrace__new(void);
void pftrace__free(struct pftrace *pf);
void pftrace__header(struct trace *trace);
int pftrace__open_slice(void *ctx, const struct slice *s);
int pftrace__slice(void *ctx, const struct slice *s);
int pftrace__observe(struct trace *trace, const struct trace_obs *obs);
int pftrace__event(struct trace *trace, const struct trace_event *ev);
int pftrace__end_thread(struct trace *trace, uint32_t pid, uint32_t tid);
/* One point of flow @id (an instant with the flow's id), the flow's end when @last. */
int pftrace__flow(struct trace *trace, uint64_t id, const struct flow_point *p, bool last);
/* Writes what is still held (slice ends, counters) and the tracks' final names. */
int pftrace__flush(struct trace *trace);
/* A finding: a slice on a track of its own under a "findings" track. */
int pftrace__finding(struct trace *trace, const struct trace_finding *f);
/* The statistics and notes, as the arguments of a last instant event. */
void pftrace__footer(struct trace *trace, const struct trace_stats *stats);

/*
 * hold.c: processes held back until shown or folded (trace__hold()). The hooks return
 * 1 when the process is not held (go on with the item), 0 when the item was kept.
 */
int hold__start(struct trace *trace, uint32_t pid);
bool hold__holds(const struct trace *trace, uint32_t pid);
int hold__release(struct trace *trace, uint32_t pid);
int hold__release_all(struct trace *trace);
void hold__forget(struct trace *trace, uint32_t pid, bool keep_holding);
void hold__free(struct hold *hold);
int hold__observe(struct trace *trace, const struct trace_obs *obs);
int hold__event(struct trace *trace, const struct trace_event *ev);
int hold__end_thread(struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t_ns);

/* svg.c: an interactive flame graph of trace->folded, every process's stacks merged. */
int svg__write(struct trace *trace);

/* pprof.c: trace->folded as pprof's profile.proto (trace->out gzips it). */
int pprof__write(struct trace *trace);

#endif
