/* Tests of the drain-time Python walks' bookkeeping, with allocation failures injected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "records.h"

void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);

static int fail_reallocs; /* how many of the next reallocs fail */

void *__wrap_realloc(void *p, size_t size)
{
	if (fail_reallocs > 0) {
		fail_reallocs--;
		return NULL;
	}
	return __real_realloc(p, size);
}

static struct py_stack *walked_stack(uint32_t n)
{
	struct py_stack *ps = calloc(1, sizeof(*ps) + n * sizeof(ps->frames[0]));
	uint32_t i;

	assert_non_null(ps);
	ps->n = n;
	for (i = 0; i < n; i++)
		ps->frames[i].code = 0x1000 + i;
	return ps;
}

/*
 * A stack walked while the list of fresh stacks can't grow is dropped, not leaked
 * (LeakSanitizer fails the test otherwise); the next one is kept.
 */
static void test_python__fresh_stack_survives_failed_growth(void **state)
{
	struct sampler *s = test_sampler();
	struct py_stack *ps = walked_stack(3);

	(void)state;
	assert_non_null(s);
	fail_reallocs = 1;
	fresh_stack(s, ps);
	assert_int_equal(s->nfresh, 0);
	fresh_stack(s, ps);
	assert_int_equal(s->nfresh, 1);
	assert_int_equal(s->fresh[0]->n, 3);
	assert_int_equal(s->fresh[0]->frames[2].code, 0x1002);
	py_stack_free(ps);
	sampler__free(s);
}

/* A sampler at 1 kHz knowing one Python process with one thread (pids that can't exist). */
static struct sampler *one_thread(struct cpython_process **proc, struct task_state **t)
{
	struct sampler *s = test_sampler();

	assert_non_null(s);
	*proc = test_python_process(s, 4194400);
	assert_non_null(*proc);
	*t = task_get(s, 4194400, 4194401, true);
	assert_non_null(*t);
	return s;
}

/*
 * guess_at(@at) is @n frames, @innermost the innermost's code, read at @read_ns (0: any
 * time).
 */
static void assert_guess(struct sampler *s, const struct task_state *t, uint64_t at, uint32_t n,
			 uint64_t innermost, uint64_t read_ns)
{
	struct py_stack *g = guess_at(s, t, at, false);

	assert_non_null(g);
	assert_int_equal(g->n, n);
	assert_int_equal(g->frames[0].code, innermost);
	if (read_ns)
		assert_int_equal(g->read_ns, read_ns);
	py_stack_free(g);
}

/*
 * A switch-out's guess is the latest stack only when that was read by then. Read later
 * (the drainer got to the sample after the thread ran on, into other calls), it is kept
 * only where it agrees with the stack read before it; with none, no Python frames.
 * (tests/e2e/test_waits.py caught a preemption in a spin loop shown under the call made
 * after the loop, read late on a loaded machine.)
 */
static void test_python__guess_read_after_the_switch(void **state)
{
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = one_thread(&proc, &t);

	(void)state;
	/* Read in time: the spin loop's stack, read 0.1 ms after its sample. */
	test_remember(t, proc, 0x5111, 1000000, 1100000);
	assert_guess(s, t, 1500000, 3, 0x5111, 0);
	/* The next sample (in the loop still) read at 2.6 ms, in the call after the loop. */
	test_remember(t, proc, 0x7222, 2000000, 2600000);
	/* A switch-out at 2.3 ms: the loop or the later call, unknown; their caller held. */
	assert_guess(s, t, 2300000, 2, 0x1001, 0);
	/* At 2.7 ms, after the read: all of it. */
	assert_guess(s, t, 2700000, 3, 0x7222, 0);
	/*
	 * The one before read after the switch-out too (a drainer a period behind): the
	 * first read after it and the latest before it (at 2.6 and 1.1 ms) bracket it.
	 */
	test_remember(t, proc, 0x7222, 2500000, 2900000);
	assert_guess(s, t, 2550000, 2, 0x1001, 2600000);
	/* Only the one-sided guess's window after the latest read: nothing known past it. */
	assert_null(guess_at(s, t, 2500000 + 4000001, false));
	/* Reads more than 10 ms apart bracket nothing (a call could have been made again). */
	test_remember(t, proc, 0x7222, 20000000, 20500000);
	assert_null(guess_at(s, t, 15000000, false));
	/* Before every read kept (the one at 1.1 ms is the oldest): nothing known. */
	assert_null(guess_at(s, t, 1050000, false));
	sampler__free(s);
}

