/*
 * Internal to trace/: the Perfetto writer's state and the helpers its parts share
 * (perfetto.c: tracks, slices and events; perfetto_cpu.c: the CPU % counter tracks).
 */
#ifndef PYTRACE_TRACE_PERFETTO_H
#define PYTRACE_TRACE_PERFETTO_H

#include <stdbool.h>
#include <stdint.h>

#include "internal.h"
#include "pb.h"

/* Field numbers, from Perfetto's protos (see trace/perfetto_subset.proto). */
enum {
	TRACE_PACKET = 1,
	PKT_TIMESTAMP = 8,
	PKT_CLOCK_SNAPSHOT = 6,
	PKT_SEQUENCE_ID = 10,
	PKT_TRACK_EVENT = 11,
	PKT_INTERNED_DATA = 12,
	PKT_SEQUENCE_FLAGS = 13,
	PKT_DEFAULTS = 59,
	PKT_TRACK_DESCRIPTOR = 60,
	DEFAULTS_CLOCK_ID = 58,
	CLOCK_SNAPSHOT_CLOCKS = 1,
	CLOCK_SNAPSHOT_PRIMARY = 2,
	CLOCK_ID = 1,
	CLOCK_TIMESTAMP = 2,
	CLOCK_UNIT_MULTIPLIER_NS = 4,
	INTERNED_CATEGORIES = 1,
	INTERNED_EVENT_NAMES = 2,
	INTERNED_ANNOTATION_NAMES = 3,
	INTERNED_ANNOTATION_STRINGS = 29,
	INTERNED_SOURCE_LOCATIONS = 4,
	SRC_IID = 1,
	SRC_FILE_NAME = 2,
	SRC_LINE_NUMBER = 4,
	INTERNED_IID = 1, /* EventCategory, EventName, DebugAnnotationName, InternedString */
	INTERNED_NAME = 2,
	TD_UUID = 1,
	TD_NAME = 2,
	TD_PROCESS = 3,
	TD_THREAD = 4,
	TD_PARENT_UUID = 5,
	TD_COUNTER = 8,
	PD_PID = 1,
	PD_CMDLINE = 2,
	PD_PROCESS_NAME = 6,
	THD_PID = 1,
	THD_TID = 2,
	THD_THREAD_NAME = 5,
	COUNTER_UNIT_NAME = 6,
	TE_CATEGORY_IIDS = 3,
	TE_DEBUG_ANNOTATIONS = 4,
	TE_TYPE = 9,
	TE_NAME_IID = 10,
	TE_TRACK_UUID = 11,
	TE_NAME = 23,
	TE_SOURCE_LOCATION_IID = 34,
	TE_DOUBLE_COUNTER_VALUE = 44,
	TE_FLOW_IDS = 47,	      /* fixed64: the event's flows go on to the next with the id */
	TE_TERMINATING_FLOW_IDS = 48, /* ... and end at it */
	DA_NAME_IID = 1,
	DA_BOOL_VALUE = 2,
	DA_UINT_VALUE = 3,
	DA_INT_VALUE = 4,
	DA_DOUBLE_VALUE = 5,
	DA_STRING_VALUE = 6,
	DA_NAME = 10,
	DA_STRING_VALUE_IID = 17,
};

enum { TYPE_SLICE_BEGIN = 1, TYPE_SLICE_END = 2, TYPE_INSTANT = 3, TYPE_COUNTER = 4 };
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };
enum { CLOCK_MONOTONIC = 3, CLOCK_JSON_US = 64 };

#define PF_SEQUENCE 1
#define PF_CATEGORY_PROCESS (FRAME_KIND_COUNT + 1) /* frame kinds are iids 1..COUNT */
#define PF_COUNTER_BUCKET_NS 100000000ULL	   /* CPU % over 100 ms */

/* Interned argument names, iids 1.. in this order. */
enum {
	ARG_SAMPLES = 1,
	ARG_WAITS,
	ARG_CHILD_PID,
	ARG_PROGRAM,
	ARG_STATUS,
	ARG_WHY,
	ARG_FIRST_LINE,
	ARG_LAST = ARG_FIRST_LINE
};

/* A slice that opened on a thread and whose end is not written yet. */
struct pf_open {
	uint32_t func, line;
	uint32_t args;	   /* the frame table's argument list id, 0: none */
	uint32_t end_args; /* known only after its begin was written: sent with its end */
	uint64_t start_ns;
	uint64_t end_us; /* when closed */
	uint32_t samples, waits;
	bool begun;  /* its SLICE_BEGIN is written */
	bool closed; /* its end is held until the next thing on the thread */
};

/* A process (tid 0) or thread track. */
struct pf_track {
	uint64_t uuid, counter_uuid;
	uint32_t pid, tid;
	char *named; /* the name its last descriptor had; NULL: none written */
	bool described;
	struct pf_open *open;
	uint32_t depth, capacity;
	uint64_t *lost_ends; /* times of ends lost to a write error, deepest first */
	uint32_t nlost, lost_capacity;
	uint64_t bucket;	 /* processes: the CPU counter's current bucket, */
	uint32_t bucket_samples; /* and the on-CPU samples in it */
	bool counting;
};

struct pf_string {
	char *s;
	uint64_t iid;
};

struct pftrace {
	struct hashmap *tracks;	 /* (pid << 32 | tid) -> struct pf_track */
	struct hashmap *strings; /* FNV-1a of the string -> struct pf_string */
	struct hashmap *places;	 /* (frame id << 32 | line) -> its source location's iid */
	uint8_t *named_frames;	 /* frame ids whose name is interned */
	size_t named_cap;
	uint64_t next_uuid, next_string_iid, next_place_iid;
	uint64_t findings_uuid; /* the findings' track; 0: none yet */
	struct pb_buf packet, interned;
	size_t interned_start;
};

/* Starts a packet at @ts_us (0: no timestamp) and ends it, writing it out. */
struct pb_buf *pf_packet_begin(struct pftrace *pf, uint64_t ts_us);
bool pf_packet_end(struct trace *trace);

/* The track of a process (@tid 0) or thread, made on first use; the thread's described. */
struct pf_track *pf_find_track(struct pftrace *pf, uint32_t pid, uint32_t tid);
struct pf_track *pf_thread_track(struct trace *trace, uint32_t pid, uint32_t tid);

/* Ends @proc's current CPU bucket (perfetto_cpu.c), and marks it idle from @next on. */
void pf_end_bucket(struct trace *trace, struct pf_track *proc, uint64_t next);

#endif
