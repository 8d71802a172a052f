/*
 * Tests of the arguments a walk reads with its frames (cpython_walk_args(): walk_args() in
 * cpython/walk.c, with the counts and slots the walk read itself), on synthetic process
 * images of every layout: the built-in 3.8-3.12 ones and 3.13-3.15 _Py_DebugOffsets.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../cpython/cpython.h"
#include "synth_process.h"

static const unsigned minors[] = { 8, 9, 10, 11, 12, 13, 14, 15 };
#define NMINORS (sizeof(minors) / sizeof(minors[0]))

/* A walk's world: the process, and what the latest walk returned. */
struct world {
	struct synth s;
	uint64_t now;
	struct cpython_frame frames[16];
	uint8_t buf[64 * CPYTHON_RAW_ARG_MAX];
	struct cpython_args_out out;
	int n;
};

/*
 * Five frames, innermost first, each of its own code object:
 *   0 leaf(a, b, /, c, d, e, f, *, g, h): 7, 'hello', '日本', None, True, 2.5, [1, 2, 3],
 *     a Widget; then a local, 99
 *   1 mid(x, /, *, y): x deleted, y freed (unmapped); then a local
 *   2 wide(p0 .. p6, *, k0 .. k4): 100 .. 111, of which 8 are read
 *   3 odd(): counts set by the test, its slots 200 .. 208
 *   4 worker(inqueue, outqueue, initializer, initargs, maxtasks, wrap_exception), a
 *     multiprocessing.pool.worker: 1, 2, None, 'café', None, False; its locals job (slot 6,
 *     17) and i (slot 8, 4), a local between them (slot 7, 99)
 */
