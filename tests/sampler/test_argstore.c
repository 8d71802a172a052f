/* Tests of the store of argument lists (sampler/argstore.c): one id per distinct list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sampler/argstore.h"

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_argstore__equal_bytes_share_an_id),
		cmocka_unit_test(test_argstore__many_lists),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
