/*
 * The rules: each kind of cause, its share of the work threads' time (see analyze.h),
 * its evidence, where to look and what to try. A finding under FINDING_MIN_SHARE is not
 * said. The rules and thresholds are documented, kind by kind, in docs/findings.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/hashmap.h"
#include "internal.h"

/* A pool needs this many tasks before their hand-over cost is called overhead. */
#define TASK_OVERHEAD_MIN_TASKS 100
/* ... and a median task run shorter than this many median hand-overs. */
#define TASK_OVERHEAD_RATIO 4

static const char *const kind_names[FINDING_KIND_COUNT] = {
	[FINDING_IMBALANCE] = "imbalance",
	[FINDING_SERIALIZATION] = "serialization",
	[FINDING_TASK_OVERHEAD] = "task-overhead",
	[FINDING_WORKER_STARTUP] = "worker-startup",
	[FINDING_GIL_CONTENTION] = "gil-contention",
	[FINDING_OVERSUBSCRIPTION] = "oversubscription",
	[FINDING_CPU_STARVED] = "cpu-starved",
	[FINDING_LOCK_CONTENTION] = "lock-contention",
	[FINDING_IO_WAIT] = "io-wait",
	[FINDING_SLEEP] = "sleep",
};

const char *finding_kind__name(enum finding_kind kind)
{
	return kind < FINDING_KIND_COUNT ? kind_names[kind] : "?";
}

const char *an_fmt_ns(char *buf, size_t size, uint64_t ns)
{
	if (ns < 1000000)
		snprintf(buf, size, "%.0f us", (double)ns / 1e3);
	else if (ns < 10000000000ULL)
		snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, size, "%.2f s", (double)ns / 1e9);
	return buf;
}

