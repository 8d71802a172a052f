// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel side: walks a Python thread's frame chain at the instant it is sampled (a
 * program on the cpu-clock perf events) and at the instant it switches out
 * (raw_tp/sched_switch), while it cannot move, and hands the raw frames to user space.
 * Only reads; the target is never written to. Kernel fields are read at offsets user
 * space found (no CO-RE, no tp_btf): libbpf then loads none of the kernel's BTF, which
 * was half of the start-up time.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "../common/fingerprint.h"
#include "pytrace_bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* Set before loading: samples go on to perf (with their stack copy) after the walk. */
const volatile __u8 pass_samples = 0;

/* Set before loading: where the kernel fields read below are in the running kernel. */
const volatile struct pytrace_kernel_offsets kernel_offsets = { 0 };

/*
 * The hash maps are not preallocated: a preallocated 65,536-entry map took 12-18 ms to
 * create, a third of the start-up left (the third map, preallocated again by mistake,
 * cost 7.6 ms of the time to the command's start). Tracing programs may use such maps
 * since Linux 6.1; an element that cannot be had in a hurry is looked for again next time.
 */

/* tgid -> how to walk it; filled by user space when it finds CPython in a process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pytrace_py_cfg);
} py_cfg SEC(".maps");

/* tid -> its PyThreadState address; kept current by user space, copied at fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

/*
 * tgids of the traced tree: set by user space for its roots, followed here at fork.
 * Not a child followed for want of an element costs only its exit status (then read
 * from /proc, if still there).
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} traced SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} events SEC(".maps");

/* Per CPU: the thread whose switch-out was just read whole (its perf sample is not needed). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} switch_read SEC(".maps");

/*
 * Where an event is built before it is copied into the ring at its real length: one per
 * CPU and kind of walk (see walk_and_send()), entry 3 * cpu + which. Not a
 * per-CPU array: those hold at most 32 KB a value, and an event has room for 1,024
 * frames. User space sizes it for the CPUs there are.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct pytrace_event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PYTRACE_STAT_COUNT);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static void count(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &which);

	if (v)
		(*v)++;
}

/* The header of an event now, with no frames yet. */
static __always_inline void event_start(struct pytrace_event *e, __u32 tgid, __u32 tid,
					__u16 kind)
{
	e->time_ns = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = tid;
	e->cpu = bpf_get_smp_processor_id();
	e->kind = kind;
	e->nframes = 0;
	e->truncated = 0;
	e->gil = PYTRACE_GIL_UNKNOWN;
	e->cut = 0;
	e->args_size = 0;
	e->names_size = 0;
	e->user_ip = e->user_sp = 0;
	e->syscall = -1;
	e->syscall_arg = 0;
}

static __u64 read_u64(__u64 addr, int *err)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		*err = 1;
	return v;
}

/* Kernel fields, at the offsets in @kernel_offsets (a task's or saved registers' memory). */
static __u64 kernel_u64(const void *base, __u32 offset)
{
	__u64 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (const char *)base + offset);
	return v;
}

static __u32 kernel_u32(const void *base, __u32 offset)
{
	__u32 v = 0;

	bpf_probe_read_kernel(&v, sizeof(v), (const char *)base + offset);
	return v;
}

/* A task's thread id and process id, as user space calls them. */
static __u32 task_tid(const void *task)
{
	return kernel_u32(task, kernel_offsets.task_pid);
}

static __u32 task_tgid(const void *task)
{
	return kernel_u32(task, kernel_offsets.task_tgid);
}

