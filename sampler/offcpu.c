/* Off-CPU spans: pairing switch-outs with switch-ins, and waits read from outside. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "procfs.h"

/* Notes switch records while draining, to find threads still waiting afterwards. */
void track_switch(struct sampler *s, const struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	struct pending_out *p;
	uint32_t ids[2];

	if (hdr->type != PERF_RECORD_SWITCH || q->size < sizeof(*hdr) + 32)
		return;
	memcpy(ids, q->data + q->size - 32, 8);
	p = hashmap__get(s->pending_outs, ids[1]);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hashmap__set(s->pending_outs, ids[1], p)) {
			free(p);
			return;
		}
	}
	p->pid = ids[0];
	if ((hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) && q->time > p->out_time)
		p->out_time = q->time;
	else if (!(hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) && q->time > p->in_time)
		p->in_time = q->time;
}

static void capture_free(struct outside_capture *c)
{
	if (c) {
		free(c->stack);
		py_stack_free(c->py);
	}
	free(c);
}

void capture_list_free(struct outside_capture *c)
{
	while (c) {
		struct outside_capture *next = c->next;

		capture_free(c);
		c = next;
	}
}

/*
 * Keeps @c until its switch-out record is processed, which may be after the thread's
 * next waits were captured too: one list per thread, in time order.
 */
static void capture_keep(struct sampler *s, uint32_t tid, struct outside_capture *c)
{
	struct outside_capture *head = hashmap__get(s->captures, tid), **link = &head;

	while (*link && (*link)->out_time < c->out_time)
		link = &(*link)->next;
	if (*link && (*link)->out_time == c->out_time) {
		capture_free(c); /* the same wait, seen again */
		return;
	}
	c->next = *link;
	*link = c;
	if (hashmap__set(s->captures, tid, head)) {
		*link = c->next;
		capture_free(c);
	}
}

/*
 * Empties the drain's switch notes in place: the map itself stays, so track_switch()
 * never sees it missing (a new map could not be allocated).
 */
static void forget_pending_outs(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->pending_outs, &cursor, &key, &value)) {
		free(hashmap__remove(s->pending_outs, key));
		cursor = 0; /* the map changed: start over */
	}
}

/*
 * Threads whose last drained switch record is a switch-out are (most likely) still
 * waiting: read their syscall and stack from outside now, while that is exact.
 */
void capture_waiting(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->pending_outs, &cursor, &key, &value)) {
		struct pending_out *p = value;
		struct outside_capture *c;
		struct task_state *t;
		uint64_t arg, sp, pc;
		int64_t nr;
		char state;

		if (p->out_time <= p->in_time)
			continue;
		/* As root the switch sample has the native stack; only Python needs more. */
		if (s->use_switch_event && !hashmap__get(s->pythons, p->pid))
			continue;
		state = procfs_task_state((pid_t)p->pid, (pid_t)key);
		if ((state != 'S' && state != 'D') ||
		    procfs_task_syscall((pid_t)p->pid, (pid_t)key, &nr, &arg, &sp, &pc))
			continue;
		c = calloc(1, sizeof(*c));
		if (!c)
			continue;
		c->out_time = p->out_time;
		c->read_ns = sampler_now_ns();
		c->syscall = nr;
		c->syscall_arg = arg;
		c->regs[SREG_SP] = sp;
		c->regs[SREG_IP] = pc;
		if (!s->use_switch_event)
			c->stack =
				read_stack((pid_t)p->pid, sp, s->opts.stack_bytes, &c->stack_size);
		c->py = walk_python(s, p->pid, (uint32_t)key, true, p->out_time);
		t = c->py ? task_get(s, p->pid, (uint32_t)key, true) : NULL;
		if (t) {
			/* The latest known state of the thread, for guesses that follow. */
			remember_py(t, c->py);
		}
		capture_keep(s, (uint32_t)key, c);
	}
	forget_pending_outs(s);
}

/* Takes what was read from outside for the wait that began at @out_time, if anything. */
static void adopt_capture(struct sampler *s, struct task_state *t, uint64_t out_time)
{
	struct outside_capture *head = hashmap__get(s->captures, t->tid), *c;

	/* Captures of earlier waits were not claimed: their records were lost. */
	while (head && head->out_time < out_time) {
		c = head;
		head = head->next;
		capture_free(c);
	}
	if (!head || head->out_time != out_time) {
		if (head)
			hashmap__set(s->captures, t->tid, head);
		else
			hashmap__remove(s->captures, t->tid);
		return;
	}
	c = head;
	head = head->next;
	if (head)
		hashmap__set(s->captures, t->tid, head);
	else
		hashmap__remove(s->captures, t->tid);
	if (t->outside_py) {
		/* The kernel read this wait at the switch itself: better than a later look. */
		capture_free(c);
		return;
	}
	free(t->outside_stack);
	t->outside_syscall = c->syscall;
	t->outside_syscall_arg = c->syscall_arg;
	memcpy(t->outside_regs, c->regs, sizeof(c->regs));
	t->outside_stack = c->stack;
	t->outside_stack_size = c->stack_size;
	t->outside_read_ns = c->read_ns;
	t->outside_py = c->py;
	c->stack = NULL;
	c->py = NULL;
	capture_free(c);
}

const struct sampler_rec *on_switch(struct sampler *s, struct qrec *q, uint32_t pid, uint32_t tid)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	struct task_state *t = task_get(s, pid, tid, true);

	if (!t || s->opts.mode != SAMPLER_MODE_WALL)
		return NULL;
	if (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) {
		t->out = true;
		t->was_out = true;
		t->out_estimated = q->py && q->py->kernel && q->py->early;
		t->out_time = t->out_estimated ? q->py->at_ns : q->time;
		py_stack_free(t->out_py);
		t->out_py = NULL;
		if (q->py && q->py->kernel) {
			py_stack_free(t->outside_py);
			t->outside_py = q->py; /* read by the kernel at the switch: exact */
			t->outside_read_ns = 0;
			t->outside_syscall = q->py->syscall;
			t->outside_syscall_arg = q->py->syscall_arg;
		} else {
			t->out_py = q->py;
		}
		q->py = NULL;
		t->wait = (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? SAMPLER_WAIT_PREEMPTED
									    : SAMPLER_WAIT_BLOCKED;
		qrec_free(t->out_sample);
		t->out_sample = NULL;
		/* The switch sample comes just before its switch record. */
		if (t->switch_sample && t->switch_sample->time <= q->time &&
		    q->time - t->switch_sample->time < 1000000) {
			t->out_sample = t->switch_sample;
			t->switch_sample = NULL;
		}
		adopt_capture(s, t, q->time);
		return NULL;
	}
	if (!t->out) {
		/* A new task's first switch-in has no switch-out before it: not a lost one. */
		s->stats.unpaired_switches += t->was_out;
		return NULL;
	}
	return emit_off_cpu(s, t, q->time, q->cpu);
}
