/* Whether a stack read from outside for a sample stands for it, decided by what followed. */
#include "internal.h"
#include "../common/hashmap.h"
#include "../common/log.h"

#include <inttypes.h>
#include <stdlib.h>

/*
 * The drainer reads a sample's stack when it gets to the sample, a fraction of a
 * period to a few periods later. What the thread did in between is known only from
 * the records that follow: a wait the read fell inside, a block it came after, the
 * kernel's own read of the thread in between, the thread's next sample. Until then the
 * sample is queued with its read (in time) or with a guess (read late: guess_at()), and
 * the read is on trial here; a verdict that changes the sample's stack is kept in
 * task_state.restacked until the sample goes out (trial_restacked(), from on_sample()),
 * about REORDER_MARGIN_NS after it.
 */

/* @ps's calls, hashed (FNV-1a over the code of each frame): two reads show the same calls. */
static uint64_t calls_of(const struct py_stack *ps)
{
	uint64_t h = FNV1A_OFFSET ^ ps->n;
	uint32_t i;

	for (i = 0; i < ps->n; i++)
		h = fnv1a_step(h, ps->frames[i].code);
	return h;
}

/* No trial open any more: a new one, or a verdict. */
static void trial_forget(struct task_state *t)
{
	py_stack_free(t->late_read);
	t->late_read = NULL;
	t->trial.known = false;
	t->trial_out_ns = 0;
	t->trial_blocked = false;
}

/* The sample on trial goes out with @ps (taken; NULL: with no Python frames). */
static void restack(struct task_state *t, struct py_stack *ps)
{
	if (!ps)
		ps = calloc(1, sizeof(*ps));
	if (!ps)
		return;
	ps->at_ns = t->trial.at_ns;
	py_fifo_push(&t->restacked, ps);
}

static void trial_decide(struct sampler *s, struct task_state *t, enum policy_verdict v)
{
	if (v == POLICY_OPEN)
		return;
	pr_debug("trial of %u's sample at %" PRIu64 " (read %" PRIu64 "-%" PRIu64 "%s): %s", t->tid,
		 t->trial.at_ns, t->trial.start_ns, t->trial.read_ns, t->late_read ? ", late" : "",
		 v == POLICY_STANDS ? "stands" : "falls");
	if (v == POLICY_STANDS && t->late_read) {
		restack(t, t->late_read);
		t->late_read = NULL;
	} else if (v == POLICY_FALLS) {
		/*
		 * What the reads around the sample share, those made since included (the
		 * kernel's, the next sample's). Read in time, the sample goes out with that
		 * even when it is nothing; read late, it carries the guess made when it was
		 * followed, replaced only by one.
		 */
		struct py_stack *ps = guess_at(s, t, t->trial.at_ns, false);

		if (ps || !t->late_read)
			restack(t, ps);
	}
	trial_forget(t);
}

/*
 * The thread's sample at @sample_ns had its stack read from outside: @read. Read too
 * late to stand for the sample unless what follows says so, @late_read is that read
 * (taken), which the sample does not carry meanwhile; else NULL. The trial before it,
 * if still open, must have been decided first (trial_next()).
 */
void trial_open(struct task_state *t, uint64_t sample_ns, const struct py_stack *read,
		struct py_stack *late_read)
{
	trial_forget(t);
	t->trial = (struct policy_read){ .known = true,
					 .at_ns = sample_ns,
					 .start_ns = read->read_ns - read->walk_ns,
					 .read_ns = read->read_ns };
	t->trial_calls = calls_of(read);
	t->late_read = late_read;
}

/* The thread's next sample, at @sample_ns: the trial open, if any, ends now. */
void trial_next(struct sampler *s, struct task_state *t, uint64_t sample_ns)
{
	if (t->trial.known)
		trial_decide(s, t, policy_read_at_next(&t->trial, sample_ns, t->late_read != NULL));
}

/* A switch-out at @out_ns: a wait begins; @blocked: the thread was not preempted. */
void trial_out(struct task_state *t, uint64_t out_ns, bool blocked)
{
	if (!t->trial.known || out_ns < t->trial.at_ns)
		return;
	t->trial_out_ns = out_ns;
	t->trial_blocked = blocked;
}

/* A switch-in at @in_ns: the wait that ends may decide the trial. */
void trial_in(struct sampler *s, struct task_state *t, uint64_t in_ns)
{
	enum policy_verdict v;

	if (!t->trial.known || !t->trial_out_ns)
		return;
	v = policy_read_after_wait(&t->trial, t->trial_out_ns, in_ns, t->trial_blocked);
	s->stats.reads_after_blocks += v == POLICY_FALLS;
	trial_decide(s, t, v);
	t->trial_out_ns = 0;
}

/* The kernel read the thread's stack @ps at @seen_ns: it may show the thread had moved on. */
void trial_seen(struct sampler *s, struct task_state *t, uint64_t seen_ns,
		const struct py_stack *ps)
{
	enum policy_verdict v;

	if (!t->trial.known)
		return;
	v = policy_read_seen_between(&t->trial, seen_ns, calls_of(ps) == t->trial_calls);
	s->stats.reads_overtaken += v == POLICY_FALLS;
	trial_decide(s, t, v);
}

/*
 * The stack the sample at @sample_ns goes out with, if its trial changed it (taken; with
 * no frames: none at all). Verdicts for samples already gone are dropped.
 */
struct py_stack *trial_restacked(struct task_state *t, uint64_t sample_ns)
{
	return py_fifo_take(&t->restacked, sample_ns, 1);
}
