/* Task and process liveness: which threads and processes are traced and still alive. */
#include "internal.h"

#include <stdlib.h>

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
	if (hashmap__set(s->tasks, tid, t)) {
		free(t);
		return NULL;
	}
	s->stats.threads_seen++;
	return t;
}

void task_free(struct task_state *t)
{
	if (!t)
		return;
	qrec_free(t->switch_sample);
	qrec_free(t->out_sample);
	free(t->outside_stack);
	py_stack_free(t->outside_py);
	py_stack_free(t->last_py);
	py_stack_free(t->out_py);
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

void proc_add_task(struct sampler *s, uint32_t pid)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

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

/* Drops one task of @pid; true when it was the process's last. */
bool proc_remove_task(struct sampler *s, uint32_t pid)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

	if (!p)
		return false;
	if (p->ntasks > 1) {
		p->ntasks--;
		return false;
	}
	free(hashmap__remove(s->procs, pid));
	return true;
}

/* Processes we traced but whose exit record was lost: gone from /proc or zombies. */
void check_liveness(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->procs, &cursor, &key, &value)) {
		char state = procfs_task_state((pid_t)key, (pid_t)key);

		if (state == 0 || state == 'Z' || state == 'X') {
			free(hashmap__remove(s->procs, key));
			cursor = 0; /* the map changed: start over */
		}
	}
}
