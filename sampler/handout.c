/* Handing records out in time order as what callers see (struct sampler_rec). */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* Hands the command line read at drain time to the record about to go out. */
static void attach_cmdline(struct sampler *s, const struct qrec *q)
{
	s->held_cmdline = hashmap__remove(s->cmdlines, (uintptr_t)q);
	s->rec.cmdline = s->held_cmdline;
}

void release_held(struct sampler *s)
{
	qrec_free(s->held[0]);
	qrec_free(s->held[1]);
	free(s->held_stack);
	free(s->held_cmdline);
	py_stack_free(s->held_py);
	s->held_py = NULL;
	s->held[0] = s->held[1] = NULL;
	s->held_stack = NULL;
	s->held_cmdline = NULL;
}

/* The common part of a record handed out. */
struct sampler_rec *out_rec(struct sampler *s, enum sampler_rec_kind kind, uint32_t pid,
			    uint32_t tid, uint32_t cpu, uint64_t time)
{
	memset(&s->rec, 0, sizeof(s->rec));
	s->rec.kind = kind;
	s->rec.pid = pid;
	s->rec.tid = tid;
	s->rec.cpu = cpu;
	s->rec.time_ns = time;
	if (kind == SREC_EXIT)
		s->rec.exit.status = -1;
	return &s->rec;
}

void out_python(struct sampler *s, struct sampler_rec *r, struct py_stack *ps)
{
	resolve_codes(ps);
	r->sample.py_source = ps->source;
	r->sample.py_at_ns = ps->at_ns;
	r->sample.gil = ps->gil;
	r->sample.py_codes = (const struct cpython_code_entry *const *)ps->codes;
	r->sample.py_frames = ps->frames;
	r->sample.npy = ps->n;
	r->sample.py_args = s->args;
	if (ps->proc) {
		r->sample.py_lines = ps->proc->layout.lines;
		r->sample.py_runtime = ps->proc->runtime;
		r->sample.py_minor = ps->proc->layout.minor;
	}
}

static const struct sampler_rec *on_sample(struct sampler *s, struct qrec *q)
{
	struct sample_view v;
	struct task_state *t;
	enum event_role role;

	if (!decode_sample(q->data, q->size, s->opts.kernel_stacks, &v))
		return NULL;
	role = (enum event_role)(uintptr_t)hashmap__get(s->roles, v.id);
	if (role == ROLE_SWITCH) {
		/* Kept until the switch record says whether and how the thread left. */
		t = task_get(s, v.pid, v.tid, true);
		if (t) {
			qrec_free(t->switch_sample);
			t->switch_sample = q;
			return (const struct sampler_rec *)q; /* ownership taken: see caller */
		}
		return NULL;
	}
	if (!v.pid && !v.tid)
		return NULL;
	s->held[0] = q;
	s->stats.samples++;
	t = (s->opts.native || s->opts.kernel_stacks) && s->bpf && v.stack.valid
		    ? task_get(s, v.pid, v.tid, false)
		    : NULL;
	if (t && t->kernel_samples.count) {
		/* Read from outside when followed; the kernel read it at the sample itself. */
		struct py_stack *exact = py_fifo_match(
			&t->kernel_samples, v.time, v.stack.regs[SREG_IP], v.stack.regs[SREG_SP]);

		if (exact) {
			py_stack_free(q->py);
			q->py = exact;
		}
	}
	/*
	 * Read from outside, or not at all: what followed may have changed its stack
	 * (readtrial.c). Samples the kernel read are not looked up.
	 */
	t = !q->py || !q->py->kernel ? task_get(s, v.pid, v.tid, false) : NULL;
	if (t && t->restacked.count) {
		struct py_stack *ps = trial_restacked(t, v.time);

		if (ps) {
			/* A late read that stood, or a guess for a read that fell. */
			s->stats.late_reads_mended += ps->source == SAMPLER_PY_READ && ps->n;
			py_stack_free(q->py);
			q->py = ps->n ? ps : NULL;
			if (!ps->n)
				py_stack_free(ps);
		}
	}
	out_rec(s, SREC_SAMPLE, v.pid, v.tid, v.cpu, v.time)->sample.stack = v.stack;
	s->rec.sample.syscall = -1;
	s->rec.sample.syscall_arg = 0;
	if (q->py) {
		s->stats.kernel_samples += q->py->kernel;
		out_python(s, &s->rec, q->py);
	}
	return &s->rec;
}

