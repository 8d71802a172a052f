/* Which processes run CPython, and the Python stacks walked as records are drained. */
#include "internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "procfs.h"
#include "waitpolicy.h"

/*
 * Remembers a stack walked in this drain (a copy: the original may be trimmed or freed
 * meanwhile): its code objects are read at the end.
 */
void fresh_stack(struct sampler *s, const struct py_stack *walked)
{
	struct py_stack *ps;

	/* Mostly all is known already: then nothing is copied (tens of thousands a second). */
	if (walked->proc && cpython_all_read(walked->proc, walked->frames, walked->n))
		return;
	ps = py_stack_copy(walked);
	if (!ps)
		return;
	if (s->nfresh == s->fresh_capacity) {
		size_t capacity = s->fresh_capacity ? s->fresh_capacity * 2 : 256;
		struct py_stack **grown = realloc(s->fresh, capacity * sizeof(*grown));

		if (!grown) {
			py_stack_free(ps); /* its codes are read later, when named */
			return;
		}
		s->fresh = grown;
		s->fresh_capacity = capacity;
	}
	s->fresh[s->nfresh++] = ps;
}

#define POOL_LOOK_EVERY_NS 20000000ULL
#define POOL_CHILD_LOOK_EVERY_NS 1000000ULL
#define POOL_LOOK_FOR_NS 3000000000ULL

/* A pool worker loop newly seen in @proc: the kernel reads its task locals from now on. */
static void send_task_codes(struct sampler *s, struct cpython_process *proc)
{
	if (!s->bpf || proc->task_codes_sent == proc->ntask_codes ||
	    hashmap__get(s->pythons, (uint64_t)proc->pid) != proc)
		return;
	bpf_reader__set_process(s->bpf, (uint32_t)proc->pid, proc, s->opts.read_args);
	proc->task_codes_sent = proc->ntask_codes;
}

/* Whether @proc has imported @module (or is importing it). */
static bool has_module(struct cpython_process *proc, const char *module)
{
	uint64_t name;

	return !cpython_module_global(proc, NULL, module, "__name__", &name);
}

/*
 * Young Python processes (the first seconds) are asked now and then whether they have
 * imported multiprocessing's pool: a spawned worker imports it, then runs its loop at
 * once, before a frame of it was seen and named. Processes that multiprocessing started
 * (spawn_main, its fork server and what that forks), and those that imported it, are
 * asked every millisecond, until the pool's or the executor's module is imported (or
 * the 3 s are over): a few reads each time, about 50 us more when sys.modules has grown
 * since. Returns whether such a process is still looked at: the drainer then runs
 * every millisecond.
 */
bool find_pool_workers(struct sampler *s, uint64_t now)
{
	size_t cursor = 0;
	uint64_t pid, nmodules;
	void *value;
	bool looking = false, counted;
	int err;

	while (s->opts.read_args && hashmap__next(s->pythons, &cursor, &pid, &value)) {
		struct cpython_process *proc = value;

		uint64_t every = proc->pool_child ? POOL_CHILD_LOOK_EVERY_NS : POOL_LOOK_EVERY_NS;

		if (proc->ntask_codes ||
		    (proc->since_ns && now > proc->since_ns + POOL_LOOK_FOR_NS) ||
		    (!proc->since_ns && proc->task_codes_tried_ns))
			continue;
		looking |= proc->pool_child;
		if (now < proc->task_codes_tried_ns + every)
			continue;
		proc->task_codes_tried_ns = now;
		/* Nothing imported since the last look: no need to look again (a few reads). */
		counted = !cpython_modules_count(proc, NULL, &nmodules);
		if (counted && nmodules == proc->modules_seen)
			continue;
		err = cpython_find_task_codes(proc, NULL);
		if (!err) {
			send_task_codes(s, proc);
			continue;
		}
		/*
		 * Not again until more is imported, unless a loop's module is there without
		 * its loop yet (its body still running) or it could not be read.
		 */
		if (counted && err == -ENOENT && !has_module(proc, "multiprocessing.pool") &&
		    !has_module(proc, "concurrent.futures.process"))
			proc->modules_seen = nmodules;
		if (!proc->pool_child && has_module(proc, "multiprocessing"))
			/*
			 * A pool or an executor may fork its workers any moment: each copies the
			 * kernel's set-up of this process at the fork, so the loop must be
			 * known by then (else a worker's first tasks go without their numbers
			 * until its fork is followed). Looked at every ms from now on.
			 */
			proc->pool_child = true;
	}
	return looking;
}

