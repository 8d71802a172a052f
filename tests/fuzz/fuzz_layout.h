/*
 * The CPython layout a harness reads objects with, for a minor version picked from its
 * input: built in for 3.8-3.12; 3.13's decoded from a real 3.13's _Py_DebugOffsets;
 * 3.14 and 3.15 as 3.13 with what the decoder sets for them (tagged references, the
 * renumbered generator state), since no such interpreter is at hand to read.
 */
#ifndef PYTRACE_TESTS_FUZZ_FUZZ_LAYOUT_H
#define PYTRACE_TESTS_FUZZ_FUZZ_LAYOUT_H

#include <stdlib.h>
#include <string.h>

#include "../../cpython/cpython.h"
#include "py313_offsets.h"

/* Minors 8 .. 15 for a byte of input. */
static inline unsigned fuzz_minor(uint8_t b)
{
	return 8 + b % 8;
}

static inline void fuzz_layout(unsigned minor, struct cpython_layout *l)
{
	static struct cpython_layout l313;
	static bool decoded;
	const struct cpython_layout *builtin = cpython_builtin_layout(minor);
	uint8_t image[CPYTHON_DEBUG_OFFSETS_BYTES] = { 0 };

	if (builtin) {
		*l = *builtin;
		return;
	}
	if (!decoded) {
		memcpy(image, py313_debug_offsets, sizeof(py313_debug_offsets));
		if (cpython_decode_debug_offsets(image, sizeof(image), 13, &l313))
			abort(); /* the 3.13 decoder no longer reads a real 3.13 */
		decoded = true;
	}
	*l = l313;
	l->minor = minor;
	l->code_tagged = minor >= 14;
	l->gen_executing = minor >= 15 ? 4 : 0;
}

#endif
