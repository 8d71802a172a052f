/*
 * Tests of copying records out of a perf ring (sampler/ring.c) with the drainer's copier
 * (copy_record(), sampler/drainer.c): records that wrap around the buffer's end come out
 * whole, a sample's stack copy only as far as the kernel filled it, an incomplete
 * record is left for the next drain.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "records.h"

#define DATA_SIZE 8192u /* a power of two, as the kernel's */

struct fake_ring {
	struct ring ring;
	uint64_t head; /* where the next record goes, counted as data_head counts */
};

static void fake_ring_init(struct fake_ring *f, uint64_t start)
{
	long page = sysconf(_SC_PAGESIZE);

	memset(f, 0, sizeof(*f));
	f->ring.base = aligned_alloc((size_t)page, (size_t)page + DATA_SIZE);
	assert_non_null(f->ring.base);
	memset(f->ring.base, 0, (size_t)page + DATA_SIZE);
	f->ring.data_size = DATA_SIZE;
	f->ring.cpu = 1;
	((struct perf_event_mmap_page *)f->ring.base)->data_tail = start;
	f->head = start;
}

/* Writes @len bytes at the ring's head, across the buffer's end as the kernel does. */
static void fake_ring_put(struct fake_ring *f, const void *rec, size_t len)
{
	uint8_t *data = (uint8_t *)f->ring.base + sysconf(_SC_PAGESIZE);
	size_t i;

	for (i = 0; i < len; i++)
		data[(f->head + i) & (DATA_SIZE - 1)] = ((const uint8_t *)rec)[i];
	f->head += len;
}

static void fake_ring_publish(struct fake_ring *f, uint64_t head)
{
	((struct perf_event_mmap_page *)f->ring.base)->data_head = head;
}

/* ring__drain()'s context here: the sampler copy_record() needs, and what was taken. */
struct drained {
	struct sampler *s;
	struct qrec *recs[8];
	size_t n;
};

static struct qrec *copy(const struct ring_rec *r, void *ctx)
{
	return copy_record(r, ((struct drained *)ctx)->s);
}

static void take(struct qrec *rec, void *ctx)
{
	struct drained *d = ctx;

	assert_true(d->n < 8);
	d->recs[d->n++] = rec;
}

static void test_ring__samples_cut_records_whole_across_the_end(void **state)
{
	struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
				     .frequency_hz = 1000,
				     .stack_bytes = 2048 };
	struct drained d = { sampler__new(&opts), { NULL }, 0 };
	struct test_task_record fork = {
		{ PERF_RECORD_FORK, 0, sizeof(fork) }, 7, 1, 7, 1, 4000, 7, 7, 4000, 0, 0, 0
	};
	struct builder b;
	struct sample_view whole, got;
	struct fake_ring f;
	uint64_t published;
	size_t i;

	(void)state;
	assert_non_null(d.s);
	/* A fork record, then a sample whose 2 KiB stack copy (300 bytes filled) wraps. */
	fake_ring_init(&f, DATA_SIZE - sizeof(fork) - 100);
	fake_ring_put(&f, &fork, sizeof(fork));
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 2048, 300);
	fake_ring_put(&f, b.buf, b.len);
	published = f.head;
	/* And half of another: not complete, left where it is. */
	fake_ring_put(&f, b.buf, b.len / 2);
	fake_ring_publish(&f, f.head);

	assert_int_equal(ring__drain(&f.ring, copy, take, &d), 2);
	assert_int_equal(((struct perf_event_mmap_page *)f.ring.base)->data_tail, published);
	assert_int_equal(d.n, 2);
	assert_int_equal(d.recs[0]->size, sizeof(fork));
	assert_memory_equal(d.recs[0]->data, &fork, sizeof(fork));
	assert_int_equal(d.recs[0]->time, 4000);
	assert_int_equal(d.recs[0]->cpu, 1);
	/* The sample: its stack cut to the 304 bytes (300 rounded up) the kernel filled. */
	assert_int_equal(d.recs[1]->size, b.len - 2048 + 304);
	assert_true(decode_sample(b.buf, (uint32_t)b.len, false, &whole));
	assert_true(decode_sample(d.recs[1]->data, d.recs[1]->size, false, &got));
	assert_int_equal(got.time, whole.time);
	assert_int_equal(d.recs[1]->time, whole.time);
	assert_int_equal(got.stack.size, 300);
	assert_memory_equal(got.stack.data, whole.stack.data, 300);
	assert_memory_equal(got.stack.regs, whole.stack.regs, sizeof(whole.stack.regs));
	for (i = 0; i < d.n; i++)
		qrec_free(d.recs[i]);
	free(f.ring.base);
	sampler__free(d.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring__samples_cut_records_whole_across_the_end),
	};

	return cmocka_run_group_tests_name("ring", tests, NULL, NULL);
}