/*
 * Code objects are read after every stack of the drain was walked: reading them is
 * slow (strings, line tables), and a walk that waits behind it reads a later stack.
 */
void read_fresh_codes(struct sampler *s)
{
	size_t i;

	for (i = 0; i < s->nfresh; i++) {
		cpython_read_codes(s->fresh[i]->proc, NULL, s->fresh[i]->frames, s->fresh[i]->n);
		send_task_codes(s, s->fresh[i]->proc);
		py_stack_free(s->fresh[i]);
	}
	s->nfresh = 0;
}

/* Mirrors a process's thread states into the kernel's map after they were re-read. */
static void sync_threads(struct sampler *s, uint32_t pid, struct cpython_process *proc)
{
	uint64_t synced = (uint64_t)(uintptr_t)hashmap__get(s->bpf_synced, pid);
	size_t i;

	if (!s->bpf || synced == proc->threads_generation + 1)
		return;
	for (i = 0; i < proc->nthreads; i++)
		bpf_reader__set_thread(s->bpf, proc->threads[i].tid, proc->threads[i].tstate);
	hashmap__set(s->bpf_synced, pid, (void *)(uintptr_t)(proc->threads_generation + 1));
}

/*
 * Reads the Python frames of @tid now, when @pid runs CPython: an empty stack when it
 * runs no Python code; NULL when it can't be read (or @pid runs no CPython).
 */
struct py_stack *walk_python(struct sampler *s, uint32_t pid, uint32_t tid, bool exact,
			     uint64_t at_ns)
{
	struct cpython_process *proc = hashmap__get(s->pythons, pid);
	struct cpython_args_out args = { s->args_scratch, ARGS_SCRATCH, 0 };
	uint64_t start = sampler_now_ns();
	struct cpython_cut cut;
	struct py_stack *ps;
	int n;

	if (!proc)
		return NULL;
	n = cpython_walk_args(proc, NULL, tid, start, s->py_scratch, CPYTHON_MAX_FRAMES,
			      s->opts.read_args ? &args : NULL, &cut);
	s->stats.python_walks++;
	if (n > 0 && cut.frames)
		count_cut(s, cut.frames, cut.rootless);
	sync_threads(s, pid, proc);
	if (n < 0) {
		s->stats.python_walk_errors++;
		return NULL;
	}
	/* n == 0: read, and running no Python code (starting, exiting): an empty stack. */
	store_args(s, proc, s->py_scratch, (uint32_t)n, args.buf, args.used);
	ps = py_stack_new(proc, (uint32_t)n, s->py_scratch);
	if (!ps)
		return NULL;
	ps->read_ns = sampler_now_ns();
	ps->walk_ns = ps->read_ns - start;
	ps->at_ns = at_ns;
	ps->extended = false;
	ps->kernel = false;
	ps->exact = exact;
	ps->user_ip = ps->user_sp = 0;
	ps->syscall = -1;
	ps->syscall_arg = 0;
	/*
	 * Named now, while the code objects are as the walk saw them: a module's body read
	 * at the end of the drain was often gone (freed right after it ran).
	 */
	if (ps->n && !cpython_all_read(proc, ps->frames, ps->n)) {
		cpython_read_codes(proc, NULL, ps->frames, ps->n);
		send_task_codes(s, proc);
	}
	return ps;
}

/* @proc (or none) runs @pid's CPython from @found_ns on (0: from before the recording). */
void set_python(struct sampler *s, uint32_t pid, struct cpython_process *proc, uint64_t found_ns)
{
	cpython_process__put(hashmap__remove(s->pythons, pid));
	if (proc)
		proc->since_ns = found_ns;
	if (proc && hashmap__set(s->pythons, pid, proc)) {
		cpython_process__put(proc);
		proc = NULL;
	}
	if (s->bpf) {
		bpf_reader__set_process(s->bpf, pid, proc, s->opts.read_args);
		if (proc)
			proc->task_codes_sent = proc->ntask_codes;
		hashmap__remove(s->bpf_synced, pid);
	}
}

