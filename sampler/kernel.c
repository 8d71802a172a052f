/* Merging the eBPF reader's events (Python stacks read in the kernel) into perf's stream. */
#include "internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "procfs.h"

/* A code object's name and file as the kernel sent them: held until both are in. */
struct sent_name {
	const struct pytrace_raw_frame *frame; /* NULL: none held */
	char name[4 * CPYTHON_ARG_TEXT + 1];
};

/* Notes what @held holds for its frame's code, should that die soon; @file may be NULL. */
static void note_name(struct cpython_process *proc, struct sent_name *held, const char *file)
{
	const struct pytrace_raw_frame *f = held->frame;

	if (f)
		cpython_code_name_seen(proc, f->code, cpython_fingerprint(f->filename, f->name),
				       held->name, file);
	held->frame = NULL;
}

/* Takes a name or file record (PYTRACE_ARG_NAME, PYTRACE_ARG_FILE) of frame @f. */
static void take_name(struct cpython_process *proc, struct sent_name *held,
		      const struct pytrace_raw_frame *f, const struct pytrace_raw_arg *rec,
		      const uint8_t *text)
{
	struct cpython_raw_arg a;
	struct cpython_value v;
	char file[4 * CPYTHON_ARG_TEXT + 4];

	memcpy(&a, rec, sizeof(a));
	cpython_arg_value(&proc->layout, &proc->types, &a, text, &v);
	if (held->frame && (held->frame != f || rec->index != PYTRACE_ARG_FILE))
		note_name(proc, held, NULL);
	if (v.kind != CPYTHON_VALUE_STR || !v.text[0])
		return;
	if (rec->index == PYTRACE_ARG_NAME && !v.cut) {
		held->frame = f;
		snprintf(held->name, sizeof(held->name), "%s", v.text);
	} else if (rec->index == PYTRACE_ARG_FILE && held->frame == f) {
		/* Its last bytes: cut at the front. */
		snprintf(file, sizeof(file), "%s%s", v.cut ? "..." : "", v.text);
		note_name(proc, held, file);
	}
}

/*
 * Notes the code names sent after an event's arguments (records of PYTRACE_ARG_NAME and
 * PYTRACE_ARG_FILE, in frame order) for the @n frames kept, @frames.
 */
static void keep_kernel_names(struct cpython_process *proc, const struct pytrace_event *e,
			      const struct pytrace_raw_frame *frames, uint32_t n)
{
	const uint8_t *names =
		(const uint8_t *)e->frames + e->nframes * sizeof(e->frames[0]) + e->args_size;
	struct sent_name held = { NULL, "" };
	struct pytrace_raw_arg rec;
	uint32_t at = 0, start, frame = 0;

	while (at + sizeof(rec) <= e->names_size) {
		memcpy(&rec, names + at, sizeof(rec));
		start = at;
		at += sizeof(rec) + ((rec.text_len + 7u) & ~7u);
		if (rec.frame < frame || rec.text_len > CPYTHON_ARG_TEXT || at > e->names_size ||
		    rec.index < PYTRACE_ARG_NAME)
			break;
		frame = rec.frame;
		if (frame >= e->cut && frame - e->cut < n)
			take_name(proc, &held, &frames[frame - e->cut], &rec,
				  names + start + sizeof(rec));
	}
	note_name(proc, &held, NULL); /* a name sent without its file */
}

/*
 * Keeps the arguments sent after an event's frames (records in frame order, each
 * followed by its text) and notes each frame's list id in @frames' args_id: @frames are
 * the @n kept, innermost first, the walk's frames e->cut on. Records of frames not kept
 * are passed over; records that break the order or the bounds leave every frame
 * without: none is shown rather than a wrong one.
 */
