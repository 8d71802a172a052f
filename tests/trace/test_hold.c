/* Tests of holding processes back (trace__hold): shown, folded, and bounded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../trace/trace.h"
#include "../common/support.h"

#define MS 1000000ULL

struct fixture {
	char *dir;
	char path[512];
	struct frame_table *frames;
	uint32_t fn[2];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = support_tempdir();
	f->frames = frame_table__new();
	if (!f->dir || !f->frames)
		return -1;
	f->fn[0] = frame_table__intern(f->frames,
				       &(struct frame_info){ "early", "/a.py", 1, FRAME_PYTHON });
	f->fn[1] = frame_table__intern(f->frames,
				       &(struct frame_info){ "late", "/a.py", 9, FRAME_PYTHON });
	snprintf(f->path, sizeof(f->path), "%s/t.folded", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	frame_table__free(f->frames);
	support_rmdir(f->dir);
	free(f);
	return 0;
}

static struct trace *open_trace(struct fixture *f)
{
	struct trace_opts opts = { .path = f->path, .period_ns = MS, .frames = f->frames };
	struct trace *trace = trace__open(&opts);

	assert_non_null(trace);
	return trace;
}

/* @n samples of pid's thread in function @fn, @depth frames deep, from @t_ms on. */
static void sample(struct trace *trace, uint32_t pid, uint32_t fn, uint32_t depth, int n,
		   uint64_t t_ms)
{
	struct trace_frame *frames = calloc(depth, sizeof(*frames));
	int i;

	assert_non_null(frames);
	for (i = 0; i < (int)depth; i++)
		frames[i].func = fn;
	for (i = 0; i < n; i++) {
		struct trace_obs obs = { .pid = pid,
					 .tid = pid,
					 .kind = TRACE_ON_CPU,
					 .t_start_ns = (t_ms + (uint64_t)i) * MS,
					 .nframes = depth,
					 .frames = frames };

		assert_int_equal(trace__observe(trace, &obs), 0);
	}
	free(frames);
}

static char *read_text(const char *path)
{
	char cmd[600];
	int status;

	snprintf(cmd, sizeof(cmd), "cat '%s'", path);
	return support_run(cmd, &status);
}

/* The samples the written file holds for @pid in function @name (folded weights). */
static long weight_of(struct fixture *f, uint32_t pid, const char *name)
{
	char *text = read_text(f->path), *line, *save = NULL, owner[32], leaf[64];
	long total = 0;

	assert_non_null(text);
	snprintf(owner, sizeof(owner), "(%u);", pid);
	snprintf(leaf, sizeof(leaf), ";%s ", name);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strstr(line, owner) && strstr(line, leaf))
			total += strtol(strrchr(line, ' ') + 1, NULL, 10);
	}
	free(text);
	return total;
}

static void test_hold__shown_or_folded(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f);

	assert_int_equal(trace__hold(trace, 7), 0);
	assert_int_equal(trace__hold(trace, 8), 0);
	assert_true(trace__holds(trace, 7));
	sample(trace, 7, f->fn[0], 3, 5, 0);
	sample(trace, 8, f->fn[0], 3, 4, 0);
	sample(trace, 9, f->fn[0], 3, 2, 0); /* not held */
	assert_int_equal(trace__show(trace, 7), 0);
	assert_false(trace__holds(trace, 7));
	sample(trace, 7, f->fn[1], 3, 3, 10); /* passes through now */
	trace__fold(trace, 8, false);
	assert_false(trace__holds(trace, 8));
	assert_int_equal(trace__close(trace, NULL), 0);
	assert_int_equal(weight_of(f, 7, "early"), 5);
	assert_int_equal(weight_of(f, 7, "late"), 3);
	assert_int_equal(weight_of(f, 8, "early"), 0);
	assert_int_equal(weight_of(f, 9, "early"), 2);
}

/* An exec: what the old program did is dropped (its events kept), what follows is held. */
static void test_hold__fold_and_keep_holding(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f);

	assert_int_equal(trace__hold(trace, 7), 0);
	sample(trace, 7, f->fn[0], 2, 6, 0);
	trace__fold(trace, 7, true);
	assert_true(trace__holds(trace, 7));
	sample(trace, 7, f->fn[1], 2, 4, 10);
	assert_int_equal(trace__show(trace, 7), 0);
	assert_int_equal(trace__close(trace, NULL), 0);
	assert_int_equal(weight_of(f, 7, "early"), 0);
	assert_int_equal(weight_of(f, 7, "late"), 4);
}

/* The exec events of a program folded away stay: the chain of programs is still said. */
static void test_hold__fold_keeps_events(void **state)
{
	struct fixture *f = *state;
	struct trace_opts opts = { .path = f->path, .period_ns = MS, .frames = f->frames };
	struct trace_event exec = { .kind = TRACE_EVENT_EXEC, .pid = 7, .tid = 7 };
	struct trace *trace;
	char *text;

	snprintf(f->path, sizeof(f->path), "%s/t.json", f->dir);
	trace = trace__open(&opts);
	assert_non_null(trace);
	assert_int_equal(trace__hold(trace, 7), 0);
	exec.t_ns = 1 * MS;
	exec.text = "wrapper-program";
	assert_int_equal(trace__event(trace, &exec), 0);
	sample(trace, 7, f->fn[0], 2, 6, 2);
	trace__fold(trace, 7, true);
	exec.t_ns = 20 * MS;
	exec.text = "real-program";
	assert_int_equal(trace__event(trace, &exec), 0);
	sample(trace, 7, f->fn[1], 2, 4, 21);
	assert_int_equal(trace__show(trace, 7), 0);
	assert_int_equal(trace__close(trace, NULL), 0);
	text = read_text(f->path);
	assert_non_null(text);
	assert_non_null(strstr(text, "\"wrapper-program\""));
	assert_non_null(strstr(text, "\"real-program\""));
	assert_null(strstr(text, "\"early\""));
	assert_non_null(strstr(text, "\"late\""));
	free(text);
}

/* Past 1 MiB held, a process is shown, nothing lost; a process still held at close is not. */
static void test_hold__bounded(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f);

	assert_int_equal(trace__hold(trace, 7), 0);
	assert_int_equal(trace__hold(trace, 8), 0);
	/* 600 samples of 100 frames: ~1.4 MiB held, past the bound */
	sample(trace, 7, f->fn[0], 100, 600, 0);
	assert_false(trace__holds(trace, 7));
	sample(trace, 8, f->fn[0], 100, 10, 0);
	assert_int_equal(trace__close(trace, NULL), 0);
	assert_int_equal(weight_of(f, 7, "early"), 600);
	assert_int_equal(weight_of(f, 8, "early"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hold__shown_or_folded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold__fold_and_keep_holding, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold__fold_keeps_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hold__bounded, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
