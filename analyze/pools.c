/*
 * The pool view: the tasks of each pool (its parent's pid and kind), with for each when
 * the parent sent it, when a worker took it, when that worker sent its result and when
 * the parent had it; for each worker its tasks, busy and idle time and start-up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "internal.h"

int an_by_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static int by_taken(const void *x, const void *y)
{
	const struct an_task *a = *(struct an_task *const *)x, *b = *(struct an_task *const *)y;

	if (a->received_ns != b->received_ns)
		return a->received_ns < b->received_ns ? -1 : 1;
	if (a->job != b->job)
		return a->job < b->job ? -1 : 1;
	return a->task < b->task ? -1 : a->task > b->task;
}

/* p50, p90 and max of @n values (sorted here). */
static struct pool_spread spread(uint64_t *v, size_t n)
{
	struct pool_spread s = { 0, 0, 0 };

	if (!n)
		return s;
	qsort(v, n, sizeof(*v), an_by_u64);
	s.p50 = v[(n - 1) / 2];
	s.p90 = v[(n - 1) * 9 / 10];
	s.max = v[n - 1];
	return s;
}

static struct an_pool *pool_of(struct analysis *a, const struct an_task *k)
{
	struct an_pool *grown;
	size_t i;

	for (i = 0; i < a->npools; i++) {
		if (a->pools[i].view.pid == k->pool_pid &&
		    a->pools[i].view.executor == k->executor &&
		    a->pools[i].view.threads == k->threads)
			return &a->pools[i];
	}
	if (a->npools >= AN_MAX_POOLS) {
		a->dropped = true;
		return NULL;
	}
	grown = realloc(a->pools, (a->npools + 1) * sizeof(*grown));
	if (!grown)
		return NULL;
	a->pools = grown;
	memset(&a->pools[a->npools], 0, sizeof(*a->pools));
	a->pools[a->npools].view.pid = k->pool_pid;
	a->pools[a->npools].view.executor = k->executor;
	a->pools[a->npools].view.threads = k->threads;
	a->pools[a->npools].view.start_ns = UINT64_MAX;
	return &a->pools[a->npools++];
}

/* The first and last slice of any thread of process @pid. */
static uint64_t process_span(const struct analysis *a, uint32_t pid, uint64_t *last)
{
	size_t cursor = 0;
	uint64_t key, first = UINT64_MAX;
	void *value;

	*last = 0;
	while (hashmap__next(a->threads, &cursor, &key, &value)) {
		const struct an_thread *t = value;

		if (t->pid != pid)
			continue;
		first = t->first_ns < first ? t->first_ns : first;
		*last = t->last_ns > *last ? t->last_ns : *last;
	}
	return first;
}

/*
 * When a worker was ready: its first wait for a task, or its first task (@first_task)
 * when it never waited for one.
 */
static uint64_t ready_at(const struct an_thread *main, uint64_t first_task)
{
	return main && main->first_idle_ns && main->first_idle_ns < first_task ? main->first_idle_ns
									       : first_task;
}

static struct pool_worker *worker_of(struct pool_view *v, uint32_t pid, uint32_t tid)
{
	uint32_t i;

	for (i = 0; i < v->nworkers; i++) {
		if (v->workers[i].pid == pid && v->workers[i].tid == tid)
			return &v->workers[i];
	}
	if (v->nworkers == POOL_MAX_WORKERS) {
		v->workers_not_shown++;
		return NULL;
	}
	v->workers[v->nworkers] = (struct pool_worker){ .pid = pid, .tid = tid };
	return &v->workers[v->nworkers++];
}

