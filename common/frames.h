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

/* The argument lists shown with the table's frames (trace_frame.args), owned by it. */
struct args_table *frame_table__args(const struct frame_table *table);

/* "python", "native", "kernel", "off-cpu" or "no-gil": the slice category for @kind. */
const char *frame_kind__name(enum frame_kind kind);

#endif