/* The user registers of the current task, saved on its kernel stack. */
static const void *current_user_regs(void)
{
	return (const void *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

#define MAX_THREAD_SEARCH 64

/* Where a search of the interpreter's thread list stands, between check_thread() calls. */
struct thread_search {
	const struct pytrace_py_cfg *cfg;
	__u64 want;   /* the thread's id as the interpreter stores it */
	__u64 tstate; /* the state to check next; the one found when @found */
	int err;
	int found;
};

/* A bpf_loop() body (checked once by the verifier): checks one thread state; 1 ends. */
static long check_thread(__u32 i, void *arg)
{
	struct thread_search *t = arg;
	__u64 id = read_u64(t->tstate + t->cfg->tstate_id, &t->err);

	(void)i;
	if (t->cfg->id_is_native)
		id = (__u32)id;
	if (!t->err && id == t->want) {
		t->found = 1;
		return 1;
	}
	t->tstate = read_u64(t->tstate + t->cfg->tstate_next, &t->err);
	return !t->tstate || t->err;
}

/*
 * A thread not seen before (user space learns thread states only when it reads them):
 * looks for it in the main interpreter's thread list, and remembers what it finds.
 */
static __u64 find_tstate(const struct pytrace_py_cfg *cfg, __u32 tid)
{
	const void *task = (const void *)bpf_get_current_task();
	struct thread_search t = { .cfg = cfg };
	__u64 interp;

	t.want = cfg->id_is_native ? tid : kernel_u64(task, kernel_offsets.task_fsbase);
	if (cfg->id_is_native && cfg->pidns_ino) {
		struct bpf_pidns_info ns;

		if (bpf_get_ns_current_pid_tgid(cfg->pidns_dev, cfg->pidns_ino, &ns, sizeof(ns)))
			return 0;
		t.want = ns.pid;
	}
	interp = read_u64(cfg->runtime + cfg->runtime_interpreters_head, &t.err);
	if (t.err || !interp)
		return 0;
	t.tstate = read_u64(interp + cfg->interp_threads_head, &t.err);
	if (t.tstate && !t.err)
		bpf_loop(MAX_THREAD_SEARCH, check_thread, &t, 0);
	if (!t.found)
		return 0;
	bpf_map_update_elem(&tstates, &tid, &t.tstate, BPF_ANY);
	count(PYTRACE_STAT_THREADS_FOUND);
	return t.tstate;
}

/*
 * Objects passed down a stack (self, the data a recursion works on) are read once per
 * walk: a later frame's argument that is an object read earlier in the walk (remembered
 * in one of SEEN_OBJECTS slots by its address) copies its record (memory, not a read of
 * the process).
 */
#define SEEN_OBJECTS 8
#define NAMED_CODES 256
#define SENDING_NAMES 16

/* Per CPU and per kind of walk: where a frame's, a code object's and arguments' bytes land. */
struct walk_buf {
	__u8 frame[2 * PYTRACE_BPF_SPAN]; /* twice: see span_len() */
	__u8 code[2 * PYTRACE_BPF_SPAN];
	__u64 slots[2 * PYTRACE_BPF_MAX_ARGS];
	/* The latest objects read in this walk and where their records are in args. */
	__u64 seen_obj[SEEN_OBJECTS];
	__u32 seen_at[SEEN_OBJECTS];
	__u32 seen_walk[SEEN_OBJECTS]; /* the walk that wrote it */
	__u32 walks;
	/*
	 * The code object read last in this walk, whose span is in code. Here, not in the
	 * walk's state on the stack: the verifier follows values there, and fields added
	 * to it made it check 4-8 times as many states (seconds of start-up).
	 */
	__u64 last_code;
	/* Code objects whose names this CPU sent lately (read_code_name()), by address. */
	__u64 named_code[NAMED_CODES], named_fingerprint[NAMED_CODES];
	__u32 named_pid[NAMED_CODES];
	/* ... and those of this walk, noted there once it is sent (else sent again). */
	__u64 sending_code[SENDING_NAMES], sending_fingerprint[SENDING_NAMES];
	__u32 nsending;
	__u32 names_used; /* bytes of names filled (not in the walk's state: see last_code) */
	__u32 pid;	  /* the process walked */
	/*
	 * The walk's state for what read_values() reads, here for the same reason: what
	 * it reads from the walk's stack, the verifier follows into every call.
	 */
	__u32 walk_id;	  /* tells this walk's seen_* from earlier walks' */
	__u32 at;	  /* the frame being read */
	__u32 args_used;  /* bytes of args filled */
	__u32 index_base; /* 0: parameters; 0x80: a pool worker's task locals */
	__u8 args_cut;
	__u8 slots_read; /* the frame's span held its slots */
	__u8 args[PYTRACE_BPF_ARGS_BYTES];
	/* Apart from the arguments: sent or not, they must not change which fit. */
	__u8 names[PYTRACE_BPF_NAMES_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, struct walk_buf);
} walk_bufs SEC(".maps");

/* Where a frame walk stands, between calls of read_frame(). */
struct frame_walk {
	const struct pytrace_py_cfg *cfg;
	struct pytrace_event *e;
	struct walk_buf *buf;
	__u64 frame; /* the next frame to read; 0 at the end of the chain */
	int err;
	__u32 python_frames; /* frames read that are not shims (owner < OWNER_SHIM) */
};

/*
 * Frame owners from here on are the interpreter's own shims (3.11+: C-stack entry
 * frames; 3.15: also the base frame that ends every thread's chain): user space skips
 * them (cpython_layout.owner_first_skipped), and a chain of shims alone has no frame
 * to show: a thread at start-up, before its first Python call.
 */
#define OWNER_SHIM 3

/*
 * The length of a span to read, as the verifier can see it bounded: a plain check can be
 * lost when the compiler reuses an unchecked copy of the value, and a mask kept by the
 * empty asm (which the compiler can't see through) can't. User space keeps lengths
 * within PYTRACE_BPF_SPAN; buffers have room for the mask's bound.
 */
static __always_inline __u32 span_len(__u64 len)
{
	__u32 n = (__u32)len;

	asm volatile("" : "+r"(n));
	return n & (2 * PYTRACE_BPF_SPAN - 1);
}

/* A field of a span read whole; user space keeps offsets inside the span. */
static __always_inline __u64 span_u64(const __u8 *span, __u64 off)
{
	if (off > PYTRACE_BPF_SPAN - 8)
		return 0;
	return *(const __u64 *)(span + off);
}

/*
 * The name word of the code object whose span is in @code: co_name's pointer with
 * co_version's low 16 bits above it (cpython_name_word()). Masked, not branched on:
 * branches in the frame walk multiply the verifier's work.
 */
static __always_inline __u64 name_word(const __u8 *code, const struct pytrace_py_cfg *cfg)
{
	__u32 at = (__u32)cfg->code_version;

	asm volatile("" : "+r"(at));
	at &= PYTRACE_BPF_SPAN - 1; /* within code[2 * SPAN] with room for 4 bytes */
	return span_u64(code, cfg->code_name) |
	       ((__u64)(*(const __u32 *)(code + at)) & cfg->version_mask) << 48;
}

#include "values.bpf.h"

/*
 * Reads frame @i of a walk and steps to the one before it; 1 ends the walk. A loop body
 * for bpf_loop(), which the verifier checks once: as an open-coded loop of 64 rounds it
 * was checked round by round (35,000 instructions, ~15 ms of start-up per program).
 * One read for the frame's fields and one for its code object's, unless it is the code
 * of the frame read just before (a recursion). Frame i goes to frames[i % MAX_FRAMES]:
 * past MAX_FRAMES the innermost are overwritten. Their arguments are not (user space
 * passes them over): the arguments' room fills from the innermost frame, so those of a
 * stack that deep are mostly of frames cut. Starting the arguments over every
 * MAX_FRAMES frames made the verifier's work grow past its limit.
 */
static long read_frame(__u32 i, void *arg)
{
	struct frame_walk *w = arg;
	const struct pytrace_py_cfg *cfg = w->cfg;
	struct walk_buf *b = w->buf;
	struct pytrace_raw_frame *f;
	__u64 code, frame = w->frame;
	__u32 len;

	if (i >= PYTRACE_BPF_WALK_FRAMES)
		return 1;
	len = span_len(cfg->frame_span_len);
	b->slots_read = cfg->slots_in_span;
	if (bpf_probe_read_user(b->frame, len, (const void *)(frame + cfg->frame_span_at))) {
		len = span_len(cfg->frame_base_len);
		b->slots_read = 0;
		if (!cfg->slots_in_span ||
		    bpf_probe_read_user(b->frame, len, (const void *)(frame + cfg->frame_span_at))) {
			w->err = 1;
			return 1;
		}
	}
	code = span_u64(b->frame, cfg->frame_code);
	if (cfg->code_tagged)
		code &= ~3ULL;
	/*
	 * Masked, not only checked: the check above was on a register the call spilled;
	 * the empty asm keeps the compiler from dropping the mask as redundant.
	 */
	asm volatile("" : "+r"(i));
	f = &w->e->frames[i & (PYTRACE_BPF_MAX_FRAMES - 1)];
	f->code = code;
	f->instr = span_u64(b->frame, cfg->frame_instr);
	f->owner = cfg->frame_owner ? (__u8)span_u64(b->frame, cfg->frame_owner) : 0;
	w->python_frames += f->owner < OWNER_SHIM;
	f->filename = f->name = 0;
	b->at = i;
	w->e->nframes = i + 1; /* frames read so far; then those sent, see walk_and_send */
	w->frame = span_u64(b->frame, cfg->frame_previous);
	if (code) {
		/*
		 * Not read again for the frame before's code (a recursion): a read of no
		 * bytes then, not a branch around the read, which made the verifier check
		 * four times as many states (a quarter of a second of start-up a program).
		 */
		len = code == b->last_code ? 0 : span_len(cfg->code_span_len);
		if (bpf_probe_read_user(b->code, len, (const void *)(code + cfg->code_span_at))) {
			w->err = 1;
			return 1;
		}
		b->last_code = code;
		f->filename = span_u64(b->code, cfg->code_filename);
		f->name = name_word(b->code, cfg);
		if (cfg->read_args)
			read_values(b, cfg, frame, code);
	}
	return !w->frame || w->err;
}

/* Whether the current thread, whose state is @tstate, holds its GIL (enum pytrace_gil). */
static __always_inline __u8 gil_state(const struct pytrace_py_cfg *cfg, __u64 tstate)
{
	__u64 holder = 0;
	__u32 locked = 0;

	if (!cfg->gil_locked ||
	    bpf_probe_read_user(&locked, sizeof(locked), (const void *)cfg->gil_locked) ||
	    bpf_probe_read_user(&holder, sizeof(holder), (const void *)cfg->gil_holder) ||
	    locked > 1)
		return PYTRACE_GIL_UNKNOWN;
	/* last_holder stays set when the GIL is let go: `locked` says whether it is held. */
	return locked && holder == tstate ? PYTRACE_GIL_HELD : PYTRACE_GIL_RELEASED;
}

/*
 * Walks the current task's Python frames (it must be the thread @tid of @tgid) into
 * the scratch event of @kind and sends it. 0 when sent; -1 when there was nothing to
 * send or it could not be read whole (then user space reads it instead, if it can).
 */
static int walk_and_send(__u32 kind, __u32 tgid, __u32 tid)
{
	struct pytrace_py_cfg *cfg;
	struct pytrace_event *e;
	struct frame_walk w = { 0 };
	__u64 *known, tstate, size;
	__u32 frames_size, args_size, names_size;
	/*
	 * Its buffers, one set per kind: a sample (an interrupt) may come in the middle of
	 * a message's walk (at a system call's end, run with preemption off, like the
	 * switch's in the scheduler), never of another sample's.
	 */
	__u32 which = kind == PYTRACE_EV_SWITCH ? 0 : kind == PYTRACE_EV_SAMPLE ? 1 : 2;
	__u32 slot = bpf_get_smp_processor_id() * 3 + which;

	cfg = bpf_map_lookup_elem(&py_cfg, &tgid);
	if (!cfg)
		return -1;
	known = bpf_map_lookup_elem(&tstates, &tid);
	tstate = known ? *known : find_tstate(cfg, tid);
	if (!tstate)
		return -1;
	e = bpf_map_lookup_elem(&scratch, &slot);
	w.buf = bpf_map_lookup_elem(&walk_bufs, &which);
	if (!e || !w.buf)
		return -1;
	w.buf->walk_id = ++w.buf->walks; /* per CPU and kind: no other walk runs on it meanwhile */
	w.buf->args_used = 0;
	w.buf->args_cut = 0;
	w.buf->index_base = 0;
	w.buf->last_code = 0;
	w.buf->nsending = 0;
	w.buf->names_used = 0;
	w.buf->pid = tgid;
	event_start(e, tgid, tid, kind);
	if (kind == PYTRACE_EV_SAMPLE && pass_samples) {
		const void *regs = current_user_regs();

		e->user_ip = kernel_u64(regs, kernel_offsets.regs_ip);
		e->user_sp = kernel_u64(regs, kernel_offsets.regs_sp);
	} else if (kind == PYTRACE_EV_SWITCH) {
		const void *regs = current_user_regs();

		/*
		 * In a system call, ax holds -ENOSYS until it returns and orig_ax its number;
		 * an exception's error code also lands in orig_ax, hence the first test.
		 */
		if ((__s64)kernel_u64(regs, kernel_offsets.regs_ax) == -38) {
			e->syscall = (__s64)kernel_u64(regs, kernel_offsets.regs_orig_ax);
			e->syscall_arg = kernel_u64(regs, kernel_offsets.regs_di);
		}
	}
	e->gil = gil_state(cfg, tstate);
	w.cfg = cfg;
	w.e = e;
	w.frame = read_u64(tstate + cfg->tstate_frame, &w.err);
	if (cfg->via_cframe && w.frame)
		w.frame = read_u64(w.frame + cfg->cframe_current_frame, &w.err);
	if (w.frame && !w.err)
		bpf_loop(PYTRACE_BPF_WALK_FRAMES, read_frame, &w, 0);
	if (w.err) {
		count(PYTRACE_STAT_READ_ERRORS);
		return -1;
	}
	if (!e->nframes || !w.python_frames) {
		count(PYTRACE_STAT_NO_FRAMES);
		return -1;
	}
	e->truncated = w.frame != 0;
	if (e->nframes > PYTRACE_BPF_MAX_FRAMES) {
		e->cut = e->nframes - PYTRACE_BPF_MAX_FRAMES;
		e->nframes = PYTRACE_BPF_MAX_FRAMES;
	}
	if (w.buf->args_cut)
		count(PYTRACE_STAT_ARGS_CUT);
	/* Masked for the verifier (nframes <= MAX_FRAMES already): the tail has room for twice. */
	frames_size = (e->nframes & (2 * PYTRACE_BPF_MAX_FRAMES - 1)) * sizeof(e->frames[0]);
	args_size = w.buf->args_used;
	if (args_size > PYTRACE_BPF_ARGS_BYTES)
		args_size = PYTRACE_BPF_ARGS_BYTES;
	/* Keeps the compiler from using an unchecked copy (see read_frame). */
	asm volatile("" : "+r"(args_size));
	/* The arguments go right after the frames: the event is sent at its length. */
	if (args_size &&
	    bpf_probe_read_kernel((__u8 *)e->frames + frames_size, args_size, w.buf->args))
		args_size = 0;
	e->args_size = args_size;
	/* The code names after them, the same way. */
	names_size = w.buf->names_used;
	if (names_size > PYTRACE_BPF_NAMES_BYTES)
		names_size = PYTRACE_BPF_NAMES_BYTES;
	asm volatile("" : "+r"(names_size));
	asm volatile("" : "+r"(args_size));
	if (args_size > PYTRACE_BPF_ARGS_BYTES)
		args_size = 0;
	if (names_size && bpf_probe_read_kernel((__u8 *)e->frames + frames_size + args_size,
						names_size, w.buf->names))
		names_size = 0;
	e->names_size = names_size;
	size = PYTRACE_EVENT_HEADER_SIZE + (__u64)frames_size + args_size + names_size;
	if (size > sizeof(*e))
		size = sizeof(*e);
	/* No wakeup from here (it starved targets in testing): user space drains on a timer. */
	if (bpf_ringbuf_output(&events, e, size, BPF_RB_NO_WAKEUP)) {
		count(PYTRACE_STAT_RINGBUF_FULL);
		return -1;
	}
	count(PYTRACE_STAT_EVENTS);
	names_sent(w.buf, tgid);
	return 0;
}

/*
 * Attached to the cpu-clock events of the traced tree (inherited by every new task, and
 * so is this program): runs in the sampled thread's context, before perf writes the
 * sample. Returning 0 drops perf's own record and its stack copy, which are then not
 * needed; 1 keeps it (no Python state known here, or native frames are wanted).
 */
SEC("perf_event")
int on_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();

	(void)ctx;
	if (walk_and_send(PYTRACE_EV_SAMPLE, id >> 32, (__u32)id)) {
		count(PYTRACE_STAT_SAMPLES_PASSED);
		return 1;
	}
	count(PYTRACE_STAT_SAMPLES_KERNEL);
	return pass_samples;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 tid = task_tid(prev), zero = 0, *read = bpf_map_lookup_elem(&switch_read, &zero);

	/* prev is still the current task here: its user memory is readable. */
	if (walk_and_send(PYTRACE_EV_SWITCH, task_tgid(prev), tid))
		tid = 0;
	if (read)
		*read = tid;
	return 0;
}

/*
 * Attached to the context-switch events, which perf samples (with a user stack copy
 * and the kernel's call chain) at every switch-out, right after the program above ran:
 * when that read the thread whole, the sample is dropped, unless native or kernel
 * frames are wanted. At tens of thousands of switches a second, those copies are what
 * filled perf's buffers.
 */
SEC("perf_event")
int on_switch_sample(struct bpf_perf_event_data *ctx)
{
	__u32 zero = 0, *read = bpf_map_lookup_elem(&switch_read, &zero);

	(void)ctx;
	if (!pass_samples && read && *read && *read == (__u32)bpf_get_current_pid_tgid()) {
		count(PYTRACE_STAT_SWITCH_SAMPLES_DROPPED);
		return 0;
	}
	return 1;
}

/*
 * Messages between the processes of a pool (multiprocessing's connections: a task handed
 * to a worker, its result sent back) are pickles written to and read from pipes and
 * sockets, whose first bytes carry the task's numbers. At the end of each read or write
 * of a Python thread that may be one, its first bytes are sent, then the thread's stack
 * (read in its own context, as at a sample). What the bytes are is decided in user
 * space. One tracepoint at every system call's end, not one per call: each attached
 * syscall tracepoint costs ~50 ms to detach here (the kernel waits for its readers).
 */
#define NR_READ 0 /* x86-64 */
#define NR_WRITE 1

/*
 * Whether @len bytes at @buf may be a pickled message: a pickle of protocol 2 or later
 * (PROTO, 0x80, first), or multiprocessing's 4-byte big-endian length of one under
 * 16 MB (first byte 0) with the pickle after it. One 8-byte read; most end here.
 */
static __always_inline bool maybe_pickle(__u64 buf, __s64 len)
{
	__u8 head[8] = {};

	if (len < 8 || bpf_probe_read_user(head, sizeof(head), (const void *)buf))
		return false;
	return head[0] == 0x80 || (head[0] == 0 && head[4] == 0x80);
}

static __always_inline int send_message(__u64 id, __u64 buf, __s64 len, bool sent)
{
	__u32 n = len < PYTRACE_MESSAGE_BYTES ? (__u32)len : PYTRACE_MESSAGE_BYTES;
	struct pytrace_event *e =
		bpf_ringbuf_reserve(&events, PYTRACE_EVENT_HEADER_SIZE + PYTRACE_MESSAGE_BYTES, 0);

	if (!e) {
		count(PYTRACE_STAT_RINGBUF_FULL);
		return -1;
	}
	event_start(e, id >> 32, (__u32)id, PYTRACE_EV_MESSAGE);
	e->syscall = sent;
	e->syscall_arg = len;
	n &= 127; /* for the verifier: it is <= MESSAGE_BYTES (< 128) already */
	if (n > PYTRACE_MESSAGE_BYTES ||
	    bpf_probe_read_user((__u8 *)e + PYTRACE_EVENT_HEADER_SIZE, n, (const void *)buf))
		n = 0;
	e->args_size = n;
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	count(PYTRACE_STAT_MESSAGES);
	return 0;
}

SEC("raw_tp/sys_exit")
int BPF_PROG(on_syscall_done, struct pt_regs *regs, long ret)
{
	__u64 id = bpf_get_current_pid_tgid(), nr, buf;
	__u32 tgid = id >> 32;

	nr = kernel_u64(regs, kernel_offsets.regs_orig_ax);
	if ((nr != NR_READ && nr != NR_WRITE) || ret < 8 || !bpf_map_lookup_elem(&py_cfg, &tgid))
		return 0;
	buf = kernel_u64(regs, kernel_offsets.regs_si);
	if (maybe_pickle(buf, ret) && !send_message(id, buf, ret, nr == NR_WRITE))
		walk_and_send(PYTRACE_EV_MESSAGE_STACK, tgid, (__u32)id);
	return 0;
}

/*
 * A traced Python process forked: the child runs the same image with the forking
 * thread's state at the same address. Known here at once, so the child's first samples
 * are read at sample time too, before user space has seen the fork.
 */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = task_tgid(parent), ctgid = task_tgid(child);
	__u32 ptid = task_tid(parent), ctid = task_tid(child);
	struct pytrace_py_cfg *cfg;
	__u64 *tstate;

	if (ptgid == ctgid)
		return 0; /* a new thread: user space learns its state from the interpreter */
	if (bpf_map_lookup_elem(&traced, &ptgid)) {
		__u8 yes = 1;

		bpf_map_update_elem(&traced, &ctgid, &yes, BPF_ANY);
	}
	cfg = bpf_map_lookup_elem(&py_cfg, &ptgid);
	if (!cfg)
		return 0;
	bpf_map_update_elem(&py_cfg, &ctgid, cfg, BPF_ANY);
	tstate = bpf_map_lookup_elem(&tstates, &ptid);
	if (tstate)
		bpf_map_update_elem(&tstates, &ctid, tstate, BPF_ANY);
	count(PYTRACE_STAT_FORKS_FOLLOWED);
	return 0;
}