static void keep_kernel_args(struct sampler *s, struct cpython_process *proc,
			     const struct pytrace_event *e, struct pytrace_raw_frame *frames,
			     uint32_t n)
{
	const uint8_t *args = (const uint8_t *)e->frames + e->nframes * sizeof(e->frames[0]);
	uint32_t at = 0, start, i, frame = 0, from[PYTRACE_BPF_MAX_FRAMES] = { 0 },
		 len[PYTRACE_BPF_MAX_FRAMES] = { 0 };
	struct pytrace_raw_arg rec;

	for (i = 0; i < n; i++)
		frames[i].args_id = 0;
	while (proc && at + sizeof(rec) <= e->args_size) {
		memcpy(&rec, args + at, sizeof(rec));
		start = at;
		at += sizeof(rec) + ((rec.text_len + 7u) & ~7u);
		if (rec.frame < frame || rec.text_len > CPYTHON_ARG_TEXT || at > e->args_size)
			return;
		frame = rec.frame;
		if (frame < e->cut)
			continue;
		i = frame - e->cut;
		if (i >= n)
			return;
		if (!len[i])
			from[i] = start;
		len[i] = at - from[i];
	}
	for (i = 0; i < n; i++) {
		if (len[i])
			frames[i].args_id = store_list(s, proc, args + from[i], len[i]);
	}
	/*
	 * The kernel's room ran out: the last frame with arguments sent may have lost some,
	 * the frames after it (towards the root) were not read for theirs.
	 */
	if (e->args_size > PYTRACE_BPF_ARGS_BYTES - PYTRACE_BPF_ARG_MAX_BYTES) {
		for (i = n; i-- > 0 && !len[i];)
			frames[i].args_id = ARG_STORE_UNKNOWN;
		if (i < n)
			frames[i].args_id = ARG_STORE_UNKNOWN;
	}
}

/* The frames of a kernel event as a stack, or NULL (not Python, or none left). */
static struct py_stack *kernel_stack(struct sampler *s, struct cpython_process *proc,
				     const struct pytrace_event *e)
{
	struct cpython_raw_frame raw[PYTRACE_BPF_MAX_FRAMES];
	struct py_stack *ps;
	uint32_t i, n = e->nframes < PYTRACE_BPF_MAX_FRAMES ? e->nframes : PYTRACE_BPF_MAX_FRAMES;
	int count;

	for (i = 0; i < n; i++) {
		raw[i].code = e->frames[i].code;
		raw[i].filename = e->frames[i].filename;
		raw[i].name = e->frames[i].name;
		raw[i].instr = e->frames[i].instr;
		raw[i].owner = e->frames[i].owner;
		raw[i].args = e->frames[i].args_id; /* kept as the event was taken */
	}
	count = cpython_frames_from_raw(&proc->layout, raw, n, s->py_scratch, CPYTHON_MAX_FRAMES);
	if (count <= 0)
		return NULL;
	ps = py_stack_new(proc, (uint32_t)count, s->py_scratch);
	if (!ps)
		return NULL;
	ps->read_ns = ps->at_ns = e->time_ns; /* read at that very instant */
	ps->extended = false;
	ps->exact = true;
	ps->kernel = true;
	ps->user_ip = e->user_ip;
	ps->user_sp = e->user_sp;
	ps->syscall = e->syscall;
	ps->syscall_arg = e->syscall_arg;
	ps->gil = e->gil == PYTRACE_GIL_HELD	   ? SAMPLER_GIL_HELD
		  : e->gil == PYTRACE_GIL_RELEASED ? SAMPLER_GIL_RELEASED
						   : SAMPLER_GIL_UNKNOWN;
	fresh_stack(s, ps);
	return ps;
}

/*
 * A sample the kernel read and perf dropped: becomes a perf-format sample record of
 * our own (no registers, no stack copy) that carries the frames.
 */
static struct qrec *kernel_sample_record(struct sampler *s, const struct pytrace_event *e,
					 struct py_stack *ps)
{
	struct {
		struct perf_event_header header;
		uint64_t id;
		uint32_t pid, tid;
		uint64_t time;
		uint32_t cpu, res;
		uint64_t abi, stack_size;
	} rec = { .header = { PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, sizeof(rec) },
		  .id = s->clock_id,
		  .pid = e->pid,
		  .tid = e->tid,
		  .time = e->time_ns,
		  .cpu = e->cpu,
		  .abi = PERF_SAMPLE_REGS_ABI_NONE };
	struct qrec *q = malloc(sizeof(*q) + sizeof(rec));

	if (!q) {
		py_stack_free(ps);
		return NULL;
	}
	q->time = e->time_ns;
	q->seq = 0;
	q->cpu = e->cpu;
	q->size = sizeof(rec);
	q->py = ps;
	memcpy(q->data, &rec, sizeof(rec));
	return q;
}

/*
 * The process whose layout an event of @pid is read with: @pid's, or for a process the
 * kernel reads before its fork record was followed here (forked moments ago, the kernel
 * copied its parent's set-up at the fork itself), its parent's, the same image. Without
 * this, a forked worker's first events lost their arguments (its first wait shown
 * without them: 3 times in ~70 executor runs on 3.8-3.10).
 */
static struct cpython_process *event_python(struct sampler *s, uint32_t pid)
{
	struct cpython_process *proc = hashmap__get(s->pythons, pid);
	pid_t ppid;

