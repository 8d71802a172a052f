/*
 * Tests of telling a process in its own pid namespace (a container) from ours, and of
 * mapping its thread ids to ours, with a real namespace (unshare(2), as root).
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../common/pidns.h"

static void test_pidns__ours(void **state)
{
	struct pidns_id ns = { 7, 7 };
	pid_t inner = 7;
	struct pidns_map m = { .pid = getpid() };

	(void)state;
	assert_int_equal(pidns_probe(getpid(), &ns, &inner), 0);
	assert_int_equal(inner, 7); /* untouched */
	assert_true(pidns_probe(0x7ffffff0, &ns, &inner) < 0);
	/* in our namespace every id is its own */
	assert_int_equal(pidns_map__refresh(&m), 0);
	assert_int_equal(pidns_map__host(&m, (uint32_t)getpid()), (uint32_t)getpid());
	assert_int_equal(pidns_map__host(&m, 0x7ffffff0), 0);
	pidns_map__clear(&m);
	m.pid = 0x7ffffff0;
	assert_true(pidns_map__refresh(&m) < 0);
}

/* Forks a process that makes a grandchild, pid 1 of a new namespace; its id as ours, or 0. */
static pid_t start_namespaced(int *skip_it)
{
	int ids[2], started[2], status;
	pid_t child, host = 0;
	char c = 0;

	assert_int_equal(pipe(ids), 0);
	assert_int_equal(pipe(started), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		pid_t g;

		if (unshare(CLONE_NEWPID))
			_exit(errno == EPERM ? 3 : 1);
		g = fork();
		if (g == 0) {
			c = getpid() == 1 ? 'y' : 'n';
			if (write(started[1], &c, 1) != 1)
				_exit(1);
			pause();
			_exit(0);
		}
		/* fork(2) names it in the namespace we stay in: ours */
		if (g < 0 || write(ids[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		_exit(0);
	}
	close(ids[1]);
	close(started[1]);
	waitpid(child, &status, 0);
	*skip_it = WIFEXITED(status) && WEXITSTATUS(status) == 3;
	if (read(ids[0], &host, sizeof(host)) != sizeof(host) || read(started[0], &c, 1) != 1 ||
	    c != 'y')
		host = 0;
	close(ids[0]);
	close(started[0]);
	return host;
}

static void test_pidns__other(void **state)
{
	struct pidns_id ns = { 0, 0 };
	struct pidns_map m = { 0 };
	pid_t host, inner = 0;
	int skip_it = 0;

	(void)state;
	host = start_namespaced(&skip_it);
	if (skip_it) {
		fprintf(stderr, "skipped: unshare(CLONE_NEWPID) needs root (CI runs as root)\n");
		skip();
	}
	assert_true(host > 1);
	/* it calls itself 1 */
	assert_int_equal(pidns_probe(host, &ns, &inner), 1);
	assert_int_equal(inner, 1);
	assert_true(ns.ino != 0);
	/* its one thread: 1 in its namespace, host in ours */
	m.pid = host;
	assert_int_equal(pidns_map__refresh(&m), 0);
	assert_int_equal(m.n, 1);
	assert_int_equal(pidns_map__host(&m, 1), (uint32_t)host);
	assert_int_equal(pidns_map__host(&m, (uint32_t)host), 0);
	pidns_map__clear(&m);
	kill(host, SIGKILL);
	/* an orphan reaped by init; gone once its pid 1 (itself) is */
	for (int i = 0; i < 1000 && pidns_probe(host, &ns, &inner) == 1; i++)
		usleep(1000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pidns__ours),
		cmocka_unit_test(test_pidns__other),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
