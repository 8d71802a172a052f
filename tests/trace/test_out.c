/* Write failures (a full disk) injected with -Wl,--wrap=write: the trace stays valid. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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
int fallocate(int fd, int mode, off_t offset, off_t len);

/*
 * A small disk holding one file (the one the test writes): @disk_room bytes may still be
 * allocated (-1: unlimited); the file has @file_allocated bytes. Writes within them need
 * no room; writes past them take it, short first, like a filling disk; fallocate takes it
 * or fails whole; cutting the file gives it back.
 */
static long long disk_room = -1;
static long long file_allocated;

static void disk_reset(long long room)
{
	disk_room = room;
	file_allocated = 0;
}

static long long take_room(long long end, long long *allowed_end)
{
	long long grow = end > file_allocated ? end - file_allocated : 0;

	if (disk_room >= 0 && grow > disk_room)
		grow = disk_room;
	*allowed_end = file_allocated + grow > end ? end : file_allocated + grow;
	return grow;
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
	long long at, allowed_end, grow;
	ssize_t written;

	if (fd <= 2)
		return __real_write(fd, buf, n);
	at = lseek(fd, 0, SEEK_CUR);
	grow = take_room(at + (long long)n, &allowed_end);
	if (allowed_end <= at) {
		errno = ENOSPC;
		return -1;
	}
	written = __real_write(fd, buf, (size_t)(allowed_end - at));
	if (written > 0) {
		if (disk_room >= 0)
			disk_room -= grow;
		if (allowed_end > file_allocated)
			file_allocated = allowed_end;
	}
	return written;
}

/* Our fallocate in place of libc's: the same model, then the real system call. */
int fallocate(int fd, int mode, off_t offset, off_t len)
{
	long long end = (long long)offset + len, allowed_end, grow;

	grow = take_room(end, &allowed_end);
	if (allowed_end < end) {
		errno = ENOSPC;
		return -1;
	}
	if (syscall(SYS_fallocate, fd, mode, offset, len))
		return -1;
	if (disk_room >= 0)
		disk_room -= grow;
	if (end > file_allocated)
		file_allocated = end;
	return 0;
}

int __wrap_ftruncate(int fd, off_t length)
{
	if (length < file_allocated) {
		if (disk_room >= 0)
			disk_room += file_allocated - length;
		file_allocated = length;
	}
	return __real_ftruncate(fd, length);
}

