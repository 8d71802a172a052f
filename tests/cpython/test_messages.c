/*
 * Tests of telling a Pool's messages from their first bytes (cpython/messages.c). The
 * byte strings are what multiprocessing's ForkingPickler and connections write on
 * CPython 3.8 to 3.13 (the same bytes on each), for the tuples named beside them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../../cpython/messages.h"

#define BYTES(s) (const uint8_t *)(s), sizeof(s) - 1

/* (0, 3, starmapstar, ((f, [(1, 2)]),), {}) with its length header, as written. */
static const char task_written[] = "\x00\x00\x00Z\x80\x04\x95O\x00\x00\x00\x00\x00\x00\x00"
				   "(K\x00K\x03\x8c\x14multiprocessing.po";
/* (300, 70000, (True, [5])), as written. */
static const char result_written[] = "\x00\x00\x00\x1e\x80\x04\x95\x13\x00\x00\x00\x00\x00\x00"
				     "\x00M,\x01Jp\x11\x01\x00\x88]\x94K\x05a\x86\x94\x87\x94.";

static void test_messages__task_as_written_and_as_read(void **state)
{
	struct cpython_message m;

	(void)state;
	assert_int_equal(cpython_message_parse(BYTES(task_written), &m), CPYTHON_MESSAGE_POOL_TASK);
	assert_int_equal(m.job, 0);
	assert_int_equal(m.task, 3);
	/* The reader takes the length apart: its second read starts at the pickle. */
	assert_int_equal(cpython_message_parse((const uint8_t *)task_written + 4,
					       sizeof(task_written) - 5, &m),
			 CPYTHON_MESSAGE_POOL_TASK);
	assert_int_equal(m.task, 3);
}

static void test_messages__results_and_their_numbers(void **state)
{
	/* (2**40, 1, (False, None)): a long job number, a failed task. */
	static const char failed[] = "\x80\x04\x95\x11\x00\x00\x00\x00\x00\x00\x00\x8a\x06\x00\x00"
				     "\x00\x00\x00\x01K\x01\x89N\x86\x94\x87\x94.";
	/* (-2, 1, (True, None)) in protocol 2 (no frame): a negative LONG1. */
	static const char negative[] = "\x80\x02\x8a\x01\xfeK\x01\x88N\x86\x87.";
	struct cpython_message m;

	(void)state;
	assert_int_equal(cpython_message_parse(BYTES(result_written), &m),
			 CPYTHON_MESSAGE_POOL_RESULT);
	assert_int_equal(m.job, 300);
	assert_int_equal(m.task, 70000);
	assert_int_equal(cpython_message_parse(BYTES(failed), &m), CPYTHON_MESSAGE_POOL_RESULT);
	assert_int_equal(m.job, 1LL << 40);
	assert_int_equal(m.task, 1);
	assert_int_equal(cpython_message_parse(BYTES(negative), &m), CPYTHON_MESSAGE_POOL_RESULT);
	assert_int_equal(m.job, -2);
}

static void test_messages__anything_else_is_none(void **state)
{
	/* (1, 2, 3): two ints, but neither a mark before them nor a bool after. */
	static const char ints[] = "\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00K\x01K\x02K\x03\x87"
				   "\x94.";
	/* ("a", 1, 2, 3, 4): a mark, then no int. */
	static const char text_first[] = "\x80\x04\x95\x12\x00\x00\x00\x00\x00\x00\x00(\x8c\x01a"
					 "\x94K\x01K\x02K\x03K\x04t\x94.";
	static const char not_pickle[] = "GET / HTTP/1.1\r\n";
	struct cpython_message m;
	size_t cut;

	(void)state;
	assert_int_equal(cpython_message_parse(BYTES(ints), &m), CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse(BYTES(text_first), &m), CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse(BYTES(not_pickle), &m), CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse(NULL, 0, &m), CPYTHON_MESSAGE_NONE);
	/* Cut anywhere before the item that tells it: not told, never misread. */
	for (cut = 0; cut < 21; cut++)
		assert_int_equal(cpython_message_parse((const uint8_t *)task_written, cut, &m),
				 CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse((const uint8_t *)task_written, 21, &m),
			 CPYTHON_MESSAGE_POOL_TASK);
	for (cut = 0; cut < 24; cut++)
		assert_int_equal(cpython_message_parse((const uint8_t *)result_written, cut, &m),
				 CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse((const uint8_t *)result_written, 24, &m),
			 CPYTHON_MESSAGE_POOL_RESULT);
}

static void test_messages__executor_call_and_result_items(void **state)
{
	/* _CallItem(5, f, (1, 2), {}) as written; _ResultItem(300, result=[1]) as read. */
	static const char call[] = "\x00\x00\x00y\x80\x04\x95n\x00\x00\x00\x00\x00\x00\x00"
				   "\x8c\x1a"
				   "concurrent.futures.process\x94\x8c\t_CallItem\x94"
				   "\x93\x94)\x81\x94}\x94(\x8c\x07work_id\x94K\x05\x8c\x02"
				   "fn\x94";
	static const char result[] = "\x80\x04\x95j\x00\x00\x00\x00\x00\x00\x00"
				     "\x8c\x1a"
				     "concurrent.futures.process\x94\x8c\x0b_ResultItem\x94"
				     "\x93\x94)\x81\x94}\x94(\x8c\x07work_id\x94M,\x01\x8c\t";
	/* Another class of that module, and another module's _CallItem: not told. */
	static const char other[] = "\x80\x04\x95j\x00\x00\x00\x00\x00\x00\x00"
				    "\x8c\x1a"
				    "concurrent.futures.process\x94\x8c\x0b_WorkItemXX\x94"
				    "\x93\x94)\x81\x94}\x94(\x8c\x07work_id\x94M,\x01\x8c\t";
	static const char elsewhere[] = "\x80\x04\x95j\x00\x00\x00\x00\x00\x00\x00"
					"\x8c\x1a"
					"concurrent.futures.thread_\x94\x8c\t_CallItem\x94"
					"\x93\x94)\x81\x94}\x94(\x8c\x07work_id\x94K\x05";
	struct cpython_message m;
	size_t cut;

	(void)state;
	assert_int_equal(cpython_message_parse(BYTES(call), &m), CPYTHON_MESSAGE_EXECUTOR_TASK);
	assert_int_equal(m.task, 5);
	assert_int_equal(m.job, 0);
	assert_int_equal(cpython_message_parse(BYTES(result), &m), CPYTHON_MESSAGE_EXECUTOR_RESULT);
	assert_int_equal(m.task, 300);
	assert_int_equal(cpython_message_parse(BYTES(other), &m), CPYTHON_MESSAGE_NONE);
	assert_int_equal(cpython_message_parse(BYTES(elsewhere), &m), CPYTHON_MESSAGE_NONE);
	/* The work id is the last byte needed: cut before it, not told. */
	for (cut = 0; cut < 76; cut++)
		assert_int_equal(cpython_message_parse((const uint8_t *)call, cut, &m),
				 CPYTHON_MESSAGE_NONE);
	assert_true(76 <= CPYTHON_MESSAGE_BYTES);
	assert_int_equal(cpython_message_parse((const uint8_t *)call, 76, &m),
			 CPYTHON_MESSAGE_EXECUTOR_TASK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_messages__task_as_written_and_as_read),
		cmocka_unit_test(test_messages__results_and_their_numbers),
		cmocka_unit_test(test_messages__anything_else_is_none),
		cmocka_unit_test(test_messages__executor_call_and_result_items),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
