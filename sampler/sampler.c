/*
 * The perf_event_open backend. Per CPU, a cpu-clock event per traced task with inherit
 * (so every descendant is followed from birth by the kernel) owns one ring buffer; in
 * wall mode a context-switch software event, sampled on every switch, captures the stack
 * a thread blocks with, and PERF_RECORD_SWITCH gives the exact switch times. Records of
 * all CPUs are merged back into time order through a heap, behind a watermark.
 */
#include "sampler.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../common/hashmap.h"
#include "../common/log.h"
#include "bpf_reader.h"
#include "launch.h"
#include "procfs.h"
#include "ring.h"

#define REGS_MASK 0xff01ffULL /* AX..IP, R8..R15: see enum sampler_reg */
/*
 * Records are handed out this long after they happened: enough for every CPU's buffer
 * to have them, and for the stack a thread resumed with to be read before its wait is
 * handed out (see emit_off_cpu).
 */
#define REORDER_MARGIN_NS (30 * 1000000ULL)
#define MAX_CPUS 1024
#define ATTACH_ROUNDS 20
#define DRAIN_INTERVAL_MS 1	  /* while a traced process runs CPython */
#define SLOW_DRAIN_INTERVAL_MS 20 /* otherwise */

/* Records we make ourselves for what existed before we attached. */
#define SYNTH_RECORD 0x7f00
/* An event of the kernel-side reader (struct pytrace_event) after the header. */
#define KERNEL_EVENT_RECORD 0x7f01
/* Longer than the kernel takes from stamping an event to sending it. */
#define KERNEL_EVENT_MARGIN_NS 1000000ULL

enum event_role {
	ROLE_CLOCK = 1,	 /* cpu-clock samples, side-band records */
	ROLE_SWITCH = 2, /* context-switch samples: stacks at switch-out */
};

struct synth_record {
	struct perf_event_header header;
	struct sampler_rec rec;
	char text[]; /* the comm or path that rec points to */
};

/* Stacks read by the kernel, oldest first, until their perf records are followed. */
struct py_fifo {
	struct py_stack **items;
	uint32_t head, count, capacity;
};

struct task_state {
	uint32_t pid, tid;
	struct qrec *switch_sample; /* the latest context-switch sample (owned) */
	bool out;		    /* switched out and not back yet */
	uint64_t out_time;
	enum sampler_wait wait;
	struct qrec *out_sample; /* the sample taken as it switched out (owned) */
	/*
	 * A wait seen from outside: the thread was blocked when we attached, or was still
	 * switched out when its switch record was drained. Its stack can't change while
	 * it waits, so reading it with process_vm_readv is exact.
	 */
	int64_t outside_syscall;
	uint64_t outside_regs[SREG_COUNT];
	uint8_t *outside_stack;
	uint64_t outside_stack_size;
	uint64_t outside_read_ns;
	struct py_stack *outside_py;
	struct py_stack *last_py;	 /* of the latest sample followed: the drainer's view */
	struct py_stack *out_py;	 /* last_py as of the switch-out: a guess for short waits */
	struct py_fifo kernel_outs;	 /* read by the kernel at switch-outs */
	struct py_fifo kernel_samples;	 /* read by the kernel at samples perf also kept */
	uint64_t chain_start;		 /* the first switch-in since the last stack read, or 0 */
	struct after_stack *afters;	 /* oldest first: kept until their waits go out */
	struct after_stack *afters_last; /* the newest, where the next one goes */
};

/* The first stack read after a chain of short waits that began at @from. */
struct after_stack {
	struct after_stack *next;
	uint64_t from;
	struct py_stack *ps;
};

/* Python frames read from the target for one record. */
struct py_stack {
	struct cpython_process *proc; /* a reference */
	uint64_t read_ns;
	uint64_t at_ns; /* the record it was read for: a sample or a switch-out */
	bool extended;	/* at_ns moved to the end of the wait it was read in */
	bool kernel;	/* read by the kernel at a switch-out (copies are not) */
	bool exact;
	uint64_t user_ip, user_sp; /* kernel samples: the user registers perf saw too */
	int64_t syscall;	   /* kernel switch-outs: the system call it waits in, or -1 */
	uint32_t n;
	struct cpython_code_entry **codes; /* resolved as the record goes out, under the lock */
	struct cpython_frame frames[];
};

static void py_stack_free(struct py_stack *ps)
{
	if (!ps)
		return;
	cpython_process__put(ps->proc);
	free(ps->codes);
	free(ps);
}

/*
 * Looks up each frame's code object in the process's cache, while the lock keeps the
 * drainer from changing it, so the symbolizer can use them without the lock.
 */
static void resolve_codes(struct py_stack *ps)
{
	uint32_t i;

	if (ps->codes)
		return;
	ps->codes = calloc(ps->n ? ps->n : 1, sizeof(*ps->codes));
	for (i = 0; ps->codes && i < ps->n; i++)
		ps->codes[i] = cpython_code_lookup(ps->proc, ps->frames[i].code,
						   ps->frames[i].fingerprint);
}

void qrec_free(struct qrec *q)
{
	if (!q)
		return;
	py_stack_free(q->py);
	free(q);
}

static struct py_stack *py_stack_copy(const struct py_stack *src)
{
	size_t size = sizeof(*src) + src->n * sizeof(src->frames[0]);
	struct py_stack *ps = malloc(size);

	if (!ps)
		return NULL;
	memcpy(ps, src, size);
	ps->codes = NULL;
	ps->kernel = false; /* a copy stands for another moment: a guess */
	cpython_process__get(ps->proc);
	return ps;
}

/*
 * A drain consumes all the kernel's events before it follows perf's records, so a fifo
 * holds up to one drain's worth for its thread (bounded: the oldest go first).
 */
#define PY_FIFO_MAX 4096

static void py_fifo_push(struct py_fifo *f, struct py_stack *ps)
{
	if (f->count == PY_FIFO_MAX) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	if (f->head + f->count == f->capacity) {
		if (f->head) {
			memmove(f->items, f->items + f->head, f->count * sizeof(*f->items));
			f->head = 0;
		} else {
			uint32_t capacity = f->capacity ? f->capacity * 2 : 8;
			struct py_stack **grown = realloc(f->items, capacity * sizeof(*grown));

			if (!grown) {
				py_stack_free(ps);
				return;
			}
			f->items = grown;
			f->capacity = capacity;
		}
	}
	f->items[f->head + f->count++] = ps;
}

/*
 * Takes the latest stack read at or before @time, dropping older ones; NULL unless it
 * was read less than @within ns before (else it belongs to an earlier record).
 */
static struct py_stack *py_fifo_take(struct py_fifo *f, uint64_t time, uint64_t within)
{
	struct py_stack *found = NULL;

	while (f->count && f->items[f->head]->at_ns <= time) {
		py_stack_free(found);
		found = f->items[f->head++];
		f->count--;
	}
	if (!f->count)
		f->head = 0;
	if (found && time - found->at_ns >= within) {
		py_stack_free(found);
		found = NULL;
	}
	return found;
}

/*
 * The kernel's reading of a sample perf kept (with its stack copy) for @time, @ip, @sp:
 * they carry the same user registers, and perf stamps its record a little before the
 * kernel's reader runs (0.25-0.5 ms here). Readings of earlier samples are dropped.
 */
static struct py_stack *py_fifo_match(struct py_fifo *f, uint64_t time, uint64_t ip, uint64_t sp)
{
	uint32_t i;

	while (f->count && f->items[f->head]->at_ns + 100000 < time) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	for (i = 0; i < f->count && i < 16; i++) {
		struct py_stack *ps = f->items[f->head + i];

		if (ps->at_ns > time + 5000000)
			break;
		if (ps->user_ip == ip && ps->user_sp == sp) {
			while (i--) {
				py_stack_free(f->items[f->head++]);
				f->count--;
			}
			f->head++;
			f->count--;
			return ps;
		}
	}
	return NULL;
}

static void py_fifo_clear(struct py_fifo *f)
{
	while (f->count) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	free(f->items);
	memset(f, 0, sizeof(*f));
}

/*
 * A runtime found in a new mapping whose description could not be read yet: 3.13+
 * describe themselves in _PyRuntime, which the loader may not have mapped in place when
 * the executable segment's record is followed. Tried again at the process's samples.
 */
struct unread_runtime {
	uint64_t runtime;
	unsigned minor;
	uint32_t tries;
};

#define UNREAD_RUNTIME_TRIES 100

/* A switch-out drained without its switch-in: the thread may still be waiting. */
struct pending_out {
	uint32_t pid;
	uint64_t out_time, in_time;
};

