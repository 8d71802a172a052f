/* Tests of decoding PERF_RECORD_* bytes: samples field by field, and every cut short. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "records.h"

/* Decodes the first @size bytes of @b from an exact-size copy (ASan sees overreads). */
static bool decode_cut(const struct builder *b, size_t size, bool callchain, struct sample_view *v)
{
	uint8_t *copy = malloc(size ? size : 1);
	bool ok;

	assert_non_null(copy);
	memcpy(copy, b->buf, size);
	ok = decode_sample(copy, (uint32_t)size, callchain, v);
	free(copy);
	return ok;
}

static void test_decode__sample_fields(void **state)
{
	struct builder b;
	struct sample_view v;

	(void)state;
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 64, 40);
	assert_true(decode_sample(b.buf, (uint32_t)b.len, false, &v));
	assert_int_equal(v.id, 77);
	assert_int_equal(v.pid, 100);
	assert_int_equal(v.tid, 101);
	assert_int_equal(v.time, 5000);
	assert_int_equal(v.cpu, 3);
	assert_true(v.stack.valid);
	assert_int_equal(v.stack.regs[SREG_AX], 0x1000);
	assert_int_equal(v.stack.regs[SREG_IP], 0x1000 + SREG_IP);
	assert_int_equal(v.stack.regs[SREG_R15], 0x1000 + SREG_R15);
	assert_int_equal(v.stack.size, 40); /* the dynamic size: what was really copied */
	assert_ptr_equal(v.stack.data, b.buf + b.len - 8 - 64);
	assert_int_equal(v.stack.nkernel, 0);
}

static void test_decode__callchain(void **state)
{
	struct builder b;
	struct sample_view v;

	(void)state;
	build_sample(&b, true, PERF_SAMPLE_REGS_ABI_64, 0, 0);
	assert_true(decode_sample(b.buf, (uint32_t)b.len, true, &v));
	assert_int_equal(v.stack.nkernel, 2);
	assert_int_equal(v.stack.kernel_ips[0], 0xffffffff81000010ULL);
	assert_int_equal(v.stack.kernel_ips[1], 0xffffffff81000020ULL);
	assert_true(v.stack.valid);
	assert_null(v.stack.data);
}

static void test_decode__no_user_state(void **state)
{
	struct builder b;
	struct sample_view v;

	(void)state;
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_NONE, 0, 0);
	assert_true(decode_sample(b.buf, (uint32_t)b.len, false, &v));
	assert_false(v.stack.valid);
	assert_int_equal(v.pid, 100);
}

static void test_decode__dynamic_size_is_capped(void **state)
{
	struct builder b;
	struct sample_view v;

	(void)state;
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 32, 1000);
	assert_true(decode_sample(b.buf, (uint32_t)b.len, false, &v));
	assert_int_equal(v.stack.size, 32);
}

/* Every record cut short, anywhere, is refused without reading past its end. */
static void test_decode__every_cut_is_refused(void **state)
{
	static const struct {
		bool callchain;
		uint64_t abi, stack;
	} shapes[] = {
		{ false, PERF_SAMPLE_REGS_ABI_64, 64 },
		{ true, PERF_SAMPLE_REGS_ABI_64, 64 },
		{ false, PERF_SAMPLE_REGS_ABI_NONE, 0 },
		{ true, PERF_SAMPLE_REGS_ABI_NONE, 16 },
	};
	struct builder b;
	struct sample_view v;
	size_t i, cut;

	(void)state;
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		build_sample(&b, shapes[i].callchain, shapes[i].abi, shapes[i].stack, 8);
		assert_true(decode_cut(&b, b.len, shapes[i].callchain, &v));
		for (cut = 0; cut < b.len; cut++)
			assert_false(decode_cut(&b, cut, shapes[i].callchain, &v));
	}
}

/* Sizes in the record that claim more than it holds. */
static void test_decode__lying_sizes_are_refused(void **state)
{
	struct builder b;
	struct sample_view v;
	size_t nr_at = sizeof(struct perf_event_header) + 8 + 8 + 8 + 8;

	(void)state;
	build_sample(&b, true, PERF_SAMPLE_REGS_ABI_64, 0, 0);
	memcpy(b.buf + nr_at, &(uint64_t){ 1ULL << 61 }, 8); /* callchain length */
	assert_false(decode_cut(&b, b.len, true, &v));
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 16, 16);
	/* The stack size field sits before its 16 bytes and the dynamic size. */
	memcpy(b.buf + b.len - 8 - 16 - 8, &(uint64_t){ 4096 }, 8);
	assert_false(decode_cut(&b, b.len, false, &v));
}

static void test_decode__time_and_pid(void **state)
{
	struct builder b;
	struct qrec *q;
	struct test_task_record fork = { .header = { PERF_RECORD_FORK, 0, sizeof(fork) },
					 .pid = 20,
					 .ppid = 10,
					 .time = 900,
					 .id_pid = 20,
					 .id_time = 901 };

	(void)state;
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_NONE, 0, 0);
	assert_int_equal(record_time((const struct perf_event_header *)b.buf, NULL), 5000);
	/* Other records carry it in the sample_id trailer. */
	assert_int_equal(record_time(&fork.header, NULL), 901);
	q = test_qrec(b.buf, b.len, 0);
	assert_non_null(q);
	assert_int_equal(record_pid(q), 100);
	free(q);
	q = test_qrec(&fork, sizeof(fork), 0);
	assert_non_null(q);
	assert_int_equal(record_pid(q), 20);
	free(q);
}

