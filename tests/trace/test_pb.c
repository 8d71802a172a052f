/* Tests of the protobuf encoder: bytes checked against the wire format by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../trace/pb.h"

static void expect_bytes(const struct pb_buf *b, const void *want, size_t len)
{
	assert_int_equal(b->err, 0);
	assert_int_equal(b->len, len);
	assert_memory_equal(b->data, want, len);
}

static void test_pb__varints(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_uint(&b, 1, 0);
	pb_uint(&b, 1, 150); /* the protobuf docs' example: 96 01 */
	pb_uint(&b, 60, 1);  /* a tag past 15 takes two bytes */
	pb_int(&b, 2, -1);   /* int64: ten bytes */
	expect_bytes(&b,
		     "\x08\x00"
		     "\x08\x96\x01"
		     "\xe0\x03\x01"
		     "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
		     2 + 3 + 3 + 11);
	pb_buf__release(&b);
}

static void test_pb__double(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_double(&b, 44, 1.0);
	expect_bytes(&b, "\xe1\x02\x00\x00\x00\x00\x00\x00\xf0\x3f", 10);
	pb_buf__release(&b);
}

static void test_pb__nested_lengths(void **state)
{
	struct pb_buf b = { 0 };
	char big[200];
	size_t outer, inner;

	(void)state;
	memset(big, 'x', sizeof(big));
	outer = pb_begin(&b, 1);
	inner = pb_begin(&b, 2);
	pb_uint(&b, 3, 7);
	pb_end(&b, inner);
	pb_end(&b, outer);
	expect_bytes(&b, "\x0a\x04\x12\x02\x18\x07", 6);
	pb_buf__reset(&b);
	/* A body of 203 bytes: a two-byte length (cb 01). */
	outer = pb_begin(&b, 1);
	pb_bytes(&b, 2, big, sizeof(big));
	pb_end(&b, outer);
	assert_int_equal(b.len, 1 + 2 + 1 + 2 + sizeof(big));
	assert_memory_equal(b.data, "\x0a\xcb\x01\x12\xc8\x01", 6);
	assert_memory_equal(b.data + 6, big, sizeof(big));
	pb_buf__release(&b);
}

static void test_pb__strings_are_utf8(void **state)
{
	struct pb_buf b = { 0 };

	(void)state;
	pb_string(&b, 2, "a\xff\xc3\xa9");
	/* The stray byte becomes U+FFFD; the valid sequence stays. */
	expect_bytes(&b,
		     "\x12\x06"
		     "a\xef\xbf\xbd\xc3\xa9",
		     8);
	pb_buf__reset(&b);
	pb_string(&b, 2, NULL);
	expect_bytes(&b, "\x12\x00", 2);
	pb_buf__release(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pb__varints),
		cmocka_unit_test(test_pb__double),
		cmocka_unit_test(test_pb__nested_lengths),
		cmocka_unit_test(test_pb__strings_are_utf8),
	};

	return cmocka_run_group_tests_name("pb", tests, NULL, NULL);
}
