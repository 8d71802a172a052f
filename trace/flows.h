/*
 * Internal to trace/: the messages of a Pool's tasks as marked on their threads, joined
 * per task into flows (handed out, taken by a worker, result sent, result received).
 */
#ifndef PYTRACE_TRACE_FLOWS_H
#define PYTRACE_TRACE_FLOWS_H

#include <stdbool.h>
#include <stdint.h>

#include "trace.h"

/* One marked message: where its marker slice starts, the point a flow binds to. */
struct flow_point {
	uint32_t pid, tid;
	uint64_t t_ns;	/* when it was written or read */
	uint64_t ts_us; /* its marker slice's start as written; 0: not written (yet) */
	struct trace_message m;
};

/*
 * Messages kept at most (48 bytes each): past them, a long run of tiny tasks would hold
 * gigabytes; the rest are counted (flows__dropped()), not joined.
 */
#define FLOWS_MAX_POINTS (1u << 21)

struct flows;

/* NULL with errno set. Free with flows__free() (accepts NULL). */
struct flows *flows__new(void);
void flows__free(struct flows *f);

/* Notes a message observed on thread @tid at @t_ns. 0 or -ENOMEM. */
int flows__mark(struct flows *f, uint32_t pid, uint32_t tid, uint64_t t_ns,
		const struct trace_message *m);

/* Messages not kept: past FLOWS_MAX_POINTS. */
uint64_t flows__dropped(const struct flows *f);

/* Messages kept whose marker slice was not written yet (nor dropped: too deep, hidden). */
uint64_t flows__unbound(const struct flows *f);

/* A message's marker slice opened at @start_ns was written starting at @ts_us. */
void flows__bind(struct flows *f, uint32_t pid, uint32_t tid, uint64_t start_ns, uint64_t ts_us);

/*
 * Joins the written points per task, each used once: a worker's receipt of a task,
 * after the latest hand-out of that task number by another process, then the first
 * result of it that thread sent, then the first receipt of that result by the process
 * that handed it out (or by any other, when the hand-out was not seen). Calls @emit
 * with each chain of 2 to 4 points, in time order. Returns how many, or -ENOMEM.
 */
int flows__join(struct flows *f,
		int (*emit)(void *ctx, const struct flow_point *const *points, uint32_t n),
		void *ctx);

#endif
