/*
 * The analysis's feed: per thread, its time on a CPU and its waits sorted by what they
 * were (by reason, and by where: a worker between tasks or a parent waiting for results
 * is idle, not slowed); time in pickling and pipe transfer; imports before the first
 * task; and every pool task's four moments (sent, taken, result sent, result received)
 * from its markers.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "../trace/trace.h"
#include "internal.h"

/*
 * Frames under which a wait is a wait for work or for others, not a cause: a pool's
 * helper threads, a parent collecting results, a thread joining another. Qualified names
 * as CPython 3.11+ give them, and the bare names 3.8-3.10 give where those are not as
 * common as "get" or "wait".
 */
static const char *const idle_frames[] = {
	"Pool._handle_workers",
	"Pool._handle_tasks",
	"Pool._handle_results",
	"ApplyResult.wait",
	"ApplyResult.get",
	"IMapIterator.next",
	"Pool.join",
	"Process.join",
	"Popen.wait",
	"Thread.join",
	"Condition.wait",
	"Event.wait",
	"Future.result",
	"as_completed",
	"result_iterator", /* Executor.map's results, waited for */
	"Executor.map.<locals>.result_iterator",
	"_ExecutorManagerThread.run",
	"wait_result_broken_or_wakeup",
	"Barrier.wait",
	"BaseProcess.join",
	"_wait_for_tstate_lock",
	"_handle_workers",
	"_handle_tasks",
	"_handle_results",
};

/* Pickling and pipe transfer of what a pool sends (the C pickler runs under these). */
static const char *const serial_frames[] = {
	"_ForkingPickler.dumps",
	"ForkingPickler.dumps",
	"_ConnectionBase.send_bytes",
	"_ConnectionBase.recv_bytes",
	"_ConnectionBase.send",
	"_ConnectionBase.recv",
	"Connection._send_bytes",
	"Connection._recv_bytes",
	"Connection._send",
	"Connection._recv",
	"SimpleQueue.put",
	"SimpleQueue.get",
	"Queue._feed",
	"_SafeQueue._on_queue_feeder_error",
	"dumps",
	"send_bytes",
	"recv_bytes",
	"_send_bytes",
	"_recv_bytes",
	"_send",
	"_recv",
	"_feed",
};

static bool named(const char *name, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!strcmp(name, list[i]))
			return true;
	}
	return false;
}

/*
 * A name's flags, looked up once per name: the report interns names, so a pointer is a
 * name (a slice opens with each sample that changes the stack, a name is met thousands
 * of times).
 */
static uint8_t frame_flags(struct analysis *a, const char *name)
{
	uint64_t key = (uint64_t)(uintptr_t)name;
	void *known = hashmap__get(a->name_flags, key);
	uint8_t flags;

	if (known)
		return (uint8_t)((uintptr_t)known - 1);
	flags = (named(name, idle_frames, sizeof(idle_frames) / sizeof(*idle_frames))
			 ? AN_FRAME_IDLE
			 : 0) |
		(named(name, serial_frames, sizeof(serial_frames) / sizeof(*serial_frames))
			 ? AN_FRAME_SERIAL
			 : 0) |
		(!strcmp(name, "_find_and_load") ? AN_FRAME_IMPORT : 0);
	/* Stored as flags + 1: a map holds no NULL. Full or out of memory: asked again. */
	if (hashmap__count(a->name_flags) < AN_MAX_NAMES)
		(void)hashmap__set(a->name_flags, key, (void *)(uintptr_t)(flags + 1u));
	return flags;
}

static void free_thread(void *value)
{
	struct an_thread *t = value;

	free(t->names);
	free(t->flags);
	free(t);
}

struct analysis *analysis__new(void)
{
	struct analysis *a = calloc(1, sizeof(*a));

	if (!a)
		return NULL;
	a->threads = hashmap__new();
	a->tasks = hashmap__new();
	a->name_flags = hashmap__new();
	a->first_ns = UINT64_MAX;
	if (!a->threads || !a->tasks || !a->name_flags) {
		analysis__free(a);
		errno = ENOMEM;
		return NULL;
	}
	return a;
}

