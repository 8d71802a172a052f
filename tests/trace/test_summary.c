/*
 * Tests of the report: its figures from slices fed by hand, and the JSON reader on
 * traces written by hand, well formed or not.
 */
#include <errno.h>
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

/* The report of @s as a string; caller frees. */
static char *report_text(const struct trace_summary *s)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	assert_int_equal(trace_summary__print(s, f), 0);
	fclose(f);
	return text;
}

static void close_slice(struct trace_summary *s, uint32_t depth, const char *name, bool off_cpu,
			uint64_t start_ms, uint64_t end_ms)
{
	struct trace_summary_slice sl = { .pid = 10,
					  .tid = 11,
					  .depth = depth,
					  .name = name,
					  .off_cpu = off_cpu,
					  .start_ns = start_ms * 1000000,
					  .end_ns = end_ms * 1000000 };

	assert_int_equal(trace_summary__close(s, &sl), 0);
}

/* main [0, 100): work [10, 60) with a 30 ms sleep in it, a 20 ms lock wait after it. */
static void test_summary__figures(void **state)
{
	struct trace_summary *s = trace_summary__new();
	char *text;

	(void)state;
	assert_non_null(s);
	assert_int_equal(trace_summary__name(s, 10, 0, "app"), 0);
	assert_int_equal(trace_summary__name(s, 10, 11, "worker"), 0);
	assert_int_equal(trace_summary__open(s, 10, 11, 0, "main", NULL), 0);
	assert_int_equal(trace_summary__open(s, 10, 11, 1, "work", NULL), 0);
	assert_int_equal(trace_summary__open(s, 10, 11, 2, "sleep", NULL), 0);
	close_slice(s, 2, "sleep", true, 20, 50);
	close_slice(s, 1, "work", false, 10, 60);
	assert_int_equal(trace_summary__open(s, 10, 11, 1, "lock wait (futex)", NULL), 0);
	close_slice(s, 1, "lock wait (futex)", true, 60, 80);
	close_slice(s, 0, "main", false, 0, 100);
	text = report_text(s);
	assert_non_null(strstr(text, "1 processes, 1 threads over 100.0 ms\n"));
	/* 100 ms covered, 50 ms of waits; the lock wait is named by its first words. */
	assert_non_null(strstr(text, "process 10 app: wall 100.0 ms, on-CPU 50.0 ms (50%), "
				     "waits 50.0 ms: sleep 30.0 ms, lock wait 20.0 ms\n"));
	/* main: 100 - 50 (work) - 20 (wait) = 30; work: 50 - 30 (sleep) = 20. */
	assert_non_null(strstr(text, "30.0 ms  60%  main\n"));
	assert_non_null(strstr(text, "20.0 ms  40%  work\n"));
	assert_non_null(strstr(text, "30.0 ms  sleep  10/11: main > work\n"));
	assert_non_null(strstr(text, "20.0 ms  lock wait (futex)  10/11: main\n"));
	free(text);
	trace_summary__free(s);
}

static int read_text(const char *dir, const char *json, struct trace_summary *s)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/t.json", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(json, f);
	fclose(f);
	return trace_summary__read_json(s, path);
}

/*
 * main [0, 100): work [10, 60) ran without the GIL in [20, 50) (a leaf marker); a JSON
 * trace says the same by the marker's category. The marker is a state of its parent's
 * time: in the totals, not a function taking work's self time.
 */