/* What was read from outside for a wait that began at @out_time. */
struct outside_capture {
	struct outside_capture *next; /* the thread's later captures */
	uint64_t out_time;
	uint64_t read_ns; /* when it was read: valid only if before the wait ended */
	struct py_stack *py;
	int64_t syscall;
	uint64_t regs[SREG_COUNT];
	uint8_t *stack;
	uint64_t stack_size;
};

struct proc_state {
	uint32_t ntasks;
};

struct sampler {
	struct sampler_opts opts;
	uint32_t ncpus;
	struct ring rings[MAX_CPUS];
	int *fds;
	size_t nfds, fds_capacity;
	struct hashmap *roles; /* event id -> enum event_role */
	struct perf_event_attr clock_attr, switch_attr;
	bool use_switch_event;
	struct queue queue;
	struct hashmap *tasks;		 /* tid -> struct task_state */
	struct hashmap *procs;		 /* pid -> struct proc_state */
	struct hashmap *cmdlines;	 /* record -> command line read at drain time */
	struct hashmap *pending_outs;	 /* tid -> struct pending_out, during one drain */
	struct hashmap *captures;	 /* tid -> struct outside_capture */
	struct hashmap *pythons;	 /* pid -> struct cpython_process */
	struct hashmap *unread_runtimes; /* pid -> struct unread_runtime: found, not yet readable */
	struct bpf_reader *bpf;		 /* Python frames read by the kernel at switch-outs */
	bool kernel_samples;	    /* ... and at samples: it is attached to the clock events */
	size_t nfds_sampled;	    /* clock events it was attached to (or tried) */
	uint64_t clock_id;	    /* a cpu-clock event's id, for the samples it reads */
	struct hashmap *bpf_synced; /* pid -> thread list generation + 1 mirrored there */
	pthread_t drainer;	    /* drains, follows and walks every ~1 ms */
	bool drainer_running;
	volatile bool drainer_stop;
	pthread_mutex_t lock; /* everything here, between the drainer and sampler__next() */
	struct qrec **batch;  /* records of the drain in progress */
	size_t batch_count, batch_capacity;
	uint64_t batch_seq;
	struct cpython_frame *py_scratch;
	struct py_stack *held_py;
	struct py_stack **fresh; /* walked in the drain in progress, codes not yet read */
	size_t nfresh, fresh_capacity;
	char *held_cmdline;
	struct held_child child;
	bool child_execed;
	uint64_t watermark;
	uint64_t start_ns, stop_ns;
	bool stopped;
	uint64_t last_liveness_ns;
	/* What the last handed-out record points into, freed on the next call. */
	struct qrec *held[2];
	uint8_t *held_stack;
	struct sampler_rec rec;
	struct sampler_stats stats;
};

uint64_t sampler_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int sampler_list_tree(pid_t pid, pid_t **pids, size_t *count)
{
	*pids = NULL;
	*count = 0;
	if (kill(pid, 0) && errno == ESRCH)
		return -ESRCH;
	return procfs_descendants(pid, pids, count);
}

int sampler_list_threads(pid_t pid, pid_t **tids, size_t *count)
{
	return procfs_tasks(pid, tids, count);
}

int sampler_read_cmdline(pid_t pid, char *buf, size_t size)
{
	return procfs_cmdline(pid, buf, size);
}

int sampler_read_exit_status(pid_t pid)
{
	char path[64], buf[1024], *p;
	int field, code = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (procfs_read(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || (p[2] != 'Z' && p[2] != 'X'))
		return -1;
	/* exit_code is field 52; after ')' comes field 3. */
	for (field = 3, p += 2; p && field < 52; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%d", &code) != 1)
		return -1;
	if (code & 0x7f)
		return 128 + (code & 0x7f);
	return (code >> 8) & 0xff;
}

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

static uint32_t online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	if (n < 1)
		return 1;
	return n > MAX_CPUS ? MAX_CPUS : (uint32_t)n;
}

static uint64_t sample_type(const struct sampler_opts *opts)
{
	uint64_t type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			PERF_SAMPLE_CPU | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

	if (opts->kernel_stacks)
		type |= PERF_SAMPLE_CALLCHAIN;
	return type;
}

static void build_attrs(struct sampler *s, bool privileged)
{
	struct perf_event_attr *a = &s->clock_attr;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = 1000000000ULL / s->opts.frequency_hz; /* cpu-clock counts ns */
	a->sample_type = sample_type(&s->opts);
	a->sample_regs_user = REGS_MASK;
	a->sample_stack_user = s->opts.stack_bytes;
	a->inherit = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->build_id = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->context_switch = s->opts.mode == SAMPLER_MODE_WALL;
	a->sample_id_all = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->exclude_kernel = !privileged;
	a->exclude_hv = 1;
	a->exclude_callchain_user = 1;
	a->watermark = 1;

	/* Sampled on every switch; must see kernel mode, where switches happen. */
	s->switch_attr = *a;
	a = &s->switch_attr;
	a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	a->sample_period = 1;
	a->mmap = a->mmap2 = a->build_id = a->comm = a->comm_exec = a->task = 0;
	a->context_switch = 0;
	a->exclude_kernel = 0;
	a->watermark = 0;
	a->wakeup_events = 0;
}

static int remember_fd(struct sampler *s, int fd)
{
	if (s->nfds == s->fds_capacity) {
		size_t capacity = s->fds_capacity ? s->fds_capacity * 2 : 64;
		int *grown = realloc(s->fds, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->fds = grown;
		s->fds_capacity = capacity;
	}
	s->fds[s->nfds++] = fd;
	s->stats.events_open = (uint32_t)s->nfds;
	return 0;
}

/* Sends @fd's records into the CPU's ring, mapping the ring on first use. */
static int route_to_ring(struct sampler *s, int fd, uint32_t cpu, enum event_role role)
{
	struct ring *ring = &s->rings[cpu];
	uint64_t id;
	int err;

	if (!ring->base) {
		size_t size = (size_t)s->opts.buffer_kb * 1024;

		/* Unprivileged users are held to perf_event_mlock_kb: shrink until it fits. */
		while ((err = ring__map(ring, fd, cpu, size)) == -EPERM && size > 64 * 1024)
			size /= 2;
		if (err)
			return err;
		if (size < (size_t)s->opts.buffer_kb * 1024)
			pr_warn("ring buffer limited to %zu KiB per CPU (perf_event_mlock_kb); "
				"samples may be lost",
				size / 1024);
	} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring->fd)) {
		return -errno;
	}
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id))
		return -errno;
	return hashmap__set(s->roles, id, (void *)(uintptr_t)role);
}

/* Opens this task's events on every CPU. -ESRCH when the task is already gone. */
static int open_task_events(struct sampler *s, pid_t tid)
{
	uint32_t cpu;
	int err;

	for (cpu = 0; cpu < s->ncpus; cpu++) {
		int fd = perf_event_open(&s->clock_attr, tid, (int)cpu);

		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* an offline CPU */
			return -errno;
		}
		err = remember_fd(s, fd);
		if (!err)
			err = route_to_ring(s, fd, cpu, ROLE_CLOCK);
		if (err)
			return err;
		if (!s->clock_id && ioctl(fd, PERF_EVENT_IOC_ID, &s->clock_id))
			return -errno;
		if (s->bpf && (s->kernel_samples || !s->nfds_sampled)) {
			err = bpf_reader__attach_sampling(s->bpf, fd, false);
			if (err) {
				/* Samples then keep perf's record: read from outside, later. */
				pr_info("eBPF sample reader not attached (%s): on-CPU Python stacks "
					"are read from outside, about 1 ms late",
					strerror(-err));
				s->kernel_samples = false;
			} else {
				s->kernel_samples = true;
			}
			s->nfds_sampled++;
		}
		if (!s->use_switch_event)
			continue;
		fd = perf_event_open(&s->switch_attr, tid, (int)cpu);
		if (fd < 0) {
			if (errno != EACCES && errno != EPERM)
				return -errno;
			/* Not allowed to see kernel-mode switches: spans keep the last stack. */
			pr_info("context-switch samples not permitted; off-CPU stacks approximate");
			s->use_switch_event = false;
			continue;
		}
		err = remember_fd(s, fd);
		if (!err)
			err = route_to_ring(s, fd, cpu, ROLE_SWITCH);
		if (!err && s->kernel_samples && bpf_reader__attach_sampling(s->bpf, fd, true))
			pr_debug("switch samples keep their stack copies: program not attached");
		if (err)
			return err;
	}
	return 0;
}

static struct task_state *task_get(struct sampler *s, uint32_t pid, uint32_t tid, bool create)
{
	struct task_state *t = hashmap__get(s->tasks, tid);

	if (t || !create)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->outside_syscall = -1;
	if (hashmap__set(s->tasks, tid, t)) {
		free(t);
		return NULL;
	}
	s->stats.threads_seen++;
	return t;
}