/* Whether multiprocessing started @pid (spawn_main, its fork server): by its command line. */
static bool started_by_multiprocessing(pid_t pid)
{
	char cmdline[512];

	return !procfs_cmdline(pid, cmdline, sizeof(cmdline)) &&
	       strstr(cmdline, "from multiprocessing.");
}

static void remember_unread(struct sampler *s, uint32_t pid, uint64_t runtime, unsigned minor,
			    const struct cpython_types *types)
{
	struct unread_runtime *u = calloc(1, sizeof(*u));

	if (!u)
		return;
	u->runtime = runtime;
	u->minor = minor;
	u->types = *types;
	if (hashmap__set(s->unread_runtimes, pid, u))
		free(u);
}

/* The user sees only native frames for it, and must not take them for its Python profile. */
void note_unreadable(struct sampler *s, uint32_t pid, uint64_t time, unsigned minor, int err)
{
	struct sampler_rec rec = { .kind = SREC_NOTE, .pid = pid, .tid = pid, .time_ns = time };
	char why[256], text[300];

	snprintf(text, sizeof(text), "%s; native frames only",
		 cpython_unreadable_why(err, minor, why, sizeof(why)));
	push_synth(s, &rec, text);
}

/* A runtime no later try can read: its build or version, not its state, is the cause. */
static bool never_readable(int err)
{
	return err == ENOTSUP || err == EPROTONOSUPPORT;
}

static void retry_unread(struct sampler *s, uint32_t pid, uint64_t time)
{
	struct unread_runtime *u = hashmap__get(s->unread_runtimes, pid);
	struct cpython_process *proc;

	if (!u)
		return;
	proc = cpython_process__new((pid_t)pid, u->runtime, u->minor);
	if (proc) {
		proc->types = u->types;
		proc->pool_child = started_by_multiprocessing((pid_t)pid);
	}
	if (proc) {
		set_python(s, pid, proc, time);
		free(hashmap__remove(s->unread_runtimes, pid));
	} else if (++u->tries == UNREAD_RUNTIME_TRIES || never_readable(errno)) {
		note_unreadable(s, pid, time, u->minor, errno);
		free(hashmap__remove(s->unread_runtimes, pid));
	}
}

/* The pid and tid at the start of a fork, exit, comm or mmap record. */
static void record_ids(const struct qrec *q, uint32_t ids[2])
{
	memcpy(ids, q->data + sizeof(struct perf_event_header), 8);
}

/* The pid and tid of the sample_id trailer every record ends with. */
static void trailer_ids(const struct qrec *q, uint32_t ids[2])
{
	memcpy(ids, q->data + q->size - 32, 8);
}

/* An executable mapping of libpython or python: the process runs CPython from now on. */
static void track_mmap(struct sampler *s, struct qrec *q)
{
	const uint8_t *p = q->data + sizeof(struct perf_event_header);
	const char *path = (const char *)p + 64;
	uint64_t start, pgoff, runtime;
	struct cpython_process *proc;
	struct cpython_types types;
	unsigned minor = 0;
	uint32_t ids[2];
	int err;

	if (q->size < sizeof(struct perf_event_header) + 64 + 33)
		return;
	record_ids(q, ids);
	q->data[q->size - 33] = '\0';
	memcpy(&start, p + 8, 8);
	memcpy(&pgoff, p + 24, 8);
	err = cpython_locate((pid_t)ids[0], path, start, pgoff, &runtime, &minor, &types);
	if (err == -ENODATA && !hashmap__get(s->pythons, ids[0]))
		note_unreadable(s, ids[0], q->time, minor, ENODATA);
	if (err)
		return;
	proc = cpython_process__new((pid_t)ids[0], runtime, minor);
	err = proc ? 0 : errno;
	if (proc) {
		proc->types = types;
		proc->pool_child = started_by_multiprocessing((pid_t)ids[0]);
	}
	set_python(s, ids[0], proc, q->time);
	free(hashmap__remove(s->unread_runtimes, ids[0]));
	if (never_readable(err))
		note_unreadable(s, ids[0], q->time, minor, err);
	else if (!proc)
		remember_unread(s, ids[0], runtime, minor, &types);
}

