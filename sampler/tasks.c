/* Task and process liveness: which threads and processes are traced and still alive. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "procfs.h"

struct task_state *task_get(struct sampler *s, uint32_t pid, uint32_t tid, bool create)
{
	struct task_state *t = hashmap__get(s->tasks, tid);

	if (t || !create)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->outside_syscall = -1;
	t->outside_syscall_arg = 0;
	if (hashmap__set(s->tasks, tid, t)) {
		free(t);
		return NULL;
	}
	s->stats.threads_seen++;
	return t;
}

void task_free(struct task_state *t)
{
	int i;

	if (!t)
		return;
	qrec_free(t->switch_sample);
	qrec_free(t->out_sample);
	free(t->outside_stack);
	py_stack_free(t->outside_py);
	py_stack_free(t->last_py);
	for (i = 0; i < OLDER_READS; i++)
		py_stack_free(t->older_py[i]);
	py_stack_free(t->out_py);
	py_stack_free(t->late_read);
	py_fifo_clear(&t->restacked);
	py_fifo_clear(&t->kernel_outs);
	py_fifo_clear(&t->kernel_samples);
	while (t->afters) {
		struct after_stack *a = t->afters;

		t->afters = a->next;
		py_stack_free(a->ps);
		free(a);
	}
	free(t);
}

/* Counts a task of @pid; @starts: it is the process's first (a fork or a launch). */
void proc_add_task(struct sampler *s, uint32_t pid, bool starts)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

	if (p && starts && p->gone) {
		/* The pid was reused before the old process's exit went out: that one is over. */
		s->ngone--;
		memset(p, 0, sizeof(*p));
	}
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hashmap__set(s->procs, pid, p)) {
			free(p);
			return;
		}
		s->stats.processes_seen++;
	}
	p->ntasks++;
}

/* Forgets process @pid: its counts, and what runs CPython in it. */
void proc_forget(struct sampler *s, uint32_t pid)
{
	struct proc_state *p = hashmap__remove(s->procs, pid);

	if (p && p->gone)
		s->ngone--;
	if (p && p->name_reads)
		s->procs_names_due--;
	free(p);
	set_python(s, pid, NULL, 0);
	free(hashmap__remove(s->unread_runtimes, pid));
}

/*
 * Drops task @tid of @pid as its exit record goes out; true when it was the process's
 * last. A process already seen dead ends with its main thread's exit, whatever the
 * count says (records of its other threads may have been lost).
 */
bool proc_remove_task(struct sampler *s, uint32_t pid, uint32_t tid)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

	if (!p)
		return false;
	if (p->ntasks > 1 && !(p->gone && tid == pid)) {
		p->ntasks--;
		return false;
	}
	proc_forget(s, pid);
	return true;
}

/* The exit status the kernel sent for @pid, or -1; forgotten once taken. */
int take_exit_status(struct sampler *s, uint32_t pid)
{
	uintptr_t code = (uintptr_t)hashmap__remove(s->exit_codes, pid);

	return code ? decode_exit_code((uint32_t)(code - 1)) : -1;
}

/*
 * Processes we traced that are gone from /proc or zombies. They are only marked: their
 * exit record is most likely still on its way to the hand-out (and with it, forks of
 * children that outlive them), which must see the process to say it was the last.
 */
void check_liveness(struct sampler *s)
{
	uint64_t now = sampler_now_ns();
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->procs, &cursor, &key, &value)) {
		struct proc_state *p = value;
		char state;

		if (p->gone)
			continue;
		state = procfs_task_state((pid_t)key, (pid_t)key);
		if (state == 0 || state == 'Z' || state == 'X') {
			p->gone = true;
			p->gone_ns = now;
			if (!s->ngone++ || now < s->first_gone_ns)
				s->first_gone_ns = now;
		}
	}
}

/* A gone process whose exit is overdue at @horizon, or NULL. Updates first_gone_ns. */
static uint32_t overdue_process(struct sampler *s, uint64_t horizon)
{
	uint64_t key, first = UINT64_MAX;
	uint32_t found = 0;
	size_t cursor = 0;
	void *value;

	while (hashmap__next(s->procs, &cursor, &key, &value)) {
		struct proc_state *p = value;

		if (!p->gone)
			continue;
		if (p->gone_ns + EXIT_GRACE_NS < horizon && !found)
			found = (uint32_t)key;
		else if (p->gone_ns < first)
			first = p->gone_ns;
	}
	s->first_gone_ns = first;
	return found;
}

/* Any task of @pid but its main thread, or NULL. */
static struct task_state *other_task(struct sampler *s, uint32_t pid)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->tasks, &cursor, &key, &value)) {
		struct task_state *t = value;

		if (t->pid == pid && t->tid != pid)
			return t;
	}
	return NULL;
}

/*
 * Once the hand-out is at @horizon, well past the moment a process was seen dead, every
 * record it made has gone out: if its exit was not among them (lost with a full ring),
 * one is made up, stamped when it was seen dead. Its other threads end first, one
 * record per call, then the process. NULL when no exit is overdue.
 */
const struct sampler_rec *emit_lost_exit(struct sampler *s, uint64_t horizon)
{
	struct proc_state *p;
	struct task_state *t;
	struct sampler_rec *r;
	uint32_t pid;

	if (!s->ngone || s->first_gone_ns + EXIT_GRACE_NS >= horizon)
		return NULL;
	pid = overdue_process(s, horizon);
	p = pid ? hashmap__get(s->procs, pid) : NULL;
	if (!p)
		return NULL;
	t = other_task(s, pid);
	r = out_rec(s, SREC_EXIT, pid, t ? t->tid : pid, 0, p->gone_ns);
	if (t) {
		task_free(hashmap__remove(s->tasks, t->tid));
		return r;
	}
	task_free(hashmap__remove(s->tasks, pid));
	proc_forget(s, pid);
	r->exit.last_in_process = true;
	r->exit.status = take_exit_status(s, pid);
	s->stats.exits_assumed++;
	return r;
}
