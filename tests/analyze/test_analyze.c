/*
 * Tests of the findings: small runs fed by hand, slice by slice as the trace feeds the
 * report, each on both sides of its rule's threshold; the JSON and terminal outputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../analyze/analyze.h"
#include "../../trace/trace.h"

#define MS 1000000ULL
#define US 1000ULL

static void open_at(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth,
		    const char *name)
{
	assert_int_equal(analysis__open(a, pid, tid, depth, name, "/app/x.py"), 0);
}

static void close_at(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth,
		     const char *name, uint64_t start, uint64_t end, bool off_cpu)
{
	struct trace_summary_slice sl = {
		.pid = pid,
		.tid = tid,
		.depth = depth,
		.name = name,
		.off_cpu = off_cpu,
		.start_ns = start,
		.end_ns = end,
		.file = "/app/x.py",
		.line = 7,
	};

	assert_int_equal(analysis__close(a, &sl, name), 0);
}

/* A leaf: opened and closed. */
static void leaf(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth, const char *name,
		 uint64_t start, uint64_t end, bool off_cpu)
{
	open_at(a, pid, tid, depth, name);
	close_at(a, pid, tid, depth, name, start, end, off_cpu);
}

static void marker(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth, const char *name,
		   int64_t task, uint64_t at)
{
	struct trace_summary_slice sl = {
		.pid = pid,
		.tid = tid,
		.depth = depth,
		.name = name,
		.message = true,
		.job = 0,
		.task = task,
		.start_ns = at,
		.end_ns = at + US,
	};

	assert_int_equal(analysis__open(a, pid, tid, depth, name, NULL), 0);
	assert_int_equal(analysis__close(a, &sl, name), 0);
}

static const struct finding *find(struct analysis *a, enum finding_kind kind, size_t *rank)
{
	const struct finding *f;
	size_t n = analysis__findings(a, &f), i;

	for (i = 0; i < n; i++) {
		if (f[i].kind == kind) {
			if (rank)
				*rank = i;
			return &f[i];
		}
	}
	return NULL;
}

/*
 * A Pool run by hand: the parent (pid 1) sends every task at 0; worker @w of 2 runs
 * tasks in turn, each from @runs (ms), with @gap_us between them; a task's frames: the
 * worker loop at depth 0, the job at 1 (a compute leaf) and the markers at 1.
 */
static void pool_run(struct analysis *a, const uint64_t *runs_us, size_t ntasks, uint64_t gap_us)
{
	uint64_t at[2] = { 1 * MS, 1 * MS }, worker_start = 0;
	size_t i;

	leaf(a, 1, 1, 0, "main", 0, 1 * MS, false);
	for (i = 0; i < ntasks; i++)
		marker(a, 1, 2, 0, "pool task sent", (int64_t)i, 1 * MS);
	/* Each worker alive from 0: its loop slice covers all it does. */
	for (int w = 0; w < 2; w++)
		open_at(a, 10 + w, 10 + w, 0, "worker");
	for (i = 0; i < ntasks; i++) {
		int w = at[0] <= at[1] ? 0 : 1;
		uint32_t pid = 10 + w;
		uint64_t t = at[w];

		marker(a, pid, pid, 1, "pool task received", (int64_t)i, t);
		leaf(a, pid, pid, 1, "job", t + US, t + US + runs_us[i] * US, false);
		t += runs_us[i] * US + 2 * US;
		marker(a, pid, pid, 1, "pool result sent", (int64_t)i, t);
		marker(a, 1, 3, 0, "pool result received", (int64_t)i, t + 10 * US);
		/* Waiting for the next task: idle, not a cause. */
		leaf(a, pid, pid, 1, "read", t + US, t + US + gap_us * US, true);
		at[w] = t + US + gap_us * US;
	}
	/* Workers live until the pool ends, as a Pool's do. */
	for (int w = 0; w < 2; w++) {
		close_at(a, 10 + w, 10 + w, 0, "worker", worker_start, at[w], false);
		leaf(a, 10 + w, 10 + w, 0, "exit", at[w], (at[0] > at[1] ? at[0] : at[1]) + US,
		     false);
	}
	/* The parent waits for results till the end: under an idle frame. */
	open_at(a, 1, 1, 0, "ApplyResult.wait");
	leaf(a, 1, 1, 1, "lock wait (futex)", 1 * MS, (at[0] > at[1] ? at[0] : at[1]), true);
	close_at(a, 1, 1, 0, "ApplyResult.wait", 1 * MS, (at[0] > at[1] ? at[0] : at[1]), false);
}

