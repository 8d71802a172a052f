// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel side: at every context switch of a thread of a traced Python process, walk its
 * Python frame chain right there, while it cannot move, and hand the raw frames to user
 * space. Only reads; the target is never written to.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "pytrace_bpf.h"

char LICENSE[] SEC("license") = "GPL";

/* tgid -> how to walk it; filled by user space when it finds CPython in a process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct pytrace_py_cfg);
} py_cfg SEC(".maps");

/* tid -> its PyThreadState address; kept current by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u64);
} tstates SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} events SEC(".maps");

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

static __u64 read_u64(__u64 addr, int *err)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		*err = 1;
	return v;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u32 tgid = BPF_CORE_READ(prev, tgid), tid = BPF_CORE_READ(prev, pid);
	struct pytrace_switch_event *e;
	struct pytrace_py_cfg *cfg;
	__u64 *tstate, frame;
	int err = 0, i;

	cfg = bpf_map_lookup_elem(&py_cfg, &tgid);
	if (!cfg)
		return 0;
	tstate = bpf_map_lookup_elem(&tstates, &tid);
	if (!tstate)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count(PYTRACE_STAT_RINGBUF_FULL);
		return 0;
	}
	e->time_ns = bpf_ktime_get_ns();
	e->pid = tgid;
	e->tid = tid;
	e->nframes = 0;
	e->truncated = 0;
	/* prev is still the current task here: its user memory is readable. */
	frame = read_u64(*tstate + cfg->tstate_frame, &err);
	if (cfg->via_cframe && frame)
		frame = read_u64(frame + cfg->cframe_current_frame, &err);
	for (i = 0; i < PYTRACE_BPF_MAX_FRAMES && frame && !err; i++) {
		struct pytrace_raw_frame *f = &e->frames[i];
		__u64 code = read_u64(frame + cfg->frame_code, &err);

		if (cfg->code_tagged)
			code &= ~3ULL;
		f->code = code;
		f->instr = read_u64(frame + cfg->frame_instr, &err);
		f->owner = 0;
		if (cfg->frame_owner)
			bpf_probe_read_user(&f->owner, 1, (const void *)(frame + cfg->frame_owner));
		f->fingerprint = 0;
		if (code)
			f->fingerprint = read_u64(code + cfg->code_filename, &err) ^
					 (read_u64(code + cfg->code_name, &err) << 1);
		e->nframes = i + 1;
		frame = read_u64(frame + cfg->frame_previous, &err);
	}
	if (frame && !err)
		e->truncated = 1;
	if (err)
		count(PYTRACE_STAT_READ_ERRORS);
	count(PYTRACE_STAT_EVENTS);
	/* No wakeup from here (it starved targets in testing): user space drains on a timer. */
	bpf_ringbuf_submit(e, BPF_RB_NO_WAKEUP);
	return 0;
}