void analysis__free(struct analysis *a)
{
	if (!a)
		return;
	hashmap__free_all(a->threads, free_thread);
	hashmap__free_all(a->tasks, free);
	hashmap__free(a->name_flags);
	while (a->npools)
		free(a->pools[--a->npools].tasks);
	free(a->findings);
	free(a->pools);
	free(a);
}

void analysis__cpus(struct analysis *a, unsigned cpus)
{
	a->cpus = cpus;
	a->finished = false;
}

void analysis__tool_cpu(struct analysis *a, uint64_t ns)
{
	a->tool_cpu_ns = ns;
	a->finished = false;
}

static struct an_thread *find_thread(struct analysis *a, uint32_t pid, uint32_t tid)
{
	uint64_t key = (uint64_t)pid << 32 | tid;
	struct an_thread *t = hashmap__get(a->threads, key);

	if (t)
		return t;
	if (hashmap__count(a->threads) >= AN_MAX_THREADS) {
		a->dropped = true;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->first_ns = UINT64_MAX;
	if (hashmap__set(a->threads, key, t)) {
		free(t);
		return NULL;
	}
	return t;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t len = strlen(s), n = strlen(suffix);

	return len >= n && !strcmp(s + len - n, suffix);
}

/*
 * The loops that wait for requests for the whole run: multiprocessing's own helper
 * processes (the forkserver, 3.14's default, and the resource tracker), and a
 * ThreadPoolExecutor's worker threads before their first task (between tasks a worker
 * is idle anyway).
 */
static bool helper_loop(const char *name, const char *file)
{
	if (!file)
		return false;
	if (!strcmp(name, "main"))
		return ends_with(file, "multiprocessing/forkserver.py") ||
		       ends_with(file, "multiprocessing/resource_tracker.py");
	return !strcmp(name, "_worker") && ends_with(file, "concurrent/futures/thread.py");
}

/*
 * A ThreadPoolExecutor's task: a worker thread's _WorkItem.run (3.11+'s qualified name;
 * 3.8-3.10 say "run", in concurrent/futures/thread.py). No marker says when it was
 * submitted or its result taken: its run alone is known, from its slice.
 */
static bool work_item(const char *name, const char *file)
{
	return !strcmp(name, "_WorkItem.run") ||
	       (!strcmp(name, "run") && file && ends_with(file, "concurrent/futures/thread.py"));
}

static struct an_task *find_task(struct analysis *a, bool executor, int64_t job, int64_t task);

/* Whether @sl comes after thread task @k ended (a process pool's task ends otherwise). */
static bool task_over(const struct an_task *k, const struct trace_summary_slice *sl)
{
	return k->threads && k->result_sent_ns && sl->start_ns >= k->result_sent_ns;
}

static int begin_work_item(struct analysis *a, struct an_thread *t, uint32_t depth)
{
	struct an_task *k = find_task(a, false, -1 - (int64_t)t->tid, ++t->thread_tasks);

	if (!k)
		return a->dropped ? 0 : -ENOMEM;
	k->threads = true;
	k->pool_pid = k->worker_pid = t->pid;
	k->worker_tid = t->tid;
	k->loop_depth = depth; /* the job's frames are under it */
	t->task = k;
	t->took_task = true;
	return 0;
}

int analysis__open(struct analysis *a, uint32_t pid, uint32_t tid, uint32_t depth, const char *name,
		   const char *file)
{
	struct an_thread *t = find_thread(a, pid, tid);

	if (!t)
		return a->dropped ? 0 : -ENOMEM;
	if (depth >= AN_MAX_DEPTH)
		return 0;
	if (depth >= t->cap) {
		uint32_t cap = t->cap ? t->cap : 32;
		const char **names;
		uint8_t *flags;

		while (cap <= depth)
			cap *= 2;
		names = realloc(t->names, cap * sizeof(*names));
		if (!names)
			return -ENOMEM;
		t->names = names;
		flags = realloc(t->flags, cap);
		if (!flags)
			return -ENOMEM;
		t->flags = flags;
		t->cap = cap;
	}
	t->names[depth] = name;
	t->flags[depth] = frame_flags(a, name) | (helper_loop(name, file) ? AN_FRAME_IDLE : 0);
	if (work_item(name, file) && (!t->task || t->task->result_sent_ns))
		return begin_work_item(a, t, depth);
	if (!a->pool_loops && file &&
	    ((!strcmp(name, "worker") && strstr(file, "multiprocessing/pool.py")) ||
	     (!strcmp(name, "_process_worker") && strstr(file, "concurrent/futures/process.py"))))
		a->pool_loops = true;
	return 0;
}

/* Whether any open frame above @depth has @flag. */
static bool under(const struct an_thread *t, uint32_t depth, uint8_t flag)
{
	uint32_t d;

	for (d = 0; d < depth && d < t->cap; d++) {
		if (t->flags[d] & flag)
			return true;
	}
	return false;
}

static enum an_wait classify(const struct an_thread *t, const struct trace_summary_slice *sl)
{
	const char *reason = sl->name;