/* A fork of a CPython process: the child runs a copy of it. */
static void track_fork(struct sampler *s, struct qrec *q)
{
	const uint8_t *p = q->data + sizeof(struct perf_event_header);
	struct cpython_process *parent;
	uint32_t ids[2], ppid, tid, ptid;
	size_t i;

	record_ids(q, ids);
	memcpy(&ppid, p + 4, 4);
	parent = hashmap__get(s->pythons, ppid);
	/*
	 * A fork is written on the parent's CPU, the child's exec and mmaps on
	 * another: drained later, it must not replace what the child's own new
	 * image already told (a runtime found in a mapping always wins).
	 */
	if (ppid == ids[0] || !parent || hashmap__get(s->pythons, ids[0]))
		return;
	/* A pool forking its workers: they run the loop from their first instant. */
	if (s->opts.read_args && !parent->ntask_codes) {
		cpython_find_task_codes(parent, NULL);
		send_task_codes(s, parent);
	}
	set_python(s, ids[0], cpython_process__fork(parent, (pid_t)ids[0]), q->time);
	/* The child is a copy of the forking thread: same thread state address. */
	memcpy(&tid, p + 8, 4);
	memcpy(&ptid, p + 12, 4);
	for (i = 0; s->bpf && i < parent->nthreads; i++) {
		if (parent->threads[i].tid == ptid)
			bpf_reader__set_thread(s->bpf, tid, parent->threads[i].tstate);
	}
}

/*
 * An exec drops the old image's runtime, but not one its own new image mapped later:
 * that mapping may have run on another CPU and been drained first.
 */
static void track_exec(struct sampler *s, struct qrec *q)
{
	struct cpython_process *known;
	uint32_t ids[2];

	record_ids(q, ids);
	known = hashmap__get(s->pythons, ids[0]);
	if (known && known->since_ns > q->time)
		return;
	set_python(s, ids[0], NULL, 0);
	free(hashmap__remove(s->unread_runtimes, ids[0]));
	/* The thread that exec'd (now the only one) had a state in the old image. */
	if (s->bpf) {
		bpf_reader__forget_thread(s->bpf, ids[0]);
		bpf_reader__forget_thread(s->bpf, ids[1]);
	}
}

/* A switch-in: a stack read while the thread waited held until it ran again, now. */
static void track_switch_in(struct sampler *s, struct qrec *q)
{
	struct task_state *t;
	uint32_t ids[2];

	trailer_ids(q, ids);
	t = hashmap__get(s->pythons, ids[0]) ? hashmap__get(s->tasks, ids[1]) : NULL;
	if (!t)
		return;
	if (t->last_py && t->last_py->exact && !t->last_py->extended &&
	    q->time > t->last_py->at_ns) {
		t->last_py->at_ns = q->time; /* only this wait's end, not later ones */
		t->last_py->extended = true;
	}
	if (!t->chain_start)
		t->chain_start = q->time;
	trial_in(s, t, q->time);
	if (t->drain_out_ns && q->time >= t->drain_out_ns)
		t->waited_ns += q->time - t->drain_out_ns;
	t->drain_out_ns = 0;
	t->seen_ns = q->time;
}

/*
 * Where a Python process's GIL is, read while it runs (a short-lived one is gone by
 * the time its records are named): a wait on it is told from a lock wait by its address,
 * and the kernel tells from it whether a sampled thread holds it. Early in its life the
 * interpreter may not be readable yet: tried again every 10 ms.
 */
void find_gil(struct sampler *s, struct cpython_process *proc, uint64_t time)
{
	if (!proc || proc->gil_known ||
	    (proc->gil_tried_ns && time < proc->gil_tried_ns + 10000000))
		return;
	proc->gil_tried_ns = time;
	proc->gil_known = !cpython_gil_addrs(proc, NULL, &proc->gil);
	if (proc->gil_known && s->bpf)
		bpf_reader__set_process(s->bpf, (uint32_t)proc->pid, proc, s->opts.read_args);
}