/*
 * The reads around a moment are the nearest by when they were made, not by when they were
 * kept: a sample read late is kept as it is followed, a read the kernel made meanwhile
 * (a pool message's) after it. The first after the moment is the kernel's.
 */
static void test_python__guess_nearest_reads(void **state)
{
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = one_thread(&proc, &t);

	(void)state;
	test_remember(t, proc, 0x5111, 800000, 900000);
	/* The sample at 1 ms read at 3.5 ms, in other calls; the kernel's read at 1.5 ms. */
	test_remember(t, proc, 0x7222, 1000000, 3500000);
	test_remember(t, proc, 0x5111, 1500000, 1500000);
	assert_guess(s, t, 1000000, 3, 0x5111, 1500000);
	/* After 1.5 ms, before 3.5: the kernel's is the latest before, the late one after. */
	assert_guess(s, t, 2000000, 2, 0x1001, 3500000);
	sampler__free(s);
}

/* An argument list of one record of parameter @index, whose object is at @object. */
static uint32_t list_id(struct sampler *s, uint8_t index, uint64_t object)
{
	struct cpython_raw_arg a = { 0 };
	bool added;

	a.index = index;
	a.object = object;
	return arg_store__add(s->args, (const uint8_t *)&a, sizeof(a), &added);
}

/* A read of the thread at @read_ns for @at_ns, its loop frame's arguments @loop_args. */
static void remember_read(struct task_state *t, struct cpython_process *proc, uint64_t at_ns,
			  uint64_t read_ns, uint32_t loop_args)
{
	struct py_stack *ps = test_py_stack(proc, 3, 0x5111, at_ns, read_ns);

	assert_non_null(ps);
	ps->frames[1].args = loop_args;
	remember_py(t, ps);
	py_stack_free(ps);
}

/*
 * A sampler with one thread of a process whose pool worker loop is code 0x1001 (the
 * middle frame of test_py_stack's), and argument lists: @unknown (no task locals),
 * @task0 and @task1 (two tasks' numbers, read with the loop).
 */
static struct sampler *pool_worker(struct cpython_process **proc, struct task_state **t,
				   uint32_t *unknown, uint32_t *task0, uint32_t *task1)
{
	static const struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
						  .frequency_hz = 1000,
						  .stack_bytes = 8192 };
	struct sampler *s = sampler__new(&opts);

	assert_non_null(s);
	*proc = test_python_process(s, 4194400);
	assert_non_null(*proc);
	(*proc)->task_codes[0].code = 0x1001;
	(*proc)->task_codes[0].kind = CPYTHON_TASK_MP_POOL;
	(*proc)->ntask_codes = 1;
	*unknown = list_id(s, 0, 0xa000);
	*task0 = list_id(s, CPYTHON_ARG_TASK, 0xb000);
	*task1 = list_id(s, CPYTHON_ARG_TASK, 0xb100);
	assert_true(*unknown && *task0 && *task1);
	*t = task_get(s, 4194400, 4194401, true);
	assert_non_null(*t);
	return s;
}

/*
 * A pool worker's loop read before the loop was known (no task locals) and read after
 * with them is the same call where two reads bracket a moment; two tasks are not.
 */
