/*
 * Processes held back: what comes for a process the caller is not yet sure the user
 * wants to see (a wrapper that may only exec or wait, such as a pyenv shim, env or
 * timeout) is kept, in order, until the caller shows it (hold__release: replayed into
 * the trace, then passed through) or folds it (hold__forget: dropped). Bounded: a
 * process holding more than HOLD_MAX_BYTES, or all together more than
 * HOLD_TOTAL_MAX_BYTES, is shown, which is what a process doing that much is for.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "internal.h"

#define HOLD_MAX_BYTES (1u << 20)
#define HOLD_TOTAL_MAX_BYTES (32u << 20)

enum held_kind { HELD_OBS, HELD_EVENT, HELD_END_THREAD };

struct held_item {
	struct held_item *next;
	enum held_kind kind;
	union {
		struct trace_obs obs;	  /* frames: the item's own copy, after it */
		struct trace_event event; /* text: the item's own copy, after it */
		struct {
			uint32_t tid;
			uint64_t t_ns;
		} end;
	};
	uint64_t size;
};

struct held_process {
	struct held_item *first, **last;
	uint64_t bytes;
};

struct hold {
	struct hashmap *by_pid;
	uint64_t bytes;
};

static struct hold *hold_of(struct trace *trace)
{
	if (!trace->hold) {
		trace->hold = calloc(1, sizeof(*trace->hold));
		if (!trace->hold)
			return NULL;
		trace->hold->by_pid = hashmap__new();
		if (!trace->hold->by_pid) {
			free(trace->hold);
			trace->hold = NULL;
		}
	}
	return trace->hold;
}

int hold__start(struct trace *trace, uint32_t pid)
{
	struct hold *hold = hold_of(trace);
	struct held_process *p;

	if (!hold)
		return -ENOMEM;
	if (hashmap__get(hold->by_pid, pid))
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->last = &p->first;
	if (hashmap__set(hold->by_pid, pid, p)) {
		free(p);
		return -ENOMEM;
	}
	return 0;
}

bool hold__holds(const struct trace *trace, uint32_t pid)
{
	return trace->hold && hashmap__get(trace->hold->by_pid, pid);
}

static void free_items(struct hold *hold, struct held_process *p)
{
	struct held_item *it, *next;

	for (it = p->first; it; it = next) {
		next = it->next;
		hold->bytes -= it->size;
		free(it);
	}
	p->first = NULL;
	p->last = &p->first;
	p->bytes = 0;
}

/* Drops @p's observations and thread ends, keeping its events (forks, execs) in order. */
static void keep_events(struct hold *hold, struct held_process *p)
{
	struct held_item *it = p->first, *next;

	p->first = NULL;
	p->last = &p->first;
	for (; it; it = next) {
		next = it->next;
		if (it->kind == HELD_EVENT) {
			it->next = NULL;
			*p->last = it;
			p->last = &it->next;
			continue;
		}
		p->bytes -= it->size;
		hold->bytes -= it->size;
		free(it);
	}
}

void hold__forget(struct trace *trace, uint32_t pid, bool keep_holding)
{
	struct held_process *p;

	if (!trace->hold || !(p = hashmap__get(trace->hold->by_pid, pid)))
		return;
	if (keep_holding) {
		keep_events(trace->hold, p);
		return;
	}
	free_items(trace->hold, p);
	free(hashmap__remove(trace->hold->by_pid, pid));
}

int hold__release(struct trace *trace, uint32_t pid)
{
	struct held_process *p;
	struct held_item *it;
	int err = 0, r;

	if (!trace->hold || !(p = hashmap__remove(trace->hold->by_pid, pid)))
		return 0;
	/* No longer held: each replayed item goes through as a new one would. */
	for (it = p->first; it; it = it->next) {
		r = it->kind == HELD_OBS ? trace__observe(trace, &it->obs)
		    : it->kind == HELD_EVENT
			    ? trace__event(trace, &it->event)
			    : trace__end_thread(trace, pid, it->end.tid, it->end.t_ns);
		err = err ? err : r;
	}
	free_items(trace->hold, p);
	free(p);
	return err;
}

int hold__release_all(struct trace *trace)
{
	int err = 0;

	while (trace->hold && hashmap__count(trace->hold->by_pid)) {
		size_t cursor = 0;
		uint64_t pid;
		void *value;
		int r;

		if (!hashmap__next(trace->hold->by_pid, &cursor, &pid, &value))
			break;
		r = hold__release(trace, (uint32_t)pid);
		err = err ? err : r;
	}
	return err;
}

void hold__free(struct hold *hold)
{
	size_t cursor = 0;
	uint64_t pid;
	void *value;

	if (!hold)
		return;
	while (hashmap__next(hold->by_pid, &cursor, &pid, &value)) {
		free_items(hold, value);
		free(value);
	}
	hashmap__free(hold->by_pid);
	free(hold);
}

/* Keeps @it for @pid; past the bounds, shows the process instead (1: @it not kept). */
static int keep(struct trace *trace, uint32_t pid, struct held_item *it)
{
	struct hold *hold = trace->hold;
	struct held_process *p = hashmap__get(hold->by_pid, pid);

	if (p->bytes + it->size > HOLD_MAX_BYTES || hold->bytes + it->size > HOLD_TOTAL_MAX_BYTES) {
		free(it);
		return hold__release(trace, pid) ?: 1;
	}
	*p->last = it;
	p->last = &it->next;
	p->bytes += it->size;
	hold->bytes += it->size;
	return 0;
}

/*
 * For trace__observe(): 0 when @obs was kept, 1 when the process is not held (or no
 * longer: it is to be passed on), a negative errno on failure.
 */
int hold__observe(struct trace *trace, const struct trace_obs *obs)
{
	size_t frames = obs->nframes * sizeof(*obs->frames);
	struct held_item *it;

	if (!hold__holds(trace, obs->pid))
		return 1;
	it = malloc(sizeof(*it) + frames);
	if (!it)
		return -ENOMEM;
	*it = (struct held_item){ .kind = HELD_OBS, .obs = *obs, .size = sizeof(*it) + frames };
	memcpy(it + 1, obs->frames, frames);
	it->obs.frames = (const struct trace_frame *)(it + 1);
	return keep(trace, obs->pid, it);
}

int hold__event(struct trace *trace, const struct trace_event *ev)
{
	size_t text = ev->text ? strlen(ev->text) + 1 : 0;
	struct held_item *it;

	if (!hold__holds(trace, ev->pid))
		return 1;
	it = malloc(sizeof(*it) + text);
	if (!it)
		return -ENOMEM;
	*it = (struct held_item){ .kind = HELD_EVENT, .event = *ev, .size = sizeof(*it) + text };
	if (text) {
		memcpy(it + 1, ev->text, text);
		it->event.text = (const char *)(it + 1);
	}
	return keep(trace, ev->pid, it);
}

int hold__end_thread(struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t_ns)
{
	struct held_item *it;

	if (!hold__holds(trace, pid))
		return 1;
	it = malloc(sizeof(*it));
	if (!it)
		return -ENOMEM;
	*it = (struct held_item){ .kind = HELD_END_THREAD, .size = sizeof(*it) };
	it->end.tid = tid;
	it->end.t_ns = t_ns;
	return keep(trace, pid, it);
}