/* A switch-out: the stack it waits with, read by the kernel right then, else a guess. */
static void track_switch_out(struct sampler *s, struct qrec *q)
{
	struct cpython_process *proc;
	struct task_state *t;
	uint32_t ids[2];

	trailer_ids(q, ids);
	proc = hashmap__get(s->pythons, ids[0]);
	find_gil(s, proc, q->time);
	t = proc ? hashmap__get(s->tasks, ids[1]) : NULL;
	if (t) {
		const struct perf_event_header *hdr = (const void *)q->data;
		bool preempted = hdr->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;

		trial_out(t, q->time, !preempted);
		/*
		 * Only preemptions count as not running (policy windows): a thread preempted
		 * mid-computation resumes where it was, one that blocked was at a boundary of
		 * its work (a queue, a lock, I/O) and often left the call it had been read in
		 * with little CPU. Counting every wait, an executor worker's samples after its
		 * last job (their reads failing as it exited) showed that job again 16-40 ms
		 * after it ended (test_pool_args, one core busy).
		 */
		t->drain_out_ns = preempted ? q->time : 0;
	}
	q->py = t ? take_kernel_out(s, t, q->time) : NULL;
	if (t && !q->py && s->bpf) {
		s->stats.kernel_switch_misses++;
		pr_debug("switch-out of %u at %" PRIu64 " without the kernel's stack (%u "
			 "queued, first at %" PRIu64 ")",
			 ids[1], q->time, t->kernel_outs.count,
			 t->kernel_outs.count ? t->kernel_outs.items[t->kernel_outs.head]->at_ns
					      : 0);
	}
	if (q->py) {
		remember_py(t, q->py);
		trial_seen(s, t, q->time, q->py);
	} else if (t) {
		q->py = guess_at(s, t, q->time, true);
	}
}

/*
 * Whether the sample at @at_ns is late, the thread's stack was read after it already,
 * and reading it takes long (over half a period): then it is not read again (that
 * would be later still) but given what the reads before and after it share
 * (guess_at()). A drainer behind its samples because its walks are slow (very deep
 * stacks: 3.5 ms for 5,000 frames on 3.8) so catches up instead of falling further
 * behind with every walk. Quick walks of a drainer late for other reasons (a busy
 * machine) are made as before: the stacks they leave are what waits are guessed from.
 */
static bool read_since(struct sampler *s, const struct task_state *t, uint64_t at_ns)
{
	if (!t || !t->last_py || t->last_py->kernel || t->last_py->read_ns <= at_ns ||
	    t->last_py->walk_ns <= period_ns(s) / 2 || sampler_now_ns() - at_ns <= 2 * period_ns(s))
		return false;
	s->stats.bracketed_samples++;
	return true;
}