static void test_python__bracket_across_a_loop_found(void **state)
{
	uint32_t unknown, task0, task1;
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = pool_worker(&proc, &t, &unknown, &task0, &task1);
	struct py_stack *g;

	(void)state;
	remember_read(t, proc, 1000000, 1100000, unknown);
	remember_read(t, proc, 2000000, 2600000, task1);
	g = guess_at(s, t, 2000000, false);
	assert_non_null(g);
	assert_int_equal(g->n, 3);
	assert_int_equal(g->frames[1].args, task1);
	py_stack_free(g);
	/* Another task before: only the root held. */
	remember_read(t, proc, 3000000, 3100000, task0);
	remember_read(t, proc, 4000000, 4600000, task1);
	assert_guess(s, t, 4000000, 1, 0x1002, 0);
	sampler__free(s);
}

/*
 * Reads further apart than the bracket's window (10 ms at 1 kHz) still bracket a moment
 * when both show the same pool task, read with the loop: what they share is that task's
 * (without root under load, a worker's stacks came up to 13 ms late). Not when the tasks
 * differ, nor when the task is not known on both sides. A run of late reads: the read
 * before the moment is found behind several read after it.
 */
static void test_python__bracket_one_task_far_apart(void **state)
{
	uint32_t unknown, task0, task1, k;
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = pool_worker(&proc, &t, &unknown, &task0, &task1);

	(void)state;
	/* Read 1.1 ms, then samples at 2..7 ms all read late, from 16 ms on. */
	remember_read(t, proc, 1000000, 1100000, task0);
	for (k = 0; k < 6; k++)
		remember_read(t, proc, 2000000 + k * 1000000, 16000000 + k * 100000, task0);
	assert_guess(s, t, 2000000, 3, 0x5111, 16000000);
	/* The next task read late as far: nothing known. */
	remember_read(t, proc, 20000000, 20100000, task0);
	remember_read(t, proc, 21000000, 35000000, task1);
	assert_null(guess_at(s, t, 21000000, false));
	/* The task unknown on one side: nothing either. */
	remember_read(t, proc, 40000000, 40100000, unknown);
	remember_read(t, proc, 41000000, 55000000, unknown);
	assert_null(guess_at(s, t, 41000000, false));
	sampler__free(s);
}

/*
 * A read for @t's sample at @sample_ns, walked from 0.1 ms before @read_ns, leaf
 * @leaf, as track_sample() keeps it: the latest stack, on trial; @late: the sample
 * carries a guess meanwhile.
 */
static void read_for(struct task_state *t, struct cpython_process *proc, uint64_t sample_ns,
		     uint64_t read_ns, uint64_t leaf, bool late)
{
	struct py_stack *ps = test_py_stack(proc, 3, leaf, sample_ns, read_ns);

	assert_non_null(ps);
	ps->walk_ns = 100000;
	remember_py(t, ps);
	trial_open(t, sample_ns, ps, late ? ps : NULL);
	if (!late)
		py_stack_free(ps);
}

/*
 * The frames the sample at @sample_ns goes out with if its trial changed them (taken):
 * -1 unchanged, else how many, the innermost's code in *@leaf, and in *@read whether
 * they are the read itself (a late read that stood) rather than a guess.
 */
static int restacked(struct task_state *t, uint64_t sample_ns, uint64_t *leaf, bool *read)
{
	struct py_stack *ps = trial_restacked(t, sample_ns);
	int n = ps ? (int)ps->n : -1;

	*leaf = ps && ps->n ? ps->frames[0].code : 0;
	*read = ps && ps->source == SAMPLER_PY_READ;
	py_stack_free(ps);
	return n;
}

/* Whether the sample at @sample_ns goes out with its late read (taken): it stood. */
static bool stood(struct task_state *t, uint64_t sample_ns)
{
	uint64_t leaf;
	bool read;

	return restacked(t, sample_ns, &leaf, &read) > 0 && read;
}

