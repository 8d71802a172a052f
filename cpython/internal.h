/* Internal to cpython/: what its files share beyond cpython.h. */
#ifndef PYTRACE_CPYTHON_INTERNAL_H
#define PYTRACE_CPYTHON_INTERNAL_H

#include <stdint.h>

#include "cpython.h"

/* Reads 8 bytes at @addr. 0 or -errno. */
int cpython_read_u64(const struct cpython_mem *mem, uint64_t addr, uint64_t *v);

/*
 * The thread state of thread @tid, re-reading the thread lists at most every
 * millisecond when it is not known (a new thread). 0 when not found; *@err set when the
 * lists could not be read.
 */
uint64_t cpython_tstate_for(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
			    uint64_t now_ns, int *err);

/* The code cache (codes.c): new with one reference; another; one less (freed at none). */
struct cpython_codes *cpython_codes__new(void);
void cpython_codes__get(struct cpython_codes *c);
void cpython_codes__put(struct cpython_codes *c);

#endif
