/* Tests of the store of argument lists (sampler/argstore.c): one id per distinct list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sampler/argstore.h"
#include "../../sampler/sampler.h"

static void test_argstore__equal_bytes_share_an_id(void **state)
{
	struct arg_store *st = arg_store__new();
	uint8_t a[48] = { 1, 2, 3 }, b[48] = { 1, 2, 4 };
	const uint8_t *got;
	uint32_t id_a, id_b, len;
	bool added;

	(void)state;
	assert_non_null(st);
	id_a = arg_store__add(st, a, sizeof(a), &added);
	assert_int_not_equal(id_a, 0);
	assert_true(added);
	assert_int_equal(arg_store__add(st, a, sizeof(a), &added), id_a);
	assert_false(added);
	id_b = arg_store__add(st, b, sizeof(b), &added);
	assert_true(added);
	assert_int_not_equal(id_b, id_a);
	/* The same bytes, shorter: another list. */
	assert_int_not_equal(arg_store__add(st, a, 40, &added), id_a);

	got = arg_store__get(st, id_b, &len);
	assert_non_null(got);
	assert_int_equal(len, sizeof(b));
	assert_memory_equal(got, b, sizeof(b));
	assert_null(arg_store__get(st, 0, &len));
	assert_null(arg_store__get(st, 1000, &len));
	assert_int_equal(arg_store__count(st), 3);
	arg_store__free(st);
}

/* Many lists, past one block of ids: each still found, bytes intact. */
static void test_argstore__many_lists(void **state)
{
	struct arg_store *st = arg_store__new();
	uint32_t i, len, id;
	uint64_t v;
	bool added;

	(void)state;
	assert_non_null(st);
	for (i = 0; i < 10000; i++) {
		v = i * 0x9e3779b97f4a7c15ULL;
		assert_int_equal(arg_store__add(st, (const uint8_t *)&v, 8, &added), i + 1);
		assert_true(added);
	}
	for (i = 0; i < 10000; i += 997) {
		v = i * 0x9e3779b97f4a7c15ULL;
		id = arg_store__add(st, (const uint8_t *)&v, 8, &added);
		assert_int_equal(id, i + 1);
		assert_false(added);
		assert_memory_equal(arg_store__get(st, id, &len), &v, 8);
	}
	arg_store__free(st);
}

/*
 * A list's decoded values are the store's own copies, texts included: what the thread
 * handing records out reads must not depend on buffers the drainer reuses.
 */
static void test_argstore__values_kept_as_copies(void **state)
{
	struct arg_store *st = arg_store__new();
	uint8_t a[48] = { 1 }, b[48] = { 2 };
	char text[16], type[16];
	struct sampler_arg args[3] = {
		{ .index = 0, .kind = CPYTHON_VALUE_STR, .i = 5, .text = text },
		{ .index = 1, .kind = CPYTHON_VALUE_OTHER, .object = 0x7f00, .text = type },
		{ .index = 2, .kind = CPYTHON_VALUE_OTHER, .object = 0x7f08, .text = NULL },
	};
	const struct sampler_arg *got;
	uint32_t id_a, id_b, n;
	bool added;

	(void)state;
	assert_non_null(st);
	strcpy(text, "hello");
	strcpy(type, "Job");
	id_a = arg_store__add(st, a, sizeof(a), &added);
	id_b = arg_store__add(st, b, sizeof(b), &added);
	assert_int_equal(arg_store__set_values(st, id_a, args, 3), 0);
	memset(text, 'x', sizeof(text) - 1);
	memset(type, 'y', sizeof(type) - 1);
	args[0].i = 99;

	got = arg_store__values(st, id_a, &n);
	assert_non_null(got);
	assert_int_equal(n, 3);
	assert_int_equal(got[0].i, 5);
	assert_string_equal(got[0].text, "hello");
	assert_string_equal(got[1].text, "Job");
	assert_int_equal(got[1].object, 0x7f00);
	assert_null(got[2].text); /* a type whose name was not read */
	/* Another list has none of them; an id never given has nothing. */
	assert_null(arg_store__values(st, id_b, &n));
	assert_int_equal(n, 0);
	assert_null(arg_store__values(st, 0, &n));
	assert_null(arg_store__values(st, 1000, &n));
	arg_store__free(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argstore__equal_bytes_share_an_id),
		cmocka_unit_test(test_argstore__many_lists),
		cmocka_unit_test(test_argstore__values_kept_as_copies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
