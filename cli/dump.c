/* `pytrace-sample dump -p PID`: the Python stack of every thread of a tree, once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "../common/term.h"
#include "../cpython/cpython.h"
#include "../sampler/sampler.h"
#include "cli.h"

/* Walks of a running thread (each CPYTHON_WALK_TRIES reads) before saying it changed. */
#define DUMP_WALKS 64

/*
 * A walk that two reads in a row agree on (the same code objects, in the same order), or
 * -EAGAIN: a thread that runs can be read half way through a call or a return, and
 * before 3.11 a frame being reused for a new call can end the chain early while it still
 * looks live (seen once in ~300 dumps of a recursing 3.8 thread). Two identical reads
 * make that unlikely; a dump says it could not read the stack rather than show a cut one.
 */
static int walk_twice(struct cpython_process *p, uint32_t tid, struct cpython_frame *frames)
{
	struct cpython_frame *again = calloc(CPYTHON_MAX_FRAMES, sizeof(*again));
	int n = cpython_walk(p, NULL, tid, 1, frames, CPYTHON_MAX_FRAMES), m, i;

	if (!again)
		return -ENOMEM;
	m = n > 0 ? cpython_walk(p, NULL, tid, 1, again, CPYTHON_MAX_FRAMES) : n;
	for (i = 0; n > 0 && i < n && m == n; i++) {
		if (frames[i].code != again[i].code)
			m = -EAGAIN;
	}
	free(again);
	return n > 0 && m != n ? -EAGAIN : n;
}

/* What dump knows of a process besides stacks: threading names and the GIL's holder. */
struct dump_names {
	struct cpython_thread_name *threads;
	int nthreads; /* or -errno: threading's names could not be read */
	struct cpython_gil_holder gil;
	int gil_err;
	struct cpython_gil_addrs gil_addrs; /* all 0 when unknown */
};

/* The futex word thread @tid is blocked on (from /proc: futex(2)'s first argument), or 0. */
static uint64_t futex_waited_on(pid_t pid, uint32_t tid)
{
	unsigned long long nr, uaddr;
	char path[64];
	FILE *f;
	int got;

	snprintf(path, sizeof(path), "/proc/%d/task/%u/syscall", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	got = fscanf(f, "%llu 0x%llx", &nr, &uaddr);
	fclose(f);
	return got == 2 && nr == SYS_futex ? uaddr : 0;
}

/* ` "name"`, ` [name unreadable]` or nothing (not a threading thread) for @tid. */
static void print_thread_name(const struct dump_names *names, uint32_t tid)
{
	int i;

	for (i = 0; i < names->nthreads; i++) {
		if (names->threads[i].tid != tid)
			continue;
		char esc[TERM_ESCAPED(CPYTHON_NAME_MAX)];

		if (!names->threads[i].err)
			printf(" \"%s\"", term_escape(esc, sizeof(esc), names->threads[i].name,
						      CPYTHON_NAME_MAX));
		else if (names->threads[i].err != -ENOENT)
			printf(" [name unreadable]");
		return;
	}
}

/* What a thread blocked on futex word @uaddr waits for, when it is part of the GIL. */
static void print_gil_wait(const struct cpython_gil_addrs *gil, uint64_t uaddr)
{
	switch (cpython_gil_futex(gil, uaddr)) {
	case CPYTHON_GIL_COND:
	case CPYTHON_GIL_MUTEX:
		printf(" waiting for the GIL");
		break;
	case CPYTHON_GIL_SWITCH:
		printf(" waiting for another thread to take the GIL");
		break;
	case CPYTHON_GIL_NONE:
		break;
	}
}

static void print_thread(struct cpython_process *p, const struct dump_names *names, uint32_t tid)
{
	struct cpython_frame *frames = calloc(CPYTHON_MAX_FRAMES, sizeof(*frames));
	char comm[64] = "", path[64], esc[TERM_ESCAPED(512)], esc2[TERM_ESCAPED(512)];
	FILE *f;
	int n, i, tries;

	snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", p->pid, tid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
	}
	/*
	 * A one-off dump can afford to try hard: a thread that calls and returns all the
	 * time (before 3.11) may change its chain under each read, and a busy machine makes
	 * each read slower. Each walk is a few hundred microseconds at most.
	 */
	n = frames ? -EAGAIN : -ENOMEM;
	for (tries = 0; tries < DUMP_WALKS && n == -EAGAIN; tries++)
		n = walk_twice(p, tid, frames);
	if (n > 0)
		cpython_read_codes(p, NULL, frames, (uint32_t)n);
	printf("  Thread %u (%s)", tid, term_escape(esc, sizeof(esc), comm, sizeof(comm)));
	print_thread_name(names, tid);
	if (!names->gil_err && names->gil.locked && names->gil.tid == tid)
		printf(" holding the GIL");
	else
		print_gil_wait(&names->gil_addrs, futex_waited_on(p->pid, tid));
	printf("%s\n", n == 0	      ? ": no Python frames"
		       : n == -EAGAIN ? ": its stack changed under every read"
		       : n < 0	      ? ": unreadable"
				      : "");
	for (i = 0; i < n; i++) {
		const struct cpython_code_entry *e =
			cpython_code_lookup(p, frames[i].code, frames[i].fingerprint);

		if (!e || e->unreadable) {
			printf("    [unreadable code object 0x%llx]\n",
			       (unsigned long long)frames[i].code);
			continue;
		}
		printf("    %s (%s:%u)\n",
		       term_escape(esc, sizeof(esc), e->info.name, sizeof(e->info.name)),
		       term_escape(esc2, sizeof(esc2), e->info.filename, sizeof(e->info.filename)),
		       cpython_line(p->layout.lines, e->info.linetable, e->info.linetable_len,
				    e->info.firstlineno, frames[i].lasti));
	}
	free(frames);
}