/* A wait from @out_ns to @in_ns, as python.c follows its switches. */
static void wait_for(struct sampler *s, struct task_state *t, uint64_t out_ns, uint64_t in_ns,
		     bool blocked)
{
	trial_out(t, out_ns, blocked);
	trial_in(s, t, in_ns);
}

/*
 * A sample's stack read late stands for the sample after all when the read was made
 * wholly inside a wait the thread began after it, or ended before its next sample: the
 * thread had run less than a period since the sample. Not when the wait ended first,
 * nor when the next sample came first.
 */
static void test_python__late_read_mended(void **state)
{
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = one_thread(&proc, &t);
	uint64_t leaf;
	bool read;

	(void)state;
	/* Sample at 1 ms, switched out at 1.4 ms, read at 3.4-3.5 ms, back on at 4 ms. */
	read_for(t, proc, 1000000, 3500000, 0x5111, true);
	wait_for(s, t, 1400000, 4000000, true);
	assert_int_equal(restacked(t, 500000, &leaf, &read), -1); /* an earlier sample's */
	assert_int_equal(restacked(t, 1000000, &leaf, &read), 3);
	assert_true(read);
	assert_int_equal(leaf, 0x5111);
	assert_int_equal(restacked(t, 1000000, &leaf, &read), -1); /* taken */
	/* Preempted, back on at 7.45 ms, before the read ended: the thread had run again. */
	read_for(t, proc, 5000000, 7500000, 0x5111, true);
	wait_for(s, t, 5400000, 7450000, false);
	/*
	 * The next sample at 10 ms, before the read ended: the thread ran a period since the
	 * sample (samples fire on its CPU time), the read may be of the later one.
	 */
	read_for(t, proc, 9000000, 11500000, 0x5111, true);
	assert_int_equal(restacked(t, 5000000, &leaf, &read), -1);
	trial_next(s, t, 10000000);
	wait_for(s, t, 10400000, 12000000, true);
	assert_false(stood(t, 9000000));
	/* The next sample after the read ended: less than a period of running: it stands. */
	read_for(t, proc, 20000000, 23500000, 0x5111, true);
	trial_next(s, t, 24000000);
	assert_int_equal(restacked(t, 20000000, &leaf, &read), 3);
	assert_true(read);
	sampler__free(s);
}

/*
 * A read begun after the thread blocked and woke again is not its sample's stack, in
 * time or late: a blocked thread was at a boundary of its work and went on to other
 * work (a pool worker's sample before it received its next job read as that job:
 * test_pool_args, CI). The sample then gets what the reads before and after it share.
 * After a preemption, or made inside the wait, the read stands.
 */
static void test_python__read_after_a_block_falls(void **state)
{
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = one_thread(&proc, &t);
	struct sampler_stats st;
	uint64_t leaf;
	bool read;

	(void)state;
	/* Read at 1.1 ms; the sample at 2 ms read in time at 2.5-2.6 ms, after a block. */
	read_for(t, proc, 1000000, 1100000, 0x5111, false);
	trial_next(s, t, 2000000);
	assert_int_equal(restacked(t, 1000000, &leaf, &read), -1);
	read_for(t, proc, 2000000, 2600000, 0x7222, false);
	wait_for(s, t, 2200000, 2400000, true);
	assert_int_equal(restacked(t, 2000000, &leaf, &read), 2);
	assert_false(read);
	assert_int_equal(leaf, 0x1001);
	/* The same preempted: it stands (nothing changes at the next sample). */
	read_for(t, proc, 3000000, 3600000, 0x7222, false);
	wait_for(s, t, 3200000, 3400000, false);
	trial_next(s, t, 4000000);
	assert_int_equal(restacked(t, 3000000, &leaf, &read), -1);
	/* Made inside the block: stands. */
	read_for(t, proc, 4000000, 4600000, 0x7222, false);
	wait_for(s, t, 4200000, 4800000, true);
	trial_next(s, t, 5000000);
	assert_int_equal(restacked(t, 4000000, &leaf, &read), -1);
	/* Begun before the block: the thread was still running, as any read of it. */
	read_for(t, proc, 5000000, 5300000, 0x7222, false);
	wait_for(s, t, 5250000, 5400000, true);
	trial_next(s, t, 6000000);
	assert_int_equal(restacked(t, 5000000, &leaf, &read), -1);
	/* Late, after a block, ended before the next sample: falls (it stood before). */
	read_for(t, proc, 7000000, 9600000, 0x7222, true);
	wait_for(s, t, 7200000, 9000000, true);
	trial_next(s, t, 10000000);
	assert_false(stood(t, 7000000));
	sampler__stats(s, &st);
	assert_int_equal(st.reads_after_blocks, 2);
	sampler__free(s);
}

