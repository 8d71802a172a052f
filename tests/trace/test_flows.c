/*
 * Tests of joining a Pool's task messages into flows (trace/flows.c): which marks make
 * one task's chain, in which order, each used once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../trace/flows.h"

#define PARENT 10
#define WORKER_A 20
#define WORKER_B 30

struct chains {
	char text[8][128];
	int n;
};

/* Each chain as "pid:tid@ts ..." in the order given. */
static int collect(void *ctx, const struct flow_point *const *points, uint32_t n)
{
	struct chains *c = ctx;
	size_t used = 0;
	uint32_t i;

	assert_true(c->n < 8);
	for (i = 0; i < n; i++)
		used += (size_t)snprintf(c->text[c->n] + used, sizeof(c->text[0]) - used,
					 "%s%u:%u@%llu", i ? " " : "", points[i]->pid,
					 points[i]->tid, (unsigned long long)points[i]->ts_us);
	c->n++;
	return 0;
}

/* Marks a message at @t us (its marker slice written at the same us, unless !@bound). */
static void mark(struct flows *f, uint32_t pid, uint32_t tid, uint64_t t, bool result, bool sent,
		 int64_t job, int64_t task, bool bound)
{
	struct trace_message m = { .result = result, .sent = sent, .job = job, .task = task };

	assert_int_equal(flows__mark(f, pid, tid, t * 1000, &m), 0);
	if (bound)
		flows__bind(f, pid, tid, t * 1000, t);
}

static void test_flows__one_chain_per_task_in_time_order(void **state)
{
	struct flows *f = flows__new();
	struct chains c = { .n = 0 };

	(void)state;
	assert_non_null(f);
	/* Two tasks of job 7: handed out, taken by two workers, results back. */
	mark(f, PARENT, 11, 100, false, true, 7, 0, true);
	mark(f, PARENT, 11, 101, false, true, 7, 1, true);
	mark(f, WORKER_A, WORKER_A, 110, false, false, 7, 0, true);
	mark(f, WORKER_B, WORKER_B, 120, false, false, 7, 1, true);
	mark(f, WORKER_B, WORKER_B, 300, true, true, 7, 1, true);
	mark(f, PARENT, 12, 305, true, false, 7, 1, true);
	mark(f, WORKER_A, WORKER_A, 400, true, true, 7, 0, true);
	mark(f, PARENT, 12, 402, true, false, 7, 0, true);
	assert_int_equal(flows__join(f, collect, &c), 2);
	assert_string_equal(c.text[0], "10:11@100 20:20@110 20:20@400 10:12@402");
	assert_string_equal(c.text[1], "10:11@101 30:30@120 30:30@300 10:12@305");
	flows__free(f);
}

static void test_flows__equal_numbers_apart_by_process_and_time(void **state)
{
	struct flows *f = flows__new();
	struct chains c = { .n = 0 };

	(void)state;
	assert_non_null(f);
	/*
	 * Two pools (parents 10 and 40) each with a job 0 task 0; worker 20 takes the first
	 * pool's, worker 50 the second's, later. A hand-out never seen by its worker's
	 * side (a third one, after both) is not joined.
	 */
	mark(f, PARENT, 11, 100, false, true, 0, 0, true);
	mark(f, WORKER_A, WORKER_A, 110, false, false, 0, 0, true);
	mark(f, WORKER_A, WORKER_A, 200, true, true, 0, 0, true);
	mark(f, PARENT, 12, 210, true, false, 0, 0, true);
	mark(f, 40, 41, 500, false, true, 0, 0, true);
	mark(f, 50, 50, 510, false, false, 0, 0, true);
	mark(f, 50, 50, 600, true, true, 0, 0, true);
	mark(f, 40, 42, 610, true, false, 0, 0, true);
	mark(f, PARENT, 11, 900, false, true, 0, 0, true);
	assert_int_equal(flows__join(f, collect, &c), 2);
	assert_string_equal(c.text[0], "10:11@100 20:20@110 20:20@200 10:12@210");
	assert_string_equal(c.text[1], "40:41@500 50:50@510 50:50@600 40:42@610");
	flows__free(f);
}

static void test_flows__partial_chains_and_unwritten_markers(void **state)
{
	struct flows *f = flows__new();
	struct chains c = { .n = 0 };

	(void)state;
	assert_non_null(f);
	/* Task 0: its hand-out not seen (before the tool attached): 3 points. */
	mark(f, WORKER_A, WORKER_A, 110, false, false, 1, 0, true);
	mark(f, WORKER_A, WORKER_A, 200, true, true, 1, 0, true);
	mark(f, PARENT, 12, 210, true, false, 1, 0, true);
	/* Task 1: the worker's marker not written (too deep): no point to bind to. */
	mark(f, PARENT, 11, 300, false, true, 1, 1, true);
	mark(f, WORKER_B, WORKER_B, 310, false, false, 1, 1, false);
	/* Task 2: only handed out and taken: 2 points, still a flow. */
	mark(f, PARENT, 11, 400, false, true, 1, 2, true);
	mark(f, WORKER_B, WORKER_B, 410, false, false, 1, 2, true);
	assert_int_equal(flows__unbound(f), 1); /* only the worker's marker never written */
	assert_int_equal(flows__join(f, collect, &c), 2);
	assert_string_equal(c.text[0], "20:20@110 20:20@200 10:12@210");
	assert_string_equal(c.text[1], "10:11@400 30:30@410");
	flows__free(f);
}

static void test_flows__keeps_a_bounded_number(void **state)
{
	struct flows *f = flows__new();
	struct chains c = { .n = 0 };
	uint32_t i;

	(void)state;
	assert_non_null(f);
	for (i = 0; i < FLOWS_MAX_POINTS + 3; i++)
		mark(f, PARENT, 11, 100 + i, false, true, 0, i, false);
	assert_int_equal(flows__dropped(f), 3);
	/* None was written: nothing to join, and nothing joined past the bound. */
	assert_int_equal(flows__join(f, collect, &c), 0);
	flows__free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_flows__one_chain_per_task_in_time_order),
		cmocka_unit_test(test_flows__equal_numbers_apart_by_process_and_time),
		cmocka_unit_test(test_flows__partial_chains_and_unwritten_markers),
		cmocka_unit_test(test_flows__keeps_a_bounded_number),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
