/*
 * A walk's reads of another process, by whole pages: one system call brings the frames,
 * code objects or small objects that lie together, where reading field by field cost one
 * call each (a 100-frame stack with its arguments took ~420 calls, 0.85 ms: longer than
 * a sample period, so stacks read from outside came too late to be kept).
 */
#ifndef PYTRACE_CPYTHON_PAGES_H
#define PYTRACE_CPYTHON_PAGES_H

#include <stdint.h>

#include "cpython.h"

#define CPYTHON_PAGE_SIZE 4096u
#define CPYTHON_PAGES 16 /* kept at once; the oldest is replaced */

/*
 * Pages read through @under, each once, for as long as the cache lives: what it gives
 * is the memory of one moment per page (one walk's try; a new try starts a new cache).
 * A read of a page that fails falls back to reading just the bytes asked for, so what
 * can be read through @under can be read through the cache too.
 */
struct cpython_pages {
	const struct cpython_mem *under;
	uint32_t n, next;
	uint64_t calls; /* reads made through @under */
	uint64_t addr[CPYTHON_PAGES];
	uint8_t data[CPYTHON_PAGES][CPYTHON_PAGE_SIZE];
};

void cpython_pages_init(struct cpython_pages *c, const struct cpython_mem *under);

/* A cpython_mem reader over @ctx, a struct cpython_pages. */
int cpython_pages_read(void *ctx, uint64_t addr, void *buf, size_t len);

#endif
