/* Tests of the names processes get from their command lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/procname.h"
#include "support.h"

static const char *short_of(const char *cmdline)
{
	static char out[256];

	return procname_short(cmdline, out, sizeof(out)) ? NULL : out;
}

static void test_procname__script(void **state)
{
	(void)state;
	assert_string_equal(short_of("/root/.pyenv/versions/3.12.1/bin/python3 "
				     "/work/main/examples/pool_jobs.py 8"),
			    "pool_jobs.py");
	assert_string_equal(short_of("python3.14 -B -u -X dev -W error x/y/run.py --fast"),
			    "run.py");
	assert_string_equal(short_of("python -- -odd.py"), "-odd.py");
	assert_string_equal(short_of("python3 -m http.server 8000"), "http.server");
	/* Not a script: the interpreter alone, or code given on the command line */
	assert_string_equal(short_of("python3"), "python3");
	assert_string_equal(short_of("python3 -c import sys; print(1)"),
			    "python3 -c import sys; print(1)");
}

static void test_procname__multiprocessing(void **state)
{
	(void)state;
	assert_string_equal(
		short_of("/usr/bin/python3.11 -c from multiprocessing.forkserver import main; "
			 "main(8, 9, ['__main__'], **{'sys_path': ['/x']})"),
		"forkserver");
	assert_string_equal(short_of("python3 -c from multiprocessing.resource_tracker import "
				     "main;main(5)"),
			    "resource_tracker");
	/* A spawned child keeps the name it had: its parent's */
	assert_null(short_of("python3 -B -s -c from multiprocessing.spawn import spawn_main; "
			     "spawn_main(tracker_fd=5, pipe_handle=7) --multiprocessing-fork"));
}

static void test_procname__other_programs(void **state)
{
	(void)state;
	assert_string_equal(short_of("sleep 0.3"), "sleep 0.3");
	assert_string_equal(short_of("/bin/sh -c python3 x.py"), "/bin/sh -c python3 x.py");
	/* "pythonista" is a python... by its name: the rule is the program's file name */
	assert_string_equal(short_of("/opt/bin/pythonw app.py"), "app.py");
}

static void test_procname__container_note_and_bounds(void **state)
{
	char out[8];

	(void)state;
	assert_string_equal(short_of("python3 /srv/app.py (pid 1 in its namespace)"),
			    "app.py (pid 1 in its namespace)");
	assert_string_equal(short_of("python3 -m worker (pid 7 in its namespace)"),
			    "worker (pid 7 in its namespace)");
	/* Cut to the room given, and always terminated */
	assert_int_equal(procname_short("python3 /a/very_long_script_name.py", out, sizeof(out)),
			 0);
	assert_string_equal(out, "very_lo");
	/* Hostile: options with no value at the end, empty, only spaces */
	assert_string_equal(short_of("python3 -X"), "python3 -X");
	assert_string_equal(short_of("python3 -c"), "python3 -c");
	assert_string_equal(short_of("python3 -m"), "");
	assert_string_equal(short_of(""), "");
	assert_string_equal(short_of("   "), "   ");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_procname__script),
		cmocka_unit_test(test_procname__multiprocessing),
		cmocka_unit_test(test_procname__other_programs),
		cmocka_unit_test(test_procname__container_note_and_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
