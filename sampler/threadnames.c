/*
 * A Python thread's threading name, read by the drainer as soon as the thread's first
 * Python stack is followed. The session reads names too (cli/pynames.c), but its
 * records come out 100-200 ms after they happened: a thread that lives tens of
 * milliseconds was gone from threading._active by then and kept the process's comm,
 * and short-lived threads are where a race or a stall hides. What is read here goes
 * out as an SREC_PYNAME record at the thread's first stack.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/*
 * Drains a process's names are read in after one of its threads asked, until every
 * thread that asked has its name: a thread's first stack can be followed before its
 * Thread object is in threading._active (its bootstrap puts it there). One read costs
 * the drainer 0.05-0.7 ms (a forkserver Pool of 4 on sid's 3.15), time that a walk
 * from outside waits.
 */
#define NAME_READS 4
#define NAMES_MAX 256

void thread_name_due(struct sampler *s, struct task_state *t, const struct py_stack *ps)
{
	struct proc_state *p;

	if (t->name_asked || !ps || !ps->n)
		return;
	p = hashmap__get(s->procs, t->pid);
	if (!p)
		return;
	t->name_asked = true;
	t->name_at_ns = ps->at_ns;
	s->procs_names_due += !p->name_reads;
	p->name_reads = NAME_READS;
	p->names_waiting++;
}

/* Queues the names of @pid's threads that asked and have none yet. */
static void send_names(struct sampler *s, uint32_t pid, struct proc_state *p,
		       struct cpython_thread_name *names)
{
	struct cpython_process *proc = hashmap__get(s->pythons, pid);
	int n = proc ? cpython_thread_names(proc, NULL, names, NAMES_MAX) : 0, i;

	for (i = 0; i < n; i++) {
		struct task_state *t = hashmap__get(s->tasks, names[i].tid);
		struct sampler_rec rec = { .kind = SREC_PYNAME, .pid = pid, .tid = names[i].tid };

		if (!t || t->pid != pid || !t->name_asked || t->name_sent || names[i].err ||
		    !names[i].name[0])
			continue;
		/*
		 * A state read while a thread starts can hold the main thread's ident: then
		 * one thread's name shows on the other (seen both ways on 3.8). Here only
		 * the main thread is "MainThread"; a main thread renamed is left to the
		 * session's later reads.
		 */
		if ((names[i].tid == pid) != !strcmp(names[i].name, "MainThread"))
			continue;
		rec.time_ns = t->name_at_ns;
		t->name_sent = !push_synth(s, &rec, names[i].name);
		p->names_waiting -= t->name_sent && p->names_waiting;
	}
}

void read_due_names(struct sampler *s)
{
	struct cpython_thread_name *names;
	size_t cursor = 0;
	uint64_t pid;
	void *value;

	if (!s->procs_names_due || !(names = calloc(NAMES_MAX, sizeof(*names))))
		return;
	while (hashmap__next(s->procs, &cursor, &pid, &value)) {
		struct proc_state *p = value;

		if (!p->name_reads)
			continue;
		send_names(s, (uint32_t)pid, p, names);
		/* All named, or tried enough: until another thread asks. */
		if (!p->names_waiting || !--p->name_reads) {
			p->name_reads = 0;
			p->names_waiting = 0;
			s->procs_names_due--;
		}
	}
	free(names);
}
