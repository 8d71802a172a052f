/* The drainer thread: copies records out of the rings and follows them as they come. */
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "procfs.h"

/*
 * A new program or process: read its command line now, while it most likely still
 * runs; by the time the record is processed a short-lived one may be gone.
 */
static void capture_cmdline(struct sampler *s, const struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	uint32_t ids[2];
	char buf[1024], *copy;
	uint64_t key;

	if (q->size < sizeof(*hdr) + 8)
		return;
	/* Keyed by the record itself: one process can exec several times in one drain. */
	key = (uintptr_t)q;
	free(hashmap__remove(s->cmdlines, key));
	memcpy(ids, q->data + sizeof(*hdr), 8);
	if (hdr->type == PERF_RECORD_FORK) {
		uint32_t ppid;

		memcpy(&ppid, q->data + sizeof(*hdr) + 4, 4);
		if (ppid == ids[0])
			return; /* a thread */
	} else if (hdr->type != PERF_RECORD_COMM || !(hdr->misc & PERF_RECORD_MISC_COMM_EXEC)) {
		return;
	}
	if (hdr->type == PERF_RECORD_COMM) {
		/* Only if the process still runs this exec's program: it may have exec'd again. */
		char comm[16] = "";
		size_t room = q->size - sizeof(*hdr) - 8;

		memcpy(comm, q->data + sizeof(*hdr) + 8, room < 15 ? room : 15);
		if (procfs_cmdline_of((pid_t)ids[0], comm, buf, sizeof(buf)))
			return;
	} else if (procfs_cmdline((pid_t)ids[0], buf, sizeof(buf))) {
		return;
	}
	copy = strdup(buf);
	if (!copy)
		return;
	if (hashmap__set(s->cmdlines, key, copy))
		free(copy);
}

static void read_ring_rec(const void *src, uint32_t off, void *buf, size_t len)
{
	ring_rec__read(src, off, buf, len);
}

/*
 * A record copied out of its ring, a sample's user stack cut to what the kernel copied:
 * it reserves the whole --stack-size (16 KiB) in every sample, and copying that out took
 * ~60 us a sample on this VM (the copies' fresh pages faulted in as records queued up),
 * most of the drainer's time at 10 kHz and the reason stacks read from outside came
 * late. The copy says the stack's size is what is kept, so it reads as any sample.
 */
struct qrec *copy_record(const struct ring_rec *r, void *sampler)
{
	const struct sampler *s = sampler;
	struct stack_cut cut;
	struct qrec *rec;

	if (r->hdr.type != PERF_RECORD_SAMPLE ||
	    !sample_stack_cut(read_ring_rec, r, r->hdr.size, s->opts.kernel_stacks, &cut)) {
		rec = ring_rec__copy(r);
	} else if ((rec = malloc(sizeof(*rec) + cut.size))) {
		ring_rec__read(r, 0, rec->data, cut.size - 8);
		stack_cut_apply(&cut, rec->data);
		rec->size = cut.size;
		rec->py = NULL;
		rec->cpu = r->ring->cpu;
	}
	if (rec)
		rec->time = record_time((const struct perf_event_header *)rec->data, NULL);
	return rec;
}

/*
 * Rings are drained one CPU after another, so a batch is not in time order: an exec
 * on one CPU would otherwise be seen after the new image's mmaps on another.
 */
static void follow_batch(struct sampler *s, uint64_t cut)
{
	size_t i;

	if (!s->batch_count)
		return; /* memmove() too wants non-NULL arrays even for nothing */
	batch_sort(s->batch, s->batch_count);
	for (i = 0; i < s->batch_count && s->batch[i]->time <= cut; i++) {
		struct qrec *rec = s->batch[i];

		if (((struct perf_event_header *)rec->data)->type == KERNEL_EVENT_RECORD) {
			rec = follow_kernel_event(s, rec);
			if (!rec)
				continue;
		}
		capture_cmdline(s, rec);
		track_python(s, rec);
		if (s->opts.mode == SAMPLER_MODE_WALL)
			track_switch(s, rec);
		if (queue__push(&s->queue, rec))
			qrec_free(rec);
	}
	/* Later ones wait for the next drain, with the kernel's events that go with them. */
	memmove(s->batch, s->batch + i, (s->batch_count - i) * sizeof(*s->batch));
	s->batch_count -= i;
}

/*
 * Copies out what the kernel has, then follows it in time order. The kernel-side
 * reader's events are taken first: one precedes the perf record it goes with (a switch,
 * a sample kept for its stack copy) and follows the ones it needs (a fork before its
 * child's events). So perf's records are followed only up to the moment the events
 * were taken, less a margin for an event being written then; later ones wait for the
 * next drain. @last: nothing more will come, follow everything.
 */