	if (!strncmp(reason, "holding the GIL: ", 17))
		reason += 17; /* a wait of its own while others wait for it */
	if (!strcmp(reason, "GIL wait"))
		return AN_WAIT_GIL;
	if (!strncmp(reason, "preempted", 9))
		return AN_WAIT_PREEMPTED;
	/* A worker between tasks waits for work; in a task, for what the task waits for. */
	if (t->took_task ? !t->task || task_over(t->task, sl) : under(t, sl->depth, AN_FRAME_IDLE))
		return AN_WAIT_IDLE;
	if (under(t, sl->depth, AN_FRAME_SERIAL))
		return !strcmp(reason, "write") ? AN_WAIT_SERIAL : AN_WAIT_IDLE;
	if (!strncmp(reason, "lock wait", 9))
		return AN_WAIT_LOCK;
	if (!strcmp(reason, "sleep"))
		return AN_WAIT_SLEEP;
	if (!strcmp(reason, "read") || !strcmp(reason, "write") || !strcmp(reason, "poll") ||
	    !strncmp(reason, "disk", 4) || !strcmp(reason, "blocked") ||
	    !strcmp(reason, "accept") || !strcmp(reason, "connect"))
		return AN_WAIT_IO;
	return AN_WAIT_OTHER;
}

static void note_longest(struct analysis *a, const struct an_thread *t,
			 const struct trace_summary_slice *sl, enum an_wait kind)
{
	struct an_longest *l = &a->longest[kind];
	uint64_t ns = sl->end_ns - sl->start_ns;
	uint32_t depth = sl->depth < t->cap ? sl->depth : t->cap, d, from;
	size_t len = 0;

	if (ns < l->ns || (ns == l->ns && sl->start_ns >= l->start_ns))
		return;
	*l = (struct an_longest){
		.ns = ns, .start_ns = sl->start_ns, .pid = t->pid, .tid = t->tid
	};
	from = depth > 4 ? depth - 4 : 0;
	if (from)
		len = (size_t)snprintf(l->stack, sizeof(l->stack), "... > ");
	/* Raw: each output escapes it for where it goes. */
	for (d = from; d < depth && len < sizeof(l->stack); d++)
		len += (size_t)snprintf(l->stack + len, sizeof(l->stack) - len, "%.48s%s",
					t->names[d], d + 1 < depth ? " > " : "");
}

static uint64_t task_key(bool executor, int64_t job, int64_t task)
{
	return ((uint64_t)job * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)task << 1) ^ executor;
}

/* The task of a marker: one per (kind, job, task); NULL when the table is full. */
static struct an_task *find_task(struct analysis *a, bool executor, int64_t job, int64_t task)
{
	uint64_t key = task_key(executor, job, task);
	struct an_task *k;