static void task_free(struct task_state *t)
{
	if (!t)
		return;
	qrec_free(t->switch_sample);
	qrec_free(t->out_sample);
	free(t->outside_stack);
	py_stack_free(t->outside_py);
	py_stack_free(t->last_py);
	py_stack_free(t->out_py);
	py_fifo_clear(&t->kernel_outs);
	py_fifo_clear(&t->kernel_samples);
	while (t->afters) {
		struct after_stack *a = t->afters;

		t->afters = a->next;
		py_stack_free(a->ps);
		free(a);
	}
	free(t);
}

static void proc_add_task(struct sampler *s, uint32_t pid)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hashmap__set(s->procs, pid, p)) {
			free(p);
			return;
		}
		s->stats.processes_seen++;
	}
	p->ntasks++;
}

/* Drops one task of @pid; true when it was the process's last. */
static bool proc_remove_task(struct sampler *s, uint32_t pid)
{
	struct proc_state *p = hashmap__get(s->procs, pid);

	if (!p)
		return false;
	if (p->ntasks > 1) {
		p->ntasks--;
		return false;
	}
	free(hashmap__remove(s->procs, pid));
	return true;
}

/* ---- record parsing ---- */

struct sample_view {
	uint64_t id;
	uint32_t pid, tid, cpu;
	uint64_t time;
	struct sampler_ustack stack;
};

/* Reads the fields our sample_type puts in a PERF_RECORD_SAMPLE. False when malformed. */
static bool parse_sample(const struct sampler *s, const uint8_t *rec, uint32_t size,
			 struct sample_view *v)
{
	const uint8_t *p = rec + sizeof(struct perf_event_header), *end = rec + size;
	uint64_t abi, n;

	memset(v, 0, sizeof(*v));
#define TAKE(dst)                                                                                  \
	do {                                                                                       \
		if (p + sizeof(dst) > end)                                                         \
			return false;                                                              \
		memcpy(&(dst), p, sizeof(dst));                                                    \
		p += sizeof(dst);                                                                  \
	} while (0)
	TAKE(v->id);
	TAKE(v->pid);
	TAKE(v->tid);
	TAKE(v->time);
	TAKE(v->cpu);
	p += 4; /* res */
	if (s->opts.kernel_stacks) {
		TAKE(n);
		if (n > (uint64_t)(end - p) / 8)
			return false;
		v->stack.kernel_ips = (const uint64_t *)p;
		v->stack.nkernel = (uint32_t)n;
		p += n * 8;
	}
	TAKE(abi);
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		for (int i = 0; i < SREG_COUNT; i++)
			TAKE(v->stack.regs[i]);
		v->stack.valid = true;
	}
	TAKE(n);
	if (n) {
		uint64_t dyn;

		if (n > (uint64_t)(end - p))
			return false;
		v->stack.data = p;
		p += n;
		TAKE(dyn);
		v->stack.size = dyn < n ? dyn : n;
	}
#undef TAKE
	return true;
}

/* The time of any record: samples carry it near the start, others in the sample_id trailer. */
static uint64_t record_time(const struct perf_event_header *hdr, void *ctx)
{
	const uint8_t *rec = (const uint8_t *)hdr;
	uint64_t t = 0;

	(void)ctx;
	if (hdr->type == PERF_RECORD_SAMPLE) {
		if (hdr->size >= 32)
			memcpy(&t, rec + 24, 8);
	} else if (hdr->size >= sizeof(*hdr) + 32) {
		/* trailer: {pid, tid}, time, {cpu, res}, identifier */
		memcpy(&t, rec + hdr->size - 24, 8);
	}
	return t;
}

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

static struct py_stack *py_stack_copy(const struct py_stack *src);

/*
 * Remembers a stack walked in this drain (a copy: the original may be trimmed or freed
 * meanwhile): its code objects are read at the end.
 */
static void fresh_stack(struct sampler *s, const struct py_stack *walked)
{
	struct py_stack *ps = py_stack_copy(walked);

	if (!ps)
		return;
	if (s->nfresh == s->fresh_capacity) {
		size_t capacity = s->fresh_capacity ? s->fresh_capacity * 2 : 256;
		struct py_stack **grown = realloc(s->fresh, capacity * sizeof(*grown));

		if (!grown)
			return;
		s->fresh = grown;
		s->fresh_capacity = capacity;
	}
	s->fresh[s->nfresh++] = ps;
}

/*
 * Code objects are read after every stack of the drain was walked: reading them is
 * slow (strings, line tables), and a walk that waits behind it reads a later stack.
 */
static void read_fresh_codes(struct sampler *s)
{
	size_t i;

	for (i = 0; i < s->nfresh; i++) {
		cpython_read_codes(s->fresh[i]->proc, NULL, s->fresh[i]->frames, s->fresh[i]->n);
		py_stack_free(s->fresh[i]);
	}
	s->nfresh = 0;
}

static void sync_threads(struct sampler *s, uint32_t pid, struct cpython_process *proc);
struct task_state;
static struct py_stack *take_kernel_out(struct task_state *t, uint64_t out_time);

/* Reads the Python frames of @tid now, when @pid runs CPython. NULL otherwise. */
static struct py_stack *walk_python(struct sampler *s, uint32_t pid, uint32_t tid, bool exact,
				    uint64_t at_ns)
{
	struct cpython_process *proc = hashmap__get(s->pythons, pid);
	struct py_stack *ps;
	int n;

	if (!proc)
		return NULL;
	n = cpython_walk(proc, NULL, tid, sampler_now_ns(), s->py_scratch, CPYTHON_MAX_FRAMES);
	s->stats.python_walks++;
	sync_threads(s, pid, proc);
	if (n <= 0) {
		if (n < 0)
			s->stats.python_walk_errors++;
		return NULL;
	}
	ps = malloc(sizeof(*ps) + (size_t)n * sizeof(ps->frames[0]));
	if (!ps)
		return NULL;
	ps->proc = cpython_process__get(proc);
	ps->codes = NULL;
	ps->read_ns = sampler_now_ns();
	ps->at_ns = at_ns;
	ps->extended = false;
	ps->kernel = false;
	ps->exact = exact;
	ps->user_ip = ps->user_sp = 0;
	ps->syscall = -1;
	ps->n = (uint32_t)n;
	memcpy(ps->frames, s->py_scratch, (size_t)n * sizeof(ps->frames[0]));
	fresh_stack(s, ps);
	return ps;
}

/*
 * A stack was read for the thread: it is the "after" of every wait that ended since the
 * previous one was read (a chain of short waits with no sample between them). Kept in
 * a list: the drainer runs well ahead of the records being handed out.
 */
static void note_after_resume(struct task_state *t, const struct py_stack *ps)
{
	struct after_stack *a;

	if (!t->chain_start || ps->at_ns < t->chain_start)
		return;
	a = calloc(1, sizeof(*a));
	if (!a)
		return;
	a->from = t->chain_start;
	a->ps = py_stack_copy(ps);
	if (!a->ps) {
		free(a);
		return;
	}
	/* Appended at the end in O(1): thousands a second with many switches. */
	if (t->afters)
		t->afters_last->next = a;
	else
		t->afters = a;
	t->afters_last = a;
	t->chain_start = 0;
}

/* The stack read after the chain holding a wait that ended at @end, if known yet. */
static const struct py_stack *after_of(struct task_state *t, uint64_t end)
{
	/* Chains wholly before this wait are done with: their waits went out already. */
	while (t->afters && t->afters->ps->at_ns < end) {
		struct after_stack *a = t->afters;

		t->afters = a->next;
		py_stack_free(a->ps);
		free(a);
	}
	return t->afters && t->afters->from <= end ? t->afters->ps : NULL;
}

static bool same_frame(const struct cpython_frame *a, const struct cpython_frame *b, bool leaf)
{
	return a->code == b->code && a->fingerprint == b->fingerprint &&
	       (leaf || a->lasti == b->lasti);
}

/*
 * A wait too short to be read from outside lies between two stacks that are known: the
 * last one read before it and the first one read after it. What both share (from the
 * root: the same code objects, the same call sites) held all along; keep only that.
 */
static void keep_common_root(struct py_stack *guess, const struct py_stack *after)
{
	uint32_t n = 0;

	while (n < guess->n && n < after->n &&
	       same_frame(&guess->frames[guess->n - 1 - n], &after->frames[after->n - 1 - n],
			  n + 1 == guess->n || n + 1 == after->n))
		n++;
	if (n == guess->n)
		return;
	/* Frames are innermost first: drop the first (innermost) ones. */
	memmove(guess->frames, guess->frames + (guess->n - n), n * sizeof(guess->frames[0]));
	guess->n = n;
}