static void test_summary__no_gil(void **state)
{
	static const char trace[] =
		"{\"traceEvents\":[\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":1,\"dur\":100000,\"name\":\"main\","
		"\"cat\":\"python\"},\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":10001,\"dur\":50000,\"name\":\"work\","
		"\"cat\":\"python\"},\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":20001,\"dur\":30000,"
		"\"name\":\"running without the GIL\",\"cat\":\"no-gil\"}\n"
		"],\"otherData\":{\"origin_ns\":0}}\n";
	struct trace_summary_slice marker = { .pid = 10,
					      .tid = 11,
					      .depth = 2,
					      .name = "running without the GIL",
					      .no_gil = true,
					      .start_ns = 20000000,
					      .end_ns = 50000000 };
	struct trace_summary *fed = trace_summary__new(), *read = trace_summary__new();
	char *dir = support_tempdir(), *text[2];
	int i;

	(void)state;
	assert_non_null(fed);
	assert_non_null(read);
	assert_int_equal(trace_summary__open(fed, 10, 11, 0, "main", NULL), 0);
	assert_int_equal(trace_summary__open(fed, 10, 11, 1, "work", NULL), 0);
	assert_int_equal(trace_summary__open(fed, 10, 11, 2, marker.name, NULL), 0);
	assert_int_equal(trace_summary__close(fed, &marker), 0);
	close_slice(fed, 1, "work", false, 10, 60);
	close_slice(fed, 0, "main", false, 0, 100);
	assert_int_equal(read_text(dir, trace, read), 0);
	text[0] = report_text(fed);
	text[1] = report_text(read);
	for (i = 0; i < 2; i++) {
		assert_non_null(strstr(text[i], "wall 100.0 ms, on-CPU 100.0 ms (100%, 30.0 ms "
						"without the GIL), waits 0.0 ms\n"));
		assert_non_null(strstr(text[i], "50.0 ms  50%  main\n"));
		assert_non_null(strstr(text[i], "50.0 ms  50%  work\n"));
		assert_null(strstr(text[i], "%  running without the GIL"));
		free(text[i]);
	}
	trace_summary__free(fed);
	trace_summary__free(read);
	support_rmdir(dir);
}

static void test_summary__read_json(void **state)
{
	static const char trace[] =
		"{\"traceEvents\":[\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":21001,\"dur\":30000,\"name\":\"sle\\u0065p\","
		"\"cat\":\"off-cpu\",\"args\":{\"file\":\"\",\"line\":0,\"samples\":0,\"waits\":1}},\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":11001,\"dur\":50000,\"name\":\"work\","
		"\"cat\":\"python\",\"args\":{\"nested\":[1,{\"a\":null},true,false,-1.5e3]}},\n"
		"{\"ph\":\"X\",\"pid\":10,\"tid\":11,\"ts\":1,\"dur\":100000,\"name\":\"main\","
		"\"cat\":\"python\"},\n"
		"{\"ph\":\"M\",\"pid\":10,\"tid\":10,\"ts\":0,\"name\":\"process_name\","
		"\"args\":{\"name\":\"app \\\"quoted\\\"\"}}\n"
		"],\"otherData\":{\"origin_ns\":5000}}\n";
	struct trace_summary *s = trace_summary__new();
	char *dir = support_tempdir(), *text;

	(void)state;
	assert_non_null(s);
	assert_int_equal(read_text(dir, trace, s), 0);
	text = report_text(s);
	assert_non_null(strstr(text, "process 10 app \"quoted\": wall 100.0 ms, on-CPU 70.0 ms"));
	/* Nested again by time although written children first. */
	assert_non_null(strstr(text, "30.0 ms  sleep  10/11: main > work\n"));
	free(text);
	trace_summary__free(s);
	support_rmdir(dir);
}

/* Whatever the file holds, the reader says what it is and never crashes. */
static void test_summary__not_traces(void **state)
{
	static const char *const bad[] = {
		"",
		"not json",
		"{\"traceEvents\":[{\"ph\":\"X\"",
		"{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"unterminated}]}",
		"{\"traceEvents\":{}}",
		"{\"other\":1}",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]",
		"{\"traceEvents\":[{\"args\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":"
		"{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":",
	};
	char *dir = support_tempdir(), path[512];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct trace_summary *s = trace_summary__new();

		assert_non_null(s);
		if (read_text(dir, bad[i], s) != -EINVAL)
			fail_msg("case %zu was taken for a trace", i);
		trace_summary__free(s);
	}
	{
		/* Nesting past the reader's bound is refused, not recursed into. */
		char deep[256] = "{\"traceEvents\":[";
		struct trace_summary *s = trace_summary__new();

		memset(deep + strlen(deep), '[', 100);
		strcat(deep, "]}");
		assert_int_equal(read_text(dir, deep, s), -EINVAL);
		trace_summary__free(s);
	}
	snprintf(path, sizeof(path), "%s/missing.json", dir);
	{
		struct trace_summary *s = trace_summary__new();

		assert_int_equal(trace_summary__read_json(s, path), -ENOENT);
		trace_summary__free(s);
	}
	support_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_summary__figures),
		cmocka_unit_test(test_summary__read_json),
		cmocka_unit_test(test_summary__no_gil),
		cmocka_unit_test(test_summary__not_traces),
	};

	return cmocka_run_group_tests_name("summary", tests, NULL, NULL);
}
