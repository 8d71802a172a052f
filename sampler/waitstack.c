/* Which Python stack a wait gets: read while it waited, else what held before and after. */
#include "internal.h"
#include "waitpolicy.h"

#include <stdlib.h>
#include <string.h>

/*
 * A stack was read for the thread: it is the "after" of every wait that ended since the
 * previous one was read (a chain of short waits with no sample between them). Kept in
 * a list: the drainer runs well ahead of the records being handed out.
 */
static void note_after_resume(struct task_state *t, const struct py_stack *ps)
{
	struct after_stack *a;

	if (!t->chain_start || ps->at_ns < t->chain_start)
		return;
	a = calloc(1, sizeof(*a));
	if (!a)
		return;
	a->from = t->chain_start;
	a->ps = py_stack_copy(ps);
	if (!a->ps) {
		free(a);
		return;
	}
	/* Appended at the end in O(1): thousands a second with many switches. */
	if (t->afters)
		t->afters_last->next = a;
	else
		t->afters = a;
	t->afters_last = a;
	t->chain_start = 0;
}

/* The stack read after the chain holding a wait that ended at @end, if known yet. */
static const struct py_stack *after_of(struct task_state *t, uint64_t end)
{
	/* Chains wholly before this wait are done with: their waits went out already. */
	while (t->afters && t->afters->ps->at_ns < end) {
		struct after_stack *a = t->afters;

		t->afters = a->next;
		py_stack_free(a->ps);
		free(a);
	}
	return t->afters && t->afters->from <= end ? t->afters->ps : NULL;
}

/* Whether the argument list kept under @id holds a pool worker loop's task locals. */
static bool task_read(const struct sampler *s, uint32_t id)
{
	uint32_t len, at = 0;
	const uint8_t *bytes = id ? arg_store__get(s->args, id, &len) : NULL, *text;
	struct cpython_raw_arg a;

	while (bytes && cpython_next_arg(bytes, len, &at, &a, &text)) {
		if (a.index >= CPYTHON_ARG_TASK)
			return true;
	}
	return false;
}

/*
 * The same arguments, or a pool worker loop read before the loop was known (no task
 * locals read with it) beside one read after: which task the first ran is not known,
 * which must not end the loop's slice (the trace takes it as the same, see
 * symbolize/python.c), nor cut the loop from a stack both share.
 */
/* Whether @code is a pool worker loop's (its walks read the task locals). */
static bool task_loop(const struct py_stack *ps, uint64_t code)
{
	uint32_t k;

	for (k = 0; ps->proc && k < ps->proc->ntask_codes; k++) {
		if (ps->proc->task_codes[k].code == code)
			return true;
	}
	return false;
}

static bool same_args(const struct sampler *s, const struct py_stack *ps,
		      const struct cpython_frame *a, const struct cpython_frame *b)
{
	if (a->args == b->args)
		return true;
	return task_loop(ps, a->code) && (!task_read(s, a->args) || !task_read(s, b->args));
}

/* The same call: the same code, call site and arguments (one task, not the next). */
static bool same_frame(const struct sampler *s, const struct py_stack *ps,
		       const struct cpython_frame *a, const struct cpython_frame *b, bool leaf)
{
	return a->code == b->code && a->fingerprint == b->fingerprint &&
	       (leaf || a->lasti == b->lasti) && same_args(s, ps, a, b);
}

/*
 * Whether @a and @b, from the root, are the same calls down to a pool worker loop's
 * frame with the same task read in both: what they share below it is that one task's,
 * however far apart they were read. Under load (four computing workers on two cores,
 * without root) a worker's stacks came up to 13 ms late, and its job's slice had holes
 * where the reads around a sample lay further apart than the bracket's window.
 */
