/* Tests of off-CPU spans: switch-outs paired with switch-ins as the records go out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "records.h"

/* pids that can't exist (above pid_max): nothing is read from outside for them. */
#define PID 4194400U
#define TID 4194401U

struct switch_record {
	struct perf_event_header header;
	uint32_t pid, tid;
	uint64_t time;
	uint32_t cpu, res;
	uint64_t id;
};

static struct qrec *switch_rec(uint16_t misc, uint32_t tid, uint64_t time)
{
	struct switch_record r = {
		{ PERF_RECORD_SWITCH, misc, sizeof(r) }, PID, tid, time, 1, 0, 0
	};
	struct qrec *q = test_qrec(&r, sizeof(r), time);

	assert_non_null(q);
	q->cpu = 1;
	return q;
}

static int setup(void **state)
{
	struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
				     .frequency_hz = 1000,
				     .mode = SAMPLER_MODE_WALL,
				     .stack_bytes = 8192 };
	struct sampler *s = sampler__new(&opts);

	if (!s)
		return -1;
	s->watermark = UINT64_MAX / 2;
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	sampler__free(*state);
	return 0;
}

static void push(struct sampler *s, struct qrec *q)
{
	assert_int_equal(queue__push(&s->queue, q), 0);
}

static void test_offcpu__blocked_wait_is_paired(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;

	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 1000));
	push(s, switch_rec(0, TID, 5000));
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->kind, SREC_OFF_CPU);
	assert_int_equal(r->pid, PID);
	assert_int_equal(r->tid, TID);
	assert_int_equal(r->time_ns, 1000);
	assert_int_equal(r->sample.end_ns, 5000);
	assert_int_equal(r->sample.wait, SAMPLER_WAIT_BLOCKED);
	assert_int_equal(r->sample.npy, 0);
	assert_null(sampler__next(s));
}

static void test_offcpu__preemption(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;

	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT, TID,
			   2000));
	push(s, switch_rec(0, TID, 2500));
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->sample.wait, SAMPLER_WAIT_PREEMPTED);
	assert_int_equal(r->sample.end_ns - r->time_ns, 500);
}

/*
 * A switch-in without its switch-out yields nothing. A task's first (a new task, or one
 * from before we started) never switched out; one after it lost its switch-out record
 * and counts as unpaired.
 */
static void test_offcpu__unpaired_switch_in(void **state)
{
	struct sampler *s = *state;
	struct sampler_stats st;
	const struct sampler_rec *r;

	push(s, switch_rec(0, TID, 3000));
	assert_null(sampler__next(s));
	sampler__stats(s, &st);
	assert_int_equal(st.unpaired_switches, 0);
	assert_int_equal(st.off_cpu_spans, 0);

	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 4000));
	push(s, switch_rec(0, TID, 5000));
	push(s, switch_rec(0, TID, 7000));
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->sample.end_ns, 5000);
	assert_null(sampler__next(s));
	sampler__stats(s, &st);
	assert_int_equal(st.unpaired_switches, 1);
	assert_int_equal(st.off_cpu_spans, 1);
}

/* Threads are paired separately, whatever the interleaving. */
static void test_offcpu__threads_apart(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;

	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 100));
	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID + 1, 200));
	push(s, switch_rec(0, TID + 1, 300));
	push(s, switch_rec(0, TID, 400));
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->tid, TID + 1);
	assert_int_equal(r->time_ns, 200);
	assert_int_equal(r->sample.end_ns, 300);
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->tid, TID);
	assert_int_equal(r->time_ns, 100);
	assert_int_equal(r->sample.end_ns, 400);
}

/* Nothing newer than the watermark goes out: its switch-in may be on another CPU. */
static void test_offcpu__waits_for_the_watermark(void **state)
{
	struct sampler *s = *state;

	s->watermark = 1500;
	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 1000));
	push(s, switch_rec(0, TID, 2000));
	assert_null(sampler__next(s));
	s->watermark = 2000;
	assert_non_null(sampler__next(s));
}

/* At the stop, a thread still waiting gets a span up to the stop. */
static void test_offcpu__stop_closes_waits(void **state)
{
	struct sampler *s = *state;
	const struct sampler_rec *r;

	push(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 1000));
	sampler__stop(s);
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->kind, SREC_OFF_CPU);
	assert_int_equal(r->time_ns, 1000);
	assert_int_equal(r->sample.end_ns, s->stop_ns);
	assert_null(sampler__next(s));
}

/*
 * The drain's switch notes are emptied in place after waiting threads were looked at:
 * the next drain notes into the same map (it used to be replaced by an unchecked new one).
 */
