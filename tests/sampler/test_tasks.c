/* Tests of process liveness: processes seen dead end with their exit, real or made up. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "records.h"

/* pids that can't exist (above pid_max): /proc says they are gone. */
#define PID 4194400U

static struct qrec *task_rec(uint32_t type, uint32_t pid, uint32_t ppid, uint32_t tid,
			     uint64_t time)
{
	struct qrec *q = test_task_qrec(type, pid, ppid, tid, time);

	assert_non_null(q);
	return q;
}

static int setup(void **state)
{
	struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
				     .frequency_hz = 1000,
				     .stack_bytes = 8192 };
	struct sampler *s = sampler__new(&opts);

	if (!s)
		return -1;
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	sampler__free(*state);
	return 0;
}

/*
 * Seen dead by the drainer before its exit record was handed out: the exit still says
 * it was the process's last (it used to be forgotten first: no exit event at all).
 */
static void test_tasks__seen_dead_before_its_exit(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;
	uint64_t exit_time = sampler_now_ns();

	proc_add_task(s, PID, true);
	assert_int_equal(
		queue__push(&s->queue, task_rec(PERF_RECORD_EXIT, PID, PID, PID, exit_time)), 0);
	check_liveness(s);
	assert_false(sampler__done(s)); /* its exit has not gone out */
	s->watermark = exit_time + 1;
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->kind, SREC_EXIT);
	assert_int_equal(r->time_ns, exit_time);
	assert_true(r->exit.last_in_process);
	assert_true(sampler__done(s));
	assert_null(sampler__next(s));
}

/* Its exit record lost: once the hand-out is well past, one is made up, threads first. */
static void test_tasks__lost_exit_is_made_up(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;
	struct sampler_stats st;
	uint64_t gone_ns;

	proc_add_task(s, PID, true);
	assert_non_null(task_get(s, PID, PID, true));
	assert_non_null(task_get(s, PID, PID + 1, true));
	proc_add_task(s, PID, false);
	check_liveness(s);
	gone_ns = ((struct proc_state *)hashmap__get(s->procs, PID))->gone_ns;
	s->watermark = gone_ns + EXIT_GRACE_NS / 2;
	assert_null(sampler__next(s)); /* within the grace period: it may still come */
	assert_false(sampler__done(s));
	s->watermark = gone_ns + 2 * EXIT_GRACE_NS;
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->kind, SREC_EXIT);
	assert_int_equal(r->tid, PID + 1);
	assert_false(r->exit.last_in_process);
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->tid, PID);
	assert_int_equal(r->time_ns, gone_ns);
	assert_true(r->exit.last_in_process);
	assert_null(sampler__next(s));
	assert_true(sampler__done(s));
	sampler__stats(s, &st);
	assert_int_equal(st.exits_assumed, 1);
	assert_null(hashmap__get(s->tasks, PID + 1));
}

/*
 * A parent seen dead before the fork of its child went out: the tree is not over until
 * the hand-out has passed it (the tool used to stop there, with the child running).
 */
static void test_tasks__not_done_before_the_child_is_known(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;
	uint64_t t0 = sampler_now_ns();

	proc_add_task(s, PID, true);
	assert_int_equal(
		queue__push(&s->queue, task_rec(PERF_RECORD_FORK, PID + 5, PID, PID + 5, t0)), 0);
	assert_int_equal(queue__push(&s->queue, task_rec(PERF_RECORD_EXIT, PID, PID, PID, t0 + 1)),
			 0);
	check_liveness(s);
	assert_false(sampler__done(s));
	s->watermark = t0 + 2;
	r = sampler__next(s);
	assert_int_equal(r->kind, SREC_FORK);
	r = sampler__next(s);
	assert_int_equal(r->kind, SREC_EXIT);
	assert_true(r->exit.last_in_process);
	assert_false(sampler__done(s)); /* the child lives on */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tasks__seen_dead_before_its_exit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tasks__lost_exit_is_made_up, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tasks__not_done_before_the_child_is_known,
						setup, teardown),
	};

	return cmocka_run_group_tests_name("tasks", tests, NULL, NULL);
}
