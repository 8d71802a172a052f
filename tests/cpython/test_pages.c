/*
 * Tests of the page-at-a-time reader walks use (cpython/pages.c): it must give exactly
 * what a direct read gives, fail exactly where a direct read fails, and read each page
 * once while it is kept.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../cpython/pages.h"

#define BASE 0x7f0000000000ULL
#define SIZE (64 * CPYTHON_PAGE_SIZE)

/* A fake address space: SIZE bytes at BASE, readable but for [hole_at, hole_end). */
struct space {
	uint8_t bytes[SIZE];
	uint64_t hole_at, hole_end;
	uint32_t reads, block_calls;
	struct cpython_mem mem; /* reads it: space_read() */
};

static int space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct space *sp = ctx;

	sp->reads++;
	if (addr < BASE || addr + len > BASE + SIZE || addr + len < addr)
		return -EFAULT;
	if (addr < sp->hole_end && addr + len > sp->hole_at)
		return -EFAULT;
	memcpy(buf, sp->bytes + (addr - BASE), len);
	return 0;
}

/* Reads whole blocks in one call, stopping at the first that can't be read. */
static uint32_t space_read_blocks(void *ctx, const uint64_t *addrs, uint32_t n, void *buf,
				  size_t size)
{
	struct space *sp = ctx;
	uint32_t k;

	sp->block_calls++;
	for (k = 0; k < n; k++) {
		uint64_t addr = addrs[k];

		if (addr < BASE || addr + size > BASE + SIZE ||
		    (addr < sp->hole_end && addr + size > sp->hole_at))
			break;
		memcpy((uint8_t *)buf + k * size, sp->bytes + (addr - BASE), size);
	}
	return k;
}

static struct space *new_space(void)
{
	struct space *sp = calloc(1, sizeof(*sp));
	size_t i;

	assert_non_null(sp);
	for (i = 0; i < SIZE; i++)
		sp->bytes[i] = (uint8_t)(i * 7 + (i >> 12));
	sp->mem.read = space_read;
	sp->mem.ctx = sp;
	sp->mem.read_blocks = space_read_blocks;
	return sp;
}

/* An empty page cache over @sp. */
static struct cpython_pages *new_pages(struct space *sp)
{
	struct cpython_pages *c = malloc(sizeof(*c));

	assert_non_null(c);
	cpython_pages_init(c, &sp->mem);
	return c;
}

/* Reads that lie in pages read already cost no call. */
static void test_pages__one_call_a_page(void **state)
{
	struct space *sp = new_space();
	struct cpython_pages *c;
	uint8_t buf[256];
	uint32_t i;

	(void)state;
	c = new_pages(sp);
	/* 40 frames of 100 bytes walked down one page, as a chain of frames is. */
	for (i = 0; i < 40; i++) {
		uint64_t at = BASE + 5 * CPYTHON_PAGE_SIZE + 4000 - 100 * i;

		assert_int_equal(cpython_pages_read(c, at, buf, 96), 0);
		assert_memory_equal(buf, sp->bytes + (at - BASE), 96);
	}
	assert_int_equal(sp->reads, 1);
	assert_int_equal(c->calls, 1);
	/* Across a page's end: the next page too, once. */
	assert_int_equal(cpython_pages_read(c, BASE + 6 * CPYTHON_PAGE_SIZE - 10, buf, 40), 0);
	assert_memory_equal(buf, sp->bytes + 6 * CPYTHON_PAGE_SIZE - 10, 40);
	assert_int_equal(sp->reads, 2);
	free(c);
	free(sp);
}

/*
 * What a direct read can read, the cache reads too, though its page is partly
 * unreadable; what a direct read can't, it can't.
 */
static void test_pages__partial_pages_fall_back(void **state)
{
	struct space *sp = new_space();
	struct cpython_pages *c;
	uint8_t buf[64];

	(void)state;
	sp->hole_at = BASE + 3 * CPYTHON_PAGE_SIZE + 1000;
	sp->hole_end = BASE + 3 * CPYTHON_PAGE_SIZE + 2000;
	c = new_pages(sp);
	assert_int_equal(cpython_pages_read(c, BASE + 3 * CPYTHON_PAGE_SIZE + 100, buf, 64), 0);
	assert_memory_equal(buf, sp->bytes + 3 * CPYTHON_PAGE_SIZE + 100, 64);
	assert_int_not_equal(cpython_pages_read(c, BASE + 3 * CPYTHON_PAGE_SIZE + 990, buf, 64), 0);
	/* The end of the space, and past it. */
	assert_int_equal(cpython_pages_read(c, BASE + SIZE - 64, buf, 64), 0);
	assert_memory_equal(buf, sp->bytes + SIZE - 64, 64);
	assert_int_not_equal(cpython_pages_read(c, BASE + SIZE - 32, buf, 64), 0);
	assert_int_not_equal(cpython_pages_read(c, 0, buf, 8), 0);
	assert_int_not_equal(cpython_pages_read(c, UINT64_MAX - 4, buf, 8), 0);
	free(c);
	free(sp);
}