static void read_flat(const void *src, uint32_t off, void *buf, size_t len)
{
	memcpy(buf, (const uint8_t *)src + off, len);
}

/*
 * A sample copied by its stack cut decodes as the whole one does, its stack the bytes the
 * kernel copied (rounded up to 8) and no more: with and without a callchain and user
 * registers, a dynamic size below, at, and (lying) over the reserved size.
 */
static void test_decode__stack_cut_keeps_what_was_copied(void **state)
{
	const struct {
		bool callchain;
		uint64_t abi, size, dyn, keep;
	} cases[] = {
		{ false, PERF_SAMPLE_REGS_ABI_64, 1024, 300, 304 },
		{ true, PERF_SAMPLE_REGS_ABI_64, 1024, 1024, 1024 },
		{ false, PERF_SAMPLE_REGS_ABI_NONE, 512, 0, 0 },
		{ true, PERF_SAMPLE_REGS_ABI_64, 256, 5000, 256 },
		{ false, PERF_SAMPLE_REGS_ABI_64, 2048, 8, 8 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct builder b;
		struct stack_cut cut;
		struct sample_view whole, cut_view;
		uint8_t copy[4096];
		size_t len;

		build_sample(&b, cases[i].callchain, cases[i].abi, cases[i].size, cases[i].dyn);
		assert_true(sample_stack_cut(read_flat, b.buf, (uint32_t)b.len, cases[i].callchain,
					     &cut));
		assert_int_equal(cut.keep, cases[i].keep);
		assert_int_equal(cut.dyn, cases[i].dyn);
		len = cut.size;
		assert_int_equal(len, b.len - cases[i].size + cases[i].keep);
		memcpy(copy, b.buf, len - 8);
		stack_cut_apply(&cut, copy);
		assert_int_equal(((struct perf_event_header *)copy)->size, len);
		assert_true(decode_sample(b.buf, (uint32_t)b.len, cases[i].callchain, &whole));
		assert_true(decode_sample(copy, (uint32_t)len, cases[i].callchain, &cut_view));
		assert_int_equal(cut_view.id, whole.id);
		assert_int_equal(cut_view.tid, whole.tid);
		assert_int_equal(cut_view.time, whole.time);
		assert_int_equal(cut_view.stack.valid, whole.stack.valid);
		assert_memory_equal(cut_view.stack.regs, whole.stack.regs,
				    sizeof(whole.stack.regs));
		assert_int_equal(cut_view.stack.nkernel, whole.stack.nkernel);
		assert_int_equal(cut_view.stack.size,
				 whole.stack.size < cut.keep ? whole.stack.size : cut.keep);
		if (whole.stack.size)
			assert_memory_equal(cut_view.stack.data, whole.stack.data,
					    cut_view.stack.size);
	}
}

/* Samples it can't cut are copied whole: no stack, a cut-short one, a field after it. */
static void test_decode__stack_cut_refused(void **state)
{
	struct builder b;
	struct stack_cut cut;
	size_t size;

	(void)state;
	build_sample(&b, false, PERF_SAMPLE_REGS_ABI_64, 0, 0);
	assert_false(sample_stack_cut(read_flat, b.buf, (uint32_t)b.len, false, &cut));
	build_sample(&b, true, PERF_SAMPLE_REGS_ABI_64, 256, 100);
	for (size = 0; size < b.len; size++)
		assert_false(sample_stack_cut(read_flat, b.buf, (uint32_t)size, true, &cut));
	put_u64(&b, 0); /* a field past the stack: not the layout asked for */
	assert_false(sample_stack_cut(read_flat, b.buf, (uint32_t)b.len, true, &cut));
	/* A callchain that says it is longer than the record. */
	build_sample(&b, true, PERF_SAMPLE_REGS_ABI_64, 64, 64);
	memcpy(b.buf + sizeof(struct perf_event_header) + 32, &(uint64_t){ 1ULL << 40 }, 8);
	assert_false(sample_stack_cut(read_flat, b.buf, (uint32_t)b.len, true, &cut));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_decode__sample_fields),
		cmocka_unit_test(test_decode__callchain),
		cmocka_unit_test(test_decode__no_user_state),
		cmocka_unit_test(test_decode__dynamic_size_is_capped),
		cmocka_unit_test(test_decode__every_cut_is_refused),
		cmocka_unit_test(test_decode__lying_sizes_are_refused),
		cmocka_unit_test(test_decode__time_and_pid),
		cmocka_unit_test(test_decode__stack_cut_keeps_what_was_copied),
		cmocka_unit_test(test_decode__stack_cut_refused),
	};

	return cmocka_run_group_tests_name("decode", tests, NULL, NULL);
}