/*
 * Whether a thread's latest known Python stack may stand for it at @at_ns: it must be
 * of the same interpreter image (not from before an exec) and read for a moment at
 * most 4 sampling periods earlier. The stack itself is never more than one period of
 * the thread's CPU time stale (samples fire on its CPU time), but the wait that
 * inherits it may be long: a wider window puts long preemptions after a function
 * returned under that function; a narrower one splits slices at short waits. Measured
 * on the pool test (tests/e2e/test_python_record.py), 4 periods does best.
 */
static uint64_t period_ns(const struct sampler *s)
{
	return 1000000000ULL / s->opts.frequency_hz;
}

static uint64_t guess_window(const struct sampler *s)
{
	return 4 * period_ns(s);
}

static bool guess_fits(struct sampler *s, const struct task_state *t, const struct py_stack *ps,
		       uint64_t at_ns)
{
	return ps && at_ns >= ps->at_ns && at_ns - ps->at_ns <= guess_window(s) &&
	       ps->proc == hashmap__get(s->pythons, t->pid);
}

/* @proc (or none) runs @pid's CPython from @found_ns on (0: from before the recording). */
static void set_python(struct sampler *s, uint32_t pid, struct cpython_process *proc,
		       uint64_t found_ns)
{
	cpython_process__put(hashmap__remove(s->pythons, pid));
	if (proc)
		proc->since_ns = found_ns;
	if (proc && hashmap__set(s->pythons, pid, proc)) {
		cpython_process__put(proc);
		proc = NULL;
	}
	if (s->bpf) {
		bpf_reader__set_process(s->bpf, pid, proc ? &proc->layout : NULL,
					proc ? proc->runtime : 0);
		hashmap__remove(s->bpf_synced, pid);
	}
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

static void remember_unread(struct sampler *s, uint32_t pid, uint64_t runtime, unsigned minor)
{
	struct unread_runtime *u = calloc(1, sizeof(*u));

	if (!u)
		return;
	u->runtime = runtime;
	u->minor = minor;
	if (hashmap__set(s->unread_runtimes, pid, u))
		free(u);
}

static void retry_unread(struct sampler *s, uint32_t pid, uint64_t time)
{
	struct unread_runtime *u = hashmap__get(s->unread_runtimes, pid);
	struct cpython_process *proc;

	if (!u)
		return;
	proc = cpython_process__new((pid_t)pid, u->runtime, u->minor);
	if (proc) {
		set_python(s, pid, proc, time);
		free(hashmap__remove(s->unread_runtimes, pid));
	} else if (++u->tries == UNREAD_RUNTIME_TRIES) {
		pr_info("process %u: CPython %u.%u found but its runtime is unreadable", pid, 3U,
			u->minor);
		free(hashmap__remove(s->unread_runtimes, pid));
	}
}

/*
 * Follows which processes run CPython as records are drained: a libpython or python
 * mapping makes one (replacing any), fork copies it, exec drops it. Samples of such processes get
 * their Python frames read right away, as close to the sample as we can get.
 */
static void track_python(struct sampler *s, struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	const uint8_t *p = q->data + sizeof(*hdr);
	uint32_t ids[2];

	if (q->size < sizeof(*hdr) + 32)
		return; /* every record has at least the sample_id trailer */
	memcpy(ids, p, 8);
	if (hdr->type == PERF_RECORD_MMAP2 && !(hdr->misc & PERF_RECORD_MISC_MMAP_DATA)) {
		uint64_t start, pgoff, runtime;
		unsigned minor;
		const char *path = (const char *)q->data + sizeof(*hdr) + 64;

		if (q->size < sizeof(*hdr) + 64 + 33)
			return;
		q->data[q->size - 33] = '\0';
		memcpy(&start, p + 8, 8);
		memcpy(&pgoff, p + 24, 8);
		if (!cpython_locate(path, start, pgoff, &runtime, &minor)) {
			struct cpython_process *proc =
				cpython_process__new((pid_t)ids[0], runtime, minor);

			set_python(s, ids[0], proc, q->time);
			free(hashmap__remove(s->unread_runtimes, ids[0]));
			if (!proc)
				remember_unread(s, ids[0], runtime, minor);
		}
	} else if (hdr->type == PERF_RECORD_FORK) {
		uint32_t ppid;
		struct cpython_process *parent;

		memcpy(&ppid, p + 4, 4);
		parent = hashmap__get(s->pythons, ppid);
		/*
		 * A fork is written on the parent's CPU, the child's exec and mmaps on
		 * another: drained later, it must not replace what the child's own new
		 * image already told (a runtime found in a mapping always wins).
		 */
		if (ppid != ids[0] && parent && !hashmap__get(s->pythons, ids[0])) {
			uint32_t tid, ptid;
			size_t i;

			set_python(s, ids[0], cpython_process__fork(parent, (pid_t)ids[0]),
				   q->time);
			/* The child is a copy of the forking thread: same thread state address. */
			memcpy(&tid, p + 8, 4);
			memcpy(&ptid, p + 12, 4);
			for (i = 0; s->bpf && i < parent->nthreads; i++) {
				if (parent->threads[i].tid == ptid)
					bpf_reader__set_thread(s->bpf, tid,
							       parent->threads[i].tstate);
			}
		}
	} else if (hdr->type == PERF_RECORD_COMM && (hdr->misc & PERF_RECORD_MISC_COMM_EXEC)) {
		struct cpython_process *known = hashmap__get(s->pythons, ids[0]);

		/*
		 * An exec drops the old image's runtime, but not one its own new image mapped
		 * later: that mapping may have run on another CPU and been drained first.
		 */
		if (known && known->since_ns > q->time)
			return;
		set_python(s, ids[0], NULL, 0);
		free(hashmap__remove(s->unread_runtimes, ids[0]));
		/* The thread that exec'd (now the only one) had a state in the old image. */
		if (s->bpf) {
			bpf_reader__forget_thread(s->bpf, ids[0]);
			bpf_reader__forget_thread(s->bpf, ids[1]);
		}
	} else if (hdr->type == PERF_RECORD_SWITCH && !(hdr->misc & PERF_RECORD_MISC_SWITCH_OUT)) {
		struct task_state *t;

		/* A stack read while the thread waited held until it ran again: now. */
		memcpy(ids, q->data + q->size - 32, 8);
		t = hashmap__get(s->pythons, ids[0]) ? hashmap__get(s->tasks, ids[1]) : NULL;
		if (t && t->last_py && t->last_py->exact && !t->last_py->extended &&
		    q->time > t->last_py->at_ns) {
			t->last_py->at_ns = q->time; /* only this wait's end, not later ones */
			t->last_py->extended = true;
		}
		if (t && !t->chain_start)
			t->chain_start = q->time;
	} else if (hdr->type == PERF_RECORD_SWITCH && (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT)) {
		struct task_state *t;

		/* The stack it waits with: read by the kernel right then, else a guess. */
		memcpy(ids, q->data + q->size - 32, 8);
		t = hashmap__get(s->pythons, ids[0]) ? hashmap__get(s->tasks, ids[1]) : NULL;
		q->py = t ? take_kernel_out(t, q->time) : NULL;
		if (t && !q->py && s->bpf) {
			s->stats.kernel_switch_misses++;
			pr_debug("switch-out of %u at %" PRIu64 " without the kernel's stack (%u "
				 "queued, first at %" PRIu64 ")",
				 ids[1], q->time, t->kernel_outs.count,
				 t->kernel_outs.count
					 ? t->kernel_outs.items[t->kernel_outs.head]->at_ns
					 : 0);
		}
		if (q->py) {
			py_stack_free(t->last_py);
			t->last_py = py_stack_copy(q->py);
			note_after_resume(t, q->py);
		} else if (t && guess_fits(s, t, t->last_py, q->time)) {
			q->py = py_stack_copy(t->last_py);
		}
	} else if (hdr->type == PERF_RECORD_SAMPLE) {
		uint64_t id;
		struct task_state *t;

		/* Samples carry pid, tid after the identifier. */
		memcpy(&id, p, 8);
		memcpy(ids, p + 8, 8);
		retry_unread(s, ids[0], q->time);
		if (!hashmap__get(s->pythons, ids[0]) ||
		    (enum event_role)(uintptr_t)hashmap__get(s->roles, id) != ROLE_CLOCK)
			return;
		t = task_get(s, ids[0], ids[1], true);
		if (!q->py)
			q->py = walk_python(s, ids[0], ids[1], false, q->time);
		if (!t)
			return;
		if (q->py && !q->py->kernel && q->py->read_ns - q->time > 2 * period_ns(s) &&
		    t->last_py && t->last_py->at_ns <= q->time && t->last_py->proc == q->py->proc) {
			/*
			 * Read well after the sample (a busy machine): the thread may have
			 * moved on. What it had both before the sample and when read held
			 * at the sample; keep that.
			 */
			keep_common_root(q->py, t->last_py);
			s->stats.late_walks++;
		}
		if (q->py && !q->py->n) {
			py_stack_free(q->py);
			q->py = NULL;
		}
		if (q->py) {
			py_stack_free(t->last_py);
			t->last_py = py_stack_copy(q->py);
			note_after_resume(t, q->py);
		} else if (guess_fits(s, t, t->last_py, q->time)) {
			/* Gone by the time we looked (it left Python, or exited): its latest. */
			q->py = py_stack_copy(t->last_py);
		}
	}
}

/* Notes switch records while draining, to find threads still waiting afterwards. */
static void track_switch(struct sampler *s, const struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	struct pending_out *p;
	uint32_t ids[2];

	if (hdr->type != PERF_RECORD_SWITCH || q->size < sizeof(*hdr) + 32)
		return;
	memcpy(ids, q->data + q->size - 32, 8);
	p = hashmap__get(s->pending_outs, ids[1]);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || hashmap__set(s->pending_outs, ids[1], p)) {
			free(p);
			return;
		}
	}
	p->pid = ids[0];
	if ((hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) && q->time > p->out_time)
		p->out_time = q->time;
	else if (!(hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) && q->time > p->in_time)
		p->in_time = q->time;
}