int an_add_finding(struct analysis *a, const struct finding *f)
{
	struct finding *grown;

	if (!(f->share >= FINDING_MIN_SHARE))
		return 0;
	grown = realloc(a->findings, (a->nfindings + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	a->findings = grown;
	a->findings[a->nfindings] = *f;
	if (a->findings[a->nfindings].share > 1)
		a->findings[a->nfindings].share = 1;
	a->nfindings++;
	return 0;
}

static double share_of(uint64_t ns, uint64_t of)
{
	return of ? (double)ns / (double)of : 0;
}

/*
 * "fn (file:line), job J task T" (a thread pool's: "the Nth task of thread TID"): raw,
 * each output escapes it for where it goes.
 */
static void task_where(char *dst, size_t size, const struct an_task *k)
{
	char which[64];

	if (k->threads)
		snprintf(which, sizeof(which), "task %" PRId64 " of thread %" PRIu32, k->task,
			 k->worker_tid);
	else
		snprintf(which, sizeof(which), "job %" PRId64 " task %" PRId64, k->job, k->task);
	if (k->fn)
		snprintf(dst, size, "%.64s (%.96s:%" PRIu32 "), %s", k->fn, k->fn_file, k->fn_line,
			 which);
	else
		snprintf(dst, size, "%s", which);
}

/*
 * A pool's findings are shares of its workers' time over the run: as many workers as
 * were alive at once, on average, for the whole run.
 */
static uint64_t pool_capacity(const struct pool_view *v, uint64_t run)
{
	return (uint64_t)((v->concurrency > 1 ? v->concurrency : 1) * (double)run);
}

/* Idle workers while the last tasks run: the tail after the last task was taken. */
static int imbalance(struct analysis *a, const struct an_pool *p, uint64_t run)
{
	const struct pool_view *v = &p->view;
	const struct an_task *last = NULL;
	uint64_t last_take = 0, end = 0, tail_idle = 0, longest_idle = 0;
	uint64_t free_at[POOL_MAX_WORKERS] = { 0 };
	uint32_t w, idle_workers = 0;
	struct finding f = { .kind = FINDING_IMBALANCE };
	char b1[32], b2[32], b3[32], b4[32];
	size_t i;

	for (i = 0; i < p->ntasks; i++) {
		const struct an_task *k = p->tasks[i];

		if (!k->received_ns || k->result_sent_ns < k->received_ns)
			continue;
		if (k->worker >= 0 && k->result_sent_ns > free_at[k->worker])
			free_at[k->worker] = k->result_sent_ns;
		last_take = k->received_ns > last_take ? k->received_ns : last_take;
		if (k->result_sent_ns > end) {
			end = k->result_sent_ns;
			last = k;
		}
	}
	if (!last || v->nworkers < 2)
		return 0;
	for (w = 0; w < v->nworkers; w++) {
		uint64_t from = free_at[w] > last_take ? free_at[w] : last_take;
		uint64_t idle = end > from ? end - from : 0;

		tail_idle += idle;
		if (idle) {
			idle_workers++;
			longest_idle = idle > longest_idle ? idle : longest_idle;
		}
	}
	f.share = share_of(tail_idle, pool_capacity(v, run));
	f.start_ns = last_take;
	f.end_ns = end;
	snprintf(f.title, sizeof(f.title),
		 "%" PRIu32 " of %" PRIu32
		 " workers sat idle for up to %s while the last tasks ran",
		 idle_workers, v->nworkers, an_fmt_ns(b1, sizeof(b1), longest_idle));
	snprintf(f.evidence, sizeof(f.evidence),
		 "%" PRIu32 " tasks; the last one was taken %s before the pool's end; the task "
		 "that ended last ran %s (median task %s); %s of workers' time idle in the tail",
		 v->tasks, an_fmt_ns(b2, sizeof(b2), end - last_take),
		 an_fmt_ns(b3, sizeof(b3), last->result_sent_ns - last->received_ns),
		 an_fmt_ns(b4, sizeof(b4), v->run.p50), an_fmt_ns(b1, sizeof(b1), tail_idle));
	task_where(f.where, sizeof(f.where), last);
	snprintf(f.hint, sizeof(f.hint),
		 "split the long tasks, or send the longest first; with many tasks, "
		 "imap_unordered (chunksize=1) lets a free worker take what is left");
	return an_add_finding(a, &f);
}

/*
 * Many tasks, each costing a worker more than four times its own run (the pool's worker
 * time over its tasks): the cost is the workers' time between one task and the next.
 */
static int task_overhead(struct analysis *a, const struct an_pool *p, uint64_t run)
{
	const struct pool_view *v = &p->view;
	uint64_t last_result[POOL_MAX_WORKERS] = { 0 }, sum = 0, per_task;
	struct finding f = { .kind = FINDING_TASK_OVERHEAD };
	char b1[32], b2[32], b3[32];
	size_t i, n = 0;

	if (v->done < TASK_OVERHEAD_MIN_TASKS || v->end_ns <= v->start_ns)
		return 0;
	per_task = (uint64_t)((v->concurrency > 1 ? v->concurrency : 1) *
			      (double)(v->end_ns - v->start_ns) / v->done);
	if (TASK_OVERHEAD_RATIO * v->run.p50 >= per_task)
		return 0;
	/* Tasks come in the order they were taken: a worker's gap is from its last result. */
	for (i = 0; i < p->ntasks; i++) {
		const struct an_task *k = p->tasks[i];
		int32_t w = k->worker;

		if (w < 0)
			continue;
		if (last_result[w] && k->received_ns >= last_result[w]) {
			sum += k->received_ns - last_result[w];
			n++;
		}
		last_result[w] = k->result_sent_ns;
	}
	if (!n)
		return 0;
	f.share = share_of(sum, pool_capacity(v, run));
	f.start_ns = v->start_ns;
	f.end_ns = v->end_ns;
	snprintf(f.title, sizeof(f.title),
		 "%" PRIu32 " tasks of %s each (median) took %s each of a worker's time", v->done,
		 an_fmt_ns(b1, sizeof(b1), v->run.p50), an_fmt_ns(b2, sizeof(b2), per_task));
	snprintf(f.evidence, sizeof(f.evidence),
		 "%s of workers' time between one task's result and the next task (%s each on "
		 "average); median queue delay %s",
		 an_fmt_ns(b3, sizeof(b3), sum), an_fmt_ns(b2, sizeof(b2), sum / n),
		 an_fmt_ns(b1, sizeof(b1), v->queue.p50));
	snprintf(f.where, sizeof(f.where), "the pool of process %" PRIu32, v->pid);
	snprintf(f.hint, sizeof(f.hint),
		 "send fewer, larger tasks: chunksize= in Pool.map/imap/executor.map, or a batch "
		 "of items per task, so each runs 10 ms or more");
	return an_add_finding(a, &f);
}

/* Workers' start before their first task: an interpreter and its imports, each time. */
static int worker_startup(struct analysis *a, const struct an_pool *p, uint64_t run)
{
	const struct pool_view *v = &p->view;
	uint64_t sum = 0, longest = 0, imports = 0;
	struct finding f = { .kind = FINDING_WORKER_STARTUP };
	char b1[32], b2[32], b3[32];
	uint32_t w;

	for (w = 0; w < v->nworkers; w++) {
		const struct an_thread *t = hashmap__get(
			a->threads, (uint64_t)v->workers[w].pid << 32 | v->workers[w].tid);

		sum += v->workers[w].startup_ns;
		longest = v->workers[w].startup_ns > longest ? v->workers[w].startup_ns : longest;
		imports += t ? t->import_ns : 0;
	}
	if (!v->nworkers)
		return 0;
	f.share = share_of(sum, pool_capacity(v, run));
	f.start_ns = v->start_ns;
	f.end_ns = v->end_ns;
	snprintf(f.title, sizeof(f.title),
		 "%" PRIu32 " workers took %s each (mean) to start before their first task",
		 v->nworkers, an_fmt_ns(b1, sizeof(b1), sum / v->nworkers));
	snprintf(f.evidence, sizeof(f.evidence),
		 "%s in all, the slowest %s; %s of it in imports; %" PRIu32 " tasks, %.1f per "
		 "worker",
		 an_fmt_ns(b2, sizeof(b2), sum), an_fmt_ns(b3, sizeof(b3), longest),
		 an_fmt_ns(b1, sizeof(b1), imports), v->tasks, (double)v->tasks / v->nworkers);
	snprintf(f.where, sizeof(f.where), "the workers of process %" PRIu32 "'s pool", v->pid);
	snprintf(f.hint, sizeof(f.hint),
		 "keep workers for many tasks (no maxtasksperchild=1), use the fork start "
		 "method where it is safe, and import less at the top of the worker's module");
	return an_add_finding(a, &f);
}

/* Per process: what its threads would save if they could run Python at once. */
static int gil_contention(struct analysis *a, uint64_t run)
{
	struct finding f = { .kind = FINDING_GIL_CONTENTION };
	uint64_t best = 0, best_wait = 0;
	uint32_t best_pid = 0, best_threads = 0;
	size_t c1 = 0;
	uint64_t key;
	void *value;
	char b1[32], b2[32];

	while (hashmap__next(a->threads, &c1, &key, &value)) {
		const struct an_thread *t = value;
		uint64_t cpu = 0, max_cpu = 0, waited = 0, first = UINT64_MAX, last = 0;
		uint64_t ideal, saving;
		uint32_t n = 0;
		size_t c2 = 0;
		void *v2;

		if (t->tid != t->pid || !t->wait_ns[AN_WAIT_GIL])
			continue;
		while (hashmap__next(a->threads, &c2, &key, &v2)) {
			const struct an_thread *u = v2;
			uint64_t c = an_thread_cpu(u);

			if (u->pid != t->pid)
				continue;
			first = u->first_ns < first ? u->first_ns : first;
			last = u->last_ns > last ? u->last_ns : last;
			waited += u->wait_ns[AN_WAIT_GIL];
			if (c + u->wait_ns[AN_WAIT_GIL] < run / 100)
				continue;
			n++;
			cpu += c;
			max_cpu = c > max_cpu ? c : max_cpu;
		}
		if (n < 2)
			continue;
		ideal = cpu / (n < a->cpus ? n : a->cpus);
		ideal = ideal > max_cpu ? ideal : max_cpu;
		saving = last - first > ideal ? last - first - ideal : 0;
		saving = saving < waited / n ? saving : waited / n;
		if (saving > best) {
			best = saving;
			best_pid = t->pid;
			best_threads = n;
			best_wait = waited;
		}
	}
	if (!best)
		return 0;
	f.share = share_of(best, run);
	f.start_ns = a->kind_first[AN_WAIT_GIL];
	f.end_ns = a->kind_last[AN_WAIT_GIL];
	snprintf(f.title, sizeof(f.title),
		 "%" PRIu32 " threads of process %" PRIu32 " took turns at the GIL", best_threads,
		 best_pid);
	snprintf(f.evidence, sizeof(f.evidence),
		 "they waited %s for the GIL in all; running at once on %u CPUs would save "
		 "about %s",
		 an_fmt_ns(b1, sizeof(b1), best_wait), a->cpus, an_fmt_ns(b2, sizeof(b2), best));
	snprintf(f.where, sizeof(f.where), "the longest GIL wait: %s",
		 a->longest[AN_WAIT_GIL].stack);
	snprintf(f.hint, sizeof(f.hint),
		 "Python code in threads runs one at a time: use processes "
		 "(ProcessPoolExecutor, multiprocessing) for CPU-bound work, or code that "
		 "releases the GIL (NumPy, I/O)");
	return an_add_finding(a, &f);
}

/* Sums over the work threads. */
struct an_sums {
	uint64_t wait[AN_WAIT_COUNT], cpu, serial, serial_max;
	uint32_t serial_max_pid, serial_max_tid;
};

static void sum_work_threads(const struct analysis *a, struct an_sums *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;
	int i;

	memset(s, 0, sizeof(*s));
	while (hashmap__next(a->threads, &cursor, &key, &value)) {
		const struct an_thread *t = value;
		/* Its time on a CPU and its pipe writes: not the waits for the GIL or a CPU. */
		uint64_t serial = t->serial_gross_ns > t->serial_waits_ns
					  ? t->serial_gross_ns - t->serial_waits_ns
					  : 0;

		s->cpu += an_thread_cpu(t);
		/* Runnable is runnable, whatever the thread; the rest only where work is done. */
		s->wait[AN_WAIT_PREEMPTED] += t->wait_ns[AN_WAIT_PREEMPTED];
		if (serial > s->serial_max) {
			s->serial_max = serial;
			s->serial_max_pid = t->pid;
			s->serial_max_tid = t->tid;
		}
		s->serial += serial;
		if (!an_is_work_thread(t))
			continue;
		for (i = 0; i < AN_WAIT_COUNT; i++) {
			if (i != AN_WAIT_PREEMPTED)
				s->wait[i] += t->wait_ns[i];
		}
	}
}

/*
 * Runnable waits, split by whose they are: this run's threads wanted @demand CPUs on
 * average (on a CPU or runnable); with the machine to itself they would have got
 * min(demand, CPUs), so (demand - CPUs) x run of the waits are its own oversubscription,
 * and the rest other programs' (the profiler among them): cpu-starved. Said as one
 * finding, with a busy core beside an oversubscribed pool, it named the busy core's
 * waits oversubscription (42 %) above the pool's task-overhead (36 %).
 */
/* A finding of @ns of runnable waits: its share, times and where. */
static struct finding runnable_finding(const struct analysis *a, enum finding_kind kind,
				       uint64_t ns, uint64_t work)
{
	struct finding f = { .kind = kind, .share = share_of(ns, work) };

	f.start_ns = a->kind_first[AN_WAIT_PREEMPTED];
	f.end_ns = a->kind_last[AN_WAIT_PREEMPTED];
	snprintf(f.where, sizeof(f.where), "the longest such wait: %s",
		 a->longest[AN_WAIT_PREEMPTED].stack);
	return f;
}

/* The runnable waits that were this run's own oversubscription, of @waited (see above). */
static uint64_t own_runnable(const struct analysis *a, const struct an_sums *s, uint64_t run,
			     double *demand)
{
	uint64_t waited = s->wait[AN_WAIT_PREEMPTED];
	double over;

	*demand = run ? (double)(s->cpu + waited) / (double)run : 0;
	over = *demand > a->cpus ? (*demand - a->cpus) * (double)run : 0;
	return over < (double)waited ? (uint64_t)over : waited;
}

static int cpu_demand(struct analysis *a, const struct an_sums *s, uint64_t run, uint64_t work)
{
	uint64_t waited = s->wait[AN_WAIT_PREEMPTED];
	double demand;
	uint64_t own = own_runnable(a, s, run, &demand);
	struct finding f = runnable_finding(a, FINDING_OVERSUBSCRIPTION, own, work);
	char b1[32], b2[32], b3[32];
	int err;

	snprintf(f.title, sizeof(f.title),
		 "more runnable threads than CPUs: %.1f wanted %u CPUs on average", demand,
		 a->cpus);
	snprintf(f.evidence, sizeof(f.evidence),
		 "%s runnable, waiting for a CPU, of which %s for want of CPUs enough for this "
		 "run's own threads",
		 an_fmt_ns(b1, sizeof(b1), waited), an_fmt_ns(b2, sizeof(b2), own));
	snprintf(f.hint, sizeof(f.hint),
		 "as many CPU-bound workers as CPUs (os.process_cpu_count()); more do not finish "
		 "sooner, each task just takes longer");
	err = an_add_finding(a, &f);
	if (!err) {
		f = runnable_finding(a, FINDING_CPU_STARVED, waited - own, work);
		snprintf(f.title, sizeof(f.title),
			 "other programs%s took the CPUs: this run's threads waited %s to run",
			 a->tool_cpu_ns > (waited - own) / 4 ? " (the profiler among them)" : "",
			 an_fmt_ns(b1, sizeof(b1), waited - own));
		if (a->tool_cpu_ns)
			snprintf(
				f.evidence, sizeof(f.evidence),
				"it wanted %.1f of %u CPUs on average; the profiler itself used %s "
				"of CPU time (%.0f%% of one over the run)",
				demand, a->cpus, an_fmt_ns(b3, sizeof(b3), a->tool_cpu_ns),
				100.0 * share_of(a->tool_cpu_ns, run));
		else
			snprintf(f.evidence, sizeof(f.evidence),
				 "it wanted %.1f of %u CPUs on average", demand, a->cpus);
		snprintf(f.hint, sizeof(f.hint),
			 "the machine was busy with other work (the profiler counts: a lower -F "
			 "costs less): measure on a quieter one, or give this one CPUs of its own");
		err = an_add_finding(a, &f);
	}
	return err;
}

static int serialization(struct analysis *a, const struct an_sums *s, uint64_t run, uint64_t work)
{
	struct finding f = { .kind = FINDING_SERIALIZATION };
	double one = share_of(s->serial_max, run), all = share_of(s->serial, work);
	char b1[32], b2[32];

	f.share = one > all ? one : all;
	f.start_ns = a->first_ns;
	f.end_ns = a->last_ns;
	snprintf(f.title, sizeof(f.title),
		 "pickling and pipe transfer of tasks and results took %s",
		 an_fmt_ns(b1, sizeof(b1), s->serial));
	snprintf(f.evidence, sizeof(f.evidence),
		 "%s of it in one thread (%" PRIu32 "/%" PRIu32 "), on the path of every task "
		 "it handles",
		 an_fmt_ns(b2, sizeof(b2), s->serial_max), s->serial_max_pid, s->serial_max_tid);
	snprintf(f.where, sizeof(f.where),
		 "_ForkingPickler.dumps, SimpleQueue.get/put and Connection reads and writes");
	snprintf(f.hint, sizeof(f.hint),
		 "send less: a path or a key the worker reads itself rather than the data, "
		 "shared memory (multiprocessing.shared_memory), smaller results");
	return an_add_finding(a, &f);
}

static int waits(struct analysis *a, const struct an_sums *s, uint64_t work)
{
	static const struct {
		enum an_wait wait;
		enum finding_kind kind;
		const char *before, *after, *hint;
	} rules[] = {
		{ AN_WAIT_LOCK, FINDING_LOCK_CONTENTION, "threads waited ", " for locks",
		  "hold the lock for less (work outside `with lock:`), split it, or give each "
		  "worker its own data" },
		{ AN_WAIT_IO, FINDING_IO_WAIT, "the work waited ",
		  " for I/O (reads, writes, polls)",
		  "overlap the waits (threads or asyncio for I/O), read less or in larger pieces" },
		{ AN_WAIT_SLEEP, FINDING_SLEEP, "the work slept ", "",
		  "a sleep in a worker holds its CPU's share idle: wait for an event instead of "
		  "polling with sleep" },
	};
	size_t i;
	int err = 0;

	for (i = 0; i < sizeof(rules) / sizeof(*rules) && !err; i++) {
		struct finding f = { .kind = rules[i].kind };
		const struct an_longest *l = &a->longest[rules[i].wait];
		char b1[32], b2[32];

		f.share = share_of(s->wait[rules[i].wait], work);
		f.start_ns = a->kind_first[rules[i].wait];
		f.end_ns = a->kind_last[rules[i].wait];
		snprintf(f.title, sizeof(f.title), "%s%s%s", rules[i].before,
			 an_fmt_ns(b1, sizeof(b1), s->wait[rules[i].wait]), rules[i].after);
		snprintf(f.evidence, sizeof(f.evidence),
			 "the longest wait %s, in %" PRIu32 "/%" PRIu32,
			 an_fmt_ns(b2, sizeof(b2), l->ns), l->pid, l->tid);
		snprintf(f.where, sizeof(f.where), "%s", l->stack);
		snprintf(f.hint, sizeof(f.hint), "%s", rules[i].hint);
		err = an_add_finding(a, &f);
	}
	return err;
}

static int by_share(const void *x, const void *y)
{
	const struct finding *a = x, *b = y;

	if (a->share != b->share)
		return a->share > b->share ? -1 : 1;
	return a->kind < b->kind ? -1 : a->kind > b->kind;
}

int an_find_causes(struct analysis *a)
{
	uint64_t run = a->last_ns > a->first_ns ? a->last_ns - a->first_ns : 0;
	uint64_t work = an_work_time(a);
	struct an_sums sums;
	size_t i;
	int err = 0;

	if (!a->cpus) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);

		a->cpus = n > 0 ? (unsigned)n : 1;
	}
	free(a->findings);
	a->findings = NULL;
	a->nfindings = 0;
	if (!run || !work)
		return 0;
	sum_work_threads(a, &sums);
	for (i = 0; i < a->npools && !err; i++) {
		err = imbalance(a, &a->pools[i], run);
		if (!err)
			err = task_overhead(a, &a->pools[i], run);
		if (!err)
			err = worker_startup(a, &a->pools[i], run);
	}
	if (!err)
		err = gil_contention(a, run);
	if (!err)
		err = cpu_demand(a, &sums, run, work);
	if (!err)
		err = serialization(a, &sums, run, work);
	if (!err)
		err = waits(a, &sums, work);
	if (a->nfindings)
		qsort(a->findings, a->nfindings, sizeof(*a->findings), by_share);
	return err;
}