static void test_offcpu__switch_notes_survive_a_drain(void **state)
{
	struct sampler *s = *state;
	struct hashmap *notes = s->pending_outs;
	struct qrec *q = switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, 1000);

	track_switch(s, q);
	assert_int_equal(hashmap__count(s->pending_outs), 1);
	capture_waiting(s);
	assert_ptr_equal(s->pending_outs, notes);
	assert_int_equal(hashmap__count(s->pending_outs), 0);
	track_switch(s, q);
	assert_int_equal(hashmap__count(s->pending_outs), 1);
	qrec_free(q);
}

/* Follows @q as the drainer does (Python stacks, switch notes), then queues it. */
static void follow(struct sampler *s, struct qrec *q)
{
	track_python(s, q);
	track_switch(s, q);
	push(s, q);
}

/*
 * The kernel read a switch-out at 1.8 ms; perf's next record of the thread is a
 * switch-out at 5.8 ms (its records of the 1.8 ms switch and of the switch-in after
 * it never came: seen under a CPU hog). Unseen since, the thread waited from 1.8 ms,
 * with the kernel's stack, a start said to be estimated. Had it been seen since (a
 * switch-in at 3 ms), the reading would be another switch's: not taken.
 */
static void test_offcpu__kernel_saw_the_switch_first(void **state)
{
	struct sampler *s = *state;
	struct cpython_process *proc = test_python_process(s, PID);
	const struct sampler_rec *r;
	struct task_state *t = task_get(s, PID, TID, true);
	struct sampler_stats st;
	int seen;

	assert_non_null(proc);
	assert_non_null(t);
	for (seen = 0; seen < 2; seen++) {
		uint64_t base = seen * 10000000ULL;
		/* What the kernel read at a switch-out at 1.8 ms. */
		struct py_stack *read =
			test_py_stack(proc, 2, 0x2000, base + 1800000, base + 1800000);

		assert_non_null(read);
		follow(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT, TID, base + 900000));
		follow(s, switch_rec(0, TID, base + 1000000));
		assert_non_null(sampler__next(s));
		read->kernel = read->exact = true;
		py_fifo_push(&t->kernel_outs, read);
		if (seen)
			follow(s, switch_rec(0, TID, base + 3000000)); /* unpaired: no span */
		follow(s,
		       switch_rec(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
				  TID, base + 5800000));
		follow(s, switch_rec(0, TID, base + 6000000));
		r = sampler__next(s);
		assert_non_null(r);
		assert_int_equal(r->kind, SREC_OFF_CPU);
		assert_int_equal(r->sample.end_ns, base + 6000000);
		assert_int_equal(r->time_ns, base + (seen ? 5800000 : 1800000));
		assert_int_equal(r->sample.npy, seen ? 0 : 2);
		/* The start taken from the kernel's reading is said to be an estimate. */
		assert_int_equal(r->sample.start_estimated, !seen);
	}
	sampler__stats(s, &st);
	assert_int_equal(st.kernel_switches_early, 1);
}

/*
 * A sample's stack read late, 0.6 ms after a switch-out that followed the sample, while
 * the thread still waited: the thread could not move, so that read is the wait's stack,
 * whole (before, the wait got only what it shared with the read before the sample).
 * Had the thread run again before the read ended, the read would be a later moment's.
 */
static void test_offcpu__late_read_inside_the_wait(void **state)
{
	struct sampler *s = *state;
	struct cpython_process *proc = test_python_process(s, PID);
	struct task_state *t = task_get(s, PID, TID, true);
	const struct sampler_rec *r;
	struct sampler_stats st;
	int inside;

	assert_non_null(proc);
	assert_non_null(t);
	for (inside = 1; inside >= 0; inside--) {
		uint64_t base = (1 - inside) * 10000000ULL;
		/* Read for a sample at 1 ms in time; for one at 1.9 ms at 2.6-2.65 ms. */
		struct py_stack *late =
			test_py_stack(proc, 3, 0x7222, base + 1900000, base + 2650000);

		assert_non_null(late);
		late->walk_ns = 50000;
		test_remember(t, proc, 0x5111, base + 1000000, base + 1100000);
		remember_py(t, late);
		py_stack_free(late);
		follow(s,
		       switch_rec(PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT,
				  TID, base + 2000000));
		follow(s, switch_rec(0, TID, base + (inside ? 3000000 : 2620000)));
		r = sampler__next(s);
		assert_non_null(r);
		assert_int_equal(r->kind, SREC_OFF_CPU);
		/* Else what the two reads share, from the switch-out on (no read after it). */
		assert_int_equal(r->sample.npy, inside ? 3 : 2);
		assert_int_equal(r->sample.py_frames[0].code, inside ? 0x7222 : 0x1001);
		assert_int_equal(r->sample.py_source, inside ? SAMPLER_PY_READ : SAMPLER_PY_BEFORE);
	}
	sampler__stats(s, &st);
	assert_int_equal(st.late_reads_in_waits, 1);
}

