/*
 * Wrappers folded into what they start. A launched command is often not the program
 * the user came to see but a chain that only execs or waits: a pyenv shim (a bash
 * script running a dozen helpers before it execs the real python), env, sh -c,
 * timeout, chroot. Shown, each is a process of its own in the trace and the report
 * (45 for a Pool(4) program under pyenv).
 *
 * So, unless --all-processes, the launched command and every process its undecided
 * processes start are held back (trace__hold) until they show what they are:
 * - shown (and what was held written) at their first record from Python, or past
 *   WRAPPER_MAX_CPU_NS on a CPU since their last exec: work of their own, whatever it is;
 * - at an exec, what the old program did is dropped (the wrapper ends there; its fork
 *   and exec events stay, so the chain of programs is still said) and the new one is
 *   held in turn;
 * - at their exit, or at the end of the recording, still held: dropped, and counted.
 * Processes started by a shown process are never held: a Python program's subprocesses
 * are its work. When no process ran Python (a tree of other programs: then nothing
 * in it is a Python program's wrapper), everything held is shown after all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "../common/term.h"
#include "session.h"

/*
 * More CPU than a wrapper's exec and waits take: pyenv's helpers take a few ms each,
 * its shim up to ~30 ms between two execs on a busy machine.
 */
#define WRAPPER_MAX_CPU_NS 100000000ULL

struct wrapper {
	uint64_t cpu_ns; /* on a CPU, by its samples, since its last exec */
	char comm[16];
	bool exited;	  /* kept, not folded, while no Python was shown */
	unsigned threads; /* started in it besides its first */
};

static void count_folded(struct session *s, const struct wrapper *folded)
{
	struct wrapper_names *w = &s->folded;
	const char *comm = folded->comm;
	unsigned i;

	w->processes++;
	w->threads += 1 + folded->threads;
	for (i = 0; i < w->n; i++) {
		if (!strcmp(w->names[i].comm, comm)) {
			w->names[i].count++;
			return;
		}
	}
	if (w->n == WRAPPER_NAMES_MAX) {
		w->others++;
		return;
	}
	snprintf(w->names[w->n].comm, sizeof(w->names[w->n].comm), "%s", comm);
	w->names[w->n++].count = 1;
}

static int hold(struct session *s, uint32_t pid, const char *comm)
{
	struct wrapper *w = calloc(1, sizeof(*w));

	if (!w)
		return -1;
	snprintf(w->comm, sizeof(w->comm), "%s", comm ? comm : "?");
	if (hashmap__set(s->wrappers, pid, w) || trace__hold(s->trace, pid)) {
		free(hashmap__remove(s->wrappers, pid));
		return -1;
	}
	return 0;
}

/* Shows @pid; @python: for running Python, which makes what only waited wrappers. */
static void show(struct session *s, uint32_t pid, bool python)
{
	free(hashmap__remove(s->wrappers, pid));
	if (trace__show(s->trace, pid))
		s->record_errors++;
	s->python_shown |= python;
}

static void fold(struct session *s, uint32_t pid, struct wrapper *w)
{
	count_folded(s, w);
	trace__fold(s->trace, pid, false);
	free(hashmap__remove(s->wrappers, pid));
}

void wrappers__before(struct session *s, const struct sampler_rec *r)
{
	struct wrapper *w, *parent;

	if (!s->wrappers)
		return;
	w = hashmap__get(s->wrappers, r->pid);
	/* The launched command: held from its first record on. */
	if (!w && !s->root_seen && (pid_t)r->pid == sampler__child(s->sampler)) {
		s->root_seen = true;
		if (hold(s, r->pid, NULL))
			return;
		w = hashmap__get(s->wrappers, r->pid);
	}
	switch (r->kind) {
	case SREC_FORK:
		if (r->pid == r->fork.ppid) {
			if (w)
				w->threads++;
			break;
		}
		/* A pid used again: the process that had it is over. */
		if (w && w->exited)
			fold(s, r->pid, w);
		parent = hashmap__get(s->wrappers, r->fork.ppid);
		if (parent && !hashmap__get(s->wrappers, r->pid))
			hold(s, r->pid, parent->comm);
		break;
	case SREC_SAMPLE:
	case SREC_OFF_CPU:
		/* Python running, held or not (one shown before for its CPU, since exec'd). */
		s->python_shown |= r->sample.py_runtime != 0;
		if (!w)
			break;
		if (r->sample.py_runtime) {
			show(s, r->pid, true);
			break;
		}
		if (r->kind == SREC_SAMPLE)
			w->cpu_ns += s->period_ns;
		if (w->cpu_ns > WRAPPER_MAX_CPU_NS)
			show(s, r->pid, false);
		break;
	case SREC_NOTE: /* a CPython we can't read is Python all the same */
	case SREC_MESSAGE:
		if (w)
			show(s, r->pid, true);
		break;
	case SREC_EXEC:
		if (!w)
			break;
		/* The old program ends here, having done no more than a wrapper does. */
		trace__fold(s->trace, r->pid, true);
		snprintf(w->comm, sizeof(w->comm), "%s", r->comm.comm);
		w->cpu_ns = 0;
		break;
	default:
		break;
	}
}

void wrappers__after(struct session *s, const struct sampler_rec *r)
{
	struct wrapper *w;

	if (!s->wrappers || r->kind != SREC_EXIT || !r->exit.last_in_process)
		return;
	w = hashmap__get(s->wrappers, r->pid);
	if (!w)
		return;
	/* Kept while no Python was shown: if none ever is, it is not a Python's wrapper. */
	if (s->python_shown)
		fold(s, r->pid, w);
	else
		w->exited = true;
}

void wrappers__end(struct session *s)
{
	size_t cursor = 0;
	uint64_t pid;
	void *value;

	if (!s->wrappers)
		return;
	if (!s->python_shown) {
		if (trace__show_all(s->trace))
			s->record_errors++;
	} else {
		while (hashmap__next(s->wrappers, &cursor, &pid, &value)) {
			count_folded(s, value);
			trace__fold(s->trace, (uint32_t)pid, false);
		}
	}
	hashmap__free_all(s->wrappers, free);
	s->wrappers = NULL;
}

void wrappers__print(const struct session *s, FILE *f)
{
	const struct wrapper_names *w = &s->folded;
	char name[TERM_ESCAPED(16)];
	unsigned i;

	if (!w->processes)
		return;
	fprintf(f, "pytrace-sample: %u wrapper process%s folded into what %s started (",
		w->processes, w->processes == 1 ? "" : "es", w->processes == 1 ? "it" : "they");
	for (i = 0; i < w->n; i++) {
		term_escape(name, sizeof(name), w->names[i].comm, 16);
		fprintf(f, "%s%s", i ? ", " : "", name);
		if (w->names[i].count > 1)
			fprintf(f, " x%u", w->names[i].count);
	}
	if (w->others)
		fprintf(f, ", %u others", w->others);
	fprintf(f, "): --all-processes shows them\n");
}