/*
 * Reads and prints the process's multiprocessing name, and reads its threads' names into
 * @names for print_thread(); says so when they can't be read at all.
 */
static void print_names(struct cpython_process *p, struct dump_names *names)
{
	char name[CPYTHON_NAME_MAX], esc[TERM_ESCAPED(CPYTHON_NAME_MAX)];
	int err = cpython_process_name(p, NULL, name, sizeof(name));

	if (err == -ENOTSUP) {
		printf("  names: not read (the layouts they need are not known for 3.%u)\n",
		       p->layout.minor);
		return;
	}
	if (!err)
		printf("  multiprocessing name: \"%s\"\n",
		       term_escape(esc, sizeof(esc), name, sizeof(name)));
	else if (err != -ENOENT)
		printf("  multiprocessing name: unreadable\n");
	names->threads = calloc(CPYTHON_MAX_THREADS, sizeof(*names->threads));
	names->nthreads =
		names->threads ? cpython_thread_names(p, NULL, names->threads, CPYTHON_MAX_THREADS)
			       : -ENOMEM;
	if (names->nthreads < 0 && names->nthreads != -ENOENT)
		printf("  threading names: unreadable\n");
}

/* Reads and prints who holds the GIL, and where it is for print_gil_wait(). */
static void print_gil(struct cpython_process *p, struct dump_names *names)
{
	names->gil_err = cpython_gil_holder(p, NULL, &names->gil);
	if (cpython_gil_addrs(p, NULL, &names->gil_addrs))
		memset(&names->gil_addrs, 0, sizeof(names->gil_addrs));
	if (names->gil_err)
		printf("  GIL: unreadable\n");
	else if (!names->gil.locked)
		printf("  GIL: free\n");
	else if (names->gil.tid)
		printf("  GIL: held by thread %u\n", names->gil.tid);
	else
		printf("  GIL: held by a thread not in the interpreter's list\n");
}

/* Prints one process's threads; false when we may not read it. */
static bool print_process(pid_t pid)
{
	unsigned minor;
	struct cpython_process *p = cpython_process__find(pid, &minor);
	int err = p ? 0 : errno;
	char cmdline[512] = "?", esc[TERM_ESCAPED(512)], why[256];
	struct dump_names names = { 0 };
	pid_t *tids = NULL;
	size_t ntids = 0, i;

	sampler_read_cmdline(pid, cmdline, sizeof(cmdline));
	term_escape(esc, sizeof(esc), cmdline, sizeof(cmdline));
	if (err == EACCES || err == EPERM) {
		fflush(stdout);
		fprintf(stderr,
			"pytrace-sample: cannot read %d (%s): permission denied (run with sudo or "
			"grant CAP_SYS_PTRACE)\n",
			pid, esc);
		return false;
	}
	if (!p && (err == ENOENT || err == ESRCH)) {
		printf("Process %d: %s\n  not a Python process (no CPython runtime mapped)\n", pid,
		       esc);
		return true;
	}
	if (!p) {
		printf("Process %d: %s\n  not read: %s\n", pid, esc,
		       cpython_unreadable_why(err, minor, why, sizeof(why)));
		return true;
	}
	printf("Process %d: %s\n  Python 3.%u\n", pid, esc, p->layout.minor);
	print_names(p, &names);
	print_gil(p, &names);
	if (!sampler_list_threads(pid, &tids, &ntids)) {
		for (i = 0; i < ntids; i++)
			print_thread(p, &names, (uint32_t)tids[i]);
	}
	free(names.threads);
	free(tids);
	cpython_process__put(p);
	return true;
}

int cli_dump(const struct cli_opts *o)
{
	bool denied = false;
	size_t i, j;

	for (i = 0; i < o->npids; i++) {
		pid_t *tree = NULL;
		size_t n = 0;
		int err = sampler_list_tree(o->pids[i], &tree, &n);

		if (err) {
			fprintf(stderr, "pytrace-sample: no such process: %d\n", o->pids[i]);
			free(tree);
			return EXIT_NO_PROCESS;
		}
		for (j = 0; j < n; j++)
			denied |= !print_process(tree[j]);
		free(tree);
	}
	return denied ? EXIT_NO_PERMISSION : 0;
}