static struct qrec *follow_kernel_event(struct sampler *s, struct qrec *q);

/* Collects one drain's records; they are followed in time order once all are in. */
static void take_record(struct qrec *rec, void *ctx)
{
	struct sampler *s = ctx;

	if (s->batch_count == s->batch_capacity) {
		size_t capacity = s->batch_capacity ? s->batch_capacity * 2 : 1024;
		struct qrec **grown = realloc(s->batch, capacity * sizeof(*grown));

		if (!grown) {
			qrec_free(rec);
			return;
		}
		s->batch = grown;
		s->batch_capacity = capacity;
	}
	rec->seq = s->batch_seq++;
	s->batch[s->batch_count++] = rec;
}

static int by_time(const void *a, const void *b)
{
	const struct qrec *x = *(struct qrec *const *)a, *y = *(struct qrec *const *)b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Rings are drained one CPU after another, so a batch is not in time order: an exec
 * on one CPU would otherwise be seen after the new image's mmaps on another.
 */
static void follow_batch(struct sampler *s, uint64_t cut)
{
	size_t i;

	if (!s->batch_count)
		return; /* qsort() wants a non-NULL array even for nothing */
	qsort(s->batch, s->batch_count, sizeof(*s->batch), by_time);
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

/* Hands the command line read at drain time to the record about to go out. */
static void attach_cmdline(struct sampler *s, const struct qrec *q)
{
	s->held_cmdline = hashmap__remove(s->cmdlines, (uintptr_t)q);
	s->rec.cmdline = s->held_cmdline;
}

static uint8_t *read_stack(pid_t pid, uint64_t sp, uint64_t size, uint64_t *got);

static void capture_free(struct outside_capture *c)
{
	if (c) {
		free(c->stack);
		py_stack_free(c->py);
	}
	free(c);
}

static void capture_list_free(struct outside_capture *c)
{
	while (c) {
		struct outside_capture *next = c->next;

		capture_free(c);
		c = next;
	}
}

/*
 * Keeps @c until its switch-out record is processed, which may be after the thread's
 * next waits were captured too: one list per thread, in time order.
 */
static void capture_keep(struct sampler *s, uint32_t tid, struct outside_capture *c)
{
	struct outside_capture *head = hashmap__get(s->captures, tid), **link = &head;

	while (*link && (*link)->out_time < c->out_time)
		link = &(*link)->next;
	if (*link && (*link)->out_time == c->out_time) {
		capture_free(c); /* the same wait, seen again */
		return;
	}
	c->next = *link;
	*link = c;
	if (hashmap__set(s->captures, tid, head)) {
		*link = c->next;
		capture_free(c);
	}
}

/*
 * Threads whose last drained switch record is a switch-out are (most likely) still
 * waiting: read their syscall and stack from outside now, while that is exact.
 */
static void capture_waiting(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->pending_outs, &cursor, &key, &value)) {
		struct pending_out *p = value;
		struct outside_capture *c;
		struct task_state *t;
		uint64_t sp, pc;
		int64_t nr;
		char state;

		if (p->out_time <= p->in_time)
			continue;
		/* As root the switch sample has the native stack; only Python needs more. */
		if (s->use_switch_event && !hashmap__get(s->pythons, p->pid))
			continue;
		state = procfs_task_state((pid_t)p->pid, (pid_t)key);
		if ((state != 'S' && state != 'D') ||
		    procfs_task_syscall((pid_t)p->pid, (pid_t)key, &nr, &sp, &pc))
			continue;
		c = calloc(1, sizeof(*c));
		if (!c)
			continue;
		c->out_time = p->out_time;
		c->read_ns = sampler_now_ns();
		c->syscall = nr;
		c->regs[SREG_SP] = sp;
		c->regs[SREG_IP] = pc;
		if (!s->use_switch_event)
			c->stack =
				read_stack((pid_t)p->pid, sp, s->opts.stack_bytes, &c->stack_size);
		c->py = walk_python(s, p->pid, (uint32_t)key, true, p->out_time);
		t = c->py ? task_get(s, p->pid, (uint32_t)key, true) : NULL;
		if (t) {
			/* The latest known state of the thread, for guesses that follow. */
			py_stack_free(t->last_py);
			t->last_py = py_stack_copy(c->py);
			note_after_resume(t, c->py);
		}
		capture_keep(s, (uint32_t)key, c);
	}
	hashmap__free_all(s->pending_outs, free);
	s->pending_outs = hashmap__new();
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
		raw[i].fingerprint = e->frames[i].fingerprint;
		raw[i].instr = e->frames[i].instr;
		raw[i].owner = e->frames[i].owner;
	}
	count = cpython_frames_from_raw(&proc->layout, raw, n, s->py_scratch, CPYTHON_MAX_FRAMES);
	if (count <= 0)
		return NULL;
	ps = malloc(sizeof(*ps) + (size_t)count * sizeof(ps->frames[0]));
	if (!ps)
		return NULL;
	ps->proc = cpython_process__get(proc);
	ps->codes = NULL;
	ps->read_ns = ps->at_ns = e->time_ns; /* read at that very instant */
	ps->extended = false;
	ps->exact = true;
	ps->kernel = true;
	ps->user_ip = e->user_ip;
	ps->user_sp = e->user_sp;
	ps->syscall = e->syscall;
	ps->n = (uint32_t)count;
	memcpy(ps->frames, s->py_scratch, (size_t)count * sizeof(ps->frames[0]));
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

/* Queues an event of the kernel-side reader with perf's records, to follow in time order. */
static void take_kernel_event(void *ctx, const struct pytrace_event *e)
{
	size_t size = PYTRACE_EVENT_HEADER_SIZE + e->nframes * sizeof(e->frames[0]);
	struct perf_event_header header = { KERNEL_EVENT_RECORD, 0,
					    (uint16_t)(sizeof(header) + size) };
	struct qrec *q = malloc(sizeof(*q) + header.size);

	if (!q)
		return;
	q->time = e->time_ns;
	q->cpu = e->cpu;
	q->size = header.size;
	q->py = NULL;
	memcpy(q->data, &header, sizeof(header));
	memcpy(q->data + sizeof(header), e, size);
	take_record(q, ctx);
}

/*
 * Follows an event of the kernel-side reader, in time order with perf's records (so
 * what runs CPython is known as of that moment). A switch-out's stack waits on its
 * thread for the switch record; a sample's becomes the sample record, or waits for
 * perf's own record of it when that was kept for its native or kernel frames. Returns
 * the record to go on with, or NULL.
 */
static struct qrec *follow_kernel_event(struct sampler *s, struct qrec *q)
{
	const struct pytrace_event *e = (const void *)(q->data + sizeof(struct perf_event_header));
	struct cpython_process *proc = hashmap__get(s->pythons, e->pid);
	struct qrec *out = NULL;
	struct task_state *t;
	struct py_stack *ps;