/* A sample of the thread at @time, read from outside: @read its Python stack (taken). */
static struct qrec *read_sample(uint64_t time, struct py_stack *read)
{
	struct builder b;
	struct qrec *q;

	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 0, 0);
	memcpy(b.buf + 16, &(uint32_t){ PID }, 4);
	memcpy(b.buf + 20, &(uint32_t){ TID }, 4);
	memcpy(b.buf + 24, &time, 8);
	q = test_qrec(b.buf, b.len, time);
	assert_non_null(q);
	q->py = read;
	return q;
}

/*
 * A sample read in time from outside, but after its thread blocked and woke: it goes
 * out with what the reads before and after it share, the wait after it with its own
 * stack. Preempted instead, the thread resumed where it was: the read stands.
 */
static void test_offcpu__sample_read_after_a_block(void **state)
{
	struct sampler *s = *state;
	struct cpython_process *proc = test_python_process(s, PID);
	struct task_state *t = task_get(s, PID, TID, true);
	const struct sampler_rec *r;
	int blocked;

	assert_non_null(proc);
	assert_non_null(t);
	for (blocked = 1; blocked >= 0; blocked--) {
		uint64_t base = (1 - blocked) * 10000000ULL;
		struct py_stack *read =
			test_py_stack(proc, 3, 0x7222, base + 2000000, base + 2600000);

		assert_non_null(read);
		read->walk_ns = 100000;
		test_remember(t, proc, 0x5111, base + 1000000, base + 1100000);
		/* As track_sample() keeps a read made in time. */
		remember_py(t, read);
		trial_open(t, base + 2000000, read, NULL);
		push(s, read_sample(base + 2000000, read));
		follow(s, switch_rec(PERF_RECORD_MISC_SWITCH_OUT |
					     (blocked ? 0 : PERF_RECORD_MISC_SWITCH_OUT_PREEMPT),
				     TID, base + 2200000));
		follow(s, switch_rec(0, TID, base + 2400000));
		r = sampler__next(s);
		assert_non_null(r);
		assert_int_equal(r->kind, SREC_SAMPLE);
		assert_int_equal(r->time_ns, base + 2000000);
		assert_int_equal(r->sample.npy, blocked ? 2 : 3);
		assert_int_equal(r->sample.py_frames[0].code, blocked ? 0x1001 : 0x7222);
		assert_int_equal(r->sample.py_source,
				 blocked ? SAMPLER_PY_SHARED : SAMPLER_PY_READ);
		r = sampler__next(s);
		assert_non_null(r);
		assert_int_equal(r->kind, SREC_OFF_CPU);
		assert_null(sampler__next(s));
	}
}

/*
 * A sample unread in time (its read came 11 ms late, in other calls), with only an old
 * read before it, goes out without Python frames at first; the thread's next sample,
 * read by the kernel 1 ms after it, brackets it with that old read, and it goes out
 * with what they share. (A pool worker's sample after a 10 ms sleep had only its late
 * read, made in the next job, to go by: no frames, the worker's loop cut in two.)
 */
static void test_offcpu__unread_sample_bracketed_by_the_next(void **state)
{
	struct sampler *s = *state;
	struct cpython_process *proc = test_python_process(s, PID);
	struct task_state *t = task_get(s, PID, TID, true);
	struct py_stack *late = test_py_stack(proc, 3, 0x7222, 9000000, 20000000);
	struct py_stack *next = test_py_stack(proc, 3, 0x5111, 10000000, 10000000);
	const struct sampler_rec *r;

	assert_non_null(proc);
	assert_non_null(t);
	assert_non_null(late);
	assert_non_null(next);
	assert_int_equal(hashmap__set(s->roles, 77, (void *)(uintptr_t)ROLE_CLOCK), 0);
	test_remember(t, proc, 0x5111, 1000000, 1100000);
	late->walk_ns = 100000;
	next->kernel = true;
	follow(s, read_sample(9000000, late));
	follow(s, read_sample(10000000, next));
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->time_ns, 9000000);
	assert_int_equal(r->sample.npy, 3);
	assert_int_equal(r->sample.py_frames[0].code, 0x5111);
	assert_int_equal(r->sample.py_source, SAMPLER_PY_SHARED);
	r = sampler__next(s);
	assert_non_null(r);
	assert_int_equal(r->time_ns, 10000000);
	assert_int_equal(r->sample.py_source, SAMPLER_PY_READ);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_offcpu__blocked_wait_is_paired, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__preemption, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__unpaired_switch_in, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__threads_apart, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__waits_for_the_watermark, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__stop_closes_waits, setup, teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__switch_notes_survive_a_drain, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__late_read_inside_the_wait, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__sample_read_after_a_block, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__unread_sample_bracketed_by_the_next,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_offcpu__kernel_saw_the_switch_first, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("offcpu", tests, NULL, NULL);
}