static bool same_task(const struct sampler *s, const struct py_stack *a, const struct py_stack *b)
{
	uint32_t n;

	for (n = 0; n < a->n && n < b->n; n++) {
		const struct cpython_frame *x = &a->frames[a->n - 1 - n];
		const struct cpython_frame *y = &b->frames[b->n - 1 - n];

		if (!same_frame(s, a, x, y, false))
			return false;
		/* same_frame() takes a loop whose task was not read for any task. */
		if (task_loop(a, x->code))
			return x->args == y->args && task_read(s, x->args);
	}
	return false;
}

/* How many frames @a and @b share from the root: the same calls, one moment or another. */
static uint32_t common_root(const struct sampler *s, const struct py_stack *a,
			    const struct py_stack *b)
{
	uint32_t n = 0;

	while (n < a->n && n < b->n &&
	       same_frame(s, a, &a->frames[a->n - 1 - n], &b->frames[b->n - 1 - n],
			  n + 1 == a->n || n + 1 == b->n))
		n++;
	return n;
}

/* Keeps @ps's @n root-most frames (frames are innermost first: drops the first ones). */
static void keep_root(struct py_stack *ps, uint32_t n)
{
	if (n >= ps->n)
		return;
	memmove(ps->frames, ps->frames + (ps->n - n), n * sizeof(ps->frames[0]));
	ps->n = n;
}

/* @ps's times and size as the policy sees them; known when there is one. */
static struct policy_read read_times(const struct py_stack *ps)
{
	struct policy_read r = { 0 };

	if (!ps)
		return r;
	r.known = true;
	r.at_ns = ps->at_ns;
	r.read_ns = ps->read_ns;
	r.start_ns = ps->read_ns - ps->walk_ns;
	r.waited_ns = ps->waited_ns;
	r.ran_ns = ps->ran_ns;
	r.n = ps->n;
	return r;
}

/* @ps as the policy sees it: known if read from the image the thread runs now. */
static struct policy_read policy_read_of(const struct sampler *s, const struct task_state *t,
					 const struct py_stack *ps)
{
	struct policy_read r = read_times(ps);

	r.known = ps && ps->proc == hashmap__get(s->pythons, t->pid);
	return r;
}

/*
 * @ps was read for the thread: its latest known stack (the one it replaces is kept as
 * the one before), and the "after" of the waits since the previous one.
 */
void remember_py(struct task_state *t, const struct py_stack *ps)
{
	py_stack_free(t->older_py[OLDER_READS - 1]);
	memmove(t->older_py + 1, t->older_py, (OLDER_READS - 1) * sizeof(t->older_py[0]));
	t->older_py[0] = t->last_py;
	t->last_py = py_stack_copy(ps);
	if (t->last_py)
		t->last_py->waited_ns = t->waited_ns;
	note_after_resume(t, ps);
}

uint64_t period_ns(const struct sampler *s)
{
	return 1000000000ULL / s->opts.frequency_hz;
}

static struct py_stack *guess_moment(struct sampler *s, struct policy_moment *m,
				     const struct py_stack *before, const struct py_stack *after);

/*
 * A switch-out's guess, with the read after it kept whole beside it (py_stack.late)
 * when that read began after the switch: it may then lie inside the wait. With nothing
 * known at the switch, an empty stack carries it.
 */
static struct py_stack *guess_keeping_late(struct sampler *s, struct policy_moment *m,
					   const struct py_stack *before,
					   const struct py_stack *after)
{
	struct py_stack *ps = guess_moment(s, m, before, after);
	struct py_stack *late;

	if (m->after.start_ns < m->at_ns)
		return ps;
	late = py_stack_copy(after);
	if (!ps && late)
		ps = py_stack_new(after->proc, 0, after->frames);
	if (ps)
		ps->late = late;
	else
		py_stack_free(late);
	return ps;
}

/*
 * The thread's Python stack as of @at_ns (a switch-out, a sample whose stack was not
 * read), when none was read for that moment, by policy_at_moment() from the reads
 * around it. The drainer reads a sample's stack when it gets to it, often after the
 * switch-outs that follow the sample, when the thread may have run on: read then, it is
 * an "after" of @at_ns; the one it replaced is the "before".
 */
