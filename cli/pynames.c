/*
 * Python's own names for what the trace shows: a thread's threading.Thread.name
 * ("crunch-1", "Thread-3 (_handle_results)") and a process's multiprocessing name
 * ("ForkPoolWorker-2"), read from outside when the first record of a Python process
 * goes out, then again every PYNAMES_REFRESH_NS while the recording goes on, so that
 * a name set after start is followed (a worker blocked for long still gets read): more
 * often in a process's first second, where a pool worker forked with its parent's
 * names ("MainProcess") renames itself as it starts.
 *
 * The reads use a reader of our own, made from where the records say the interpreter
 * is (its runtime's address and version): nothing here shares state with the sampler,
 * whose drainer thread changes its own readers meanwhile.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "session.h"

#define PYNAMES_REFRESH_NS 500000000ULL
#define PYNAMES_YOUNG_REFRESH_NS 100000000ULL
#define PYNAMES_YOUNG_NS 1000000000ULL
#define PYNAMES_MAX_THREADS 256

struct pynames_proc {
	struct cpython_process *python; /* our own reader */
	uint64_t runtime;		/* where the records said it is: exec'd since? */
	unsigned minor;
	uint64_t first_ns, read_ns; /* first seen, last read */
	struct hashmap *named;	    /* tids we gave a Python name */
	char *base;		    /* the process's name before we added to it */
	char *shown;		    /* what we last set it to */
};

static void proc_free(void *value)
{
	struct pynames_proc *p = value;

	if (!p)
		return;
	cpython_process__put(p->python);
	hashmap__free(p->named);
	free(p->base);
	free(p->shown);
	free(p);
}

/*
 * The process's name with its multiprocessing name: the main process keeps its own
 * ("pool.py"); a pool's worker N is "pool.py worker N (ForkPoolWorker-N)"; any other
 * "pool.py (Process-1)".
 */
static char *label_of(const char *base, const char *mp)
{
	const char *dash = strrchr(mp, '-'), *worker = strstr(mp, "PoolWorker-");
	char *label;

	if (!strcmp(mp, "MainProcess"))
		return strdup(base);
	if (worker && dash && dash[1] && !dash[1 + strspn(dash + 1, "0123456789")])
		return asprintf(&label, "%s worker %s (%s)", base, dash + 1, mp) < 0 ? NULL : label;
	return asprintf(&label, "%s (%s)", base, mp) < 0 ? NULL : label;
}

static void name_process(struct session *s, struct pynames_proc *p, uint32_t pid)
{
	const char *now = session__name(s, pid, 0);
	char mp[CPYTHON_NAME_MAX], *label;

	if (cpython_process_name(p->python, NULL, mp, sizeof(mp)))
		return;
	/* The name changed under us (an exec, a late command line): it is the new base. */
	if (now && (!p->shown || strcmp(now, p->shown))) {
		free(p->base);
		p->base = strdup(now);
	}
	label = label_of(p->base ? p->base : "?", mp);
	if (!label)
		return;
	if (!now || strcmp(now, label))
		session__set_name(s, pid, 0, label);
	free(p->shown);
	p->shown = label;
}

static void name_threads(struct session *s, struct pynames_proc *p, uint32_t pid)
{
	struct cpython_thread_name *names = calloc(PYNAMES_MAX_THREADS, sizeof(*names));
	int n, i;

	if (!names)
		return;
	n = cpython_thread_names(p->python, NULL, names, PYNAMES_MAX_THREADS);
	for (i = 0; i < n; i++) {
		const char *now;

		if (names[i].err || !names[i].tid || !names[i].name[0])
			continue;
		/*
		 * The main thread is the process's first: a state read while a new thread
		 * starts can still hold the main thread's ident (seen on 3.10 and 3.13).
		 */
		if (names[i].tid != pid && !strcmp(names[i].name, "MainThread"))
			continue;
		now = session__name(s, pid, names[i].tid);
		if (!now || strcmp(now, names[i].name))
			session__set_name(s, pid, names[i].tid, names[i].name);
		if (p->named)
			hashmap__set(p->named, names[i].tid, p);
	}
	free(names);
}

void pynames__gone(struct session *s, uint32_t pid)
{
	if (s->pynames)
		proc_free(hashmap__remove(s->pynames, pid));
}

/* Reads the names of @p's process now. */
static void read_names(struct session *s, struct pynames_proc *p, uint32_t pid, uint64_t now_ns)
{
	p->read_ns = now_ns;
	if (!p->python)
		return; /* its runtime could not be read (gone already): not asked again */
	name_threads(s, p, pid);
	name_process(s, p, pid);
}

void pynames__observe(struct session *s, const struct sampler_rec *r)
{
	uint64_t runtime = r->sample.py_runtime;
	unsigned minor = r->sample.py_minor;
	struct pynames_proc *p;

	if (!runtime || !s->pynames)
		return;
	p = hashmap__get(s->pynames, r->pid);
	if (p && p->runtime == runtime && p->minor == minor)
		return;
	/* New, or the process's interpreter is another (an exec): start over. */
	pynames__gone(s, r->pid);
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->python = cpython_process__new((pid_t)r->pid, runtime, minor);
	p->runtime = runtime;
	p->minor = minor;
	p->named = hashmap__new();
	if (!p->named || hashmap__set(s->pynames, r->pid, p)) {
		proc_free(p);
		return;
	}
	p->first_ns = sampler_now_ns();
	read_names(s, p, r->pid, p->first_ns);
}

bool pynames__named(struct session *s, uint32_t pid, uint32_t tid)
{
	struct pynames_proc *p = s->pynames ? hashmap__get(s->pynames, pid) : NULL;

	return p && hashmap__get(p->named, tid);
}

void pynames__name_thread(struct session *s, uint32_t pid, uint32_t tid, const char *name)
{
	struct pynames_proc *p = s->pynames ? hashmap__get(s->pynames, pid) : NULL;
	const char *now = session__name(s, pid, tid);

	if (!name || !name[0])
		return;
	if (!now || strcmp(now, name))
		session__set_name(s, pid, tid, name);
	if (p && p->named)
		hashmap__set(p->named, tid, p);
}

void pynames__tick(struct session *s, uint64_t now_ns)
{
	size_t cursor = 0;
	uint64_t pid;
	void *value;

	while (s->pynames && hashmap__next(s->pynames, &cursor, &pid, &value)) {
		struct pynames_proc *p = value;
		uint64_t every = now_ns < p->first_ns + PYNAMES_YOUNG_NS ? PYNAMES_YOUNG_REFRESH_NS
									 : PYNAMES_REFRESH_NS;

		if (now_ns >= p->read_ns + every)
			read_names(s, p, (uint32_t)pid, now_ns);
	}
}

void pynames__free_all(struct session *s)
{
	hashmap__free_all(s->pynames, proc_free);
	s->pynames = NULL;
}