/*
 * A read that the kernel's own read of the thread, made between the sample and it,
 * shows other calls than: the thread had moved on before it was made (a new pool
 * worker read late showed its first job from before it received it, the kernel's read
 * of the receipt in between: test_pool_args, eBPF). The same calls: it stands.
 */
static void test_python__read_overtaken_falls(void **state)
{
	struct cpython_process *proc;
	struct task_state *t;
	struct sampler *s = one_thread(&proc, &t);
	struct py_stack *seen = test_py_stack(proc, 3, 0x6333, 1400000, 1400000);
	struct py_stack *same = test_py_stack(proc, 3, 0x7222, 4400000, 4400000);
	struct sampler_stats st;
	uint64_t leaf;
	bool read;

	(void)state;
	assert_non_null(seen);
	assert_non_null(same);
	read_for(t, proc, 0, 100000, 0x5111, false);
	trial_next(s, t, 1000000);
	/* Read late, at 3.4-3.5 ms; the kernel saw other calls at 1.4 ms: it falls. */
	read_for(t, proc, 1000000, 3500000, 0x7222, true);
	trial_seen(s, t, 1400000, seen);
	wait_for(s, t, 3000000, 4000000, true); /* would have stood: made inside */
	assert_false(stood(t, 1000000));
	/* In time, at 4.5-4.6 ms; the kernel saw the same calls at 4.4 ms: it stands. */
	read_for(t, proc, 4000000, 4600000, 0x7222, false);
	trial_seen(s, t, 4400000, same);
	trial_next(s, t, 5000000);
	assert_int_equal(restacked(t, 4000000, &leaf, &read), -1);
	/* In time; other calls seen in between: what the reads around it share. */
	read_for(t, proc, 6000000, 6600000, 0x8444, false);
	trial_seen(s, t, 6100000, seen);
	assert_int_equal(restacked(t, 6000000, &leaf, &read), 2);
	assert_false(read);
	assert_int_equal(leaf, 0x1001);
	/* Seen after the read began, or before the sample: says nothing of it. */
	read_for(t, proc, 7000000, 7600000, 0x7222, false);
	trial_seen(s, t, 6900000, seen);
	trial_seen(s, t, 7550000, seen);
	trial_next(s, t, 8000000);
	assert_false(stood(t, 7000000));
	sampler__stats(s, &st);
	assert_int_equal(st.reads_overtaken, 2);
	py_stack_free(seen);
	py_stack_free(same);
	sampler__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_python__fresh_stack_survives_failed_growth),
		cmocka_unit_test(test_python__guess_read_after_the_switch),
		cmocka_unit_test(test_python__guess_nearest_reads),
		cmocka_unit_test(test_python__bracket_across_a_loop_found),
		cmocka_unit_test(test_python__bracket_one_task_far_apart),
		cmocka_unit_test(test_python__late_read_mended),
		cmocka_unit_test(test_python__read_after_a_block_falls),
		cmocka_unit_test(test_python__read_overtaken_falls),
	};

	return cmocka_run_group_tests_name("python", tests, NULL, NULL);
}
