/* Which Python stack a wait or an unread sample gets: one policy, pure, with its windows. */
#ifndef PYTRACE_SAMPLER_WAITPOLICY_H
#define PYTRACE_SAMPLER_WAITPOLICY_H

#include <stdbool.h>
#include <stdint.h>

/*
 * The windows, in sampling periods. Samples fire on a thread's CPU time, so while it
 * runs its latest stack read at a sample is never more than a period of that time stale;
 * what the windows bound is how far a stack read at one moment may stand for another.
 *
 * POLICY_BEFORE_PERIODS: the latest stack read stands for a later moment (a switch-out)
 * when the thread ran at most this long since the sample it was read for (its running
 * time: its preemptions in between do not count, as it resumed where it was),
 * and for a wait when that and the wait's own length together are at most this long.
 * Wider put long preemptions after a function returned under that function; narrower
 * split slices at short waits: 4 did best on the pool test
 * (tests/e2e/test_python_record.py). Counted in wall time, a worker preempted for most of
 * the 4 periods after its last read lost its stack at its next preemption.
 *
 * POLICY_BRACKET_PERIODS, POLICY_BRACKET_MIN_NS: two reads around a moment at most this
 * far apart (the wider of the two; in the thread's running time, its preemptions seen between
 * not counted) share what held at it: the wider, the likelier a call shown whole
 * returned and was made again in between. Reads further apart come from a drainer that
 * fell behind (a busy machine, very deep stacks); inside one pool task (same_task) the
 * gap does not matter.
 *
 * POLICY_LATE_PERIODS: a stack read this long after its sample no longer stands for the
 * sample itself (the thread may have moved on); it is then a read after the sample.
 */
#define POLICY_BEFORE_PERIODS 4
#define POLICY_BRACKET_PERIODS 8
#define POLICY_BRACKET_MIN_NS 10000000ULL
#define POLICY_LATE_PERIODS 2

/* A read of the thread's Python stack, as the policy sees it. */
struct policy_read {
	bool known;	    /* there is one (of the interpreter the thread runs now) */
	uint64_t at_ns;	    /* the moment it was read for: its sample, or the switch */
	uint64_t start_ns;  /* when reading it began */
	uint64_t read_ns;   /* when reading it ended */
	uint64_t waited_ns; /* the thread's preemptions, summed, before at_ns */
	uint64_t ran_ns;    /* a guess: the thread's running time from its read to its moment */
	uint32_t n;	    /* its frames */
};

enum policy_source {
	POLICY_NONE,   /* nothing known held: no Python frames */
	POLICY_DURING, /* read while the thread waited (it could not move): exact */
	POLICY_SHARED, /* what the reads before and after share held throughout */
	POLICY_BEFORE, /* the read before, recent enough to stand for it: a guess */
};

struct policy_choice {
	enum policy_source source;
	uint32_t keep;	 /* frames kept, from the root; 0 with POLICY_NONE (or DURING: none) */
	uint64_t ran_ns; /* a guess: the thread's running time from the read it came from */
};

/* A moment whose stack was not read: a switch-out, a sample left unread. */
struct policy_moment {
	uint64_t at_ns, period_ns;
	uint64_t waited_ns;	   /* the thread's preemptions, summed, before @at_ns */
	struct policy_read before; /* the latest read that ended by @at_ns */
	struct policy_read after;  /* the first read that ended after it */
	uint32_t shared;	   /* frames before and after share, from the root */
	bool same_task;		   /* ... down to a pool worker loop running one task */
};

struct policy_choice policy_at_moment(const struct policy_moment *m);

/* A wait, from its switch-out to its switch-in. */
struct policy_wait {
	uint64_t start_ns, end_ns, period_ns;
	/*
	 * Reads that may have been made while it waited: the kernel's at the switch, one
	 * made from outside while the thread was still switched out, a sample's read late
	 * enough to fall inside the wait. Each counts only if made wholly inside it.
	 */
	struct policy_read during[2];
	struct policy_read
		start; /* the stack chosen for its start (policy_at_moment), ran_ns set */
	struct policy_read after; /* the first read after the waits that ended with it */
	uint32_t shared;	  /* frames start and after share, from the root */
};

/* The choice for @w; with POLICY_DURING, which of w->during (in *@which). */
struct policy_choice policy_of_wait(const struct policy_wait *w, uint32_t *which);

/* Whether @r was read wholly while the thread waited, from @start_ns to @end_ns. */
bool policy_read_inside(const struct policy_read *r, uint64_t start_ns, uint64_t end_ns);

/*
 * Whether a stack read at @read_ns stands for its sample at @at_ns: read within
 * POLICY_LATE_PERIODS of it. A later read stands for it too when made wholly inside the
 * wait the thread began next, with no other sample between (policy_read_inside()): the
 * thread had run for less than a period of its CPU time since the sample.
 */
bool policy_read_prompt(uint64_t at_ns, uint64_t read_ns, uint64_t period_ns);

/* Whether a sample's stack read from outside stands for the sample, as far as known. */
enum policy_verdict {
	POLICY_OPEN,   /* not known yet */
	POLICY_STANDS, /* the read is the sample's stack */
	POLICY_FALLS,  /* it is not: the sample gets what the reads around it share */
};

/*
 * @r, read for a sample, judged at the end of a wait the thread began after the sample
 * (from @out_ns to @in_ns; @blocked: it blocked rather than being preempted). Made
 * wholly inside the wait, it stands: the thread could not move, and had run less than
 * a period since the sample (samples fire on its CPU time). Begun after a block, it
 * falls: a thread that blocked was at a boundary of its work (a queue, a lock, I/O)
 * and went on to other work when it woke (a pool worker showed its next job before it
 * had received it). After a preemption the thread resumed where it was: still open.
 */
enum policy_verdict policy_read_after_wait(const struct policy_read *r, uint64_t out_ns,
					   uint64_t in_ns, bool blocked);

/*
 * @r, read for a sample, judged by another read of the thread made at @seen_ns (the
 * kernel's, exact at that moment): one between the sample and @r showing other calls
 * (@same_calls false) says the thread had moved on before @r was made, so @r falls (a
 * new pool worker read late showed its first job from before it had received it, the
 * kernel's read of that receipt in between). Else still open.
 */
enum policy_verdict policy_read_seen_between(const struct policy_read *r, uint64_t seen_ns,
					     bool same_calls);

/*
 * @r, read for a sample, judged at the thread's next sample at @next_ns with no wait
 * having decided it. A read within POLICY_LATE_PERIODS (@late false) stands. A later one
 * stands if it ended before @next_ns (the thread had run less than a period since its
 * sample), else it falls.
 */
enum policy_verdict policy_read_at_next(const struct policy_read *r, uint64_t next_ns, bool late);

#endif