static void test_analyze__imbalance(void **state)
{
	/* Six tasks of 100 ms, the last of 800: one worker runs it alone. */
	static const uint64_t straggler[] = {
		100000, 100000, 100000, 100000, 100000, 100000, 800000
	};
	static const uint64_t even[] = { 100000, 100000, 100000, 100000, 100000, 100000 };
	struct analysis *a = analysis__new();
	const struct finding *f;
	const struct pool_view *v;
	size_t rank = 99;

	(void)state;
	analysis__cpus(a, 2);
	pool_run(a, straggler, 7, 50);
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_IMBALANCE, &rank);
	assert_non_null(f);
	assert_int_equal(rank, 0);
	/* ~700 ms of one worker idle over a 2 x 1.1 s run */
	assert_true(f->share > 0.25 && f->share < 0.40);
	assert_non_null(strstr(f->where, "job (/app/x.py:7), job 0 task 6"));
	assert_int_equal(analysis__npools(a), 1);
	v = analysis__pool(a, 0);
	assert_int_equal(v->tasks, 7);
	assert_int_equal(v->done, 7);
	assert_int_equal(v->nworkers, 2);
	assert_int_equal(v->pid, 1);
	assert_true(v->run.max >= 800 * MS && v->run.p50 < 101 * MS);
	/* The parent's wait for results and the workers' for tasks: no cause of their own. */
	assert_null(find(a, FINDING_LOCK_CONTENTION, NULL));
	assert_null(find(a, FINDING_IO_WAIT, NULL));
	analysis__free(a);

	/* Even tasks, even count: nothing to say. */
	a = analysis__new();
	analysis__cpus(a, 2);
	pool_run(a, even, 6, 50);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_IMBALANCE, NULL));
	assert_int_equal(analysis__findings(a, &f), 0);
	analysis__free(a);
}

/*
 * A ThreadPoolExecutor run by hand: 4 worker threads of pid 1 (tids 2-5) each run
 * _WorkItem.run > job for their tasks (@runs_us), a lock wait for the next task between
 * them; no markers. Returns when the last task ended.
 */
static uint64_t thread_pool_run(struct analysis *a, const uint64_t *runs_us, size_t ntasks)
{
	uint64_t at[4] = { MS, MS, MS, MS }, end = 0;
	size_t i;
	int t;

	for (t = 0; t < 4; t++)
		open_at(a, 1, 2 + (uint32_t)t, 0, "_worker");
	for (i = 0; i < ntasks; i++) {
		int w = 0;
		uint32_t tid;

		for (t = 1; t < 4; t++)
			w = at[t] < at[w] ? t : w;
		tid = 2 + (uint32_t)w;
		open_at(a, 1, tid, 1, "_WorkItem.run");
		leaf(a, 1, tid, 2, "job", at[w] + US, at[w] + US + runs_us[i] * US, false);
		/* set_result, in the pool's module: not the job */
		open_at(a, 1, tid, 2, "Future.set_result");
		{
			struct trace_summary_slice sl = {
				.pid = 1,
				.tid = tid,
				.depth = 2,
				.name = "Future.set_result",
				.file = "/usr/lib/python3.14/concurrent/futures/_base.py",
				.start_ns = at[w] + US + runs_us[i] * US,
				.end_ns = at[w] + 2 * US + runs_us[i] * US,
			};

			assert_int_equal(analysis__close(a, &sl, sl.name), 0);
		}
		/* The run ends with its last frame: parents first, as the trace closes them. */
		close_at(a, 1, tid, 1, "_WorkItem.run", at[w], at[w] + 2 * US + runs_us[i] * US,
			 false);
		at[w] += 2 * US + runs_us[i] * US;
		leaf(a, 1, tid, 1, "lock wait (futex)", at[w], at[w] + 20 * US, true);
		at[w] += 20 * US;
		end = at[w] > end ? at[w] : end;
	}
	for (t = 0; t < 4; t++) {
		leaf(a, 1, 2 + (uint32_t)t, 1, "lock wait (futex)", at[t], end, true);
		close_at(a, 1, 2 + (uint32_t)t, 0, "_worker", 0, end, false);
	}
	return end;
}