/* Random reads over more pages than are kept, with a hole: the same as direct reads. */
static void test_pages__same_as_direct(void **state)
{
	struct space *sp = new_space();
	struct cpython_pages *c;
	uint8_t got[3 * CPYTHON_PAGE_SIZE], want[3 * CPYTHON_PAGE_SIZE];
	uint32_t i, seed = 12345;

	(void)state;
	sp->hole_at = BASE + 20 * CPYTHON_PAGE_SIZE + 123;
	sp->hole_end = BASE + 21 * CPYTHON_PAGE_SIZE + 7;
	c = new_pages(sp);
	for (i = 0; i < 20000; i++) {
		uint64_t at;
		size_t len;
		int a, b;

		seed = seed * 1103515245 + 12345;
		at = BASE - 512 + (seed >> 4) % (SIZE + 1024);
		seed = seed * 1103515245 + 12345;
		len = 1 + (seed >> 8) % (i % 50 ? 300 : sizeof(got));
		memset(got, 0, len);
		a = cpython_pages_read(c, at, got, len);
		b = space_read(sp, at, want, len);
		assert_int_equal(a != 0, b != 0);
		if (!a)
			assert_memory_equal(got, want, len);
	}
	free(c);
	free(sp);
}

/*
 * The pages a walk used come back in the order it first read them, those prefetched
 * and not read through the cache left out; prefetched again they cost one call, give the
 * same bytes as direct reads, and a page that can't be read ends the prefetch there
 * (the pages after it are read when asked for, one call each).
 */
static void test_pages__prefetch_what_was_used(void **state)
{
	struct space *sp = new_space();
	struct cpython_pages *c;
	uint64_t used[CPYTHON_HOT_PAGES], extra[CPYTHON_HOT_PAGES];
	const uint32_t order[] = { 9, 2, 30, 2, 17, 9 };
	uint8_t buf[64];
	uint32_t i, n;

	(void)state;
	c = new_pages(sp);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_int_equal(
			cpython_pages_read(c, BASE + order[i] * CPYTHON_PAGE_SIZE + 8 * i, buf, 64),
			0);
	n = cpython_pages_used(c, used, CPYTHON_HOT_PAGES);
	assert_int_equal(n, 4);
	assert_true(used[0] == BASE + 9 * CPYTHON_PAGE_SIZE);
	assert_true(used[1] == BASE + 2 * CPYTHON_PAGE_SIZE);
	assert_true(used[2] == BASE + 30 * CPYTHON_PAGE_SIZE);
	assert_true(used[3] == BASE + 17 * CPYTHON_PAGE_SIZE);

	/* Next walk: one call brings them all; a page prefetched and unused is not kept. */
	memcpy(extra, used, sizeof(used));
	extra[n] = BASE + 40 * CPYTHON_PAGE_SIZE;
	cpython_pages_init(c, &sp->mem);
	sp->reads = sp->block_calls = 0;
	cpython_pages_prefetch(c, extra, n + 1);
	for (i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		uint64_t at = BASE + order[i] * CPYTHON_PAGE_SIZE + 100 + i;

		assert_int_equal(cpython_pages_read(c, at, buf, 64), 0);
		assert_memory_equal(buf, sp->bytes + (at - BASE), 64);
	}
	assert_int_equal(sp->block_calls, 1);
	assert_int_equal(sp->reads, 0);
	assert_int_equal(c->calls, 1);
	assert_int_equal(cpython_pages_used(c, extra, CPYTHON_HOT_PAGES), 4);

	/* Page 30 is now partly unreadable: 9 and 2 come in the prefetch, 17 after it. */
	sp->hole_at = BASE + 30 * CPYTHON_PAGE_SIZE + 2000;
	sp->hole_end = sp->hole_at + 8;
	cpython_pages_init(c, &sp->mem);
	sp->reads = sp->block_calls = 0;
	cpython_pages_prefetch(c, used, n);
	assert_int_equal(c->n, 2);
	assert_int_equal(cpython_pages_read(c, BASE + 17 * CPYTHON_PAGE_SIZE, buf, 64), 0);
	assert_memory_equal(buf, sp->bytes + 17 * CPYTHON_PAGE_SIZE, 64);
	assert_int_equal(cpython_pages_read(c, BASE + 30 * CPYTHON_PAGE_SIZE, buf, 64), 0);
	assert_memory_equal(buf, sp->bytes + 30 * CPYTHON_PAGE_SIZE, 64);
	assert_int_not_equal(cpython_pages_read(c, sp->hole_at - 4, buf, 8), 0);
	assert_int_equal(sp->block_calls, 1);

	/* A reader without blocks: no prefetch, reads as before. */
	sp->mem.read_blocks = NULL;
	cpython_pages_init(c, &sp->mem);
	cpython_pages_prefetch(c, used, n);
	assert_int_equal(c->n, 0);
	assert_int_equal(c->calls, 0);
	free(c);
	free(sp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pages__one_call_a_page),
		cmocka_unit_test(test_pages__partial_pages_fall_back),
		cmocka_unit_test(test_pages__same_as_direct),
		cmocka_unit_test(test_pages__prefetch_what_was_used),
	};

	return cmocka_run_group_tests_name("pages", tests, NULL, NULL);
}
