/* Tests of the trace stage through its public API: what a viewer would read back. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trace/trace.h"
#include "../common/support.h"

#define ORIGIN 5000000000ULL
#define MS 1000000ULL

struct fixture {
	char *dir;
	char path[512];
	struct frame_table *frames;
	uint32_t main_fn, work_fn, io_fn, sleep_marker;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = support_tempdir();
	f->frames = frame_table__new();
	if (!f->dir || !f->frames)
		return -1;
	f->main_fn = frame_table__intern(
		f->frames, &(struct frame_info){ "<module>", "/app/main.py", 1, FRAME_PYTHON });
	f->work_fn = frame_table__intern(
		f->frames, &(struct frame_info){ "Worker.run", "/app/work.py", 10, FRAME_PYTHON });
	f->io_fn = frame_table__intern(
		f->frames,
		&(struct frame_info){ "read_all", "/usr/lib/libio.so", 0, FRAME_NATIVE });
	f->sleep_marker = frame_table__intern(
		f->frames, &(struct frame_info){ "sleep", "", 0, FRAME_OFF_CPU });
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	frame_table__free(f->frames);
	support_rmdir(f->dir);
	free(f);
	return 0;
}

static struct trace *open_trace(struct fixture *f, const char *name, enum trace_format format)
{
	struct trace_opts opts = {
		.path = f->path,
		.format = format,
		.period_ns = MS,
		.origin_ns = ORIGIN,
		.frames = f->frames,
	};
	struct trace *trace;

	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	trace = trace__open(&opts);
	assert_non_null(trace);
	return trace;
}

static void observe(struct trace *trace, uint32_t pid, uint32_t tid, enum trace_obs_kind kind,
		    uint64_t start, uint64_t end, const struct trace_frame *frames, uint32_t n)
{
	struct trace_obs obs = {
		.pid = pid,
		.tid = tid,
		.kind = kind,
		.t_start_ns = start,
		.t_end_ns = end,
		.nframes = n,
		.frames = frames,
	};

	assert_int_equal(trace__observe(trace, &obs), 0);
}

/* Two processes: a parent that forks, a worker that computes then sleeps, then exits. */
static void write_scenario(struct fixture *f, struct trace *trace)
{
	struct trace_frame work[] = { { f->main_fn, 3, 0, 0 }, { f->work_fn, 12, 40, 0 } };
	struct trace_frame wait[] = { { f->main_fn, 3, 0, 0 },
				      { f->work_fn, 15, 40, 0 },
				      { f->sleep_marker, 0, 0, 0 } };
	struct trace_frame parent[] = { { f->main_fn, 7, 0, 0 }, { f->io_fn, 0, 0x1234, 0 } };
	uint64_t t;

	assert_int_equal(trace__name_process(trace, 100, "python main.py"), 0);
	assert_int_equal(trace__name_thread(trace, 100, 100, "python"), 0);
	assert_int_equal(trace__name_process(trace, 200, "python main.py (worker)"), 0);
	assert_int_equal(trace__name_thread(trace, 200, 201, "worker-1"), 0);
	for (t = 0; t < 3; t++)
		observe(trace, 100, 100, TRACE_ON_CPU, ORIGIN + t * MS, 0, parent, 2);
	assert_int_equal(trace__event(trace, &(struct trace_event){ TRACE_EVENT_FORK, 100, 100,
								    ORIGIN + 2 * MS, 200, NULL }),
			 0);
	for (t = 4; t < 8; t++)
		observe(trace, 200, 201, TRACE_ON_CPU, ORIGIN + t * MS, 0, work, 2);
	observe(trace, 200, 201, TRACE_OFF_CPU, ORIGIN + 8 * MS + 250, ORIGIN + 20 * MS, wait, 3);
	assert_int_equal(trace__end_thread(trace, 200, 201, ORIGIN + 20 * MS), 0);
	assert_int_equal(trace__event(trace, &(struct trace_event){ TRACE_EVENT_EXIT, 200, 201,
								    ORIGIN + 20 * MS, 3, NULL }),
			 0);
	assert_int_equal(
		trace__event(trace, &(struct trace_event){ TRACE_EVENT_EXEC, 100, 100,
							   ORIGIN + 21 * MS, 0, "/bin/tr\"ue" }),
		0);
	assert_int_equal(trace__note(trace, "lost_samples", 7), 0);
}