static void test_analyze__thread_pool(void **state)
{
	/* Seven tasks of 100 ms, the eighth of 800 ms: three threads idle while it runs. */
	static const uint64_t straggler[] = { 100000, 100000, 100000, 100000,
					      100000, 100000, 100000, 800000 };
	static const uint64_t even[] = { 100000, 100000, 100000, 100000,
					 100000, 100000, 100000, 100000 };
	struct analysis *a = analysis__new();
	const struct finding *f;
	const struct pool_view *v;
	size_t rank = 99;

	(void)state;
	analysis__cpus(a, 4);
	thread_pool_run(a, straggler, 8);
	assert_int_equal(analysis__finish(a), 0);
	assert_int_equal(analysis__npools(a), 1);
	v = analysis__pool(a, 0);
	assert_true(v->threads);
	assert_int_equal(v->tasks, 8);
	assert_int_equal(v->done, 8);
	assert_int_equal(v->nworkers, 4);
	assert_true(v->run.max >= 800 * MS && v->run.p50 < 101 * MS);
	f = find(a, FINDING_IMBALANCE, &rank);
	assert_non_null(f);
	assert_int_equal(rank, 0);
	/* The job by its function, not the pool's set_result, and by its thread. */
	assert_non_null(strstr(f->where, "job (/app/x.py:7), task 2 of thread "));
	/* Waits for the next task are idle: no lock contention. */
	assert_null(find(a, FINDING_LOCK_CONTENTION, NULL));
	analysis__free(a);

	a = analysis__new();
	analysis__cpus(a, 4);
	thread_pool_run(a, even, 8);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_IMBALANCE, NULL));
	assert_null(find(a, FINDING_LOCK_CONTENTION, NULL));
	analysis__free(a);
}

static void test_analyze__task_overhead(void **state)
{
	static uint64_t tiny[400], fair[400];
	struct analysis *a = analysis__new();
	const struct finding *f;
	size_t i, rank = 99;

	(void)state;
	for (i = 0; i < 400; i++) {
		tiny[i] = 10;	/* 10 us of work, 90 us to hand over */
		fair[i] = 2000; /* 2 ms of work */
	}
	analysis__cpus(a, 2);
	pool_run(a, tiny, 400, 90);
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_TASK_OVERHEAD, &rank);
	assert_non_null(f);
	assert_int_equal(rank, 0);
	assert_true(f->share > 0.5);
	analysis__free(a);

	a = analysis__new();
	analysis__cpus(a, 2);
	pool_run(a, fair, 400, 90);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_TASK_OVERHEAD, NULL));
	/* Fewer than 100 tasks are never called overhead. */
	analysis__free(a);
	a = analysis__new();
	analysis__cpus(a, 2);
	pool_run(a, tiny, 60, 90);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_TASK_OVERHEAD, NULL));
	analysis__free(a);
}

