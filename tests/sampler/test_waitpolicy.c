/* Tests of the wait-stack policy: which stack a wait or an unread sample gets, and when. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../sampler/waitpolicy.h"

#define MS 1000000ULL
#define PERIOD MS /* 1 kHz */

/* A read of @n frames for a sample at @at_ns, walked from @start_ns to @read_ns. */
static struct policy_read read_of(uint64_t at_ns, uint64_t start_ns, uint64_t read_ns, uint32_t n)
{
	struct policy_read r = {
		.known = true, .at_ns = at_ns, .start_ns = start_ns, .read_ns = read_ns, .n = n
	};

	return r;
}

static void assert_choice(struct policy_choice c, enum policy_source source, uint32_t keep)
{
	assert_int_equal(c.source, source);
	assert_int_equal(c.keep, keep);
}

/* A read after the moment stands only where it agrees with a read before, close by. */
static void test_waitpolicy__moment_between_two_reads(void **state)
{
	struct policy_moment m = { .at_ns = 100 * MS, .period_ns = PERIOD };

	(void)state;
	m.after = read_of(99 * MS, 101 * MS, 101 * MS, 9);
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0); /* no read before */
	m.before = read_of(98 * MS, 98 * MS, 99 * MS, 7);
	m.shared = 5;
	assert_choice(policy_at_moment(&m), POLICY_SHARED, 5);
	m.shared = 0;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0); /* nothing in common */
	/* 10 ms apart (8 periods at 1 kHz is less): the widest bracket, still taken. */
	m.shared = 5;
	m.before.read_ns = 91 * MS;
	assert_choice(policy_at_moment(&m), POLICY_SHARED, 5);
	/* Further apart: what both show may have returned and been called again. */
	m.before.read_ns = 91 * MS - 1;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	/* ... unless the thread waited in between (its running time is what counts) ... */
	m.before.waited_ns = 1 * MS;
	m.waited_ns = 2 * MS;
	assert_choice(policy_at_moment(&m), POLICY_SHARED, 5);
	m.waited_ns = 1 * MS;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	/* ... or inside one pool task, read in both. */
	m.same_task = true;
	assert_choice(policy_at_moment(&m), POLICY_SHARED, 5);
	/* At 100 Hz the bracket is 8 periods, 80 ms. */
	m.same_task = false;
	m.period_ns = 10 * MS;
	m.before.read_ns = 21 * MS;
	assert_choice(policy_at_moment(&m), POLICY_SHARED, 5);
	m.before.read_ns = 21 * MS - 1;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
}

/* With no read after, the latest read stands for up to 4 periods of running after it. */
static void test_waitpolicy__moment_after_a_recent_read(void **state)
{
	struct policy_moment m = { .at_ns = 100 * MS, .period_ns = PERIOD };

	(void)state;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0); /* nothing read */
	m.before = read_of(96 * MS, 96 * MS, 96 * MS + 50000, 7);
	assert_choice(policy_at_moment(&m), POLICY_BEFORE, 7);
	assert_int_equal(policy_at_moment(&m).ran_ns, 4 * MS);
	m.before.at_ns = 96 * MS - 1;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	/* 20 ms ago, but the thread waited 17 of them (preempted): it ran 3 ms since. */
	m.before = read_of(80 * MS, 80 * MS, 80 * MS, 7);
	m.before.waited_ns = 5 * MS;
	m.waited_ns = 22 * MS;
	assert_choice(policy_at_moment(&m), POLICY_BEFORE, 7);
	assert_int_equal(policy_at_moment(&m).ran_ns, 3 * MS);
	m.waited_ns = 21 * MS; /* 4 ms */
	assert_choice(policy_at_moment(&m), POLICY_BEFORE, 7);
	m.waited_ns = 21 * MS - 1;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	m.waited_ns = 0;
	/* Read for a moment after this one (an exact read extended to its wait's end). */
	m.before.at_ns = 100 * MS + 1;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	/* Of another image (before an exec): never. */
	m.before = read_of(99 * MS, 99 * MS, 99 * MS, 7);
	m.before.known = false;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
	/* A read after that shares nothing is not made up for by a recent one before. */
	m.before.known = true;
	m.after = read_of(99 * MS, 101 * MS, 101 * MS, 3);
	m.shared = 0;
	assert_choice(policy_at_moment(&m), POLICY_NONE, 0);
}

/* A read made wholly while the thread waited is the wait's stack, whichever it was. */
static void test_waitpolicy__wait_read_while_it_waited(void **state)
{
	struct policy_wait w = { .start_ns = 100 * MS, .end_ns = 110 * MS, .period_ns = PERIOD };
	uint32_t which = 9;

	(void)state;
	w.start = read_of(99 * MS, 99 * MS, 99 * MS, 6);
	w.after = read_of(111 * MS, 111 * MS, 111 * MS, 6);
	w.shared = 4;
	w.during[0] = read_of(100 * MS, 100 * MS, 104 * MS, 8);
	assert_choice(policy_of_wait(&w, &which), POLICY_DURING, 8);
	assert_int_equal(which, 0);
	/* Read after the wait had ended: of a later moment (a stale capture). */
	w.during[0].read_ns = 110 * MS + 1;
	assert_choice(policy_of_wait(&w, &which), POLICY_SHARED, 4);
	/* A sample's read that fell inside the wait counts as well ... */
	w.during[1] = read_of(99 * MS, 100 * MS + 20000, 100 * MS + 90000, 7);
	assert_choice(policy_of_wait(&w, &which), POLICY_DURING, 7);
	assert_int_equal(which, 1);
	/* ... but not one begun before the switch-out: the thread still ran. */
	w.during[1].start_ns = 100 * MS - 1;
	assert_choice(policy_of_wait(&w, &which), POLICY_SHARED, 4);
	/* Read while it waited, with no Python frame: exactly none, not a guess. */
	w.during[0] = read_of(100 * MS, 100 * MS, 100 * MS, 0);
	assert_choice(policy_of_wait(&w, &which), POLICY_DURING, 0);
	assert_int_equal(which, 0);
}