static void check_scenario(const char *text)
{
	static const char *const lines[] = {
		/* The parent: three samples, one slice each for <module> and read_all. */
		"X 100 100 1 3000 \"<module>\" python line=7 samples=3 waits=0 file=\"/app/main.py\"",
		"X 100 100 1 3000 \"read_all\" native line=0 samples=3 waits=0 file=\"/usr/lib/libio.so\"",
		/* The worker: computing 4 ms, then a wait with exact ends inside the same frame. */
		"X 200 201 4001 16000 \"<module>\" python line=3 samples=4 waits=1 file=\"/app/main.py\"",
		"X 200 201 4001 16000 \"Worker.run\" python line=12 samples=4 waits=1 file=\"/app/work.py\"",
		"X 200 201 8001 12000 \"sleep\" off-cpu line=0 samples=0 waits=1 file=\"\"",
		"i 100 100 2001 \"fork\" {\"child_pid\": 200}",
		"i 200 201 20001 \"exit\" {\"status\": 3}",
		"i 100 100 21001 \"exec\" {\"program\": \"/bin/tr\\\"ue\"}",
		"M 100 100 \"process_name\" \"python main.py\"",
		"M 100 100 \"process_sort_index\" 0",
		"M 100 100 \"thread_name\" \"python\"",
		"M 200 200 \"process_name\" \"python main.py (worker)\"",
		"M 200 200 \"process_sort_index\" 1",
		"M 200 201 \"thread_name\" \"worker-1\"",
		"M 200 201 \"thread_sort_index\" 1",
		"otherData lost_samples 7",
		"otherData slices 5",
	};
	size_t i;

	assert_non_null(text);
	for (i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		if (!support_has_line(text, lines[i]))
			fail_msg("missing line: %s\nin:\n%s", lines[i], text);
	}
	assert_int_equal(support_count_prefix(text, "X "), 5);
}

static void test_trace__json_content(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.json", TRACE_FORMAT_AUTO);
	struct trace_stats stats;
	char *text;

	write_scenario(f, trace);
	assert_int_equal(trace__close(trace, &stats), 0);
	assert_int_equal(stats.slices, 5);
	assert_int_equal(stats.events, 3);
	text = support_trace_text(f->path);
	check_scenario(text);
	free(text);
}

/* Until close, nothing exists under the destination name. */
static void test_trace__written_through_temporary(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "late.json", TRACE_FORMAT_JSON);
	struct stat st;

	write_scenario(f, trace);
	assert_int_equal(stat(f->path, &st), -1);
	assert_int_equal(trace__close(trace, NULL), 0);
	assert_int_equal(stat(f->path, &st), 0);

	trace = open_trace(f, "aborted.json", TRACE_FORMAT_JSON);
	trace__abort(trace);
	assert_int_equal(stat(f->path, &st), -1);
}

static void test_trace__gzip_round_trip(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.json.gz", TRACE_FORMAT_AUTO);
	unsigned char magic[2] = { 0 };
	char *text;
	FILE *fp;

	write_scenario(f, trace);
	assert_int_equal(trace__close(trace, NULL), 0);
	fp = fopen(f->path, "rb");
	assert_non_null(fp);
	assert_int_equal(fread(magic, 1, 2, fp), 2);
	fclose(fp);
	assert_int_equal(magic[0], 0x1f);
	assert_int_equal(magic[1], 0x8b);
	text = support_trace_text(f->path);
	check_scenario(text);
	free(text);
}

struct escape_case {
	const char *name;
	const char *expected; /* as Python's json.dumps(ensure_ascii=True) prints it */
};

