/* Joining a Pool's task messages into flows: pure bookkeeping over marked points. */
#include "flows.h"

#include <errno.h>
#include <stdlib.h>

struct flows {
	struct flow_point *points;
	size_t n, capacity;
	uint64_t dropped;
	uint64_t unbound; /* marks without their slice yet */
};

struct flows *flows__new(void)
{
	return calloc(1, sizeof(struct flows));
}

void flows__free(struct flows *f)
{
	if (!f)
		return;
	free(f->points);
	free(f);
}

int flows__mark(struct flows *f, uint32_t pid, uint32_t tid, uint64_t t_ns,
		const struct trace_message *m)
{
	if (f->n == FLOWS_MAX_POINTS) {
		f->dropped++;
		return 0;
	}
	if (f->n == f->capacity) {
		size_t capacity = f->capacity ? 2 * f->capacity : 256;
		struct flow_point *grown = realloc(f->points, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		f->points = grown;
		f->capacity = capacity;
	}
	f->points[f->n++] = (struct flow_point){ .pid = pid, .tid = tid, .t_ns = t_ns, .m = *m };
	f->unbound++;
	return 0;
}

uint64_t flows__unbound(const struct flows *f)
{
	return f->unbound;
}

uint64_t flows__dropped(const struct flows *f)
{
	return f->dropped;
}

void flows__bind(struct flows *f, uint32_t pid, uint32_t tid, uint64_t start_ns, uint64_t ts_us)
{
	size_t i = f->n;

	/*
	 * The latest unbound mark of the thread at or before the slice's start: a slice
	 * opens at its observation's time, later when the coalescer had to clamp it.
	 */
	while (i--) {
		struct flow_point *p = &f->points[i];

		if (p->pid == pid && p->tid == tid && !p->ts_us && p->t_ns <= start_ns) {
			p->ts_us = ts_us;
			f->unbound--;
			return;
		}
	}
}

/* Written points in order of (kind, job, task, time): one task's messages side by side. */
static int by_message(const void *a, const void *b)
{
	const struct flow_point *x = *(struct flow_point *const *)a;
	const struct flow_point *y = *(struct flow_point *const *)b;
	int kx = x->m.executor * 4 + x->m.result * 2 + x->m.sent;
	int ky = y->m.executor * 4 + y->m.result * 2 + y->m.sent;

	if (kx != ky)
		return kx < ky ? -1 : 1;
	if (x->m.job != y->m.job)
		return x->m.job < y->m.job ? -1 : 1;
	if (x->m.task != y->m.task)
		return x->m.task < y->m.task ? -1 : 1;
	if (x->ts_us != y->ts_us)
		return x->ts_us < y->ts_us ? -1 : 1;
	return x->t_ns < y->t_ns ? -1 : x->t_ns > y->t_ns;
}

struct sorted {
	struct flow_point **p;
	size_t n;
	bool *used;
};

/* The first sorted index of @w's task's @result/@sent messages (may be past them). */
static size_t first_of(const struct sorted *s, const struct flow_point *w, bool result, bool sent)
{
	struct flow_point key = { .m = { .executor = w->m.executor,
					 .result = result,
					 .sent = sent,
					 .job = w->m.job,
					 .task = w->m.task } };
	const struct flow_point *k = &key;
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (by_message(&s->p[mid], &k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether @p is the @result/@sent message of @w's task. */
static bool same_message(const struct flow_point *p, const struct flow_point *w, bool result,
			 bool sent)
{
	return p->m.executor == w->m.executor && p->m.result == result && p->m.sent == sent &&
	       p->m.job == w->m.job && p->m.task == w->m.task;
}

/* The hand-out of @w's task: the latest by another process, not after it. SIZE_MAX: none. */
static size_t find_handout(const struct sorted *s, const struct flow_point *w)
{
	size_t i = first_of(s, w, false, true), found = SIZE_MAX;

	for (; i < s->n && same_message(s->p[i], w, false, true); i++) {
		if (s->p[i]->ts_us > w->ts_us)
			break;
		if (!s->used[i] && s->p[i]->pid != w->pid)
			found = i;
	}
	return found;
}

/*
 * The first unused point of @result/@sent for @w's task at or after @after: on @w's
 * thread when @same_thread, else in process @pid (0: any but @w's).
 */
static size_t find_after(const struct sorted *s, const struct flow_point *w, bool result, bool sent,
			 uint64_t after, bool same_thread, uint32_t pid)
{
	size_t i = first_of(s, w, result, sent);

	for (; i < s->n && same_message(s->p[i], w, result, sent); i++) {
		const struct flow_point *p = s->p[i];

		if (s->used[i] || p->ts_us < after)
			continue;
		if (same_thread ? p->pid == w->pid && p->tid == w->tid
				: (pid ? p->pid == pid : p->pid != w->pid))
			return i;
	}
	return SIZE_MAX;
}

int flows__join(struct flows *f,
		int (*emit)(void *ctx, const struct flow_point *const *points, uint32_t n),
		void *ctx)
{
	struct sorted s = { calloc(f->n + 1, sizeof(*s.p)), 0, calloc(f->n + 1, sizeof(bool)) };
	size_t i, w, at[4];
	int joined = 0, err = 0;

	if (!s.p || !s.used) {
		free(s.p);
		free(s.used);
		return -ENOMEM;
	}
	for (i = 0; i < f->n; i++) {
		if (f->points[i].ts_us)
			s.p[s.n++] = &f->points[i];
	}
	qsort(s.p, s.n, sizeof(*s.p), by_message);
	for (w = 0; w < s.n && !err; w++) {
		const struct flow_point *chain[4], *p = s.p[w];
		uint32_t n = 0, k;

		if (p->m.result || p->m.sent || s.used[w])
			continue; /* each chain is built from a worker's receipt of its task */
		at[0] = find_handout(&s, p);
		at[1] = w;
		at[2] = find_after(&s, p, true, true, p->ts_us, true, 0);
		at[3] = find_after(&s, p, true, false,
				   at[2] != SIZE_MAX ? s.p[at[2]]->ts_us : p->ts_us, false,
				   at[0] != SIZE_MAX ? s.p[at[0]]->pid : 0);
		for (k = 0; k < 4; k++) {
			if (at[k] == SIZE_MAX)
				continue;
			s.used[at[k]] = true;
			chain[n++] = s.p[at[k]];
		}
		if (n < 2)
			continue;
		err = emit(ctx, chain, n);
		joined++;
	}
	free(s.p);
	free(s.used);
	return err ? err : joined;
}