static const struct sampler_rec *on_fork(struct sampler *s, const struct qrec *q)
{
	struct task_record tr;

	if (q->size < sizeof(tr))
		return NULL;
	memcpy(&tr, q->data, sizeof(tr));
	if (!task_get(s, tr.pid, tr.tid, true))
		return NULL;
	proc_add_task(s, tr.pid, tr.pid != tr.ppid);
	out_rec(s, SREC_FORK, tr.pid, tr.tid, q->cpu, q->time);
	s->rec.fork.ppid = tr.ppid;
	s->rec.fork.ptid = tr.ptid;
	if (tr.pid != tr.ppid)
		attach_cmdline(s, q);
	return &s->rec;
}

static const struct sampler_rec *on_exit_record(struct sampler *s, const struct qrec *q)
{
	struct task_record tr;
	bool last;

	if (q->size < sizeof(tr))
		return NULL;
	memcpy(&tr, q->data, sizeof(tr));
	task_free(hashmap__remove(s->tasks, tr.tid));
	last = proc_remove_task(s, tr.pid, tr.tid);
	out_rec(s, SREC_EXIT, tr.pid, tr.tid, q->cpu, q->time)->exit.last_in_process = last;
	if (last)
		s->rec.exit.status = take_exit_status(s, tr.pid);
	return &s->rec;
}

static const struct sampler_rec *on_comm(struct sampler *s, struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	uint32_t ids[2];
	bool exec = hdr->misc & PERF_RECORD_MISC_COMM_EXEC;
	char *comm;

	if (q->size < sizeof(*hdr) + 8 + 1 + 32)
		return NULL;
	memcpy(ids, q->data + sizeof(*hdr), sizeof(ids));
	comm = (char *)q->data + sizeof(*hdr) + 8;
	q->data[q->size - 33] = '\0'; /* bound the string before the trailer */
	if (exec && s->child.pid && (pid_t)ids[0] == s->child.pid)
		s->child_execed = true;
	s->held[0] = q;
	out_rec(s, exec ? SREC_EXEC : SREC_COMM, ids[0], ids[1], q->cpu, q->time)->comm.comm = comm;
	if (exec)
		attach_cmdline(s, q);
	return &s->rec;
}

static const struct sampler_rec *on_mmap2(struct sampler *s, struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	const uint8_t *p = q->data + sizeof(*hdr);
	uint32_t ids[2];
	uint64_t addr, len, pgoff;
	const size_t fixed = sizeof(*hdr) + 8 + 24 + 24 + 8;

	if (q->size < fixed + 1 + 32 || (hdr->misc & PERF_RECORD_MISC_MMAP_DATA))
		return NULL;
	memcpy(ids, p, 8);
	memcpy(&addr, p + 8, 8);
	memcpy(&len, p + 16, 8);
	memcpy(&pgoff, p + 24, 8);
	q->data[q->size - 33] = '\0';
	s->held[0] = q;
	out_rec(s, SREC_MMAP, ids[0], ids[1], q->cpu, q->time);
	s->rec.mmap.start = addr;
	s->rec.mmap.len = len;
	s->rec.mmap.pgoff = pgoff;
	s->rec.mmap.path = (const char *)q->data + fixed;
	if (hdr->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
		uint8_t n = p[32];

		s->rec.mmap.build_id_size = n <= 20 ? n : 20;
		memcpy(s->rec.mmap.build_id, p + 36, s->rec.mmap.build_id_size);
	}
	return &s->rec;
}

static const struct sampler_rec *on_synth(struct sampler *s, struct qrec *q)
{
	struct synth_record *sr = (struct synth_record *)q->data;

	s->rec = sr->rec;
	if (s->rec.kind == SREC_MMAP)
		s->rec.mmap.path = sr->text;
	else if (s->rec.kind == SREC_COMM || s->rec.kind == SREC_EXEC)
		s->rec.comm.comm = sr->text;
	else if (s->rec.kind == SREC_FORK && q->size > sizeof(*sr))
		s->rec.cmdline = sr->text;
	else if (s->rec.kind == SREC_NOTE || s->rec.kind == SREC_PYNAME)
		s->rec.note = sr->text;
	else if (s->rec.kind == SREC_MESSAGE && q->py)
		out_python(s, &s->rec, q->py);
	s->held[0] = q;
	return &s->rec;
}

