/* Tests of frame interning: equal frames share an id, any differing field gives a new one. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../common/frames.h"

static void test_frames__interning(void **state)
{
	static const struct frame_info variants[] = {
		{ "f", "a.py", 1, FRAME_PYTHON }, { "g", "a.py", 1, FRAME_PYTHON },
		{ "f", "b.py", 1, FRAME_PYTHON }, { "f", "a.py", 2, FRAME_PYTHON },
		{ "f", "a.py", 1, FRAME_NATIVE }, { "f", "", 1, FRAME_PYTHON },
	};
	struct frame_table *t = frame_table__new();
	uint32_t ids[6];
	size_t i, j;

	(void)state;
	assert_non_null(t);
	for (i = 0; i < 6; i++) {
		ids[i] = frame_table__intern(t, &variants[i]);
		assert_int_equal(ids[i], i + 1);
	}
	for (i = 0; i < 6; i++) {
		const struct frame_info *f = frame_table__get(t, ids[i]);

		assert_int_equal(frame_table__intern(t, &variants[i]), ids[i]);
		assert_string_equal(f->name, variants[i].name);
		assert_string_equal(f->file, variants[i].file);
		for (j = 0; j < i; j++)
			assert_int_not_equal(ids[i], ids[j]);
	}
	/* A NULL file is the same as "". */
	assert_int_equal(frame_table__intern(t, &(struct frame_info){ "f", NULL, 1, FRAME_PYTHON }),
			 ids[5]);
	assert_null(frame_table__get(t, 0));
	assert_null(frame_table__get(t, 7));
	frame_table__free(t);
}

static void test_frames__many(void **state)
{
	struct frame_table *t = frame_table__new();
	char name[32];
	uint32_t i;

	(void)state;
	for (i = 0; i < 50000; i++) {
		snprintf(name, sizeof(name), "fn%u", i);
		assert_int_equal(frame_table__intern(t, &(struct frame_info){ name, "m.py", i % 7,
									      FRAME_PYTHON }),
				 i + 1);
	}
	for (i = 0; i < 50000; i += 997) {
		snprintf(name, sizeof(name), "fn%u", i);
		assert_int_equal(frame_table__intern(t, &(struct frame_info){ name, "m.py", i % 7,
									      FRAME_PYTHON }),
				 i + 1);
	}
	frame_table__free(t);
}

static void test_frames__bad_input(void **state)
{
	struct frame_table *t = frame_table__new();

	(void)state;
	errno = 0;
	assert_int_equal(frame_table__intern(t, &(struct frame_info){ NULL, "", 0, FRAME_PYTHON }),
			 0);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(
		frame_table__intern(t, &(struct frame_info){ "x", "", 0, FRAME_KIND_COUNT }), 0);
	assert_string_equal(frame_kind__name(FRAME_OFF_CPU), "off-cpu");
	frame_table__free(t);
	frame_table__free(NULL);
}

/*
 * A target making millions of distinct functions: past FRAME_TABLE_MAX frames the table
 * gives one standing frame for the rest and counts them, its memory bounded; frames
 * known before still resolve as themselves.
 */
static void test_frames__bounded(void **state)
{
	struct frame_table *t = frame_table__new();
	struct frame_info info = { NULL, "/gen.py", 1, FRAME_PYTHON };
	uint32_t i, first = 0, past[2];
	char name[32];

	(void)state;
	assert_non_null(t);
	for (i = 0; i < FRAME_TABLE_MAX; i++) {
		uint32_t id;

		snprintf(name, sizeof(name), "f%u", i);
		info.name = name;
		id = frame_table__intern(t, &info);
		assert_int_equal(id, i + 1);
		if (!first)
			first = id;
	}
	assert_int_equal(frame_table__losses(t), 0);
	for (i = 0; i < 2; i++) {
		snprintf(name, sizeof(name), "new%u", i);
		info.name = name;
		past[i] = frame_table__intern(t, &info);
		assert_int_not_equal(past[i], 0);
	}
	assert_int_equal(past[0], past[1]);
	assert_string_equal(frame_table__get(t, past[0])->name, "[frames past the table's bound]");
	assert_int_equal(frame_table__losses(t), 2);
	/* A frame interned before the bound is still found, not counted. */
	info.name = "f0";
	assert_int_equal(frame_table__intern(t, &info), first);
	assert_int_equal(frame_table__losses(t), 2);
	frame_table__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frames__bounded),
		cmocka_unit_test(test_frames__interning),
		cmocka_unit_test(test_frames__many),
		cmocka_unit_test(test_frames__bad_input),
	};

	return cmocka_run_group_tests_name("frames", tests, NULL, NULL);
}