	/* Not Python as far as we know yet: the sample is lost (perf's was dropped). */
	ps = proc && e->time_ns >= proc->since_ns ? kernel_stack(s, proc, e) : NULL;
	t = ps ? task_get(s, e->pid, e->tid, true) : NULL;
	if (!t) {
		py_stack_free(ps);
		if (e->kind == PYTRACE_EV_SAMPLE && !s->opts.native && !s->opts.kernel_stacks)
			s->stats.kernel_samples_lost++;
	} else if (e->kind == PYTRACE_EV_SWITCH) {
		py_fifo_push(&t->kernel_outs, ps);
		s->stats.kernel_switch_stacks++;
	} else if (s->opts.native || s->opts.kernel_stacks) {
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
 */
static struct py_stack *take_kernel_out(struct task_state *t, uint64_t out_time)
{
	return py_fifo_take(&t->kernel_outs, out_time, 1000000);
}

/*
 * Copies out what the kernel has, then follows it in time order. The kernel-side
 * reader's events are taken first: one precedes the perf record it goes with (a switch,
 * a sample kept for its stack copy) and follows the ones it needs (a fork before its
 * child's events). So perf's records are followed only up to the moment the events
 * were taken, less a margin for an event being written then; later ones wait for the
 * next drain. @last: nothing more will come, follow everything.
 */
static void drain_rings(struct sampler *s, bool last)
{
	uint64_t cut = last || !s->bpf ? UINT64_MAX : sampler_now_ns() - KERNEL_EVENT_MARGIN_NS;
	uint32_t cpu;

	if (s->bpf)
		bpf_reader__consume(s->bpf, take_kernel_event, s);
	for (cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->rings[cpu].base)
			ring__drain(&s->rings[cpu], record_time, take_record, s);
	}
	follow_batch(s, cut);
	if (s->pending_outs && hashmap__count(s->pending_outs))
		capture_waiting(s);
	read_fresh_codes(s);
}

static void release_held(struct sampler *s)
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
static struct sampler_rec *out_rec(struct sampler *s, enum sampler_rec_kind kind, uint32_t pid,
				   uint32_t tid, uint32_t cpu, uint64_t time)
{
	memset(&s->rec, 0, sizeof(s->rec));
	s->rec.kind = kind;
	s->rec.pid = pid;
	s->rec.tid = tid;
	s->rec.cpu = cpu;
	s->rec.time_ns = time;
	return &s->rec;
}

/* An off-CPU span for @t ending at @end, with the best stack we have. */
static struct sampler_rec *emit_off_cpu(struct sampler *s, struct task_state *t, uint64_t end,
					uint32_t cpu)
{
	struct sampler_rec *r = out_rec(s, SREC_OFF_CPU, t->pid, t->tid, cpu, t->out_time);
	struct sample_view v;

	r->sample.end_ns = end;
	r->sample.wait = t->wait;
	if (t->outside_read_ns > end) {
		/*
		 * Read after this wait had ended: the thread had moved on (it ran and waited
		 * again before we looked), so what was read describes a later wait.
		 */
		free(t->outside_stack);
		t->outside_stack = NULL;
		py_stack_free(t->outside_py);
		t->outside_py = NULL;
		t->outside_syscall = -1;
		s->stats.stale_captures++;
	}
	t->outside_read_ns = 0;
	r->sample.syscall = t->outside_syscall;
	/* Python frames: read while it waited (exact), else its latest known (a guess). */
	if (t->outside_py) {
		s->held_py = t->outside_py;
		py_stack_free(t->out_py);
	} else {
		const struct py_stack *after = after_of(t, end);

		s->held_py = t->out_py;
		if (s->held_py && after) {
			/* Known before and after: what both share held throughout, sound. */
			keep_common_root(s->held_py, after);
		} else if (s->held_py && end - s->held_py->at_ns > guess_window(s)) {
			/* Only the before is known: a guess, for a wait that ends soon enough. */
			s->held_py->n = 0;
		}
		if (s->held_py && !s->held_py->n) {
			py_stack_free(s->held_py);
			s->held_py = NULL;
		}
	}
	t->outside_py = NULL;
	t->out_py = NULL;
	if (s->held_py) {
		resolve_codes(s->held_py);
		r->sample.python = s->held_py->proc;
		r->sample.py_codes = s->held_py->codes;
		r->sample.py_frames = s->held_py->frames;
		r->sample.npy = s->held_py->n;
		r->sample.py_exact = s->held_py->exact;
	}
	if (t->out_sample && parse_sample(s, t->out_sample->data, t->out_sample->size, &v)) {
		r->sample.stack = v.stack;
		r->sample.stack_at_switch = true;
		s->held[1] = t->out_sample;
		t->out_sample = NULL;
	} else if (t->outside_stack || t->outside_syscall >= 0) {
		r->sample.stack.valid = t->outside_stack != NULL;
		memcpy(r->sample.stack.regs, t->outside_regs, sizeof(t->outside_regs));
		r->sample.stack.data = t->outside_stack;
		r->sample.stack.size = t->outside_stack_size;
		r->sample.stack_at_switch = true;
		s->held_stack = t->outside_stack;
		t->outside_stack = NULL;
	}
	t->outside_syscall = -1;
	qrec_free(t->out_sample);
	t->out_sample = NULL;
	t->out = false;
	s->stats.off_cpu_spans++;
	return r;
}

static const struct sampler_rec *on_sample(struct sampler *s, struct qrec *q)
{
	struct sample_view v;
	struct task_state *t;
	enum event_role role;

	if (!parse_sample(s, q->data, q->size, &v))
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
	out_rec(s, SREC_SAMPLE, v.pid, v.tid, v.cpu, v.time)->sample.stack = v.stack;
	s->rec.sample.syscall = -1;
	if (q->py) {
		resolve_codes(q->py);
		s->stats.kernel_samples += q->py->kernel;
		s->rec.sample.py_exact = q->py->kernel;
		s->rec.sample.python = q->py->proc;
		s->rec.sample.py_codes = q->py->codes;
		s->rec.sample.py_frames = q->py->frames;
		s->rec.sample.npy = q->py->n;
	}
	return &s->rec;
}

/* Takes what was read from outside for the wait that began at @out_time, if anything. */
static void adopt_capture(struct sampler *s, struct task_state *t, uint64_t out_time)
{
	struct outside_capture *head = hashmap__get(s->captures, t->tid), *c;

	/* Captures of earlier waits were not claimed: their records were lost. */
	while (head && head->out_time < out_time) {
		c = head;
		head = head->next;
		capture_free(c);
	}
	if (!head || head->out_time != out_time) {
		if (head)
			hashmap__set(s->captures, t->tid, head);
		else
			hashmap__remove(s->captures, t->tid);
		return;
	}
	c = head;
	head = head->next;
	if (head)
		hashmap__set(s->captures, t->tid, head);
	else
		hashmap__remove(s->captures, t->tid);
	if (t->outside_py) {
		/* The kernel read this wait at the switch itself: better than a later look. */
		capture_free(c);
		return;
	}
	free(t->outside_stack);
	t->outside_syscall = c->syscall;
	memcpy(t->outside_regs, c->regs, sizeof(c->regs));
	t->outside_stack = c->stack;
	t->outside_stack_size = c->stack_size;
	t->outside_read_ns = c->read_ns;
	t->outside_py = c->py;
	c->stack = NULL;
	c->py = NULL;
	capture_free(c);
}

static const struct sampler_rec *on_switch(struct sampler *s, struct qrec *q, uint32_t pid,
					   uint32_t tid)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	struct task_state *t = task_get(s, pid, tid, true);

	if (!t || s->opts.mode != SAMPLER_MODE_WALL)
		return NULL;
	if (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT) {
		t->out = true;
		t->out_time = q->time;
		py_stack_free(t->out_py);
		t->out_py = NULL;
		if (q->py && q->py->kernel) {
			py_stack_free(t->outside_py);
			t->outside_py = q->py; /* read by the kernel at the switch: exact */
			t->outside_read_ns = 0;
			t->outside_syscall = q->py->syscall;
		} else {
			t->out_py = q->py;
		}
		q->py = NULL;
		t->wait = (hdr->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT) ? SAMPLER_WAIT_PREEMPTED
									    : SAMPLER_WAIT_BLOCKED;
		qrec_free(t->out_sample);
		t->out_sample = NULL;
		/* The switch sample comes just before its switch record. */
		if (t->switch_sample && t->switch_sample->time <= q->time &&
		    q->time - t->switch_sample->time < 1000000) {
			t->out_sample = t->switch_sample;
			t->switch_sample = NULL;
		}
		adopt_capture(s, t, q->time);
		return NULL;
	}
	if (!t->out) {
		s->stats.unpaired_switches++;
		return NULL;
	}
	return emit_off_cpu(s, t, q->time, q->cpu);
}