struct py_stack *guess_at(struct sampler *s, const struct task_state *t, uint64_t at_ns,
			  bool keep_late)
{
	const struct py_stack *before = NULL, *after = NULL;
	struct policy_moment m = { .at_ns = at_ns,
				   .period_ns = period_ns(s),
				   .waited_ns = t->waited_ns };
	int k;

	/*
	 * The latest read by @at_ns, and the first after it. Kept newest first as a rule,
	 * but not always in the order they were made: a sample read late is kept when
	 * followed, the kernel's reads made meanwhile (a message's) after it.
	 */
	for (k = -1; k < OLDER_READS; k++) {
		const struct py_stack *ps = k < 0 ? t->last_py : t->older_py[k];

		if (!ps)
			break;
		if (ps->read_ns <= at_ns && (!before || ps->read_ns > before->read_ns))
			before = ps;
		else if (ps->read_ns > at_ns && (!after || ps->read_ns < after->read_ns))
			after = ps;
	}
	m.before = policy_read_of(s, t, before);
	m.after = policy_read_of(s, t, after);
	if (after && !m.after.known)
		return NULL; /* read after, of another image: nothing is known */
	if (after && keep_late)
		return guess_keeping_late(s, &m, before, after);
	return guess_moment(s, &m, before, after);
}

/* The copy policy_at_moment() chooses for @m, cut to what it keeps; NULL: none. */
static struct py_stack *guess_moment(struct sampler *s, struct policy_moment *m,
				     const struct py_stack *before, const struct py_stack *after)
{
	struct policy_choice c;
	struct py_stack *ps;

	if (before && after && m->before.known && m->after.known) {
		m->shared = common_root(s, after, before);
		m->same_task = same_task(s, before, after);
	}
	c = policy_at_moment(m);
	if (c.source == POLICY_NONE ||
	    !(ps = py_stack_copy(c.source == POLICY_SHARED ? after : before)))
		return NULL;
	keep_root(ps, c.keep);
	ps->source = c.source == POLICY_SHARED ? SAMPLER_PY_SHARED : SAMPLER_PY_BEFORE;
	ps->ran_ns = c.ran_ns;
	return ps;
}

/*
 * Whether the wait @r, of a thread of @proc, was in futex(2) on a word inside its
 * interpreter's GIL: then it waited for the GIL, not for a lock of the program's. The
 * address is the system call's first argument (read by the kernel at the switch, or
 * from /proc while it waited), else the first argument register perf saved with the
 * switch-out's user registers; the GIL's place is what find_gil() found meanwhile.
 */
static enum sampler_gil_wait gil_wait_of(const struct cpython_process *proc,
					 const struct sampler_rec *r)
{
	uint64_t uaddr = 0;

	if (r->sample.syscall == 202 /* futex */)
		uaddr = r->sample.syscall_arg;
	else if (r->sample.syscall < 0 && r->sample.stack_at_switch)
		uaddr = r->sample.stack.regs[SREG_DI];
	if (!proc || !uaddr || !proc->gil_known)
		return SAMPLER_GIL_WAIT_NONE;
	switch (cpython_gil_futex(&proc->gil, uaddr)) {
	case CPYTHON_GIL_COND:
	case CPYTHON_GIL_MUTEX:
		return SAMPLER_GIL_WAIT_TAKE;
	case CPYTHON_GIL_SWITCH:
		return SAMPLER_GIL_WAIT_HANDOFF;
	default:
		return SAMPLER_GIL_WAIT_NONE;
	}
}