/* A new image: the old one's offsets and thread states mean nothing in it. */
SEC("raw_tp/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = task_tgid(p), tid = task_tid(p), old = old_pid;

	bpf_map_delete_elem(&py_cfg, &tgid);
	bpf_map_delete_elem(&tstates, &tid);
	bpf_map_delete_elem(&tstates, &old);
	return 0;
}

/*
 * A thread ended: it is never sampled again; nor is its process when it was the last.
 * A traced process's end is sent with its exit code, which is gone from /proc as soon
 * as its parent reaps it (often before user space looks).
 */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p, bool group_dead)
{
	__u32 tgid = task_tgid(p), tid = task_tid(p);
	struct pytrace_event *e;

	bpf_map_delete_elem(&tstates, &tid);
	if (!group_dead)
		return 0;
	bpf_map_delete_elem(&py_cfg, &tgid);
	if (!bpf_map_lookup_elem(&traced, &tgid))
		return 0;
	bpf_map_delete_elem(&traced, &tgid);
	e = bpf_ringbuf_reserve(&events, PYTRACE_EVENT_HEADER_SIZE, 0);
	if (!e) {
		count(PYTRACE_STAT_RINGBUF_FULL);
		return 0;
	}
	event_start(e, tgid, tid, PYTRACE_EV_EXIT);
	e->syscall = (__s32)kernel_u32(p, kernel_offsets.task_exit_code);
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