struct task_record {
	struct perf_event_header header;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

static const struct sampler_rec *on_fork(struct sampler *s, const struct qrec *q)
{
	struct task_record tr;

	if (q->size < sizeof(tr))
		return NULL;
	memcpy(&tr, q->data, sizeof(tr));
	if (!task_get(s, tr.pid, tr.tid, true))
		return NULL;
	proc_add_task(s, tr.pid);
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
	last = proc_remove_task(s, tr.pid);
	if (last) {
		set_python(s, tr.pid, NULL, 0);
		free(hashmap__remove(s->unread_runtimes, tr.pid));
	}
	out_rec(s, SREC_EXIT, tr.pid, tr.tid, q->cpu, q->time)->exit.last_in_process = last;
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
	s->held[0] = q;
	return &s->rec;
}

/* The pid a record belongs to, for dropping what the launched child did before exec. */
static uint32_t record_pid(const struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	uint32_t pid = 0;

	if (hdr->type == PERF_RECORD_SAMPLE && q->size >= 24)
		memcpy(&pid, q->data + 16, 4);
	else if (hdr->type != SYNTH_RECORD && q->size >= sizeof(*hdr) + 32)
		memcpy(&pid, q->data + q->size - 32, 4);
	return pid;
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

static const struct sampler_rec *next_locked(struct sampler *s)
{
	struct qrec *q;

	release_held(s);
	while ((q = queue__peek(&s->queue))) {
		const struct sampler_rec *r;

		if (!s->stopped && q->time > s->watermark)
			return NULL;
		if (s->stopped && q->time > s->stop_ns && q->time != 0) {
			qrec_free(
				queue__pop(&s->queue)); /* after the stop: not part of the trace */
			continue;
		}
		r = dispatch(s, queue__pop(&s->queue));
		if (r)
			return r;
	}
	return s->stopped ? flush_waiting(s) : NULL;
}

const struct sampler_rec *sampler__next(struct sampler *s)
{
	const struct sampler_rec *r;

	pthread_mutex_lock(&s->lock);
	r = next_locked(s);
	pthread_mutex_unlock(&s->lock);
	return r;
}

/* Processes we traced but whose exit record was lost: gone from /proc or zombies. */
static void check_liveness(struct sampler *s)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	while (hashmap__next(s->procs, &cursor, &key, &value)) {
		char state = procfs_task_state((pid_t)key, (pid_t)key);

		if (state == 0 || state == 'Z' || state == 'X') {
			free(hashmap__remove(s->procs, key));
			cursor = 0; /* the map changed: start over */
		}
	}
}

/* One round of the drainer: copy records out, follow them, read waiting threads. */
static void drain_once(struct sampler *s)
{
	uint64_t now = sampler_now_ns();

	/* Anything stamped before this is already in a buffer. */
	s->watermark = now - REORDER_MARGIN_NS;
	drain_rings(s, false);
	if (now - s->last_liveness_ns > 1000000000ULL) {
		s->last_liveness_ns = now;
		check_liveness(s);
	}
	s->stats.processes = (uint32_t)hashmap__count(s->procs);
	s->stats.threads = (uint32_t)hashmap__count(s->tasks);
}

/*
 * The drainer thread. Python stacks are read when records are drained, so draining
 * must not wait for the records to be processed (loading a new process's modules can
 * take tens of ms): this thread drains about every millisecond, whatever the rest does.
 */
static void *drainer_main(void *arg)
{
	struct sampler *s = arg;
	struct sched_param realtime = { .sched_priority = 1 }, normal = { .sched_priority = 0 };
	struct pollfd pfds[MAX_CPUS];
	bool fast = false, python;
	uint64_t walks;
	nfds_t n = 0;
	uint32_t cpu;

	for (cpu = 0; cpu < s->ncpus; cpu++) {
		if (s->rings[cpu].base)
			pfds[n++] = (struct pollfd){ .fd = s->rings[cpu].fd, .events = POLLIN };
	}
	while (!s->drainer_stop) {
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
		pthread_mutex_lock(&s->lock);
		walks = s->stats.python_walks;
		drain_once(s);
		/* When the kernel reads every stack, none waits on this thread: drain slowly. */
		python = hashmap__count(s->pythons) > 0 &&
			 (!s->kernel_samples || s->stats.python_walks != walks);
		pthread_mutex_unlock(&s->lock);
		if (python == fast)
			continue;
		/*
		 * Python stacks are read as records are drained: then drain every ms, at the
		 * lowest real-time priority (a normal thread waited up to 20 ms for a CPU on a
		 * busy machine; needs CAP_SYS_NICE). Without Python both cost the target for
		 * nothing (8-13 % at 100-1000 Hz here): drain slowly, at normal priority.
		 */
		fast = python;
		if (pthread_setschedparam(pthread_self(), fast ? SCHED_FIFO : SCHED_OTHER,
					  fast ? &realtime : &normal) &&
		    fast)
			pr_info("drainer at normal priority: Python stacks may lag on a busy machine");
	}
	return NULL;
}

static int start_drainer(struct sampler *s)
{
	sigset_t all, old;
	int err;

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

static void stop_drainer(struct sampler *s)
{
	if (!s->drainer_running)
		return;
	s->drainer_stop = true;
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

void sampler__stop(struct sampler *s)
{
	size_t i;

	if (s->stopped)
		return;
	stop_drainer(s);
	pthread_mutex_lock(&s->lock);
	s->stop_ns = sampler_now_ns();
	for (i = 0; i < s->nfds; i++)
		ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	drain_rings(s, true);
	s->stopped = true;
	pthread_mutex_unlock(&s->lock);
}

bool sampler__done(struct sampler *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	done = hashmap__count(s->procs) == 0;
	pthread_mutex_unlock(&s->lock);
	return done;
}

void sampler__stats(struct sampler *s, struct sampler_stats *stats)
{
	pthread_mutex_lock(&s->lock);
	*stats = s->stats;
	stats->processes = (uint32_t)hashmap__count(s->procs);
	if (s->bpf) {
		stats->kernel_events_lost = bpf_reader__stat(s->bpf, PYTRACE_STAT_RINGBUF_FULL);
		stats->kernel_read_errors = bpf_reader__stat(s->bpf, PYTRACE_STAT_READ_ERRORS);
		stats->kernel_empty_walks = bpf_reader__stat(s->bpf, PYTRACE_STAT_NO_FRAMES);
		stats->kernel_threads_found = bpf_reader__stat(s->bpf, PYTRACE_STAT_THREADS_FOUND);
		stats->kernel_forks_followed =
			bpf_reader__stat(s->bpf, PYTRACE_STAT_FORKS_FOLLOWED);
	}
	pthread_mutex_unlock(&s->lock);
}

pid_t sampler__child(const struct sampler *s)
{
	return s->child.pid;
}

static void free_task_value(void *t)
{
	task_free(t);
}

static void free_captures_value(void *c)
{
	capture_list_free(c);
}

static void put_python_value(void *p)
{
	cpython_process__put(p);
}

void sampler__free(struct sampler *s)
{
	size_t i;

	if (!s)
		return;
	stop_drainer(s);
	for (i = 0; i < s->ncpus; i++)
		ring__unmap(&s->rings[i]);
	for (i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	queue__clear(&s->queue);
	for (i = 0; i < s->batch_count; i++)
		qrec_free(s->batch[i]);
	free(s->batch);
	release_held(s);
	hashmap__free_all(s->tasks, free_task_value);
	hashmap__free_all(s->procs, free);
	hashmap__free_all(s->cmdlines, free);
	hashmap__free_all(s->pending_outs, free);
	hashmap__free_all(s->captures, free_captures_value);
	hashmap__free_all(s->pythons, put_python_value);
	hashmap__free_all(s->unread_runtimes, free);
	bpf_reader__free(s->bpf);
	hashmap__free(s->bpf_synced);
	free(s->py_scratch);
	for (i = 0; i < s->nfresh; i++)
		py_stack_free(s->fresh[i]);
	free(s->fresh);
	hashmap__free(s->roles);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/* ---- setting up ---- */

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;
	bool privileged = geteuid() == 0;

	if (!opts->frequency_hz || opts->frequency_hz > 100000 || opts->stack_bytes % 8 ||
	    opts->stack_bytes > 65528) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->opts = *opts;
	if (!s->opts.buffer_kb) {
		/* Room for ~0.5 s of samples at the full rate on one CPU, within [1, 64] MiB. */
		uint64_t kb = (uint64_t)opts->frequency_hz * (opts->stack_bytes + 256) / 2048;
		uint32_t pow2 = 1024;

		while (pow2 < kb && pow2 < 65536)
			pow2 *= 2;
		s->opts.buffer_kb = pow2;
	}
	s->ncpus = online_cpus();
	s->child.release_fd = s->child.status_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->roles = hashmap__new();
	s->tasks = hashmap__new();
	s->procs = hashmap__new();
	s->cmdlines = hashmap__new();
	s->pending_outs = hashmap__new();
	s->captures = hashmap__new();
	s->pythons = hashmap__new();
	s->unread_runtimes = hashmap__new();
	s->py_scratch = calloc(CPYTHON_MAX_FRAMES, sizeof(*s->py_scratch));
	if (!s->roles || !s->tasks || !s->procs || !s->cmdlines || !s->pending_outs ||
	    !s->captures || !s->pythons || !s->unread_runtimes || !s->py_scratch) {
		sampler__free(s);
		errno = ENOMEM;
		return NULL;
	}
	build_attrs(s, privileged);
	s->use_switch_event = opts->mode == SAMPLER_MODE_WALL;
	s->bpf_synced = hashmap__new();
	if (!s->bpf_synced) {
		sampler__free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (opts->backend != SAMPLER_BACKEND_PERF) {
		s->bpf = bpf_reader__open(opts->native || opts->kernel_stacks,
					  opts->mode == SAMPLER_MODE_WALL);
		if (!s->bpf && opts->backend == SAMPLER_BACKEND_BPF) {
			int err = errno;

			sampler__free(s);
			errno = err;
			return NULL;
		}
		if (!s->bpf)
			pr_info("eBPF reader unavailable (%s): Python stacks are read from outside, "
				"about 1 ms after samples; waits shorter than ~2 ms get approximate ones",
				strerror(errno));
	}
	raise_fd_limit();
	s->start_ns = sampler_now_ns();
	return s;
}

struct sampler *sampler__launch(const struct sampler_opts *opts, char *const argv[],
				const struct sampler_creds *creds)
{
	struct sampler *s = sampler__new(opts);
	int err;

	if (!s)
		return NULL;
	err = launch_hold(argv, creds, &s->child);
	if (err)
		goto out_free;
	err = open_task_events(s, s->child.pid);
	if (err) {
		launch_abort(&s->child);
		goto out_free;
	}
	if (!task_get(s, (uint32_t)s->child.pid, (uint32_t)s->child.pid, true)) {
		launch_abort(&s->child);
		err = -ENOMEM;
		goto out_free;
	}
	proc_add_task(s, (uint32_t)s->child.pid);
	s->start_ns = sampler_now_ns();
	err = launch_release(&s->child);
	if (err)
		goto out_free;
	err = start_drainer(s);
	if (err)
		goto out_free;
	return s;

out_free:
	s->child.pid = 0;
	sampler__free(s);
	errno = -err;
	return NULL;
}

static int push_synth(struct sampler *s, const struct sampler_rec *rec, const char *text)
{
	size_t len = text ? strlen(text) + 1 : 0;
	size_t size = sizeof(struct synth_record) + len;
	struct qrec *q = malloc(sizeof(*q) + size);
	struct synth_record *sr;

	if (!q)
		return -ENOMEM;
	q->py = NULL;
	sr = (struct synth_record *)q->data;
	sr->header.type = SYNTH_RECORD;
	sr->header.misc = 0;
	sr->header.size = 0; /* may exceed 16 bits; never read back from a ring */
	sr->rec = *rec;
	sr->rec.synthetic = true;
	if (text)
		memcpy(sr->text, text, len);
	q->size = (uint32_t)size;
	q->cpu = 0;
	q->time = rec->time_ns;
	if (queue__push(&s->queue, q)) {
		qrec_free(q);
		return -ENOMEM;
	}
	return 0;
}

/* Copies up to @size bytes of a thread's stack from @sp with process_vm_readv. */
static uint8_t *read_stack(pid_t pid, uint64_t sp, uint64_t size, uint64_t *got)
{
	uint8_t *buf = malloc(size);
	uint64_t done = 0;

	if (!buf)
		return NULL;
	/* Page by page: the copy stops where the stack mapping ends. */
	while (done < size) {
		uint64_t chunk = 4096 - ((sp + done) & 4095);
		struct iovec local, remote;
		ssize_t n;

		if (chunk > size - done)
			chunk = size - done;
		local = (struct iovec){ buf + done, chunk };
		remote = (struct iovec){ (void *)(uintptr_t)(sp + done), chunk };
		n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0)
			break;
		done += (uint64_t)n;
	}
	if (!done) {
		free(buf);
		return NULL;
	}
	*got = done;
	return buf;
}

/* A thread that is blocked as we attach: a wait from now, with its stack read from outside. */
static void note_blocked(struct sampler *s, struct task_state *t)
{
	uint64_t sp, pc;
	int64_t nr;
	char state = procfs_task_state((pid_t)t->pid, (pid_t)t->tid);

	if (state != 'S' && state != 'D')
		return;
	t->out = true;
	t->out_time = s->start_ns;
	t->wait = SAMPLER_WAIT_BLOCKED;
	if (procfs_task_syscall((pid_t)t->pid, (pid_t)t->tid, &nr, &sp, &pc))
		return;
	t->outside_syscall = nr;
	t->outside_regs[SREG_SP] = sp;
	t->outside_regs[SREG_IP] = pc;
	t->outside_stack =
		read_stack((pid_t)t->pid, sp, s->opts.stack_bytes, &t->outside_stack_size);
}

/* Records for what a process already is: its maps, its threads and their names. */
static int describe_process(struct sampler *s, pid_t pid)
{
	struct sampler_rec rec = { .time_ns = s->start_ns,
				   .pid = (uint32_t)pid,
				   .tid = (uint32_t)pid };
	struct procfs_map *maps = NULL;
	pid_t *tids = NULL;
	size_t nmaps = 0, ntids = 0, i;
	char path[1024], comm[64];
	int err;

	rec.kind = SREC_FORK;
	rec.fork.ppid = (uint32_t)procfs_ppid(pid);
	rec.fork.ptid = rec.fork.ppid;
	err = push_synth(s, &rec, procfs_cmdline(pid, path, sizeof(path)) ? NULL : path);
	if (!err && !procfs_exec_maps(pid, &maps, &nmaps)) {
		for (i = 0; i < nmaps && !err; i++) {
			rec = (struct sampler_rec){ .kind = SREC_MMAP,
						    .time_ns = s->start_ns,
						    .pid = (uint32_t)pid,
						    .tid = (uint32_t)pid };
			rec.mmap.start = maps[i].start;
			rec.mmap.len = maps[i].end - maps[i].start;
			rec.mmap.pgoff = maps[i].pgoff;
			err = push_synth(s, &rec, maps[i].path);
		}
		procfs_maps_free(maps, nmaps);
	}
	if (!err && !procfs_tasks(pid, &tids, &ntids)) {
		for (i = 0; i < ntids && !err; i++) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tids[i]);
			if (procfs_read(path, comm, sizeof(comm)) < 0)
				continue;
			rec = (struct sampler_rec){ .kind = SREC_COMM,
						    .time_ns = s->start_ns,
						    .pid = (uint32_t)pid,
						    .tid = (uint32_t)tids[i] };
			err = push_synth(s, &rec, comm);
		}
		free(tids);
	}
	return err;
}

/* Opens events for every thread of @pid not yet traced. Returns how many were new. */
static int attach_process(struct sampler *s, pid_t pid)
{
	pid_t *tids = NULL;
	size_t ntids = 0, i;
	int err, added = 0;
	bool known = hashmap__get(s->procs, (uint64_t)pid) != NULL;

	err = procfs_tasks(pid, &tids, &ntids);
	if (err)
		return err;
	if (!hashmap__get(s->pythons, (uint64_t)pid))
		set_python(s, (uint32_t)pid, cpython_process__find(pid), 0);
	for (i = 0; i < ntids; i++) {
		struct task_state *t;

		if (hashmap__get(s->tasks, (uint64_t)tids[i]))
			continue;
		err = open_task_events(s, tids[i]);
		if (err == -ESRCH)
			continue; /* it ended meanwhile */
		if (err)
			break;
		t = task_get(s, (uint32_t)pid, (uint32_t)tids[i], true);
		if (!t) {
			err = -ENOMEM;
			break;
		}
		proc_add_task(s, (uint32_t)pid);
		note_blocked(s, t);
		added++;
	}
	free(tids);
	if (err)
		return err;
	if (!known && added)
		err = describe_process(s, pid);
	return err ? err : added;
}

struct sampler *sampler__attach(const struct sampler_opts *opts, const pid_t *pids, size_t npids,
				pid_t *bad_pid)
{
	struct sampler *s = sampler__new(opts);
	int round, err = 0, added;
	size_t i;

	if (!s)
		return NULL;
	for (i = 0; i < npids; i++) {
		if (kill(pids[i], 0) && errno == ESRCH) {
			*bad_pid = pids[i];
			err = -ESRCH;
			goto out_free;
		}
	}
	/* Threads and children may appear while we attach: go round until nothing is new. */
	for (round = 0; round < ATTACH_ROUNDS; round++) {
		added = 0;
		for (i = 0; i < npids; i++) {
			pid_t *tree = NULL;
			size_t n = 0, j;

			err = procfs_descendants(pids[i], &tree, &n);
			for (j = 0; !err && j < n; j++) {
				int r = attach_process(s, tree[j]);

				if (r == -ESRCH && j)
					continue; /* a descendant that exited meanwhile */
				if (r < 0) {
					*bad_pid = tree[j];
					err = r;
				} else {
					added += r;
				}
			}
			free(tree);
			if (err)
				goto out_free;
		}
		if (!added)
			break;
	}
	err = start_drainer(s);
	if (err)
		goto out_free;
	return s;

out_free:
	sampler__free(s);
	errno = -err;
	return NULL;
}