	if (proc)
		return proc;
	ppid = procfs_ppid((pid_t)pid);
	if (ppid > 0 && (proc = hashmap__get(s->pythons, (uint64_t)ppid)))
		s->stats.kernel_args_of_parent++;
	return proc;
}

_Static_assert(PYTRACE_MESSAGE_BYTES >= CPYTHON_MESSAGE_BYTES, "the kernel sends too few bytes");

/* A pool message the kernel sent, until the stack it sends after it (same thread). */
struct pending_message {
	struct cpython_message m;
	bool sent;
};

/*
 * A write or read the kernel sent as maybe a pickled message: kept for the stack event
 * that follows it when it is a process pool's task or result.
 */
static void take_message(struct sampler *s, const struct pytrace_event *e)
{
	const uint8_t *bytes = (const uint8_t *)e + PYTRACE_EVENT_HEADER_SIZE;
	struct pending_message *pm;

	free(hashmap__remove(s->messages, e->tid)); /* one whose stack never came */
	pm = malloc(sizeof(*pm));
	if (!pm)
		return;
	pm->sent = e->syscall == 1;
	if (e->args_size > PYTRACE_MESSAGE_BYTES ||
	    !cpython_message_parse(bytes, e->args_size, &pm->m) ||
	    hashmap__set(s->messages, e->tid, pm))
		free(pm);
}

/*
 * Where the copy of a message's stack event carries the message (fields that event
 * does not use), for message_record().
 */
static void carry_message(uint8_t *copy, const struct pending_message *pm)
{
	int64_t kind = (int64_t)pm->m.kind | (pm->sent ? 0x100 : 0);
	uint64_t job = (uint64_t)pm->m.job, task = (uint64_t)pm->m.task;

	memcpy(copy + offsetof(struct pytrace_event, syscall), &kind, sizeof(kind));
	memcpy(copy + offsetof(struct pytrace_event, user_ip), &job, sizeof(job));
	memcpy(copy + offsetof(struct pytrace_event, user_sp), &task, sizeof(task));
}

/*
 * The record of a pool message written or read, with the stack the kernel read then
 * (@ps, owned), to go out in time order with the rest.
 */
static struct qrec *message_record(const struct pytrace_event *e, struct py_stack *ps)
{
	struct qrec *q = malloc(sizeof(*q) + sizeof(struct synth_record));
	struct synth_record *sr;

	if (!q) {
		py_stack_free(ps);
		return NULL;
	}
	sr = (struct synth_record *)q->data;
	sr->header = (struct perf_event_header){ .type = SYNTH_RECORD };
	sr->rec = (struct sampler_rec){
		.kind = SREC_MESSAGE,
		.pid = e->pid,
		.tid = e->tid,
		.cpu = e->cpu,
		.time_ns = e->time_ns,
		.message = { .kind = (enum cpython_message_kind)(e->syscall & 0xff),
			     .sent = (e->syscall & 0x100) != 0,
			     .job = (int64_t)e->user_ip,
			     .task = (int64_t)e->user_sp },
	};
	q->time = e->time_ns;
	q->cpu = e->cpu;
	q->size = sizeof(*sr);
	q->py = ps;
	return q;
}

/* The other end of a message followed, by what both ends carry (kind, job, task). */
struct message_end {
	uint64_t time;
	uint32_t pid;
	bool sent;
};

/* A re-stamped write stays this much before the read of it (the trace's whole microseconds). */
#define MESSAGE_WRITE_LEAD_NS 1000
/* ... when the read came at most this long before the write's end (a writer preempted). */
#define MESSAGE_REORDER_NS 10000000ULL

static uint64_t message_key(const struct sampler_rec *r)
{
	return ((uint64_t)r->message.job * 0x9e3779b97f4a7c15ULL) ^
	       ((uint64_t)r->message.task * 0xc2b2ae3d27d4eb4fULL) ^ (uint64_t)r->message.kind;
}

/*
 * Forgets the ends older than the window before @now (they would move no write now):
 * those whose other end never came, a process killed or a message the kernel missed.
 * All of them if that leaves too many (a window's worth: not seen in any pool).
 */
static void forget_old_ends(struct sampler *s, uint64_t now)
{
	struct hashmap *young = hashmap__new();
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->message_ends, &cursor, &key, &value)) {
		struct message_end *end = value;

		if (young && end->time + MESSAGE_REORDER_NS >= now &&
		    !hashmap__set(young, key, end))
			continue;
		free(end);
	}
	hashmap__free(s->message_ends);
	s->message_ends = young;
	if (young && hashmap__count(young) >= MESSAGE_ENDS_MAX) {
		hashmap__free_all(young, free);
		s->message_ends = hashmap__new();
	}
}

