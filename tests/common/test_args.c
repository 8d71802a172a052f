/* Tests of argument-list interning (common/args.c): one id per distinct list. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/args.h"

static void test_args__equal_lists_share_an_id(void **state)
{
	struct args_table *t = args_table__new();
	char text[] = "'abc'";
	struct arg_item a[] = {
		{ .name = "n", .kind = ARG_INT, .i = 5 },
		{ .name = "s", .kind = ARG_TEXT, .text = text },
		{ .name = "f", .kind = ARG_FLOAT, .f = 0.5 },
	};
	struct arg_item b[3];
	const struct arg_item *got;
	uint32_t id, n;

	(void)state;
	assert_non_null(t);
	id = args_table__intern(t, a, 3);
	assert_int_not_equal(id, 0);
	/* Equal by value, not by where the strings are: the table keeps copies. */
	memcpy(b, a, sizeof(a));
	b[1].text = "'abc'";
	b[0].name = "n";
	text[1] = 'x';
	assert_int_not_equal(args_table__intern(t, a, 3), id);
	assert_int_equal(args_table__intern(t, b, 3), id);
	got = args_table__get(t, id, &n);
	assert_int_equal(n, 3);
	assert_string_equal(got[1].text, "'abc'");
	assert_int_equal(got[0].i, 5);

	/* Any difference is another list: a value, a kind, a name, the order, the length. */
	b[0].i = 6;
	assert_int_not_equal(args_table__intern(t, b, 3), id);
	b[0].i = 5;
	b[0].kind = ARG_BOOL;
	assert_int_not_equal(args_table__intern(t, b, 3), id);
	b[0].kind = ARG_INT;
	b[0].name = "m";
	assert_int_not_equal(args_table__intern(t, b, 3), id);
	b[0].name = "n";
	assert_int_not_equal(args_table__intern(t, b, 2), id);
	assert_int_equal(args_table__intern(t, b, 3), id);
	/* Objects shown alike (<list of 3>) but not the same object: two calls. */
	b[1].identity = 0x1000;
	assert_int_not_equal(args_table__intern(t, b, 3), id);
	/* No list, no id. */
	assert_int_equal(args_table__intern(t, b, 0), 0);
	assert_null(args_table__get(t, 0, &n));
	assert_null(args_table__get(t, UINT32_MAX, &n));
	args_table__free(t);
}

static void test_args__floats_by_their_bits(void **state)
{
	struct args_table *t = args_table__new();
	struct arg_item a = { .name = "x", .kind = ARG_FLOAT, .f = NAN };
	uint32_t id;

	(void)state;
	assert_non_null(t);
	id = args_table__intern(t, &a, 1);
	assert_int_equal(args_table__intern(t, &a, 1), id); /* NaN is itself */
	a.f = 0.0;
	id = args_table__intern(t, &a, 1);
	a.f = -0.0;
	assert_int_not_equal(args_table__intern(t, &a, 1), id); /* shown apart */
	args_table__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args__equal_lists_share_an_id),
		cmocka_unit_test(test_args__floats_by_their_bits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