static int fill_view(struct analysis *a, struct an_pool *p)
{
	struct pool_view *v = &p->view;
	uint64_t *run = calloc(p->ntasks + 1, sizeof(*run));
	uint64_t *queue = calloc(p->ntasks + 1, sizeof(*queue));
	uint64_t *result = calloc(p->ntasks + 1, sizeof(*result));
	uint64_t first_task[POOL_MAX_WORKERS];
	size_t i, nrun = 0, nqueue = 0, nresult = 0;
	uint32_t w;

	if (!run || !queue || !result) {
		free(run);
		free(queue);
		free(result);
		return -ENOMEM;
	}
	qsort(p->tasks, p->ntasks, sizeof(*p->tasks), by_taken);
	v->tasks = (uint32_t)p->ntasks;
	for (i = 0; i < p->ntasks; i++) {
		const struct an_task *k = p->tasks[i];
		uint64_t first = k->sent_ns ? k->sent_ns : k->received_ns;
		uint64_t last = k->result_received_ns ? k->result_received_ns : k->result_sent_ns;
		struct pool_worker *wk =
			k->worker_pid ? worker_of(v, k->worker_pid,
						  k->threads ? k->worker_tid : k->worker_pid)
				      : NULL;

		p->tasks[i]->worker = wk ? (int32_t)(wk - v->workers) : -1;
		if (first && first < v->start_ns)
			v->start_ns = first;
		if (last > v->end_ns)
			v->end_ns = last;
		if (k->sent_ns && k->received_ns >= k->sent_ns)
			queue[nqueue++] = k->received_ns - k->sent_ns;
		if (k->result_sent_ns && k->result_received_ns >= k->result_sent_ns)
			result[nresult++] = k->result_received_ns - k->result_sent_ns;
		if (!k->received_ns || k->result_sent_ns < k->received_ns || !k->result_sent_ns)
			continue;
		v->done++;
		run[nrun++] = k->result_sent_ns - k->received_ns;
		if (wk) {
			if (!wk->tasks)
				first_task[wk - v->workers] = k->received_ns;
			wk->tasks++;
			wk->busy_ns += k->result_sent_ns - k->received_ns;
		}
	}
	for (w = 0; w < v->nworkers; w++) {
		struct pool_worker *wk = &v->workers[w];
		/* A process's main thread; a thread pool's worker thread. */
		const struct an_thread *main =
			hashmap__get(a->threads, (uint64_t)wk->pid << 32 | wk->tid);
		uint64_t last, born = process_span(a, wk->pid, &last);
		uint64_t ready;

		if (v->threads && main) {
			born = main->first_ns;
			last = main->last_ns;
		}
		ready = wk->tasks ? ready_at(main, first_task[w]) : born;
		uint64_t to = last < v->end_ns ? last : v->end_ns;
		uint64_t from = born > v->start_ns ? born : v->start_ns;
		/* Less its waits for a CPU: the machine's time (cpu-starved says it). */
		uint64_t runnable = main ? main->startup_runnable_ns : 0;

		wk->startup_ns = ready > born + runnable ? ready - born - runnable : 0;
		wk->life_ns = last > born ? last - born : 0;
		wk->idle_ns = to > ready && to - ready > wk->busy_ns ? to - ready - wk->busy_ns : 0;
		if (to > from && v->end_ns > v->start_ns)
			v->concurrency += (double)(to - from) / (double)(v->end_ns - v->start_ns);
	}
	v->run = spread(run, nrun);
	v->queue = spread(queue, nqueue);
	v->result = spread(result, nresult);
	free(run);
	free(queue);
	free(result);
	return 0;
}

int an_find_pools(struct analysis *a)
{
	size_t cursor = 0, i;
	uint64_t key;
	void *value;
	int err = 0;

	for (i = 0; i < a->npools; i++)
		free(a->pools[i].tasks);
	free(a->pools);
	a->pools = NULL;
	a->npools = 0;
	while (!err && hashmap__next(a->tasks, &cursor, &key, &value)) {
		struct an_task *k = value;
		struct an_pool *p = pool_of(a, k);
		struct an_task **grown;

		if (!p) {
			err = a->dropped ? 0 : -ENOMEM;
			continue;
		}
		/* Doubling: one realloc per power of two. */
		if (!(p->ntasks & (p->ntasks - 1))) {
			grown = realloc(p->tasks, (p->ntasks ? 2 * p->ntasks : 1) * sizeof(*grown));
			if (!grown) {
				err = -ENOMEM;
				continue;
			}
			p->tasks = grown;
		}
		p->tasks[p->ntasks++] = k;
	}
	for (i = 0; i < a->npools && !err; i++)
		err = fill_view(a, &a->pools[i]);
	return err;
}
