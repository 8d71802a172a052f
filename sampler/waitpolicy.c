/* Which Python stack a wait or an unread sample gets: one policy, pure, with its windows. */
#include "waitpolicy.h"

static uint64_t bracket_ns(uint64_t period_ns)
{
	uint64_t periods = POLICY_BRACKET_PERIODS * period_ns;

	return periods > POLICY_BRACKET_MIN_NS ? periods : POLICY_BRACKET_MIN_NS;
}

/* A guess that keeps no frame is no guess; a read made during a wait stands as it is. */
static struct policy_choice choose(enum policy_source source, uint32_t keep)
{
	struct policy_choice c = { keep || source == POLICY_DURING ? source : POLICY_NONE, keep,
				   0 };

	return c;
}

/* How long the thread ran from @r's moment to @at_ns, after which it had waited @waited_ns. */
static uint64_t ran_since(const struct policy_read *r, uint64_t at_ns, uint64_t waited_ns)
{
	uint64_t span = at_ns - r->at_ns;
	uint64_t waits = waited_ns > r->waited_ns ? waited_ns - r->waited_ns : 0;

	return waits < span ? span - waits : 0;
}

/*
 * How long the thread ran between the reads before and after a moment: the time between
 * them less the waits it was seen in since the read before's sample (those after the
 * moment are not known yet: counted as running).
 */
static uint64_t running_between(const struct policy_moment *m)
{
	uint64_t span =
		m->after.read_ns > m->before.read_ns ? m->after.read_ns - m->before.read_ns : 0;
	uint64_t waits =
		m->waited_ns > m->before.waited_ns ? m->waited_ns - m->before.waited_ns : 0;

	return waits < span ? span - waits : 0;
}

/*
 * Read after the moment: known to hold at it only where it agrees with a read before,
 * close enough (or inside one task) that what both show was not left and entered again
 * in between. Else the latest read before, if recent. Else nothing.
 */
struct policy_choice policy_at_moment(const struct policy_moment *m)
{
	struct policy_choice c;

	if (m->after.known) {
		if (!m->before.known ||
		    (running_between(m) > bracket_ns(m->period_ns) && !m->same_task))
			return choose(POLICY_NONE, 0);
		c = choose(POLICY_SHARED, m->shared);
		/* As of the read after's own sample (a read for an earlier one, made late). */
		c.ran_ns = m->at_ns >= m->after.at_ns ? ran_since(&m->after, m->at_ns, m->waited_ns)
						      : 0;
		return c;
	}
	if (!m->before.known || m->at_ns < m->before.at_ns)
		return choose(POLICY_NONE, 0);
	c = choose(POLICY_BEFORE, m->before.n);
	c.ran_ns = ran_since(&m->before, m->at_ns, m->waited_ns);
	return c.ran_ns <= POLICY_BEFORE_PERIODS * m->period_ns ? c : choose(POLICY_NONE, 0);
}

bool policy_read_inside(const struct policy_read *r, uint64_t start_ns, uint64_t end_ns)
{
	return r->known && r->start_ns >= start_ns && r->read_ns <= end_ns;
}

/*
 * A read made while it waited is its stack, exactly. Else the stack as of its start,
 * cut to what it shares with the first read after (which held throughout), or alone
 * when the wait ended soon enough after the read it came from. Else nothing.
 */
struct policy_choice policy_of_wait(const struct policy_wait *w, uint32_t *which)
{
	uint32_t k;

	for (k = 0; k < sizeof(w->during) / sizeof(w->during[0]); k++) {
		if (policy_read_inside(&w->during[k], w->start_ns, w->end_ns)) {
			*which = k;
			return choose(POLICY_DURING, w->during[k].n);
		}
	}
	if (w->start.known && w->after.known)
		return choose(POLICY_SHARED, w->shared);
	if (w->start.known && w->end_ns >= w->start_ns &&
	    w->start.ran_ns + (w->end_ns - w->start_ns) <= POLICY_BEFORE_PERIODS * w->period_ns)
		return choose(POLICY_BEFORE, w->start.n);
	return choose(POLICY_NONE, 0);
}

bool policy_read_prompt(uint64_t at_ns, uint64_t read_ns, uint64_t period_ns)
{
	return read_ns - at_ns <= POLICY_LATE_PERIODS * period_ns;
}

enum policy_verdict policy_read_after_wait(const struct policy_read *r, uint64_t out_ns,
					   uint64_t in_ns, bool blocked)
{
	if (policy_read_inside(r, out_ns, in_ns))
		return POLICY_STANDS;
	if (blocked && r->known && r->start_ns >= out_ns)
		return POLICY_FALLS;
	return POLICY_OPEN;
}

enum policy_verdict policy_read_seen_between(const struct policy_read *r, uint64_t seen_ns,
					     bool same_calls)
{
	if (r->known && !same_calls && seen_ns > r->at_ns && seen_ns < r->start_ns)
		return POLICY_FALLS;
	return POLICY_OPEN;
}

enum policy_verdict policy_read_at_next(const struct policy_read *r, uint64_t next_ns, bool late)
{
	if (!late)
		return POLICY_STANDS;
	return r->known && next_ns >= r->read_ns ? POLICY_STANDS : POLICY_FALLS;
}