/*
 * A message's write is stamped at the write's end, its read at the read's end, and the
 * reader can get there first: woken as the bytes land in the pipe, on another CPU,
 * while the writer is still in its call (18 us seen, one core kept busy). A write
 * followed after its read is moved to just before it: the bytes were written by then,
 * within the call the writer's stack shows. Else a flow would go back in time, and
 * neither DevTools nor Perfetto join such a step (tests/e2e/test_pool_flows.py).
 */
void order_message(struct sampler *s, struct qrec *q)
{
	struct synth_record *sr = (struct synth_record *)q->data;
	uint64_t key = message_key(&sr->rec);
	struct message_end *other;

	if (!s->message_ends)
		return; /* out of memory once: messages go as stamped */
	other = hashmap__get(s->message_ends, key);
	if (other && other->sent != sr->rec.message.sent) {
		if (sr->rec.message.sent && other->pid != sr->rec.pid && q->time > other->time &&
		    q->time - other->time <= MESSAGE_REORDER_NS &&
		    other->time > MESSAGE_WRITE_LEAD_NS) {
			q->time = sr->rec.time_ns = other->time - MESSAGE_WRITE_LEAD_NS;
			s->stats.messages_restamped++;
		}
		free(hashmap__remove(s->message_ends, key));
		return;
	}
	if (hashmap__count(s->message_ends) >= MESSAGE_ENDS_MAX) {
		forget_old_ends(s, q->time);
		if (!s->message_ends)
			return;
	}
	other = malloc(sizeof(*other));
	if (!other)
		return;
	*other = (struct message_end){ q->time, sr->rec.pid, sr->rec.message.sent };
	if (hashmap__set(s->message_ends, key, other))
		free(other);
}

/*
 * Queues an event of the kernel-side reader with perf's records, to follow in time
 * order. Its arguments are kept in the store right away: the record keeps their ids,
 * not their bytes (tens of thousands of events a second, each held ~30 ms).
 */
void take_kernel_event(void *ctx, const struct pytrace_event *e)
{
	struct sampler *s = ctx;
	uint32_t n = e->nframes < PYTRACE_BPF_MAX_FRAMES ? e->nframes : PYTRACE_BPF_MAX_FRAMES;
	size_t size = PYTRACE_EVENT_HEADER_SIZE + n * sizeof(e->frames[0]);
	struct perf_event_header header = { KERNEL_EVENT_RECORD, 0,
					    (uint16_t)(sizeof(header) + size) };
	struct pytrace_raw_frame *frames;
	struct cpython_process *proc;
	struct qrec *q;
	uint8_t *copy;
	struct pending_message *pm = NULL;
	uint32_t none = 0, j;

	if (e->kind == PYTRACE_EV_MESSAGE) {
		take_message(s, e);
		return;
	}
	if (e->kind == PYTRACE_EV_MESSAGE_STACK) {
		pm = hashmap__remove(s->messages, e->tid);
		if (!pm)
			return; /* a write or read that was no pool message */
	}
	q = malloc(sizeof(*q) + header.size);
	if (!q) {
		free(pm);
		return;
	}
	q->time = e->time_ns;
	q->cpu = e->cpu;
	q->size = header.size;
	q->py = NULL;
	memcpy(q->data, &header, sizeof(header));
	memcpy(q->data + sizeof(header), e, PYTRACE_EVENT_HEADER_SIZE);
	/* Written as bytes: the copy is shorter than the struct with its room for arguments. */
	copy = q->data + sizeof(header);
	memcpy(copy + offsetof(struct pytrace_event, nframes), &n, sizeof(n));
	memcpy(copy + offsetof(struct pytrace_event, args_size), &none, sizeof(none));
	memcpy(copy + offsetof(struct pytrace_event, names_size), &none, sizeof(none));
	if (pm) {
		carry_message(copy, pm);
		free(pm);
	}
	/* In order, innermost first: past a cut the kernel's slots wrapped around. */
	frames = (struct pytrace_raw_frame *)(copy + offsetof(struct pytrace_event, frames));
	for (j = 0; j < n; j++)
		memcpy(&frames[j], &e->frames[(e->cut + j) % PYTRACE_BPF_MAX_FRAMES],
		       sizeof(frames[j]));
	proc = event_python(s, e->pid);
	keep_kernel_args(s, proc, e, frames, n);
	if (proc)
		keep_kernel_names(proc, e, frames, n);
	take_record(q, ctx);
}