	while ((k = hashmap__get(a->tasks, key)) &&
	       (k->executor != executor || k->job != job || k->task != task))
		key++; /* another task with this key: probe on */
	if (k)
		return k;
	if (hashmap__count(a->tasks) >= AN_MAX_TASKS) {
		a->dropped = true;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	*k = (struct an_task){
		.executor = executor, .job = job, .task = task, .fn_depth = AN_MAX_DEPTH
	};
	if (hashmap__set(a->tasks, key, k)) {
		free(k);
		return NULL;
	}
	return k;
}

static int message(struct analysis *a, struct an_thread *t, const struct trace_summary_slice *sl)
{
	bool executor = !strncmp(sl->name, "executor ", 9);
	const char *what;
	bool result, sent;
	struct an_task *k;

	/* The prefix first: a trace's name can be anything ("t": past its end, found by
	 * fuzz_json_read). */
	if (strncmp(sl->name, "pool ", 5) && !executor)
		return 0;
	what = sl->name + (executor ? 9 : 5); /* "task sent", "result received" */
	result = !strncmp(what, "result", 6);
	sent = strstr(what, " sent") != NULL;
	k = find_task(a, executor, sl->job, sl->task);
	if (!k)
		return a->dropped ? 0 : -ENOMEM;
	if (!result && sent) {
		k->sent_ns = sl->start_ns;
		k->pool_pid = t->pid;
	} else if (!result) {
		uint32_t d = sl->depth < t->cap ? sl->depth : t->cap;

		/* The job's frames are under the worker's loop, the innermost one open. */
		while (d-- > 0) {
			if (!strcmp(t->names[d], "worker") ||
			    !strcmp(t->names[d], "_process_worker"))
				break;
		}
		k->loop_depth = d < t->cap ? d : 0;
		k->received_ns = sl->start_ns;
		k->worker_pid = t->pid;
		t->task = k;
		t->took_task = true;
	} else if (sent) {
		k->result_sent_ns = sl->start_ns;
		if (!k->worker_pid)
			k->worker_pid = t->pid;
		if (t->task == k)
			t->task = NULL;
	} else {
		k->result_received_ns = sl->start_ns;
		if (!k->pool_pid)
			k->pool_pid = t->pid;
	}
	return 0;
}

/* Names of the pool's own frames between a worker's loop and the job's function. */
static bool pool_frame(const char *name)
{
	return !strcmp(name, "mapstar") || !strcmp(name, "starmapstar") ||
	       !strcmp(name, "_helper_reraises_exception") || !strcmp(name, "_process_chunk") ||
	       !strcmp(name, "<listcomp>") || !strcmp(name, "partial") ||
	       !strcmp(name, "WorkerContext.run"); /* 3.14's thread pools: runs the task */
}

/* The job's function: the shallowest of the task's own frames (@flags: its AN_FRAME_*). */
static void note_task_frame(struct an_task *k, const struct trace_summary_slice *sl,
			    const char *name, uint8_t flags)
{
	/* The pools' own modules run no job: their frames between the loop and the job are
	 * the pool's (3.14's thread pool runs a task through WorkerContext.run, then sets
	 * its future's result one level up). */
	if (sl->depth >= k->fn_depth || sl->depth <= k->loop_depth ||
	    sl->start_ns < k->received_ns || pool_frame(name) || flags ||
	    (sl->file &&
	     (strstr(sl->file, "/concurrent/futures/") || strstr(sl->file, "/multiprocessing/"))))
		return;
	k->fn = name;
	k->fn_depth = sl->depth;
	k->fn_line = sl->line;
	snprintf(k->fn_file, sizeof(k->fn_file), "%s", sl->file ? sl->file : "");
}

int analysis__close(struct analysis *a, const struct trace_summary_slice *sl, const char *name)
{
	struct an_thread *t = find_thread(a, sl->pid, sl->tid);
	uint64_t ns = sl->end_ns - sl->start_ns;
	enum an_wait kind;

	if (!t)
		return a->dropped ? 0 : -ENOMEM;
	if (sl->end_ns <= sl->start_ns)
		return 0;
	a->finished = false;
	t->first_ns = sl->start_ns < t->first_ns ? sl->start_ns : t->first_ns;
	t->last_ns = sl->end_ns > t->last_ns ? sl->end_ns : t->last_ns;
	a->first_ns = sl->start_ns < a->first_ns ? sl->start_ns : a->first_ns;
	a->last_ns = sl->end_ns > a->last_ns ? sl->end_ns : a->last_ns;
	if (!sl->depth)
		t->covered_ns += ns;
	if (sl->message)
		return message(a, t, sl);
	if (sl->no_gil)
		return 0;
	if (!sl->off_cpu) {
		/* As its open set them: nothing opens at its depth before it closes. */
		uint8_t flags = sl->depth < t->cap ? t->flags[sl->depth] : 0;

		if (t->task && t->task->threads && sl->depth == t->task->loop_depth &&
		    !t->task->result_sent_ns) {
			/*
			 * The work item's run ends: the task's, and its result is set. It stays
			 * the thread's task for its frames that close at the same instant (slices
			 * closing at once come parents first), until the next one begins.
			 */
			t->task->received_ns = sl->start_ns;
			t->task->result_sent_ns = sl->end_ns;
		} else if (t->task && !task_over(t->task, sl)) {
			note_task_frame(t->task, sl, name, flags);
		}
		if ((flags & AN_FRAME_SERIAL) && !under(t, sl->depth, AN_FRAME_SERIAL))
			t->serial_gross_ns += ns;
		if ((flags & AN_FRAME_IMPORT) && !t->took_task &&
		    !under(t, sl->depth, AN_FRAME_IMPORT))
			t->import_ns += ns;
		return 0;
	}
	kind = classify(t, sl);
	if (kind == AN_WAIT_IDLE && !t->first_idle_ns)
		t->first_idle_ns = sl->start_ns;
	if (kind == AN_WAIT_PREEMPTED && !t->first_idle_ns && !t->took_task)
		t->startup_runnable_ns += ns;
	if (kind != AN_WAIT_SERIAL && under(t, sl->depth, AN_FRAME_SERIAL))
		t->serial_waits_ns += ns;
	t->wait_ns[kind] += ns;
	if (!a->kind_first[kind] || sl->start_ns < a->kind_first[kind])
		a->kind_first[kind] = sl->start_ns;
	if (sl->end_ns > a->kind_last[kind])
		a->kind_last[kind] = sl->end_ns;
	note_longest(a, t, sl, kind);
	return 0;
}

uint64_t an_thread_cpu(const struct an_thread *t)
{
	uint64_t waited = 0;
	int i;

	for (i = 0; i < AN_WAIT_COUNT; i++)
		waited += t->wait_ns[i];
	return t->covered_ns > waited ? t->covered_ns - waited : 0;
}

/*
 * A work thread ran pool tasks, or ran or wanted to run (waiting for the GIL, a CPU, a
 * lock or I/O) a quarter of its life at least; its idle waits and sleeps aside. A pool's
 * parent waiting for its results is none (in shared_lock.py on sid's 3.14 the parent
 * process was on a CPU 10 % of its life: more than a tenth would have counted it).
 */
bool an_is_work_thread(const struct an_thread *t)
{
	uint64_t wall = t->last_ns > t->first_ns ? t->last_ns - t->first_ns : 0;
	uint64_t busy = an_thread_cpu(t) + t->wait_ns[AN_WAIT_GIL] + t->wait_ns[AN_WAIT_PREEMPTED] +
			t->wait_ns[AN_WAIT_LOCK] + t->wait_ns[AN_WAIT_IO] +
			t->wait_ns[AN_WAIT_SERIAL];

	return wall && (busy >= wall / 4 || t->took_task);
}

uint64_t an_work_time(const struct analysis *a)
{
	size_t cursor = 0;
	uint64_t key, sum = 0;
	void *value;

	while (hashmap__next(a->threads, &cursor, &key, &value)) {
		const struct an_thread *t = value;

		if (an_is_work_thread(t))
			sum += t->last_ns - t->first_ns;
	}
	return sum;
}