/* Turns one queued record into what callers see; NULL when it yields nothing. */
static const struct sampler_rec *dispatch(struct sampler *s, struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	const struct sampler_rec *r = NULL;
	uint32_t ids[2] = { 0, 0 };

	if (s->child.pid && !s->child_execed && hdr->type != PERF_RECORD_COMM &&
	    record_pid(q) == (uint32_t)s->child.pid) {
		qrec_free(q); /* the launcher's own moments before exec */
		return NULL;
	}
	switch (hdr->type) {
	case PERF_RECORD_SAMPLE:
		r = on_sample(s, q);
		if (r == (const struct sampler_rec *)q)
			return NULL; /* a switch sample, kept by its task */
		if (!r)
			qrec_free(q);
		return r;
	case PERF_RECORD_SWITCH:
		if (q->size >= sizeof(*hdr) + 32)
			memcpy(ids, q->data + q->size - 32, 8);
		r = on_switch(s, q, ids[0], ids[1]);
		break;
	case PERF_RECORD_FORK:
		r = on_fork(s, q);
		break;
	case PERF_RECORD_EXIT:
		r = on_exit_record(s, q);
		break;
	case PERF_RECORD_COMM:
		r = on_comm(s, q);
		if (!r)
			qrec_free(q);
		return r;
	case PERF_RECORD_MMAP2:
		r = on_mmap2(s, q);
		if (!r)
			qrec_free(q);
		return r;
	case SYNTH_RECORD:
		return on_synth(s, q);
	case PERF_RECORD_LOST:
		if (q->size >= sizeof(*hdr) + 16) {
			uint64_t lost;

			memcpy(&lost, q->data + sizeof(*hdr) + 8, 8);
			s->stats.lost_records += lost;
		}
		break;
	case PERF_RECORD_LOST_SAMPLES:
		if (q->size >= sizeof(*hdr) + 8) {
			uint64_t lost;

			memcpy(&lost, q->data + sizeof(*hdr), 8);
			s->stats.lost_samples += lost;
		}
		break;
	case PERF_RECORD_THROTTLE:
		s->stats.throttled++;
		break;
	default:
		break;
	}
	qrec_free(q);
	return r;
}

/* After the queue is empty at stop: threads still waiting get spans up to the stop. */
static const struct sampler_rec *flush_waiting(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->tasks, &cursor, &key, &value)) {
		struct task_state *t = value;

		if (t->out && t->out_time < s->stop_ns)
			return emit_off_cpu(s, t, s->stop_ns, 0);
		t->out = false;
	}
	return NULL;
}

/* How far the hand-out has got: everything stamped before it has gone out. */
static uint64_t handout_horizon(const struct sampler *s, const struct qrec *next)
{
	if (s->stopped)
		return next ? next->time : UINT64_MAX;
	return next && next->time < s->watermark ? next->time : s->watermark;
}

static const struct sampler_rec *next_locked(struct sampler *s)
{
	const struct sampler_rec *r;
	struct qrec *q;

	release_held(s);
	for (;;) {
		q = queue__peek(&s->queue);
		r = emit_lost_exit(s, handout_horizon(s, q));
		if (r || !q)
			break;
		switch (order_verdict(q->time, s->watermark, s->stopped, s->stop_ns)) {
		case ORDER_WAIT:
			return NULL;
		case ORDER_DROP:
			qrec_free(queue__pop(&s->queue));
			continue;
		case ORDER_TAKE:
			break;
		}
		r = dispatch(s, queue__pop(&s->queue));
		if (r)
			break;
	}
	if (r)
		return r;
	return s->stopped ? flush_waiting(s) : NULL;
}

/*
 * The other way round from the drainer's handout_turn(): the hand-out locks again at
 * once, record after record, and a drainer woken by the unlock finds the lock taken when
 * it gets a CPU, again and again. With one core kept busy and ~50,000 kernel stacks a
 * second it could not empty the eBPF ring for most of a run (30,140 of ~40,000 events
 * lost in one, tests/e2e/test_kernel_reader.py). A drainer that has waited over 2 ms
 * gets the lock before the next record (each wait here is 50 us, at most 1 ms).
 */
static void drainer_turn(struct sampler *s)
{
	let_waiter_in(&s->drainer_waiting_since, 2000000);
}

const struct sampler_rec *sampler__next(struct sampler *s)
{
	const struct sampler_rec *r;

	drainer_turn(s);

	/* Said to the drainer, which leaves the lock to us if we wait long (drainer_main). */
	__atomic_store_n(&s->handout_waiting_since, sampler_now_ns(), __ATOMIC_RELAXED);
	pthread_mutex_lock(&s->lock);
	__atomic_store_n(&s->handout_waiting_since, 0, __ATOMIC_RELAXED);
	r = next_locked(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}