/*
 * Follows an event of the kernel-side reader, in time order with perf's records (so
 * what runs CPython is known as of that moment). A switch-out's stack waits on its
 * thread for the switch record; a sample's becomes the sample record, or waits for
 * perf's own record of it when that was kept for its native or kernel frames. Returns
 * the record to go on with, or NULL.
 */
struct qrec *follow_kernel_event(struct sampler *s, struct qrec *q)
{
	const struct pytrace_event *e = (const void *)(q->data + sizeof(struct perf_event_header));
	struct cpython_process *proc = hashmap__get(s->pythons, e->pid);
	struct qrec *out = NULL;
	struct task_state *t;
	struct py_stack *ps;

	if (e->kind == PYTRACE_EV_EXIT) {
		/* Kept for the exit record, which goes out later: the status is gone by then. */
		void *code = (void *)(uintptr_t)(((uint64_t)e->syscall & 0xffff) + 1);

		if (hashmap__set(s->exit_codes, e->pid, code))
			pr_debug("exit code of %u not kept", e->pid);
		qrec_free(q);
		return NULL;
	}
	if (e->kind == PYTRACE_EV_MESSAGE_STACK) {
		/*
		 * Without the stack it went with, a message is not shown: a marker at the
		 * thread's root would end every slice open there.
		 */
		ps = proc && e->time_ns >= proc->since_ns ? kernel_stack(s, proc, e) : NULL;
		/* Read at that instant: the thread's stack then, as a sample's would be. */
		t = ps ? hashmap__get(s->tasks, e->tid) : NULL;
		if (t) {
			remember_py(t, ps);
			trial_seen(s, t, e->time_ns, ps);
		}
		out = ps ? message_record(e, ps) : NULL;
		if (out)
			order_message(s, out);
		if (out) {
			out->seq = q->seq;
			s->stats.pool_messages++;
		}
		qrec_free(q);
		return out;
	}
	if (proc && e->kind == PYTRACE_EV_SAMPLE)
		find_gil(s, proc, e->time_ns); /* a process that never waits has one too */
	/* Not Python as far as we know yet: the sample is lost (perf's was dropped). */
	ps = proc && e->time_ns >= proc->since_ns ? kernel_stack(s, proc, e) : NULL;
	if (ps && (e->truncated || e->cut))
		count_cut(s, e->cut, e->truncated);
	t = ps ? task_get(s, e->pid, e->tid, true) : NULL;
	if (t)
		thread_name_due(s, t, ps);
	if (!t) {
		py_stack_free(ps);
		if (e->kind == PYTRACE_EV_SAMPLE && !s->opts.native && !s->opts.kernel_stacks)
			s->stats.kernel_samples_lost++;
	} else if (e->kind == PYTRACE_EV_SWITCH) {
		py_fifo_push(&t->kernel_outs, ps);
		s->stats.kernel_switch_stacks++;
	} else if (s->opts.native || s->opts.kernel_stacks) {
		/* The thread's latest known stack too: perf's record of it is not walked. */
		t->kernel_sample_ns = e->time_ns;
		remember_py(t, ps);
		py_fifo_push(&t->kernel_samples, ps);
	} else {
		out = kernel_sample_record(s, e, ps);
		if (out)
			out->seq = q->seq;
	}
	qrec_free(q);
	return out;
}

/*
 * The kernel's reading of the switch-out at @out_time, if it made one: the tracepoint
 * runs just before perf writes its switch record, so at most a few microseconds earlier.
 * Rarely (1 switch in a few thousand, under a CPU hog) perf writes no record of a
 * switch the kernel saw, nor of the switch-in that ends it, and its next switch-out
 * record comes milliseconds later: the thread, neither sampled nor switched in since
 * the kernel saw it leave, was off the CPU from then. That reading is taken, marked
 * early: the wait starts at its time (else a silence in the trace splits the calls).
 */
struct py_stack *take_kernel_out(struct sampler *s, struct task_state *t, uint64_t out_time)
{
	struct py_stack *ps = py_fifo_take(&t->kernel_outs, out_time, UINT64_MAX);

	if (ps && out_time - ps->at_ns >= 1000000) {
		if (ps->at_ns <= t->seen_ns) {
			py_stack_free(ps); /* the thread ran since: another switch's */
			return NULL;
		}
		ps->early = true;
		s->stats.kernel_switches_early++;
	}
	return ps;
}