void drain_rings(struct sampler *s, bool last)
{
	uint64_t cut = last || !s->bpf ? UINT64_MAX : sampler_now_ns() - KERNEL_EVENT_MARGIN_NS;
	uint32_t cpu;

	if (s->bpf)
		bpf_reader__consume(s->bpf, take_kernel_event, s);
	for (cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->rings[cpu].base)
			ring__drain(&s->rings[cpu], copy_record, take_record, s);
	}
	follow_batch(s, cut);
	if (s->pending_outs && hashmap__count(s->pending_outs))
		capture_waiting(s);
	read_fresh_codes(s);
	read_due_names(s);
}

/*
 * One round of the drainer: copy records out, follow them, read waiting threads.
 * Returns whether a young pool worker is being looked at (see find_pool_workers).
 */
static bool drain_once(struct sampler *s)
{
	uint64_t now = sampler_now_ns();
	bool looking;

	/* Anything stamped before this is already in a buffer. */
	s->watermark = now - REORDER_MARGIN_NS;
	drain_rings(s, false);
	looking = find_pool_workers(s, now);
	if (now - s->last_liveness_ns > 1000000000ULL) {
		s->last_liveness_ns = now;
		check_liveness(s);
	}
	s->stats.processes = (uint32_t)hashmap__count(s->procs) - s->ngone;
	s->stats.threads = (uint32_t)hashmap__count(s->tasks);
	return looking;
}

/*
 * A mutex is not fair: a real-time drainer that locks again at once can keep the
 * hand-out waiting through many rounds (1.6 s once, at 20 kHz with --native). One that
 * has waited over 10 ms gets the lock before the next round (up to 1 ms later). Not
 * sooner: each such pause delays the next drain, and with it the stacks read from
 * outside (a pause at every round lost records and Python frames under a CPU hog).
 */
static void handout_turn(struct sampler *s)
{
	let_waiter_in(&s->handout_waiting_since, 10000000);
}

void let_waiter_in(const uint64_t *waiting_since, uint64_t after_ns)
{
	uint64_t since = __atomic_load_n(waiting_since, __ATOMIC_RELAXED);
	int i;

	if (!since || sampler_now_ns() < since + after_ns)
		return;
	for (i = 0; i < 20 && __atomic_load_n(waiting_since, __ATOMIC_RELAXED); i++)
		nanosleep(&(struct timespec){ 0, 50000 }, NULL);
}

/*
 * Without real-time priority (no root nor CAP_SYS_NICE) the drainer competes for a CPU
 * with the thread that hands records out, which is busiest as the recording starts
 * (loading symbols: a whole CPU for ~150 ms): at 10 kHz on bench/py_split.py,
 * unprivileged, the stacks read then came up to 20 ms after their samples (90th
 * percentile 4-12 ms over the run). That thread goes to nice 5 (weight 335 to the
 * drainer's 1024): 0.8-1.9 ms. It also yields to the target, whose work matters more
 * than ours; what it has not handed out waits for it in memory. Once: an unprivileged
 * thread can't take its nice value back down.
 */
static void yield_to_drainer(struct sampler *s)
{
	static const int handout_nice = 5;

	if (s->handout_reniced)
		return;
	s->handout_reniced = true;
	if (setpriority(PRIO_PROCESS, (id_t)s->handout_tid, handout_nice))
		pr_info("drainer at normal priority: Python stacks may lag on a busy machine");
	else
		pr_info("drainer at normal priority, the rest of the tool at nice %d: Python "
			"stacks may lag on a busy machine",
			handout_nice);
}

#define DRAINER_SLICE_NS 100000ULL /* the shortest the kernel grants */

/* sched_setattr(2)'s argument, as the kernel defines it (glibc 2.36 has none). */
struct sched_attr_v1 {
	uint32_t size, sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
	uint32_t sched_util_min, sched_util_max;
};

/*
 * Without real-time priority, a short time slice (Linux 6.12+, EEVDF: a fair thread may
 * ask for one, unprivileged): a woken thread whose slice is short has an early deadline
 * and takes a CPU from a computing thread sooner. With 2 and 4 computing children on the
 * 2 cores, unprivileged, 15-41 and 175-259 of ~1,000 stacks came over two periods late,
 * against 88-91 and 255-357 without. Older kernels ignore the field.
 */
