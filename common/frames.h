/*
 * The frame table: every distinct function the trace can show, interned once, so the
 * stages after symbolize/ compare and store small integer ids instead of strings.
 */
#ifndef PYTRACE_COMMON_FRAMES_H
#define PYTRACE_COMMON_FRAMES_H

#include <stdint.h>

#include "args.h"

enum frame_kind {
	FRAME_PYTHON,
	FRAME_NATIVE,
	FRAME_KERNEL,
	FRAME_OFF_CPU, /* a synthetic leaf naming why a thread waited */
	FRAME_NO_GIL,  /* a synthetic leaf: on the CPU without holding the GIL */
	FRAME_MESSAGE, /* a synthetic leaf: a Pool's task or result written or read */
	FRAME_KIND_COUNT,
};

struct frame_info {
	const char *name; /* qualified name or marker; never NULL in the table */
	const char *file; /* source or module path; "" when unknown */
	uint32_t line;	  /* first line of the function; 0 when unknown */
	enum frame_kind kind;
};

struct frame_table;

/* Returns an empty table, or NULL with errno set. Free with frame_table__free(). */
struct frame_table *frame_table__new(void);
void frame_table__free(struct frame_table *table);

/*
 * Returns the id of the frame equal to @info (name, file, line and kind), adding a copy
 * of it when new. Ids start at 1 and are dense; 0 means failure, with errno set.
 */
uint32_t frame_table__intern(struct frame_table *table, const struct frame_info *info);

/* Returns the frame with @id, borrowed until the table is freed, or NULL for a bad id. */
const struct frame_info *frame_table__get(const struct frame_table *table, uint32_t id);

/*
 * The table's bound: past FRAME_TABLE_MAX entries or FRAME_TABLE_MAX_BYTES of them
 * (names and files included), a new frame is interned as one "[frames past the
 * table's bound]" frame, and counted: a target making millions of distinct functions
 * costs the tool no more than that.
 */
#define FRAME_TABLE_MAX (1u << 20)
#define FRAME_TABLE_MAX_BYTES (256u << 20)
uint64_t frame_table__losses(const struct frame_table *table);

/* The argument lists shown with the table's frames (trace_frame.args), owned by it. */
struct args_table *frame_table__args(const struct frame_table *table);

/* "python", "native", "kernel", "off-cpu" or "no-gil": the slice category for @kind. */
const char *frame_kind__name(enum frame_kind kind);

/*
 * One frame of a stack as symbolized (symbolize/) and observed (trace/). @func is a
 * frame table id; @callsite identifies where the caller (the frame above) called it: a
 * Python instruction offset, a native return address. @line is the line being executed in this frame (0 when unknown). Frames equal
 * but for @args are two calls: a new slice.
 */
struct trace_frame {
	uint32_t func;
	uint32_t line;
	uint64_t callsite;
	uint32_t args; /* the call's arguments: an id of the frame table's args, 0 for none */
};

/*
 * A frame's arguments not known (read before the tool knew what to read, e.g. a pool
 * worker's task before its loop was found): the frame continues an open slice whatever
 * its arguments, and a slice opened so takes the first arguments that come known.
 */
#define TRACE_ARGS_UNKNOWN UINT32_MAX

#endif
