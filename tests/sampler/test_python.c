/* Tests of the drain-time Python walks' bookkeeping, with allocation failures injected. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../sampler/internal.h"

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
	struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
				     .frequency_hz = 1000,
				     .stack_bytes = 8192 };
	struct sampler *s = sampler__new(&opts);
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_python__fresh_stack_survives_failed_growth),
	};

	return cmocka_run_group_tests_name("python", tests, NULL, NULL);
}