/* Else the stack at its start, cut to what the first read after shares, or alone if recent. */
static void test_waitpolicy__wait_guessed(void **state)
{
	struct policy_wait w = { .start_ns = 100 * MS, .end_ns = 103 * MS, .period_ns = PERIOD };
	uint32_t which;

	(void)state;
	assert_choice(policy_of_wait(&w, &which), POLICY_NONE, 0);
	w.after = read_of(104 * MS, 104 * MS, 104 * MS, 6);
	assert_choice(policy_of_wait(&w, &which), POLICY_NONE, 0); /* no start */
	w.start = read_of(99 * MS, 99 * MS, 99 * MS, 6);
	w.shared = 3;
	assert_choice(policy_of_wait(&w, &which), POLICY_SHARED, 3);
	w.shared = 0;
	assert_choice(policy_of_wait(&w, &which), POLICY_NONE, 0);
	/*
	 * Known before only: when the thread's running from that read to the wait and the
	 * wait itself together last at most 4 periods.
	 */
	w.after.known = false;
	w.start.ran_ns = 1 * MS;
	assert_choice(policy_of_wait(&w, &which), POLICY_BEFORE, 6);
	w.end_ns = 103 * MS + 1;
	assert_choice(policy_of_wait(&w, &which), POLICY_NONE, 0);
	w.start.ran_ns = 0;
	assert_choice(policy_of_wait(&w, &which), POLICY_BEFORE, 6);
}

/* A read stands for its own sample when made within 2 periods of it. */
static void test_waitpolicy__prompt_reads(void **state)
{
	(void)state;
	assert_true(policy_read_prompt(100 * MS, 100 * MS, PERIOD));
	assert_true(policy_read_prompt(100 * MS, 102 * MS, PERIOD));
	assert_false(policy_read_prompt(100 * MS, 102 * MS + 1, PERIOD));
	assert_true(policy_read_prompt(100 * MS, 110 * MS, 5 * PERIOD));
}

/*
 * A read on trial, at its edges: a wait it lies inside (from its start to its end
 * exactly) makes it stand; one it began after, blocked, makes it fall; preempted, or
 * begun before the wait, it stays open. Another read between the sample and it falls it
 * only if it shows other calls, strictly between. At the next sample a read in time
 * stands, a late one if it ended by then.
 */
static void test_waitpolicy__reads_on_trial(void **state)
{
	struct policy_read r = {
		.known = true, .at_ns = 100 * MS, .start_ns = 103 * MS, .read_ns = 104 * MS
	};

	(void)state;
	assert_int_equal(policy_read_after_wait(&r, 103 * MS, 104 * MS, true), POLICY_STANDS);
	assert_int_equal(policy_read_after_wait(&r, 103 * MS, 104 * MS - 1, true), POLICY_FALLS);
	assert_int_equal(policy_read_after_wait(&r, 101 * MS, 102 * MS, true), POLICY_FALLS);
	assert_int_equal(policy_read_after_wait(&r, 101 * MS, 102 * MS, false), POLICY_OPEN);
	assert_int_equal(policy_read_after_wait(&r, 103 * MS + 1, 105 * MS, true), POLICY_OPEN);
	assert_int_equal(policy_read_seen_between(&r, 101 * MS, false), POLICY_FALLS);
	assert_int_equal(policy_read_seen_between(&r, 101 * MS, true), POLICY_OPEN);
	assert_int_equal(policy_read_seen_between(&r, 100 * MS, false), POLICY_OPEN);
	assert_int_equal(policy_read_seen_between(&r, 103 * MS, false), POLICY_OPEN);
	assert_int_equal(policy_read_at_next(&r, 101 * MS, false), POLICY_STANDS);
	assert_int_equal(policy_read_at_next(&r, 104 * MS, true), POLICY_STANDS);
	assert_int_equal(policy_read_at_next(&r, 104 * MS - 1, true), POLICY_FALLS);
	r.known = false;
	assert_int_equal(policy_read_after_wait(&r, 101 * MS, 102 * MS, true), POLICY_OPEN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_waitpolicy__moment_between_two_reads),
		cmocka_unit_test(test_waitpolicy__moment_after_a_recent_read),
		cmocka_unit_test(test_waitpolicy__wait_read_while_it_waited),
		cmocka_unit_test(test_waitpolicy__wait_guessed),
		cmocka_unit_test(test_waitpolicy__prompt_reads),
		cmocka_unit_test(test_waitpolicy__reads_on_trial),
	};

	return cmocka_run_group_tests_name("waitpolicy", tests, NULL, NULL);
}