/* @n threads of process 5 compute for 1 s of wall each, waiting @gil_ms of it for the GIL. */
static void threads_run(struct analysis *a, int n, uint64_t gil_ms)
{
	int i;

	for (i = 0; i < n; i++) {
		uint32_t tid = 5 + (uint32_t)i;

		open_at(a, 5, tid, 0, "crunch");
		leaf(a, 5, tid, 1, "GIL wait", 0, gil_ms * MS, true);
		leaf(a, 5, tid, 1, "crunch.<locals>.<genexpr>", gil_ms * MS, 1000 * MS, false);
		close_at(a, 5, tid, 0, "crunch", 0, 1000 * MS, false);
	}
}

static void test_analyze__gil_contention(void **state)
{
	struct analysis *a = analysis__new();
	const struct finding *f;
	size_t rank = 99;

	(void)state;
	analysis__cpus(a, 2);
	threads_run(a, 4, 750);
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_GIL_CONTENTION, &rank);
	assert_non_null(f);
	assert_int_equal(rank, 0);
	/* 1 s of CPU on 2 CPUs: 0.5 s of the 1 s run saved at most */
	assert_true(f->share > 0.4 && f->share <= 0.5);
	assert_non_null(strstr(f->title, "4 threads"));
	analysis__free(a);

	/* Short GIL waits of threads that mostly ran: nothing to save. */
	a = analysis__new();
	analysis__cpus(a, 4);
	threads_run(a, 2, 20);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_GIL_CONTENTION, NULL));
	analysis__free(a);
}

/* A thread's lock waits under @frame: a cause, unless @frame is a wait for others. */
static void lock_run(struct analysis *a, const char *frame)
{
	open_at(a, 7, 7, 0, "main");
	open_at(a, 7, 7, 1, frame);
	leaf(a, 7, 7, 2, "lock wait (futex)", 0, 500 * MS, true);
	close_at(a, 7, 7, 1, frame, 0, 500 * MS, false);
	leaf(a, 7, 7, 1, "compute", 500 * MS, 1000 * MS, false);
	close_at(a, 7, 7, 0, "main", 0, 1000 * MS, false);
}

static void test_analyze__lock_and_idle(void **state)
{
	struct analysis *a = analysis__new();
	const struct finding *f;

	(void)state;
	analysis__cpus(a, 2);
	lock_run(a, "update_totals");
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_LOCK_CONTENTION, NULL);
	assert_non_null(f);
	assert_true(f->share > 0.45 && f->share < 0.55);
	assert_non_null(strstr(f->where, "main > update_totals"));
	analysis__free(a);

	/* Waiting on a Condition is waiting for another thread's work: idle. */
	a = analysis__new();
	analysis__cpus(a, 2);
	lock_run(a, "Condition.wait");
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_LOCK_CONTENTION, NULL));
	analysis__free(a);
}

/*
 * Pickling: the outermost frame's time less the waits in it but pipe writes, in the
 * order a live feed gives a frame and a wait that close at one instant: parent first.
 */
static void test_analyze__serialization(void **state)
{
	struct analysis *a = analysis__new();
	const struct finding *f;

	(void)state;
	analysis__cpus(a, 2);
	open_at(a, 8, 8, 0, "main");
	open_at(a, 8, 8, 1, "SimpleQueue.put");
	open_at(a, 8, 8, 2, "_ForkingPickler.dumps");
	close_at(a, 8, 8, 2, "_ForkingPickler.dumps", 0, 300 * MS, false);
	open_at(a, 8, 8, 2, "_ConnectionBase.send_bytes");
	open_at(a, 8, 8, 3, "Connection._send");
	/* The read wait ends with its frames: they close first, as a live feed has it. */
	close_at(a, 8, 8, 2, "_ConnectionBase.send_bytes", 300 * MS, 700 * MS, false);
	close_at(a, 8, 8, 1, "SimpleQueue.put", 0, 700 * MS, false);
	leaf(a, 8, 8, 3, "write", 300 * MS, 400 * MS, true);
	leaf(a, 8, 8, 3, "read", 400 * MS, 700 * MS, true);
	leaf(a, 8, 8, 1, "compute", 700 * MS, 1000 * MS, false);
	close_at(a, 8, 8, 0, "main", 0, 1000 * MS, false);
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_SERIALIZATION, NULL);
	assert_non_null(f);
	/* 700 ms less the 300 ms read: 400 ms of the 1 s */
	assert_true(f->share > 0.39 && f->share < 0.41);
	analysis__free(a);
}