static void test_trace__escaping(void **state)
{
	static const struct escape_case cases[] = {
		{ "quote\"back\\slash", "\"quote\\\"back\\\\slash\"" },
		{ "line\nbreak\ttab\x01\x1f", "\"line\\nbreak\\ttab\\u0001\\u001f\"" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		  "\"caf\\u00e9 \\u20ac \\ud83d\\ude00\"" },
		{ "bad\xff end", "\"bad\\ufffd end\"" },
		{ "cut\xe2\x82", "\"cut\\ufffd\\ufffd\"" },
		{ "overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\"" },
		{ "surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\"" },
		{ "toobig\xf4\x90\x80\x80", "\"toobig\\ufffd\\ufffd\\ufffd\\ufffd\"" },
	};
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "escape.json", TRACE_FORMAT_JSON);
	char *text;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trace_frame fr = {
			frame_table__intern(f->frames, &(struct frame_info){ cases[i].name, "", 0,
									     FRAME_PYTHON }),
			0, 0, 0
		};

		assert_int_not_equal(fr.func, 0);
		observe(trace, 1, (uint32_t)(10 + i), TRACE_ON_CPU, ORIGIN, 0, &fr, 1);
		assert_int_equal(trace__name_thread(trace, 1, (uint32_t)(10 + i), cases[i].name),
				 0);
	}
	assert_int_equal(trace__close(trace, NULL), 0);
	text = support_trace_text(f->path);
	assert_non_null(text);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char line[256];

		snprintf(line, sizeof(line),
			 "X 1 %zu 1 1000 %s python line=0 samples=1 waits=0 file=\"\"", 10 + i,
			 cases[i].expected);
		if (!support_has_line(text, line))
			fail_msg("missing: %s\nin:\n%s", line, text);
		snprintf(line, sizeof(line), "M 1 %zu \"thread_name\" %s", 10 + i,
			 cases[i].expected);
		if (!support_has_line(text, line))
			fail_msg("missing: %s\nin:\n%s", line, text);
	}
	free(text);
}

static void test_trace__timestamps(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "ts.json", TRACE_FORMAT_JSON);
	struct trace_frame fr = { f->main_fn, 0, 0, 0 };
	struct trace_stats stats;
	char *text;

	/*
	 * Before the origin is clamped to it; start and end are floored to whole
	 * microseconds each, and what falls inside one microsecond is counted, not written.
	 */
	observe(trace, 1, 1, TRACE_OFF_CPU, ORIGIN - 500, ORIGIN + 1234, &fr, 1);
	observe(trace, 1, 2, TRACE_OFF_CPU, ORIGIN + 1999, ORIGIN + 2001, &fr, 1);
	observe(trace, 1, 3, TRACE_OFF_CPU, ORIGIN + 123456001, ORIGIN + 123456999, &fr, 1);
	assert_int_equal(trace__close(trace, &stats), 0);
	text = support_trace_text(f->path);
	assert_non_null(text);
	assert_true(support_has_line(text, "X 1 1 1 1 \"<module>\" python line=1 samples=0 "
					   "waits=1 file=\"/app/main.py\""));
	assert_true(support_has_line(text, "X 1 2 2 1 \"<module>\" python line=1 samples=0 "
					   "waits=1 file=\"/app/main.py\""));
	assert_int_equal(support_count_prefix(text, "X 1 3 "), 0);
	assert_int_equal(stats.slices_empty, 1);
	free(text);
}

static void test_trace__depth_cap(void **state)
{
	enum { DEPTH = 600 };
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "deep.json", TRACE_FORMAT_JSON);
	struct trace_frame *frames = calloc(DEPTH, sizeof(*frames));
	struct trace_stats stats;
	char *text;
	int i;

	assert_non_null(frames);
	for (i = 0; i < DEPTH; i++)
		frames[i] = (struct trace_frame){ f->work_fn, 12, (uint64_t)i, 0 };
	observe(trace, 1, 1, TRACE_ON_CPU, ORIGIN, 0, frames, DEPTH);
	assert_int_equal(trace__close(trace, &stats), 0);
	assert_int_equal(stats.slices, TRACE_DEFAULT_MAX_DEPTH);
	assert_int_equal(stats.slices_too_deep, DEPTH - TRACE_DEFAULT_MAX_DEPTH);
	text = support_trace_text(f->path);
	assert_non_null(text);
	assert_int_equal(support_count_prefix(text, "X "), TRACE_DEFAULT_MAX_DEPTH);
	assert_true(support_has_line(text, "otherData slices_too_deep 88"));
	free(text);
	free(frames);
}

