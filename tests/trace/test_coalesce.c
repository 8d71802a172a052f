/* Tests of the coalescer: table-driven cases, then a randomized property test. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../trace/coalesce.h"

#define PERIOD 100
#define MAX_SLICES 4096
#define MAX_FRAMES 16

struct collected {
	struct slice slices[MAX_SLICES];
	size_t count;
};

static int collect(void *ctx, const struct slice *s)
{
	struct collected *c = ctx;

	assert_true(c->count < MAX_SLICES);
	c->slices[c->count++] = *s;
	return 0;
}

/*
 * A case is a script of steps, one per string:
 *   "c T f@s f@s ..."      on-CPU sample at T, frames root first (function @ call site;
 *                          f@s:A with arguments A, f@s:? with arguments not known)
 *   "o T E f@s ..."        off-CPU span [T, E]
 *   "m T E f@s ..."        a message's marker [T, E]
 *   "e T"                  end of the thread at T
 * all on thread 1 unless the step starts with "tN ". Expected slices are
 * "tid depth func start-end", then " aA" for a slice with arguments A, in any order.
 */
struct coalesce_case {
	const char *name;
	uint32_t max_depth;
	const char *steps[12];
	const char *expected[16];
	uint64_t too_deep, empty, reordered, hidden;
};

static void parse_frames(const char *p, struct trace_frame *frames, uint32_t *n)
{
	unsigned func, site, args;
	int used;

	*n = 0;
	while (sscanf(p, " %u@%u%n", &func, &site, &used) == 2) {
		assert_true(*n < MAX_FRAMES);
		frames[*n] = (struct trace_frame){ .func = func, .callsite = site };
		p += used;
		if (sscanf(p, ":%u%n", &args, &used) == 1) {
			frames[*n].args = args;
			p += used;
		} else if (p[0] == ':' && p[1] == '?') {
			frames[*n].args = TRACE_ARGS_UNKNOWN;
			p += 2;
		}
		(*n)++;
	}
}

static void run_step(struct coalescer *co, const char *step)
{
	struct trace_frame frames[MAX_FRAMES];
	struct trace_obs obs = { .pid = 1, .tid = 1, .frames = frames };
	unsigned long long t, e;
	unsigned tid;
	int used;

	if (sscanf(step, "t%u %n", &tid, &used) == 1) {
		obs.tid = tid;
		step += used;
	}
	if (sscanf(step, "c %llu%n", &t, &used) == 1) {
		obs.kind = TRACE_ON_CPU;
		obs.t_start_ns = t;
	} else if (sscanf(step, "o %llu %llu%n", &t, &e, &used) == 2) {
		obs.kind = TRACE_OFF_CPU;
		obs.t_start_ns = t;
		obs.t_end_ns = e;
	} else if (sscanf(step, "m %llu %llu%n", &t, &e, &used) == 2) {
		obs.kind = TRACE_MESSAGE;
		obs.t_start_ns = t;
		obs.t_end_ns = e;
	} else if (sscanf(step, "e %llu", &t) == 1) {
		assert_int_equal(coalescer__end_thread(co, 1, obs.tid, t), 0);
		return;
	} else {
		fail_msg("bad step '%s'", step);
	}
	parse_frames(step + used, frames, &obs.nframes);
	assert_int_equal(coalescer__observe(co, &obs), 0);
}

