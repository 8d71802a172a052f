/*
 * A walk's reads of another process, by whole pages: one system call brings the frames,
 * code objects or small objects that lie together, where reading field by field cost one
 * call each (a 100-frame stack with its arguments took ~420 calls, 0.85 ms: longer than
 * a sample period, so stacks read from outside came too late to be kept).
 */
#ifndef PYTRACE_CPYTHON_PAGES_H
#define PYTRACE_CPYTHON_PAGES_H

#include <stdbool.h>
#include <stdint.h>

#include "cpython.h"

#define CPYTHON_PAGE_SIZE 4096u
#define CPYTHON_PAGES 16 /* kept at once; the oldest is replaced */
_Static_assert(CPYTHON_HOT_PAGES <= CPYTHON_PAGES, "a prefetch fits the cache");

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
	bool used[CPYTHON_PAGES]; /* read through the cache, not only brought in */
	uint8_t data[CPYTHON_PAGES][CPYTHON_PAGE_SIZE];
};

void cpython_pages_init(struct cpython_pages *c, const struct cpython_mem *under);

/* A cpython_mem reader over @ctx, a struct cpython_pages. */
int cpython_pages_read(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * Brings the pages at @pages (up to CPYTHON_HOT_PAGES, page-aligned) into an empty cache
 * with one call, when @under can read blocks; from the first it can't read on, they are
 * read when asked for. A sample's stack lies mostly in the pages of the one before: walks
 * of bench/py_split.py (4 frames, one argument) made 8.1 calls each, 1.2 with this; each
 * call checks the caller's right to read the target, and at 10 kHz the calls were more
 * than the drainer could make in time.
 */
void cpython_pages_prefetch(struct cpython_pages *c, const uint64_t *pages, uint32_t n);

/* The pages reads went to, in the order first read, up to @max; their count. */
uint32_t cpython_pages_used(const struct cpython_pages *c, uint64_t *pages, uint32_t max);

#endif