static void test_trace__folded(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.folded", TRACE_FORMAT_AUTO);
	char *text, cmd[600];
	int status;

	write_scenario(f, trace);
	assert_int_equal(trace__close(trace, NULL), 0);
	snprintf(cmd, sizeof(cmd), "sort '%s'", f->path);
	text = support_run(cmd, &status);
	assert_int_equal(status, 0);
	assert_string_equal(
		text,
		"python main.py (100);python (100);<module>;read_all 3\n"
		"python main.py (worker) (200);worker-1 (201);<module>;Worker.run 4\n"
		"python main.py (worker) (200);worker-1 (201);<module>;Worker.run;sleep 12\n");
	free(text);
}

/*
 * A target's names reach a folded file with ';' made ':' and every control character,
 * DEL, C1 control and byte that is not UTF-8 written \xNN (issue 30): the file is
 * read by terminals and made into SVG, and XML forbids C0.
 */
static void test_trace__folded_hostile_names(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "evil.folded", TRACE_FORMAT_AUTO);
	uint32_t evil = frame_table__intern(
		f->frames, &(struct frame_info){ "e\x1b]0;t\x07\n\xff\xc2\x85\x7f\xc3\xa9",
						 "/app/x.py", 1, FRAME_PYTHON });
	struct trace_frame stack[] = { { f->main_fn, 3, 0, 0 }, { evil, 4, 8, 0 } };
	char *text, cmd[600];
	int status;

	assert_int_equal(trace__name_process(trace, 100, "py\x1b[31m;x"), 0);
	observe(trace, 100, 100, TRACE_ON_CPU, ORIGIN, 0, stack, 2);
	assert_int_equal(trace__close(trace, NULL), 0);
	snprintf(cmd, sizeof(cmd), "cat '%s'", f->path);
	text = support_run(cmd, &status);
	assert_int_equal(status, 0);
	assert_string_equal(text, "py\\x1b[31m:x (100);? (100);<module>;"
				  "e\\x1b]0:t\\x07\\x0a\\xff\\xc2\\x85\\x7f\xc3\xa9 1\n");
	free(text);
}

static void test_trace__unwritable_destination(void **state)
{
	struct fixture *f = *state;
	struct trace_opts opts = { .path = "/nonexistent-dir/x.json",
				   .period_ns = MS,
				   .frames = f->frames };

	errno = 0;
	assert_null(trace__open(&opts));
	assert_int_equal(errno, ENOENT);
	opts.path = NULL;
	assert_null(trace__open(&opts));
	assert_int_equal(errno, EINVAL);
}

static volatile sig_atomic_t stop_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* A writer killed by SIGTERM (handled as cli/ does) leaves a complete, valid file. */
static void test_trace__interrupted(void **state)
{
	struct fixture *f = *state;
	struct stat st;
	char *text;
	pid_t pid;
	int status;

	snprintf(f->path, sizeof(f->path), "%s/interrupted.json", f->dir);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct trace_opts opts = {
			.path = f->path, .period_ns = MS, .origin_ns = ORIGIN, .frames = f->frames
		};
		struct trace_frame frames[] = { { f->main_fn, 0, 0, 0 }, { f->work_fn, 0, 1, 0 } };
		struct trace *trace;
		uint64_t t = ORIGIN;

		signal(SIGTERM, on_stop);
		trace = trace__open(&opts);
		if (!trace)
			_exit(2);
		while (!stop_requested) {
			struct trace_obs obs = { .pid = 1,
						 .tid = 1,
						 .t_start_ns = t,
						 .nframes = 1 + (uint32_t)(t / MS % 2),
						 .frames = frames };

			trace__observe(trace, &obs);
			t += MS;
		}
		_exit(trace__close(trace, NULL) ? 1 : 0);
	}
	usleep(200 * 1000);
	assert_int_equal(stat(f->path, &st), -1);
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	text = support_trace_text(f->path);
	assert_non_null(text);
	assert_true(support_count_prefix(text, "X 1 1 ") > 100);
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_trace__json_content, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__written_through_temporary, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_trace__gzip_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__escaping, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__timestamps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__depth_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__folded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__folded_hostile_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace__unwritable_destination, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_trace__interrupted, setup, teardown),
	};

	return cmocka_run_group_tests_name("trace", tests, NULL, NULL);
}