static int by_text(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_case(const struct coalesce_case *tc)
{
	struct coalesce_opts opts = { .period_ns = PERIOD, .max_depth = tc->max_depth };
	struct collected *got = calloc(1, sizeof(*got));
	char *got_text[MAX_SLICES], *want_text[16];
	struct trace_stats stats = { 0 };
	struct coalescer *co;
	size_t i, nwant = 0;

	assert_non_null(got);
	co = coalescer__new(&opts, (struct slice_sink){ .slice = collect, .ctx = got });
	assert_non_null(co);
	for (i = 0; tc->steps[i]; i++)
		run_step(co, tc->steps[i]);
	assert_int_equal(coalescer__end_all(co), 0);
	coalescer__stats(co, &stats);
	for (i = 0; i < got->count; i++) {
		const struct slice *s = &got->slices[i];

		char args[16] = "";

		if (s->args == TRACE_ARGS_UNKNOWN)
			snprintf(args, sizeof(args), " a?");
		else if (s->args)
			snprintf(args, sizeof(args), " a%u", s->args);
		assert_true(asprintf(&got_text[i], "%u %u %u %llu-%llu%s", s->tid, s->depth,
				     s->func, (unsigned long long)s->start_ns,
				     (unsigned long long)s->end_ns, args) > 0);
	}
	while (tc->expected[nwant]) {
		want_text[nwant] = (char *)tc->expected[nwant];
		nwant++;
	}
	qsort(got_text, got->count, sizeof(char *), by_text);
	qsort(want_text, nwant, sizeof(char *), by_text);
	for (i = 0; i < got->count || i < nwant; i++) {
		const char *g = i < got->count ? got_text[i] : "(none)";
		const char *w = i < nwant ? want_text[i] : "(none)";

		if (strcmp(g, w))
			fail_msg("case '%s': slice %zu is '%s', expected '%s'", tc->name, i, g, w);
	}
	assert_int_equal(stats.slices_too_deep, tc->too_deep);
	assert_int_equal(stats.slices_empty, tc->empty);
	assert_int_equal(stats.reordered, tc->reordered);
	assert_int_equal(stats.hidden, tc->hidden);
	for (i = 0; i < got->count; i++)
		free(got_text[i]);
	coalescer__free(co);
	free(got);
}

static const struct coalesce_case cases[] = {
	{
		/* A read returns after its wait: its marker ends where it was marked. */
		.name = "a message's marker after a wait, under the frames it was read in",
		.steps = { "o 100 300 1@0 2@1 9@2", "m 310 311 1@0 2@1 8@3", "c 400 1@0 3@2" },
		.expected = { "1 0 1 100-500", "1 1 2 100-400", "1 2 9 100-300", "1 2 8 310-311",
			      "1 1 3 400-500" },
	},
	{
		.name = "nesting",
		.steps = { "c 0 1@0 2@1 3@2", "c 100 1@0 2@1 3@2", "c 200 1@0 2@1 4@2" },
		.expected = { "1 0 1 0-300", "1 1 2 0-300", "1 2 3 0-200", "1 2 4 200-300" },
	},
	{
		.name = "f(); g(); f() gives three slices",
		.steps = { "c 0 1@0 2@10", "c 100 1@0 3@20", "c 200 1@0 2@30" },
		.expected = { "1 0 1 0-300", "1 1 2 0-100", "1 1 3 100-200", "1 1 2 200-300" },
	},
	{
		.name = "same function from the same call site continues",
		.steps = { "c 0 1@0 2@10", "c 100 1@0 2@10", "c 200 1@0 2@10" },
		.expected = { "1 0 1 0-300", "1 1 2 0-300" },
	},
	{
		.name = "the same call site with other arguments is another call",
		.steps = { "c 0 1@0 2@10:5 3@1", "c 100 1@0 2@10:5 3@1", "c 200 1@0 2@10:6 3@1" },
		.expected = { "1 0 1 0-300", "1 1 2 0-200 a5", "1 2 3 0-200", "1 1 2 200-300 a6",
			      "1 2 3 200-300" },
	},
	{
		.name = "arguments not known continue a call and take the first known",
		.steps = { "c 0 1@0 2@10:? 3@1", "c 100 1@0 2@10:7 3@1", "c 200 1@0 2@10:? 3@1",
			   "c 300 1@0 2@10:8 3@1" },
		.expected = { "1 0 1 0-400", "1 1 2 0-300 a7", "1 2 3 0-300", "1 1 2 300-400 a8",
			      "1 2 3 300-400" },
	},
	{
		.name = "a loop whose task is not known continues only over the same call below",
		.steps = { "c 0 1@0 2@10:? 3@1:4", "c 100 1@0 2@10:7 3@1:5",
			   "c 200 1@0 2@10:? 3@1:5", "c 300 1@0 2@10:? 3@1:6" },
		.expected = { "1 0 1 0-400", "1 1 2 0-100 a?", "1 2 3 0-100 a4", "1 1 2 100-300 a7",
			      "1 2 3 100-300 a5", "1 1 2 300-400 a?", "1 2 3 300-400 a6" },
	},
	{
		.name = "... and over a call from elsewhere in it, the same task's",
		.steps = { "c 0 1@0 2@10:? 3@1:4", "c 100 1@0 2@10:7 5@2",
			   "c 200 1@0 2@10:? 3@1:4" },
		.expected = { "1 0 1 0-300", "1 1 2 0-300 a7", "1 2 3 0-100 a4", "1 2 5 100-200",
			      "1 2 3 200-300 a4" },
	},
	{
		.name = "arguments never known stay so",
		.steps = { "c 0 1@0:?", "c 100 1@0:?" },
		.expected = { "1 0 1 0-200 a?" },
	},
	{
		.name = "a caller's new call site restarts every frame below it",
		.steps = { "c 0 1@0 2@5 3@7", "c 100 1@0 2@6 3@7" },
		.expected = { "1 0 1 0-200", "1 1 2 0-100", "1 1 2 100-200", "1 2 3 0-100",
			      "1 2 3 100-200" },
	},
	{
		.name = "a gap longer than two periods closes everything",
		.steps = { "c 0 1@0", "c 100 1@0", "c 501 1@0" },
		.expected = { "1 0 1 0-200", "1 0 1 501-601" },
	},
	{
		.name = "a gap of exactly two periods does not",
		.steps = { "c 0 1@0", "c 300 1@0" },
		.expected = { "1 0 1 0-400" },
	},
	{
		.name = "an off-CPU span has exact ends",
		.steps = { "c 0 1@0 2@1", "o 50 250 1@0 2@1 9@3", "c 300 1@0 2@1" },
		.expected = { "1 0 1 0-400", "1 1 2 0-400", "1 2 9 50-250" },
	},
	{
		.name = "an off-CPU span followed by a gap closes at its end",
		.steps = { "o 0 100 1@0 9@1", "c 500 1@0" },
		.expected = { "1 0 1 0-100", "1 1 9 0-100", "1 0 1 500-600" },
	},
	{
		.name = "two waits with a run between are two slices",
		.steps = { "o 0 100 1@0 9@1", "o 150 250 1@0 9@1" },
		.expected = { "1 0 1 0-250", "1 1 9 0-100", "1 1 9 150-250" },
	},
	{
		.name = "back-to-back waits for the same reason are one",
		.steps = { "o 0 100 1@0 9@1", "o 100 200 1@0 9@1" },
		.expected = { "1 0 1 0-200", "1 1 9 0-200" },
	},
	{
		.name = "depth cap cuts the deepest slices and counts them",
		.max_depth = 2,
		.steps = { "c 0 1@0 2@1 3@2 4@3", "c 100 1@0 2@1 3@2 5@3" },
		.expected = { "1 0 1 0-200", "1 1 2 0-200" },
		.too_deep = 3,
	},
	{
		.name = "an observation replaced at the same instant is hidden",
		.steps = { "c 0 1@0 2@1", "c 0 1@0 3@1" },
		.expected = { "1 0 1 0-100", "1 1 3 0-100" },
		.hidden = 1,
	},
	{
		.name = "a hidden observation does not split its neighbours",
		.steps = { "c 0 1@0 2@1", "c 100 1@0 3@1", "c 100 1@0 2@1" },
		.expected = { "1 0 1 0-200", "1 1 2 0-200" },
		.hidden = 1,
	},
	{
		.name = "a thread ended before its last sample gives no empty slice",
		.steps = { "c 100 1@0", "e 50" },
		.expected = { NULL },
		.empty = 1,
	},
	{
		.name = "an older observation is clamped to the last one",
		.steps = { "c 100 1@0", "c 50 2@0" },
		.expected = { "1 0 2 100-200" },
		.reordered = 1,
		.hidden = 1,
	},
	{
		.name = "thread end closes at the exit time",
		.steps = { "c 0 1@0 2@1", "e 50" },
		.expected = { "1 0 1 0-50", "1 1 2 0-50" },
	},
	{
		.name = "thread end after the last sample closes at its end",
		.steps = { "c 0 1@0", "e 1000" },
		.expected = { "1 0 1 0-100" },
	},
	{
		.name = "threads are independent",
		.steps = { "t1 c 0 1@0", "t2 c 50 2@0", "t1 c 100 1@0", "t2 c 150 3@0" },
		.expected = { "1 0 1 0-200", "2 0 2 50-150", "2 0 3 150-250" },
	},
	{
		.name = "an empty stack closes everything",
		.steps = { "c 0 1@0 2@1", "c 100", "c 200 1@0" },
		.expected = { "1 0 1 0-100", "1 1 2 0-100", "1 0 1 200-300" },
	},
};

static void test_coalesce__table(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		run_case(&cases[i]);
}

/* Slices closed at one instant come shallowest first, so viewers nest equal spans right. */
static void test_coalesce__close_order(void **state)
{
	struct coalesce_opts opts = { .period_ns = PERIOD };
	struct collected *got = calloc(1, sizeof(*got));
	struct trace_frame frames[] = { { 1, 0, 0, 0 }, { 2, 0, 1, 0 }, { 3, 0, 2, 0 } };
	struct trace_obs obs = { .pid = 1, .tid = 1, .nframes = 3, .frames = frames };
	struct coalescer *co;

	(void)state;
	co = coalescer__new(&opts, (struct slice_sink){ .slice = collect, .ctx = got });
	assert_non_null(co);
	assert_int_equal(coalescer__observe(co, &obs), 0);
	assert_int_equal(coalescer__end_all(co), 0);
	assert_int_equal(got->count, 3);
	assert_int_equal(got->slices[0].depth, 0);
	assert_int_equal(got->slices[1].depth, 1);
	assert_int_equal(got->slices[2].depth, 2);
	coalescer__free(co);
	free(got);
}

static void test_coalesce__bad_input(void **state)
{
	struct coalesce_opts opts = { .period_ns = 0 };
	struct collected got;
	struct coalescer *co;
	struct trace_obs obs = { .pid = 1, .tid = 1, .nframes = 2, .frames = NULL };

	(void)state;
	assert_null(coalescer__new(&opts, (struct slice_sink){ .slice = collect, .ctx = &got }));
	opts.period_ns = PERIOD;
	co = coalescer__new(&opts, (struct slice_sink){ .slice = collect, .ctx = &got });
	assert_non_null(co);
	assert_int_equal(coalescer__observe(co, &obs), -EINVAL);
	coalescer__free(co);
}

/* ---- property test ---- */

struct random_obs {
	struct trace_obs obs;
	struct trace_frame frames[MAX_FRAMES];
};

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

/* A random walk of stacks: pop a few frames, push a few, sometimes wait. */
static size_t make_sequence(struct random_obs *seq, size_t n, uint32_t tid)
{
	struct trace_frame stack[MAX_FRAMES];
	uint32_t depth = 0, i;
	uint64_t t = rnd(50);
	size_t k;

	for (k = 0; k < n; k++) {
		struct random_obs *r = &seq[k];
		uint32_t pop = depth ? rnd(depth + 1) : 0, push = rnd(4);

		depth -= pop;
		for (i = 0; i < push && depth < MAX_FRAMES - 2; i++) {
			stack[depth].func = 1 + rnd(4);
			stack[depth].callsite = rnd(3);
			stack[depth].args = 0;
			stack[depth].line = 0;
			depth++;
		}
		memcpy(r->frames, stack, depth * sizeof(stack[0]));
		r->obs = (struct trace_obs){
			.pid = 7, .tid = tid, .t_start_ns = t, .nframes = depth, .frames = r->frames
		};
		if (rnd(5) == 0) {
			r->obs.kind = TRACE_OFF_CPU;
			r->obs.t_end_ns = t + 1 + rnd(300);
			r->frames[depth] =
				(struct trace_frame){ .func = 100 + rnd(2), .callsite = 0 };
			r->obs.nframes++;
			t = r->obs.t_end_ns;
		}
		/* Mostly periodic, sometimes equal, sometimes a gap. */
		switch (rnd(8)) {
		case 0:
			break;
		case 1:
			t += 2 * PERIOD + 1 + rnd(500);
			break;
		default:
			t += PERIOD / 2 + rnd(PERIOD);
		}
	}
	return n;
}

static bool covers(const struct slice *s, uint32_t tid, uint64_t x)
{
	return s->tid == tid && s->start_ns <= x && x < s->end_ns;
}

static void check_nesting(const struct collected *got)
{
	size_t i, j;

	for (i = 0; i < got->count; i++) {
		const struct slice *s = &got->slices[i];
		bool has_parent = s->depth == 0;

		assert_true(s->end_ns > s->start_ns);
		for (j = 0; j < got->count; j++) {
			const struct slice *o = &got->slices[j];

			if (j == i || o->tid != s->tid)
				continue;
			if (o->depth + 1 == s->depth && o->start_ns <= s->start_ns &&
			    s->end_ns <= o->end_ns)
				has_parent = true;
			/* Siblings never overlap. */
			if (o->depth == s->depth && o->start_ns < s->end_ns &&
			    s->start_ns < o->end_ns)
				fail_msg("overlap at depth %u: [%llu,%llu) and [%llu,%llu)",
					 s->depth, (unsigned long long)s->start_ns,
					 (unsigned long long)s->end_ns,
					 (unsigned long long)o->start_ns,
					 (unsigned long long)o->end_ns);
		}
		if (!has_parent)
			fail_msg("slice at depth %u [%llu,%llu) has no enclosing parent", s->depth,
				 (unsigned long long)s->start_ns, (unsigned long long)s->end_ns);
	}
}

/* Each observation's stack (up to the cap) is exactly the slices covering its start. */
static void check_readback(const struct collected *got, const struct random_obs *seq, size_t n,
			   uint32_t max_depth)
{
	size_t k, i;

	for (k = 0; k < n; k++) {
		const struct trace_obs *obs = &seq[k].obs;
		uint32_t want = obs->nframes < max_depth ? obs->nframes : max_depth, found = 0;

		if (k + 1 < n && seq[k + 1].obs.t_start_ns == obs->t_start_ns)
			continue; /* replaced at the same instant: nothing to see */
		for (i = 0; i < got->count; i++) {
			const struct slice *s = &got->slices[i];

			if (!covers(s, obs->tid, obs->t_start_ns))
				continue;
			found++;
			assert_true(s->depth < want);
			if (s->func != obs->frames[s->depth].func ||
			    s->callsite != obs->frames[s->depth].callsite)
				fail_msg("observation %zu at %llu: depth %u shows %u, sampled %u",
					 k, (unsigned long long)obs->t_start_ns, s->depth, s->func,
					 obs->frames[s->depth].func);
		}
		if (found != want)
			fail_msg("observation %zu at %llu: %u slices cover it, stack depth %u", k,
				 (unsigned long long)obs->t_start_ns, found, want);
	}
}

static const struct slice *parent_of(const struct collected *got, const struct slice *s)
{
	size_t i;

	for (i = 0; i < got->count; i++) {
		const struct slice *o = &got->slices[i];

		if (o->tid == s->tid && o->depth + 1 == s->depth && o->start_ns <= s->start_ns &&
		    s->end_ns <= o->end_ns)
			return o;
	}
	return NULL;
}

/* No two touching siblings with the same function, call site and parent. */
static void check_maximal(const struct collected *got)
{
	size_t i, j;

	for (i = 0; i < got->count; i++) {
		const struct slice *a = &got->slices[i];

		for (j = 0; j < got->count; j++) {
			const struct slice *b = &got->slices[j];

			if (b->tid != a->tid || b->depth != a->depth || a->end_ns != b->start_ns ||
			    a->func != b->func || a->callsite != b->callsite)
				continue;
			if (parent_of(got, a) == parent_of(got, b))
				fail_msg(
					"slices [%llu,%llu) and [%llu,%llu) at depth %u could be one",
					(unsigned long long)a->start_ns,
					(unsigned long long)a->end_ns,
					(unsigned long long)b->start_ns,
					(unsigned long long)b->end_ns, a->depth);
		}
	}
}

static void test_coalesce__random_sequences(void **state)
{
	enum { N = 120 };
	struct random_obs *seq1 = calloc(N, sizeof(*seq1)), *seq2 = calloc(N, sizeof(*seq2));
	struct collected *got = calloc(1, sizeof(*got));
	uint64_t seed;

	(void)state;
	assert_non_null(seq1);
	assert_non_null(seq2);
	assert_non_null(got);
	for (seed = 1; seed <= 300; seed++) {
		struct coalesce_opts opts = { .period_ns = PERIOD, .max_depth = seed % 3 ? 0 : 4 };
		uint32_t cap = opts.max_depth ? opts.max_depth : TRACE_DEFAULT_MAX_DEPTH;
		struct coalescer *co;
		size_t k1 = 0, k2 = 0;

		rng_state = seed * 0x9e3779b97f4a7c15ULL;
		make_sequence(seq1, N, 1);
		make_sequence(seq2, N, 2);
		got->count = 0;
		co = coalescer__new(&opts, (struct slice_sink){ .slice = collect, .ctx = got });
		assert_non_null(co);
		/* Interleave two threads at random. */
		while (k1 < N || k2 < N) {
			bool first = k2 == N || (k1 < N && rnd(2));
			const struct trace_obs *obs = first ? &seq1[k1++].obs : &seq2[k2++].obs;

			assert_int_equal(coalescer__observe(co, obs), 0);
		}
		assert_int_equal(coalescer__end_all(co), 0);
		check_nesting(got);
		check_readback(got, seq1, N, cap);
		check_readback(got, seq2, N, cap);
		check_maximal(got);
		coalescer__free(co);
	}
	free(seq1);
	free(seq2);
	free(got);
}

/* Slices heard opening, per thread and depth (threads 1 and 2), and which closed. */
struct opened {
	struct slice open[3][64];
	bool closed[3][64];
	uint32_t depth[3];
	size_t opens, closes;
};

static int note_open(void *ctx, const struct slice *s)
{
	struct opened *o = ctx;
	uint32_t d;

	assert_true(s->tid <= 2 && s->depth < 64);
	/* Parents first: it opens under open slices, in place of closed ones. */
	assert_true(s->depth <= o->depth[s->tid]);
	for (d = 0; d < o->depth[s->tid]; d++)
		assert_int_equal(o->closed[s->tid][d], d >= s->depth);
	o->open[s->tid][s->depth] = *s;
	o->closed[s->tid][s->depth] = false;
	o->depth[s->tid] = s->depth + 1;
	o->opens++;
	return 0;
}

static int note_close(void *ctx, const struct slice *s)
{
	struct opened *o = ctx;
	const struct slice *was;

	assert_true(s->tid <= 2 && s->depth < o->depth[s->tid]);
	assert_false(o->closed[s->tid][s->depth]);
	was = &o->open[s->tid][s->depth];
	assert_int_equal(was->func, s->func);
	assert_int_equal(was->start_ns, s->start_ns);
	assert_true(s->end_ns >= s->start_ns);
	o->closed[s->tid][s->depth] = true;
	o->closes++;
	return 0;
}

/* With an open hook, every slice heard opening is heard closing, empty ones included. */
static void test_coalesce__open_hook(void **state)
{
	enum { N = 120 };
	struct random_obs *seq = calloc(N, sizeof(*seq));
	struct opened *o = calloc(1, sizeof(*o));
	uint64_t seed;

	(void)state;
	assert_non_null(seq);
	assert_non_null(o);
	for (seed = 1; seed <= 200; seed++) {
		struct coalesce_opts opts = { .period_ns = PERIOD, .max_depth = seed % 3 ? 0 : 4 };
		struct slice_sink sink = { .slice = note_close, .open = note_open, .ctx = o };
		struct coalescer *co;
		size_t k;

		rng_state = seed * 0x9e3779b97f4a7c15ULL;
		make_sequence(seq, N, 1);
		memset(o, 0, sizeof(*o));
		co = coalescer__new(&opts, sink);
		assert_non_null(co);
		for (k = 0; k < N; k++)
			assert_int_equal(coalescer__observe(co, &seq[k].obs), 0);
		assert_int_equal(coalescer__end_all(co), 0);
		for (k = 0; k < o->depth[1]; k++)
			assert_true(o->closed[1][k]);
		assert_int_equal(o->opens, o->closes);
		assert_true(o->opens > 0);
		coalescer__free(co);
	}
	free(seq);
	free(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_coalesce__table),
		cmocka_unit_test(test_coalesce__close_order),
		cmocka_unit_test(test_coalesce__bad_input),
		cmocka_unit_test(test_coalesce__random_sequences),
		cmocka_unit_test(test_coalesce__open_hook),
	};

	return cmocka_run_group_tests_name("coalesce", tests, NULL, NULL);
}
