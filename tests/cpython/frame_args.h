/*
 * For the tests: a frame's arguments read from its code object's counts and its slots,
 * as the walk does (cpython/walk.c's walk_args() without the walk), through the same
 * cpython_param_count() and cpython_read_arg_slots() the tool calls.
 */
#ifndef PYTRACE_TESTS_CPYTHON_FRAME_ARGS_H
#define PYTRACE_TESTS_CPYTHON_FRAME_ARGS_H

#include <errno.h>

#include "../../cpython/cpython.h"

/* How many were read, or -EFAULT. */
static inline int frame_args(const struct cpython_layout *l, const struct cpython_mem *mem,
			     const struct cpython_types *t, uint64_t frame, uint64_t code,
			     struct cpython_args_out *out)
{
	int32_t counts[3]; /* co_argcount, co_posonlyargcount, co_kwonlyargcount */
	uint64_t slots[CPYTHON_MAX_ARGS];
	int n;

	if (!l->frame_localsplus || !l->code_argcount)
		return 0;
	if (mem->read(mem->ctx, code + l->code_argcount, counts, sizeof(counts)))
		return -EFAULT;
	n = cpython_param_count(counts);
	if (n <= 0)
		return n;
	if (mem->read(mem->ctx, frame + l->frame_localsplus, slots, (size_t)n * sizeof(slots[0])))
		return -EFAULT;
	return cpython_read_arg_slots(l, mem, t, slots, (uint32_t)n, out);
}

#endif