/* A sample of a CPython process: its Python frames, read now unless the kernel did. */
static void track_sample(struct sampler *s, struct qrec *q)
{
	const uint8_t *p = q->data + sizeof(struct perf_event_header);
	struct cpython_process *proc;
	struct task_state *t;
	uint32_t ids[2];
	uint64_t id;
	bool empty;

	/* Samples carry pid, tid after the identifier. */
	memcpy(&id, p, 8);
	memcpy(ids, p + 8, 8);
	retry_unread(s, ids[0], q->time);
	proc = hashmap__get(s->pythons, ids[0]);
	if (!proc || (enum event_role)(uintptr_t)hashmap__get(s->roles, id) != ROLE_CLOCK)
		return;
	t = task_get(s, ids[0], ids[1], true);
	/*
	 * perf keeps its record of a sample the kernel read when native or kernel frames are
	 * wanted; the kernel's reading follows it and is matched as the record goes out. A
	 * walk from outside would be thrown away then: at 20 kHz with --native, walking
	 * every one made each drain take 0.1-0.5 s, and the hand-out (Ctrl-C with it) wait
	 * for seconds. Walked only for a thread the kernel has not read lately (before the
	 * runtime was found, or while its ring overflows).
	 */
	if (!q->py &&
	    !(t && t->kernel_sample_ns && q->time <= t->kernel_sample_ns + KERNEL_READS_NS) &&
	    !read_since(s, t, q->time))
		q->py = walk_python(s, ids[0], ids[1], false, q->time);
	if (q->py && !q->py->kernel) {
		s->stats.sample_walks++;
		s->stats.prompt_walks += q->py->read_ns - q->time <= period_ns(s);
	}
	if (!t)
		return;
	thread_name_due(s, t, q->py);
	/*
	 * Read and found running no Python code (a process exiting, its frames gone): known,
	 * not unknown. Kept as the thread's latest stack like any read, so that neither this
	 * sample nor those after it are given an older read's frames (a pool worker's last
	 * job showed again in a sample 18-30 ms after it ended, under a CPU hog; a function
	 * ran 3.5 ms past its return into the interpreter's shutdown).
	 */
	empty = q->py && !q->py->kernel && !q->py->n;
	t->seen_ns = q->time;
	if (q->py && !q->py->kernel && !t->sampled && !t->last_py && s->kernel_samples) {
		/*
		 * A new thread's first sample that the kernel left to us: it found no Python
		 * frames yet (the thread's start), or could not read them, or did not read
		 * the process yet. Read from outside even 0.3 ms later, the thread had run on
		 * into its first call (seen with a drainer at every ms): nothing is known to
		 * have held. Only the first: a thread the kernel can't read is read from
		 * outside after it.
		 */
		q->py->n = 0;
		s->stats.late_walks++;
	}
	/*
	 * Kept as the thread's latest stack first, whoever read it and when: the trial of
	 * the sample before (trial_next()) may need it as the first read after that one
	 * (a sample unread after a long sleep, its read late and fallen, had only the late
	 * read to go by, in the next job: no Python frames, a pool worker's loop cut).
	 */
	if (q->py && (q->py->n || empty))
		remember_py(t, q->py);
	trial_next(s, t, q->time);
	if (q->py && q->py->n && !q->py->kernel &&
	    !policy_read_prompt(q->time, q->py->read_ns, period_ns(s))) {
		/*
		 * Read well after the sample (a busy machine, a deep stack): the thread may
		 * have moved on. Kept whole as the thread's latest stack, for what it was
		 * when read; the sample gets (from guess_at() below) what it shares with the
		 * stack read before the sample. With nothing read before (a new thread),
		 * nothing is known to have held: no Python frames rather than later ones.
		 */
		trial_open(t, q->time, q->py, q->py);
		q->py = NULL;
		s->stats.late_walks++;
	} else if (q->py && !q->py->kernel && q->py->n) {
		/* In time, unless the thread blocked and woke before it was read. */
		trial_open(t, q->time, q->py, NULL);
	}
	t->sampled = true;
	if (q->py && !q->py->n) {
		py_stack_free(q->py);
		q->py = NULL;
	}
	if (!q->py) {
		/* Not read (gone by the time we looked, or left to the kernel): its latest. */
		q->py = guess_at(s, t, q->time, false);
	}
}

/*
 * Follows which processes run CPython as records are drained: a libpython or python
 * mapping makes one (replacing any), fork copies it, exec drops it. Samples of such
 * processes get their Python frames read right away, as close to the sample as we can.
 */
void track_python(struct sampler *s, struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;

	if (q->size < sizeof(*hdr) + 32)
		return; /* every record has at least the sample_id trailer */
	if (hdr->type == PERF_RECORD_MMAP2 && !(hdr->misc & PERF_RECORD_MISC_MMAP_DATA))
		track_mmap(s, q);
	else if (hdr->type == PERF_RECORD_FORK)
		track_fork(s, q);
	else if (hdr->type == PERF_RECORD_COMM && (hdr->misc & PERF_RECORD_MISC_COMM_EXEC))
		track_exec(s, q);
	else if (hdr->type == PERF_RECORD_SWITCH && !(hdr->misc & PERF_RECORD_MISC_SWITCH_OUT))
		track_switch_in(s, q);
	else if (hdr->type == PERF_RECORD_SWITCH && (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT))
		track_switch_out(s, q);
	else if (hdr->type == PERF_RECORD_SAMPLE)
		track_sample(s, q);
}
