/*
 * Tests of opening a target's files: never blocking on what a target names (a FIFO),
 * regular files only, and a chroot'ed target's own files through its root.
 */
#include <errno.h>
#include <fcntl.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "../../common/target_file.h"
#include "support.h"

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The first bytes of the file @fd opened; closes it. */
static char *first_bytes(int fd, char *buf, size_t size)
{
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, size - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void test_target_file__refuses_what_is_not_a_file(void **state)
{
	char *dir = support_tempdir(), path[512];

	(void)state;
	assert_non_null(dir);
	/* a FIFO nobody writes to: a blocking open would hang here for ever */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(target_file_open(0, path), -ENOEXEC);
	assert_int_equal(target_file_open(getpid(), path), -ENOEXEC);
	assert_int_equal(target_file_open(0, dir), -ENOEXEC);
	assert_int_equal(target_file_open(0, "/dev/null"), -ENOEXEC);
	assert_int_equal(target_file_open(0, "relative/path"), -EINVAL);
	assert_int_equal(target_file_open(0, NULL), -EINVAL);
	snprintf(path, sizeof(path), "%s/absent", dir);
	assert_int_equal(target_file_open(getpid(), path), -ENOENT);
	support_rmdir(dir);
}

static void test_target_file__reads_a_chroot_from_its_root(void **state)
{
	char *dir = support_tempdir(), host[512], root[512], inner[1024], buf[64];
	int ready[2], status;
	pid_t child;

	(void)state;
	assert_non_null(dir);
	if (geteuid() != 0) {
		support_rmdir(dir);
		fprintf(stderr, "skipped: chroot(2) needs root (CI runs as root)\n");
		skip();
	}
	/* the same path, two files: ours holds "host", the chroot's "inner" */
	snprintf(host, sizeof(host), "%s/f", dir);
	put(host, "host");
	snprintf(root, sizeof(root), "%s/root", dir);
	assert_int_equal(mkdir(root, 0700), 0);
	snprintf(inner, sizeof(inner), "mkdir -p '%s%s'", root, dir);
	free(support_run(inner, &status));
	assert_int_equal(status, 0);
	snprintf(inner, sizeof(inner), "%s%s/f", root, dir);
	put(inner, "inner");
	/* a symlink that climbs out of the root stays in it */
	snprintf(inner, sizeof(inner), "%s/evil", root);
	snprintf(buf, sizeof(buf), "../../../../..%s/f", dir);
	assert_int_equal(symlink(buf, inner), 0);

	assert_int_equal(pipe(ready), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char c = 1;

		if (chroot(root) || chdir("/"))
			_exit(1);
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], buf, 1), 1);
	close(ready[0]);

	assert_string_equal(first_bytes(target_file_open(child, host), buf, sizeof(buf)), "inner");
	assert_string_equal(first_bytes(target_file_open(0, host), buf, sizeof(buf)), "host");
	assert_string_equal(first_bytes(target_file_open(child, "/evil"), buf, sizeof(buf)),
			    "inner");
	/* what its root lacks is the path as we see it (maps names a chroot's by ours) */
	snprintf(inner, sizeof(inner), "%s/only-ours", dir);
	put(inner, "ours");
	assert_string_equal(first_bytes(target_file_open(child, inner), buf, sizeof(buf)), "ours");

	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* gone: its root can't be opened, the path is ours */
	assert_string_equal(first_bytes(target_file_open(child, host), buf, sizeof(buf)), "host");
	support_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_target_file__refuses_what_is_not_a_file),
		cmocka_unit_test(test_target_file__reads_a_chroot_from_its_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