static uint64_t write_many_slices(struct trace *trace, uint32_t func, int count)
{
	struct trace_frame frames[2] = { { func, 1, 0, 0 }, { func, 2, 1, 0 } };
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

/* Every slice is either in the file or counted as lost, and the footer says so. */
static void check_cut_trace(const char *path, const struct trace_stats *stats, int total)
{
	char *text = support_trace_text(path), line[128];
	int x_lines;

	assert_non_null(text);
	x_lines = support_count_prefix(text, "X ");
	assert_true(x_lines > 100);
	assert_true(stats->lost_to_write_errors > 0);
	assert_int_equal((uint64_t)x_lines, stats->slices);
	assert_int_equal((uint64_t)x_lines + stats->lost_to_write_errors, total);
	snprintf(line, sizeof(line), "otherData events_lost_to_write_errors %llu",
		 (unsigned long long)stats->lost_to_write_errors);
	if (!support_has_line(text, line))
		fail_msg("missing '%s'", line);
	free(text);
}

/* Only the named files are left in @dir (the temporary is gone). */
static void assert_dir_holds(const char *dir, int count, const char *const *names)
{
	struct dirent *de;
	int seen = 0, i;
	DIR *d = opendir(dir);

	assert_non_null(d);
	while ((de = readdir(d))) {
		bool expected = false;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		for (i = 0; i < count; i++)
			expected = expected || !strcmp(de->d_name, names[i]);
		if (!expected)
			fail_msg("unexpected file left: %s", de->d_name);
		seen++;
	}
	closedir(d);
	assert_int_equal(seen, count);
}

static void full_disk_trace(const char *name, long long room)
{
	char *dir = support_tempdir(), path[512];
	struct frame_table *frames = frame_table__new();
	struct trace_opts opts = { .path = path, .period_ns = 1000000, .frames = frames };
	struct trace_stats stats;
	struct trace *trace;
	uint32_t func;

	assert_non_null(dir);
	assert_non_null(frames);
	func = frame_table__intern(frames, &(struct frame_info){ "f", "f.py", 1, FRAME_PYTHON });
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	disk_reset(-1);
	trace = trace__open(&opts);
	assert_non_null(trace);
	/* The disk fills up after @room more bytes, the space kept to close it included. */
	disk_room = room;
	write_many_slices(trace, func, 20000);
	assert_int_equal(trace__close(trace, &stats), -ENOSPC);
	disk_reset(-1);
	check_cut_trace(path, &stats, 10001);
	assert_dir_holds(dir, 1, (const char *const[]){ name });
	frame_table__free(frames);
	support_rmdir(dir);
}

static void test_out__full_disk_keeps_valid_json(void **state)
{
	(void)state;
	full_disk_trace("full.json", 150 * 1024);
}

static void test_out__full_disk_keeps_valid_gzip(void **state)
{
	(void)state;
	full_disk_trace("full.json.gz", 20 * 1024);
}

/* A disk full from the start: refused before anything runs, nothing left behind. */
static void test_out__no_room_to_start(void **state)
{
	char *dir = support_tempdir(), path[512];

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/x.json", dir);
	disk_reset(4096);
	assert_null(out_file__open(path, false));
	assert_int_equal(errno, ENOSPC);
	disk_reset(-1);
	assert_dir_holds(dir, 0, NULL);
	support_rmdir(dir);
}

/* Lines of "N text" marked one by one; what is read back is whole lines in order. */
static void test_out__gzip_cut_at_a_mark(void **state)
{
	char *dir = support_tempdir(), path[512], cmd[600], *text, *p;
	struct out_file *out;
	int i, status, expect = 0;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/x.gz", dir);
	disk_reset(-1);
	out = out_file__open(path, true);
	assert_non_null(out);
	/* Some flushes fit before the disk is full: the gzip member is ended after them. */
	disk_room = 40 * 1024;
	for (i = 0; i < 100000 && !out_file__error(out); i++) {
		out_file__printf(out, "%d some incompressible-ish text %x\n", i, i * 2654435761u);
		out_file__mark(out);
	}
	assert_int_equal(out_file__error(out), -ENOSPC);
	assert_int_equal(out_file__recover(out), 0);
	out_file__puts(out, "end\n");
	assert_int_equal(out_file__commit(out), 0);
	disk_reset(-1);
	snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
	text = support_run(cmd, &status);
	assert_int_equal(status, 0);
	assert_non_null(text);
	for (p = text; strncmp(p, "end\n", 4); p = strchr(p, '\n') + 1) {
		char want[64];

		snprintf(want, sizeof(want), "%d ", expect++);
		assert_int_equal(strncmp(p, want, strlen(want)), 0);
		assert_non_null(strchr(p, '\n'));
	}
	assert_string_equal(p, "end\n");
	/* More than one buffer (~1400 lines): some of it came before the gzip member ended. */
	assert_true(expect > 3000);
	free(text);
	support_rmdir(dir);
}

/* A commit that fails (the name became a folder meanwhile) leaves no temporary. */
static void test_out__failed_commit_removes_temp(void **state)
{
	char *dir = support_tempdir(), path[512];
	struct out_file *out;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/x.json", dir);
	disk_reset(-1);
	out = out_file__open(path, false);
	assert_non_null(out);
	out_file__puts(out, "{}\n");
	assert_int_equal(mkdir(path, 0700), 0);
	assert_true(out_file__commit(out) < 0);
	assert_dir_holds(dir, 1, (const char *const[]){ "x.json" });
	rmdir(path);
	support_rmdir(dir);
}

static void touch(const char *dir, const char *name)
{
	char path[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
}

/* Temporaries are named NAME.pytrace-PID-XXXXXX.tmp; those of dead writers go. */
static void test_out__stale_temporaries_removed(void **state)
{
	char *dir = support_tempdir(), path[512], dead[64], alive[64], held[64], named[600];
	const char *left[4];
	struct out_file *out;
	pid_t child = fork();
	int fd;

	(void)state;
	assert_non_null(dir);
	if (!child)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child); /* a pid with no process now */
	snprintf(dead, sizeof(dead), "a.json.pytrace-%d-Ab12Cd.tmp", child);
	snprintf(alive, sizeof(alive), "b.json.pytrace-%d-Ab12Cd.tmp", getppid());
	snprintf(held, sizeof(held), "c.json.pytrace-%d-Ab12Cd.tmp", child);
	touch(dir, dead);
	touch(dir, alive);
	touch(dir, held);
	touch(dir, "d.json.tmp.Ab12Cd");
	touch(dir, "e.pytrace-1x-Ab12Cd.tmp");
	snprintf(named, sizeof(named), "%s/%s", dir, held);
	fd = open(named, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX), 0); /* as a writer in another namespace would */

	snprintf(path, sizeof(path), "%s/x.json", dir);
	disk_reset(-1);
	out = out_file__open(path, false);
	assert_non_null(out);
	snprintf(named, sizeof(named), "%s.pytrace-%d-", path, getpid());
	assert_int_equal(strncmp(out_file__temp_path(out), named, strlen(named)), 0);
	assert_int_equal(strlen(out_file__temp_path(out)), strlen(named) + 6 + 4);
	/* Our own, being written, stays. */
	assert_int_equal(trace_remove_stale_temps(path), 1);
	out_file__abort(out);
	close(fd);
	left[0] = alive;
	left[1] = held;
	left[2] = "d.json.tmp.Ab12Cd";
	left[3] = "e.pytrace-1x-Ab12Cd.tmp";
	assert_dir_holds(dir, 4, left);
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
	disk_reset(-1);
	out = out_file__open(path, false);
	assert_non_null(out);
	out_file__puts(out, "hello ");
	out_file__mark(out);
	out_file__puts(out, "world\n");
	assert_int_equal(out_file__recover(out), 0);
	assert_int_equal(out_file__commit(out), 0);
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
		cmocka_unit_test(test_out__full_disk_keeps_valid_gzip),
		cmocka_unit_test(test_out__no_room_to_start),
		cmocka_unit_test(test_out__gzip_cut_at_a_mark),
		cmocka_unit_test(test_out__failed_commit_removes_temp),
		cmocka_unit_test(test_out__stale_temporaries_removed),
		cmocka_unit_test(test_out__recover_without_error_is_noop),
	};

	return cmocka_run_group_tests_name("out", tests, NULL, NULL);
}
