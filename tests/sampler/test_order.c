/* Tests of time ordering: the heap against a sorted model, batches, and the watermark. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sampler/internal.h"

enum { RECORDS = 5000 };

static struct qrec *new_rec(uint64_t time, uint32_t tag)
{
	struct qrec *q = calloc(1, sizeof(*q) + sizeof(tag));

	assert_non_null(q);
	q->time = time;
	q->size = sizeof(tag);
	memcpy(q->data, &tag, sizeof(tag));
	return q;
}

static uint32_t tag_of(const struct qrec *q)
{
	uint32_t tag;

	memcpy(&tag, q->data, sizeof(tag));
	return tag;
}

/* Pops come out by time, and records of equal time in the order they were pushed. */
static void test_order__heap_is_time_then_push_order(void **state)
{
	struct queue queue = { 0 };
	uint64_t rng = 99, last_time = 0;
	uint32_t i, last_tag = 0;
	struct qrec *q;

	(void)state;
	for (i = 1; i <= RECORDS; i++) {
		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		/* Few distinct times: many ties. */
		assert_int_equal(queue__push(&queue, new_rec((rng >> 33) % 50, i)), 0);
	}
	assert_int_equal(queue.count, RECORDS);
	for (i = 0; (q = queue__pop(&queue)); i++) {
		assert_true(q->time >= last_time);
		if (q->time == last_time)
			assert_true(tag_of(q) > last_tag);
		last_time = q->time;
		last_tag = tag_of(q);
		qrec_free(q);
	}
	assert_int_equal(i, RECORDS);
	assert_null(queue__peek(&queue));
	queue__clear(&queue);
}

/* Interleaved pushes and pops keep the smallest on top. */
static void test_order__peek_is_the_oldest(void **state)
{
	struct queue queue = { 0 };

	(void)state;
	assert_null(queue__peek(&queue));
	assert_int_equal(queue__push(&queue, new_rec(30, 1)), 0);
	assert_int_equal(queue__push(&queue, new_rec(10, 2)), 0);
	assert_int_equal(queue__peek(&queue)->time, 10);
	qrec_free(queue__pop(&queue));
	assert_int_equal(queue__push(&queue, new_rec(20, 3)), 0);
	assert_int_equal(tag_of(queue__peek(&queue)), 3);
	/* Records still queued are freed with it (LeakSanitizer checks). */
	queue__clear(&queue);
	assert_int_equal(queue.count, 0);
}

/* A drain's batch (rings read one CPU after another) sorts by time, then arrival. */
static void test_order__batch_sort(void **state)
{
	struct qrec *batch[6];
	static const uint64_t times[6] = { 50, 10, 50, 0, 10, 40 };
	static const uint32_t want[6] = { 3, 1, 4, 5, 0, 2 };
	size_t i;

	(void)state;
	for (i = 0; i < 6; i++) {
		batch[i] = new_rec(times[i], (uint32_t)i);
		batch[i]->seq = i;
	}
	batch_sort(batch, 6);
	for (i = 0; i < 6; i++) {
		assert_int_equal(tag_of(batch[i]), want[i]);
		qrec_free(batch[i]);
	}
	batch_sort(NULL, 0); /* nothing to sort is fine */
}

static void test_order__watermark(void **state)
{
	static const struct {
		uint64_t time, watermark;
		bool stopped;
		uint64_t stop_ns;
		enum order_verdict want;
	} cases[] = {
		{ 100, 200, false, 0, ORDER_TAKE },  /* older than the watermark */
		{ 200, 200, false, 0, ORDER_TAKE },  /* at it */
		{ 201, 200, false, 0, ORDER_WAIT },  /* newer: a CPU may still have older */
		{ 0, 0, false, 0, ORDER_TAKE },	     /* what existed at attach */
		{ 500, 200, true, 600, ORDER_TAKE }, /* stopped: all is in */
		{ 700, 200, true, 600, ORDER_DROP }, /* after the stop */
		{ 0, 200, true, 600, ORDER_TAKE },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(order_verdict(cases[i].time, cases[i].watermark, cases[i].stopped,
					       cases[i].stop_ns),
				 cases[i].want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order__heap_is_time_then_push_order),
		cmocka_unit_test(test_order__peek_is_the_oldest),
		cmocka_unit_test(test_order__batch_sort),
		cmocka_unit_test(test_order__watermark),
	};

	return cmocka_run_group_tests_name("order", tests, NULL, NULL);
}