static void short_slice(void)
{
	struct sched_attr_v1 attr = { .size = sizeof(attr),
				      .sched_policy = SCHED_OTHER,
				      .sched_runtime = DRAINER_SLICE_NS };

	if (syscall(SYS_sched_setattr, 0, &attr, 0))
		pr_debug("drainer's time slice not set: %s", strerror(errno));
}

/*
 * The drainer thread. Python stacks are read when records are drained, so draining
 * must not wait for the records to be processed (loading a new process's modules can
 * take tens of ms): this thread drains about every millisecond, whatever the rest does.
 */
static void *drainer_main(void *arg)
{
	struct sampler *s = arg;
	struct sched_param lowest_fifo = { .sched_priority = 1 };
	bool realtime;
	struct pollfd pfds[MAX_CPUS];
	bool fast = false, python, looking;
	uint64_t walks;
	nfds_t n = 0;
	uint32_t cpu;

	for (cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->rings[cpu].base)
			pfds[n++] = (struct pollfd){ .fd = s->rings[cpu].fd, .events = POLLIN };
	}
	/*
	 * The lowest real-time priority when permitted (CAP_SYS_NICE): a normal thread waited
	 * up to 20 ms for a CPU on a busy machine, for its Python stacks read from outside,
	 * and with one core kept busy one that drained the eBPF ring every 20 ms lost up to
	 * three quarters of ~50,000 events a second (tests/e2e/test_kernel_reader.py). It
	 * costs no more CPU: what the drainer does is the same, it only gets a CPU sooner.
	 * Otherwise, a short slice.
	 */
	realtime = !pthread_setschedparam(pthread_self(), SCHED_FIFO, &lowest_fifo);
	if (!realtime)
		short_slice();
	while (!__atomic_load_n(&s->drainer_stop, __ATOMIC_RELAXED)) {
		/* Woken early when a ring is half full (the events' wakeup watermark). */
		if (poll(pfds, n, fast ? DRAIN_INTERVAL_MS : SLOW_DRAIN_INTERVAL_MS) > 0) {
			/*
			 * An event whose task exited reports POLLHUP from then on: polling it
			 * again would return at once, and this loop would spin.
			 */
			for (nfds_t i = 0; i < n; i++) {
				if (pfds[i].revents & (POLLHUP | POLLERR | POLLNVAL))
					pfds[i].fd = -1;
			}
		}
		if (__atomic_load_n(&s->drainer_stop, __ATOMIC_RELAXED))
			break;
		__atomic_store_n(&s->drainer_waiting_since, sampler_now_ns(), __ATOMIC_RELAXED);
		pthread_mutex_lock(&s->lock);
		__atomic_store_n(&s->drainer_waiting_since, 0, __ATOMIC_RELAXED);
		walks = s->stats.python_walks;
		looking = drain_once(s);
		python = (hashmap__count(s->pythons) > 0 &&
			  (!s->kernel_samples || s->stats.python_walks != walks)) ||
			 looking;
		pthread_mutex_unlock(&s->lock);
		handout_turn(s);
		if (python == fast)
			continue;
		/*
		 * Python stacks are read as records are drained: then drain every ms. When the
		 * kernel reads every stack, or no process runs Python, none waits on this
		 * thread: drain slowly (every ms cost the target 8-13 % at 100-1000 Hz here),
		 * except while a young pool worker is looked at, so that its loop is known
		 * within a ms (else a spawned worker's first task ran before its number could
		 * be read).
		 */
		fast = python;
		if (fast && !realtime)
			yield_to_drainer(s);
	}
	return NULL;
}

void sampler__stopping(struct sampler *s)
{
	__atomic_store_n(&s->drainer_stop, true, __ATOMIC_RELAXED);
}

int start_drainer(struct sampler *s)
{
	sigset_t all, old;
	int err;

	s->handout_tid = (pid_t)syscall(SYS_gettid);
	/* Signals stay with the caller's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&s->drainer, NULL, drainer_main, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	s->drainer_running = true;
	return 0;
}

void stop_drainer(struct sampler *s)
{
	if (!s->drainer_running)
		return;
	__atomic_store_n(&s->drainer_stop, true, __ATOMIC_RELAXED);
	pthread_join(s->drainer, NULL);
	s->drainer_running = false;
}

int sampler__poll(struct sampler *s, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };

	/* The drainer does the work; this only paces the caller (a signal cuts it short). */
	if (timeout_ms > 0)
		nanosleep(&ts, NULL);
	if (!s->drainer_running) {
		pthread_mutex_lock(&s->lock);
		drain_once(s);
		pthread_mutex_unlock(&s->lock);
	}
	return 0;
}
