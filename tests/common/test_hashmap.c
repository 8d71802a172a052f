/* Tests of the hash map against a plain array model, with random inserts and removals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "../../common/hashmap.h"

enum { KEYS = 2000 };

static void test_hashmap__matches_model(void **state)
{
	static uintptr_t model[KEYS]; /* 0: absent */
	struct hashmap *map = hashmap__new();
	uint64_t rng = 12345, key;
	size_t i, count = 0, cursor = 0, seen = 0;
	void *value;

	(void)state;
	assert_non_null(map);
	for (i = 0; i < 200000; i++) {
		uint64_t k;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		/* Keys collide in their low bits on purpose: multiples of 1024. */
		k = (rng >> 33) % KEYS;
		if ((rng >> 20) % 3) {
			uintptr_t v = (uintptr_t)i + 1;

			assert_int_equal(hashmap__set(map, k * 1024, (void *)v), 0);
			count += model[k] == 0;
			model[k] = v;
		} else {
			assert_ptr_equal(hashmap__remove(map, k * 1024), (void *)model[k]);
			count -= model[k] != 0;
			model[k] = 0;
		}
		assert_int_equal(hashmap__count(map), count);
	}
	for (i = 0; i < KEYS; i++)
		assert_ptr_equal(hashmap__get(map, i * 1024), (void *)model[i]);
	while (hashmap__next(map, &cursor, &key, &value)) {
		assert_int_equal(key % 1024, 0);
		assert_ptr_equal(value, (void *)model[key / 1024]);
		seen++;
	}
	assert_int_equal(seen, count);
	hashmap__free(map);
}

static void test_hashmap__rejects_null_value(void **state)
{
	struct hashmap *map = hashmap__new();

	(void)state;
	assert_int_not_equal(hashmap__set(map, 1, NULL), 0);
	assert_null(hashmap__get(map, 1));
	hashmap__free(map);
	hashmap__free(NULL);
}

static int freed;

static void count_free(void *value)
{
	freed++;
	free(value);
}

static void test_hashmap__free_all_frees_every_value(void **state)
{
	struct hashmap *map = hashmap__new();
	int i;

	(void)state;
	for (i = 0; i < 100; i++)
		assert_int_equal(hashmap__set(map, (uint64_t)i * 7, malloc(8)), 0);
	free(hashmap__remove(map, 7));
	freed = 0;
	hashmap__free_all(map, count_free);
	assert_int_equal(freed, 99);
	hashmap__free_all(NULL, count_free);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hashmap__matches_model),
		cmocka_unit_test(test_hashmap__rejects_null_value),
		cmocka_unit_test(test_hashmap__free_all_frees_every_value),
	};

	return cmocka_run_group_tests_name("hashmap", tests, NULL, NULL);
}