static void build(struct world *w, unsigned minor)
{
	struct synth *s = &w->s;
	static const uint16_t nihon[] = { 0x65e5, 0x672c };
	static const uint8_t cafe[] = { 'c', 'a', 'f', 0xe9 };
	uint64_t none, slots[5][13];
	unsigned k;

	synth__build(s, minor);
	none = synth__ref(s, s->p->types.addr[CPYTHON_NONE], true);
	slots[0][0] = synth__ref(s, synth__int(s, 7, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	slots[0][1] = synth__ref(s, synth__str(s, 1, true, "hello", 5), false);
	slots[0][2] = synth__ref(s, synth__str(s, 2, false, nihon, 2), false);
	slots[0][3] = none;
	slots[0][4] = synth__ref(s, synth__int(s, 1, SYNTH_TYPE(CPYTHON_TYPE_BOOL)), true);
	slots[0][5] = synth__ref(s, synth__float(s, 2.5), false);
	slots[0][6] = synth__ref(s, synth__list(s, 3), false);
	slots[0][7] = synth__ref(s, synth__object(s, SYNTH_TYPE(SYNTH_T_WIDGET)), false);
	slots[0][8] = synth__ref(s, synth__int(s, 99, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	slots[1][0] = synth__ref(s, 0, false);
	slots[1][1] = SYNTH_UNMAPPED;
	slots[1][2] = slots[0][8];
	for (k = 0; k < 13; k++) {
		slots[2][k] =
			synth__ref(s, synth__int(s, 100 + k, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
		slots[3][k] =
			synth__ref(s, synth__int(s, 200 + k, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	}
	slots[4][0] = synth__ref(s, synth__int(s, 1, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	slots[4][1] = synth__ref(s, synth__int(s, 2, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	slots[4][2] = none;
	slots[4][3] = synth__ref(s, synth__str(s, 1, false, cafe, 4), false);
	slots[4][4] = none;
	slots[4][5] = synth__ref(s, synth__int(s, 0, SYNTH_TYPE(CPYTHON_TYPE_BOOL)), true);
	slots[4][6] = synth__ref(s, synth__int(s, 17, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	slots[4][7] = slots[0][8];
	slots[4][8] = synth__ref(s, synth__int(s, 4, SYNTH_TYPE(CPYTHON_TYPE_INT)), true);
	for (k = 0; k < 5; k++)
		synth__frame(s, synth_frame_at(k), synth_code_at(k),
			     k < 4 ? synth_frame_at(k + 1) : 0, slots[k], 13);
	synth__counts(s, synth_code_at(0), 6, 2, 2);
	synth__counts(s, synth_code_at(1), 1, 1, 1);
	synth__counts(s, synth_code_at(2), 7, 0, 5);
	synth__counts(s, synth_code_at(3), 0, 0, 0);
	synth__counts(s, synth_code_at(4), 6, 0, 0);
	synth__first_frame(s, synth_frame_at(0));
	s->p->task_codes[0] =
		(struct cpython_task_code){ synth_code_at(4), CPYTHON_TASK_MP_POOL, { 6, 8 } };
	s->p->ntask_codes = 1;
}

/* A walk with arguments, into @size bytes of the world's buffer; the frame count. */
static int walk(struct world *w, uint32_t size)
{
	w->out = (struct cpython_args_out){ w->buf, size, 0 };
	w->n = cpython_walk_args(w->s.p, &w->s.mem, SYNTH_TID, ++w->now, w->frames, 16, &w->out,
				 NULL);
	return w->n;
}

static void world_free(struct world *w)
{
	synth__free(&w->s);
}

/* ---- what a frame's arguments decode to ---- */

struct want {
	uint8_t index;
	enum cpython_value_kind kind;
	int64_t i;	  /* INT, BOOL; STR: its length in characters; SIZED: a list's */
	double f;	  /* FLOAT */
	const char *text; /* STR; OTHER: its type's name */
};

#define TASK(which) (CPYTHON_ARG_TASK + (which))

static const struct want leaf_args[] = {
	{ 0, CPYTHON_VALUE_INT, 7, 0, NULL },
	{ 1, CPYTHON_VALUE_STR, 5, 0, "hello" },
	{ 2, CPYTHON_VALUE_STR, 2, 0, "\xe6\x97\xa5\xe6\x9c\xac" },
	{ 3, CPYTHON_VALUE_NONE, 0, 0, NULL },
	{ 4, CPYTHON_VALUE_BOOL, 1, 0, NULL },
	{ 5, CPYTHON_VALUE_FLOAT, 0, 2.5, NULL },
	{ 6, CPYTHON_VALUE_SIZED, 3, 0, NULL },
	{ 7, CPYTHON_VALUE_OTHER, 0, 0, "Widget" },
};

static const struct want mid_args[] = {
	{ 0, CPYTHON_VALUE_UNBOUND, 0, 0, NULL },
	{ 1, CPYTHON_VALUE_UNREADABLE, 0, 0, NULL },
};

/* The worker's parameters, then @ntask task locals @task: into @want, their count. */
static unsigned worker_args(struct want *want, const struct want *task, unsigned ntask)
{
	static const struct want params[] = {
		{ 0, CPYTHON_VALUE_INT, 1, 0, NULL },
		{ 1, CPYTHON_VALUE_INT, 2, 0, NULL },
		{ 2, CPYTHON_VALUE_NONE, 0, 0, NULL },
		{ 3, CPYTHON_VALUE_STR, 4, 0, "caf\xc3\xa9" },
		{ 4, CPYTHON_VALUE_NONE, 0, 0, NULL },
		{ 5, CPYTHON_VALUE_BOOL, 0, 0, NULL },
	};

	memcpy(want, params, sizeof(params));
	if (ntask)
		memcpy(want + 6, task, ntask * sizeof(*task));
	return 6 + ntask;
}

/* multiprocessing.pool.worker's: job and i. */
static const struct want pool_task[] = {
	{ TASK(0), CPYTHON_VALUE_INT, 17, 0, NULL },
	{ TASK(1), CPYTHON_VALUE_INT, 4, 0, NULL },
};

/* @base, @base + 1 ...: @n ints of indices 0 ... */
static void ints_from(struct want *want, unsigned n, int64_t base)
{
	unsigned k;

	for (k = 0; k < n; k++)
		want[k] = (struct want){ (uint8_t)k, CPYTHON_VALUE_INT, base + k, 0, NULL };
}

/* Checks that frame @f of the latest walk has the arguments @want, and only those. */
static void check_frame(struct world *w, int f, const struct want *want, unsigned nwant)
{
	const struct cpython_frame *fr = &w->frames[f];
	const uint8_t *at_buf = w->buf + fr->args_at, *text;
	struct cpython_raw_arg a;
	struct cpython_value v;
	uint32_t at = 0;
	unsigned k = 0;

	if (fr->args_at + fr->args_len > w->out.used)
		fail_msg("3.%u frame %d: its arguments past the walk's bytes", w->s.minor, f);
	cpython_read_type_names(w->s.p, &w->s.mem, at_buf, fr->args_len);
	for (; cpython_next_arg(at_buf, fr->args_len, &at, &a, &text); k++) {
		const struct want *x = &want[k];

		if (k >= nwant)
			fail_msg("3.%u frame %d: %u arguments or more, %u expected", w->s.minor, f,
				 k + 1, nwant);
		cpython_arg_value(&w->s.p->layout, &w->s.p->types, &a, text, &v);
		if (a.index != x->index || v.kind != x->kind)
			fail_msg("3.%u frame %d arg %u: index %u kind %d, expected %u and %d",
				 w->s.minor, f, k, a.index, v.kind, x->index, x->kind);
		if ((x->kind == CPYTHON_VALUE_INT || x->kind == CPYTHON_VALUE_BOOL ||
		     x->kind == CPYTHON_VALUE_STR || x->kind == CPYTHON_VALUE_SIZED) &&
		    v.i != x->i)
			fail_msg("3.%u frame %d arg %u: %lld, expected %lld", w->s.minor, f, k,
				 (long long)v.i, (long long)x->i);
		if (x->kind == CPYTHON_VALUE_FLOAT && v.f != x->f)
			fail_msg("3.%u frame %d arg %u: %g, expected %g", w->s.minor, f, k, v.f,
				 x->f);
		if (x->kind == CPYTHON_VALUE_SIZED && v.sized != CPYTHON_TYPE_LIST)
			fail_msg("3.%u frame %d arg %u: not a list", w->s.minor, f, k);
		if (x->kind == CPYTHON_VALUE_STR && strcmp(v.text, x->text))
			fail_msg("3.%u frame %d arg %u: '%s', expected '%s'", w->s.minor, f, k,
				 v.text, x->text);
		if (x->kind == CPYTHON_VALUE_OTHER &&
		    (!cpython_type_name(w->s.p, v.type) ||
		     strcmp(cpython_type_name(w->s.p, v.type), x->text)))
			fail_msg("3.%u frame %d arg %u: of type %s, expected %s", w->s.minor, f, k,
				 cpython_type_name(w->s.p, v.type), x->text);
	}
	if (k != nwant || at != fr->args_len)
		fail_msg("3.%u frame %d: %u arguments (%u of %u bytes), %u expected", w->s.minor, f,
			 k, at, fr->args_len, nwant);
}

/* Checks the worker's frame (@f) has its parameters, then @ntask task locals @task. */
static void check_worker(struct world *w, int f, const struct want *task, unsigned ntask)
{
	struct want want[CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS];

	check_frame(w, f, want, worker_args(want, task, ntask));
}

/* Every frame's arguments are its own bytes of the buffer, one frame after the other. */
static void check_packed(const struct world *w)
{
	uint32_t at = 0;
	int f;

	for (f = 0; f < w->n; f++) {
		assert_int_equal(w->frames[f].args_at, at);
		at += w->frames[f].args_len;
	}
	assert_int_equal(at, w->out.used);
	assert_true(w->out.used <= w->out.size);
}

static void check_world(struct world *w)
{
	struct want wide[CPYTHON_MAX_ARGS];

	ints_from(wide, CPYTHON_MAX_ARGS, 100);
	check_frame(w, 0, leaf_args, 8);
	check_frame(w, 1, mid_args, 2);
	check_frame(w, 2, wide, CPYTHON_MAX_ARGS);
	check_frame(w, 3, NULL, 0);
	check_worker(w, 4, pool_task, 2);
	check_packed(w);
}

/* ---- the cases ---- */

/*
 * Each value kind read through the walk, in every layout: positional-only, positional
 * and keyword-only parameters counted (locals after them not read), slots deleted or
 * pointing at memory that is gone, a wide frame cut at CPYTHON_MAX_ARGS, and a pool
 * worker's task locals after its parameters.
 */
static void test_walk_args__values(void **state)
{
	struct world w;
	size_t m;
	int f;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		build(&w, minors[m]);
		assert_int_equal(walk(&w, sizeof(w.buf)), 5);
		for (f = 0; f < 5; f++)
			assert_int_equal(w.frames[f].code, synth_code_at((unsigned)f));
		check_world(&w);
		/* A walk without arguments reads the same frames and leaves none. */
		assert_int_equal(cpython_walk_args(w.s.p, &w.s.mem, SYNTH_TID, ++w.now, w.frames,
						   16, NULL, NULL),
				 5);
		for (f = 0; f < 5; f++)
			assert_int_equal(w.frames[f].args_len, 0);
		world_free(&w);
	}
}

/*
 * Code objects whose counts no code has (negative, past 65535, a negative one beside a
 * positive one): their frame has no arguments, the walk goes on, and nothing is read
 * past the slots (ASan: the walk copies at most CPYTHON_MAX_ARGS of them).
 */
static void test_walk_args__hostile_counts(void **state)
{
	static const struct {
		int32_t argcount, posonly, kwonly;
		unsigned want;
	} cases[] = {
		{ -1, 0, 0, 0 },
		{ 0, 0, -1, 0 },
		{ INT32_MIN, 0, 0, 0 },
		{ INT32_MAX, 0, 0, 0 },
		{ 0, 0, INT32_MAX, 0 },
		{ 65536, 0, 0, 0 },
		{ 0, 0, 65536, 0 },
		{ 5, 0, -3, 0 },
		{ -3, 0, 5, 0 },
		{ INT32_MAX, 0, INT32_MAX, 0 },
		{ 65535, 0, 65535, CPYTHON_MAX_ARGS },
		{ 3, 7, 0, 3 },		/* posonly are among argcount: not added */
		{ 2, INT32_MIN, 1, 3 }, /* ... nor read */
		{ 0, 0, 0, 0 },
	};
	struct want odd[CPYTHON_MAX_ARGS];
	struct world w;
	size_t m, i;

	(void)state;
	ints_from(odd, CPYTHON_MAX_ARGS, 200);
	for (m = 0; m < NMINORS; m++) {
		build(&w, minors[m]);
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			synth__counts(&w.s, synth_code_at(3), cases[i].argcount, cases[i].posonly,
				      cases[i].kwonly);
			assert_int_equal(walk(&w, sizeof(w.buf)), 5);
			check_frame(&w, 0, leaf_args, 8);
			check_frame(&w, 3, odd, cases[i].want);
			check_worker(&w, 4, pool_task, 2);
			check_packed(&w);
		}
		world_free(&w);
	}
}

/*
 * A concurrent.futures process worker: its task is its call_item's work_id; between
 * tasks (call_item unbound), or a work item without one, no task. Walks read no task
 * locals of frames of other code, nor of any before the worker's code is known.
 */
static void test_walk_args__task_locals(void **state)
{
	static const struct want work_id[] = { { TASK(0), CPYTHON_VALUE_INT, 12, 0, NULL },
					       { TASK(1), CPYTHON_VALUE_UNBOUND, 0, 0, NULL } };
	static const struct want none[] = { { TASK(0), CPYTHON_VALUE_UNBOUND, 0, 0, NULL },
					    { TASK(1), CPYTHON_VALUE_UNBOUND, 0, 0, NULL } };
	struct world w;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		uint64_t item, twelve;

		build(&w, minors[m]);
		twelve = synth__int(&w.s, 12, SYNTH_TYPE(CPYTHON_TYPE_INT));
		item = synth__with_attr(&w.s, SYNTH_TYPE(SYNTH_T_CALL_ITEM), "work_id",
					synth__ref(&w.s, twelve, true));
		synth_put_u64(synth_frame_at(4) + w.s.l.frame_localsplus + 6 * 8,
			      synth__ref(&w.s, item, false));
		w.s.p->task_codes[0].kind = CPYTHON_TASK_CF_PROCESS;
		assert_int_equal(walk(&w, sizeof(w.buf)), 5);
		check_frame(&w, 0, leaf_args, 8);
		check_worker(&w, 4, work_id, 2);
		check_packed(&w);
		/* A work item whose work_id can't be read (its dict gone): no task. */
		synth_put_u64(item + 16, 0);
		assert_int_equal(walk(&w, sizeof(w.buf)), 5);
		check_worker(&w, 4, none, 2);
		synth_put_u64(synth_frame_at(4) + w.s.l.frame_localsplus + 6 * 8,
			      synth__ref(&w.s, 0, false));
		assert_int_equal(walk(&w, sizeof(w.buf)), 5);
		check_worker(&w, 4, none, 2);
		/* The worker's code not known (yet): its parameters only. */
		w.s.p->ntask_codes = 0;
		assert_int_equal(walk(&w, sizeof(w.buf)), 5);
		check_worker(&w, 4, NULL, 0);
		world_free(&w);
	}
}

/*
 * Arguments that don't fit the buffer are left out, whole records only: the frames
 * after keep none, and none is written past the buffer (ASan).
 */
static void test_walk_args__out_of_room(void **state)
{
	struct world w;
	size_t m;
	int f;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		build(&w, minors[m]);
		/* Room for the first three (an int and two strs of 5 and 4 bytes) only. */
		assert_int_equal(walk(&w, 3 * sizeof(struct cpython_raw_arg) + 2 * 8 +
						  CPYTHON_RAW_ARG_MAX - 1),
				 5);
		check_frame(&w, 0, leaf_args, 3);
		for (f = 1; f < 5; f++)
			check_frame(&w, f, NULL, 0);
		check_packed(&w);
		world_free(&w);
	}
}

/*
 * A frame whose slots end where its memory does (the end of a data stack chunk): the
 * slots past its parameters can't be read with it, those of its parameters can.
 */
static void test_walk_args__frame_at_memory_end(void **state)
{
	static const struct want two[] = { { 0, CPYTHON_VALUE_INT, 7, 0, NULL },
					   { 1, CPYTHON_VALUE_STR, 5, 0, "hello" } };
	struct world w;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		uint64_t last, slots[2];

		build(&w, minors[m]);
		last = SYNTH_END - w.s.l.frame_localsplus - sizeof(slots);
		memcpy(slots,
		       synth_image + (synth_frame_at(0) + w.s.l.frame_localsplus - SYNTH_BASE),
		       sizeof(slots));
		synth__frame(&w.s, last, synth_code_at(3), 0, slots, 2);
		synth__counts(&w.s, synth_code_at(3), 2, 0, 0);
		synth_put_u64(synth_frame_at(0) + w.s.l.frame_previous, last);
		assert_int_equal(walk(&w, sizeof(w.buf)), 2);
		assert_int_equal(w.frames[1].code, synth_code_at(3));
		check_frame(&w, 0, leaf_args, 8);
		check_frame(&w, 1, two, 2);
		check_packed(&w);
		world_free(&w);
	}
}

/*
 * A frame whose code claims 8 parameters but whose memory ends after 2: the slots are not
 * in the walk's read of the frame, so they are read on their own, which fails: the frame
 * gets no arguments, never the frame before's (left in the walk's buffer).
 */
static void test_walk_args__stale_slots(void **state)
{
	struct world w;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		uint64_t last, slots[2];

		build(&w, minors[m]);
		last = SYNTH_END - w.s.l.frame_localsplus - sizeof(slots);
		memcpy(slots,
		       synth_image + (synth_frame_at(0) + w.s.l.frame_localsplus - SYNTH_BASE),
		       sizeof(slots));
		synth__frame(&w.s, last, synth_code_at(3), 0, slots, 2);
		synth__counts(&w.s, synth_code_at(3), 8, 0, 0);
		synth_put_u64(synth_frame_at(0) + w.s.l.frame_previous, last);
		assert_int_equal(walk(&w, sizeof(w.buf)), 2);
		check_frame(&w, 0, leaf_args, 8);
		check_frame(&w, 1, NULL, 0);
		world_free(&w);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_args__values),
		cmocka_unit_test(test_walk_args__hostile_counts),
		cmocka_unit_test(test_walk_args__task_locals),
		cmocka_unit_test(test_walk_args__out_of_room),
		cmocka_unit_test(test_walk_args__frame_at_memory_end),
		cmocka_unit_test(test_walk_args__stale_slots),
	};

	return cmocka_run_group_tests_name("walk_args", tests, NULL, NULL);
}