/* An off-CPU span for @t ending at @end, with the best stack we have. */
struct sampler_rec *emit_off_cpu(struct sampler *s, struct task_state *t, uint64_t end,
				 uint32_t cpu)
{
	struct sampler_rec *r = out_rec(s, SREC_OFF_CPU, t->pid, t->tid, cpu, t->out_time);
	struct policy_wait w = { .start_ns = t->out_time,
				 .end_ns = end,
				 .period_ns = period_ns(s) };
	struct policy_choice c;
	struct sample_view v;
	uint32_t which = 0;

	/* Read at the switch by the kernel (outside_read_ns 0), or while it still waited. */
	if (t->outside_py) {
		w.during[0] = read_times(t->outside_py); /* of the image the thread waited in */
		w.during[0].at_ns = w.during[0].start_ns = t->out_time;
		w.during[0].read_ns = t->outside_read_ns;
	}
	if (t->out_py && t->out_py->late)
		w.during[1] = policy_read_of(s, t, t->out_py->late);
	w.start = read_times(t->out_py); /* qualified at the switch-out already */
	if (t->out_py) {
		const struct py_stack *after = after_of(t, end);

		w.after = read_times(after);
		if (after)
			w.shared = common_root(s, t->out_py, after);
	}
	r->sample.end_ns = end;
	r->sample.wait = t->wait;
	r->sample.start_estimated = t->out_estimated;
	t->out_estimated = false;
	if (t->outside_read_ns > end) {
		/*
		 * Read after this wait had ended: the thread had moved on (it ran and waited
		 * again before we looked), so what was read describes a later wait.
		 */
		free(t->outside_stack);
		t->outside_stack = NULL;
		py_stack_free(t->outside_py);
		t->outside_py = NULL;
		t->outside_syscall = -1;
		t->outside_syscall_arg = 0;
		s->stats.stale_captures++;
	}
	t->outside_read_ns = 0;
	r->sample.syscall = t->outside_syscall;
	r->sample.syscall_arg = t->outside_syscall_arg;
	/* Python frames: read while it waited (exact), else a guess (policy_of_wait()). */
	c = policy_of_wait(&w, &which);
	if (c.source == POLICY_DURING && which == 1) {
		/* A sample's read, made late enough to fall inside this wait. */
		s->held_py = t->out_py->late;
		t->out_py->late = NULL;
		s->stats.late_reads_in_waits++;
	} else if (c.source == POLICY_DURING) {
		s->held_py = t->outside_py;
		t->outside_py = NULL;
	} else if (c.source != POLICY_NONE) {
		s->held_py = t->out_py;
		t->out_py = NULL;
		keep_root(s->held_py, c.keep);
	}
	py_stack_free(t->outside_py);
	t->outside_py = NULL;
	py_stack_free(t->out_py);
	t->out_py = NULL;
	if (s->held_py) {
		/* gil: the kernel's, at the switch (copies: unknown) */
		out_python(s, r, s->held_py);
		r->sample.py_source = c.source == POLICY_SHARED	  ? SAMPLER_PY_SHARED
				      : c.source == POLICY_BEFORE ? SAMPLER_PY_BEFORE
								  : SAMPLER_PY_READ;
	}
	if (t->out_sample &&
	    decode_sample(t->out_sample->data, t->out_sample->size, s->opts.kernel_stacks, &v)) {
		r->sample.stack = v.stack;
		r->sample.stack_at_switch = true;
		s->held[1] = t->out_sample;
		t->out_sample = NULL;
	} else if (t->outside_stack || t->outside_syscall >= 0) {
		r->sample.stack.valid = t->outside_stack != NULL;
		memcpy(r->sample.stack.regs, t->outside_regs, sizeof(t->outside_regs));
		r->sample.stack.data = t->outside_stack;
		r->sample.stack.size = t->outside_stack_size;
		r->sample.stack_at_switch = true;
		s->held_stack = t->outside_stack;
		t->outside_stack = NULL;
	}
	t->outside_syscall = -1;
	t->outside_syscall_arg = 0;
	qrec_free(t->out_sample);
	t->out_sample = NULL;
	t->out = false;
	if (s->held_py)
		r->sample.gil_wait = gil_wait_of(s->held_py->proc, r);
	s->stats.off_cpu_spans++;
	return r;
}
