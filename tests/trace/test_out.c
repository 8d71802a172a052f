/* Write failures (a full disk) injected with -Wl,--wrap=write: the trace stays valid. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trace/out.h"
#include "../../trace/trace.h"
#include "../common/support.h"

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
int __real_ftruncate(int fd, off_t length);
int __wrap_ftruncate(int fd, off_t length);

/* Bytes that may still be written before the disk is "full"; -1: unlimited. */
static long long disk_room = -1;

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	if (fd > 2 && disk_room >= 0) {
		if (!disk_room) {
			errno = ENOSPC;
			return -1;
		}
		if ((long long)n > disk_room)
			n = (size_t)disk_room; /* a short write first, like a filling disk */
		disk_room -= (long long)n;
	}
	return __real_write(fd, buf, n);
}

/* Cutting the file back frees space: afterwards writes succeed again. */
int __wrap_ftruncate(int fd, off_t length)
{
	disk_room = -1;
	return __real_ftruncate(fd, length);
}

static uint64_t write_many_slices(struct trace *trace, uint32_t func, int count)
{
	struct trace_frame frames[2] = { { func, 1, 0 }, { func, 2, 1 } };
	int i;

	for (i = 0; i < count; i++) {
		struct trace_obs obs = { .pid = 1,
					 .tid = 1,
					 .t_start_ns = 1000000ULL * (uint64_t)i,
					 .nframes = 1 + (uint32_t)(i % 2),
					 .frames = frames };

		assert_int_equal(trace__observe(trace, &obs), 0);
	}
	return (uint64_t)count;
}

static void test_out__full_disk_keeps_valid_json(void **state)
{
	char *dir = support_tempdir(), path[512], *text;
	struct frame_table *frames = frame_table__new();
	struct trace_opts opts = { .path = path, .period_ns = 1000000, .frames = frames };
	struct trace_stats stats;
	struct trace *trace;
	uint32_t func;
	int x_lines;

	(void)state;
	assert_non_null(dir);
	assert_non_null(frames);
	func = frame_table__intern(frames, &(struct frame_info){ "f", "f.py", 1, FRAME_PYTHON });
	snprintf(path, sizeof(path), "%s/full.json", dir);
	trace = trace__open(&opts);
	assert_non_null(trace);
	disk_room = 150 * 1024;
	write_many_slices(trace, func, 20000);
	assert_int_equal(trace__close(trace, &stats), -ENOSPC);
	disk_room = -1;

	text = support_trace_text(path);
	assert_non_null(text);
	x_lines = support_count_prefix(text, "X ");
	assert_true(x_lines > 100);
	/* Every slice is either in the file or counted as lost, and the footer says so. */
	assert_int_equal((uint64_t)x_lines, stats.slices);
	assert_int_equal((uint64_t)x_lines + stats.lost_to_write_errors, 10001);
	{
		char line[128];

		snprintf(line, sizeof(line), "otherData events_lost_to_write_errors %llu",
			 (unsigned long long)stats.lost_to_write_errors);
		if (!support_has_line(text, line))
			fail_msg("missing '%s'", line);
	}
	free(text);
	frame_table__free(frames);
	support_rmdir(dir);
}

static void test_out__gzip_write_failure_reports_error(void **state)
{
	char *dir = support_tempdir(), path[512];
	struct stat st;
	struct out_file *out;
	int i;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/x.gz", dir);
	out = out_file__open(path, true);
	assert_non_null(out);
	disk_room = 0;
	for (i = 0; i < 100000; i++)
		out_file__printf(out, "%d some incompressible-ish text %x\n", i, i * 2654435761u);
	assert_int_equal(out_file__error(out), -ENOSPC);
	assert_int_equal(out_file__recover(out), -ENOSPC);
	assert_int_equal(out_file__commit(out), -ENOSPC);
	disk_room = -1;
	assert_int_equal(stat(path, &st), -1);
	support_rmdir(dir);
}

static void test_out__recover_without_error_is_noop(void **state)
{
	char *dir = support_tempdir(), path[512], *text;
	struct out_file *out;
	int status;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/plain.txt", dir);
	out = out_file__open(path, false);
	assert_non_null(out);
	out_file__puts(out, "hello ");
	out_file__mark(out);
	out_file__puts(out, "world\n");
	assert_int_equal(out_file__recover(out), 0);
	assert_int_equal(out_file__commit(out), 0);
	snprintf(path + strlen(path), 16, "%s", "");
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "cat '%s/plain.txt'", dir);
		text = support_run(cmd, &status);
	}
	assert_string_equal(text, "hello world\n");
	free(text);
	support_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_out__full_disk_keeps_valid_json),
		cmocka_unit_test(test_out__gzip_write_failure_reports_error),
		cmocka_unit_test(test_out__recover_without_error_is_noop),
	};

	return cmocka_run_group_tests_name("out", tests, NULL, NULL);
}