/* @n threads computing 0.5 s and runnable 0.5 s of a 1 s run. */
static void runnable_run(struct analysis *a, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		uint32_t tid = 20 + (uint32_t)i;

		open_at(a, 20, tid, 0, "job");
		leaf(a, 20, tid, 1, "preempted (runnable, waiting for a CPU)", 0, 500 * MS, true);
		leaf(a, 20, tid, 1, "compute", 500 * MS, 1000 * MS, false);
		close_at(a, 20, tid, 0, "job", 0, 1000 * MS, false);
	}
}

/* Runnable waits split: this run's own want of CPUs, and the rest other programs'. */
static void test_analyze__oversubscribed_or_starved(void **state)
{
	struct analysis *a = analysis__new();
	const struct finding *f;

	(void)state;
	/* 4 threads wanting 4 CPUs of 2: every wait is their own. */
	analysis__cpus(a, 2);
	runnable_run(a, 4);
	assert_int_equal(analysis__finish(a), 0);
	f = find(a, FINDING_OVERSUBSCRIPTION, NULL);
	assert_non_null(f);
	assert_true(f->share > 0.45 && f->share < 0.55);
	assert_null(find(a, FINDING_CPU_STARVED, NULL));
	analysis__free(a);
	/* 1 thread wanting 1 CPU of 2 and waiting: another program's doing. */
	a = analysis__new();
	analysis__cpus(a, 2);
	runnable_run(a, 1);
	assert_int_equal(analysis__finish(a), 0);
	assert_null(find(a, FINDING_OVERSUBSCRIPTION, NULL));
	f = find(a, FINDING_CPU_STARVED, NULL);
	assert_non_null(f);
	assert_true(f->share > 0.45 && f->share < 0.55);
	analysis__free(a);
}

/* Target names reach the outputs escaped: for a terminal, and as JSON. */
static void test_analyze__outputs_escape(void **state)
{
	struct analysis *a = analysis__new();
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	analysis__cpus(a, 2);
	lock_run(a, "evil\x1b]0;owned\x07\n\"x\"");
	assert_int_equal(analysis__finish(a), 0);
	f = open_memstream(&text, &len);
	analysis__print(a, f, 5);
	fclose(f);
	assert_null(strchr(text, '\x1b'));
	assert_null(strchr(text, '\x07'));
	assert_non_null(strstr(text, "lock-contention"));
	assert_non_null(strstr(text, "evil\\x1b]0;owned\\x07\\x0a"));
	free(text);
	f = open_memstream(&text, &len);
	analysis__print_json(a, f);
	fclose(f);
	assert_non_null(strstr(text, "{\"findings\": [{\"kind\": \"lock-contention\""));
	assert_non_null(strstr(text, "evil\\u001b]0;owned\\u0007\\n\\\"x\\\""));
	assert_non_null(strstr(text, "\"pools\": []"));
	free(text);
	analysis__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_analyze__imbalance),
		cmocka_unit_test(test_analyze__thread_pool),
		cmocka_unit_test(test_analyze__task_overhead),
		cmocka_unit_test(test_analyze__gil_contention),
		cmocka_unit_test(test_analyze__lock_and_idle),
		cmocka_unit_test(test_analyze__serialization),
		cmocka_unit_test(test_analyze__oversubscribed_or_starved),
		cmocka_unit_test(test_analyze__outputs_escape),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
