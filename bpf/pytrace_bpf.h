/*
 * The one header shared by the kernel-side programs and user space: fixed-width types
 * and fixed arrays only.
 */
#ifndef PYTRACE_BPF_PYTRACE_BPF_H
#define PYTRACE_BPF_PYTRACE_BPF_H

#define PYTRACE_BPF_MAX_FRAMES 64

/* How to walk one process's Python frames: offsets from cpython/, per process. */
struct pytrace_py_cfg {
	__u64 tstate_frame;	    /* tstate -> frame, cframe or current_frame */
	__u64 cframe_current_frame; /* used when via_cframe */
	__u64 frame_previous;
	__u64 frame_code;
	__u64 frame_instr;
	__u64 frame_owner; /* 0: no owner field (<= 3.10) */
	__u64 code_filename;
	__u64 code_name;
	__u8 via_cframe;
	__u8 code_tagged; /* mask the low bits of the code reference (3.14) */
	__u8 pad[6];
};

/* One frame as read in the kernel; user space turns it into names and lines. */
struct pytrace_raw_frame {
	__u64 code;
	__u64 fingerprint; /* co_filename ^ (co_name << 1) */
	__u64 instr;	   /* f_lasti, prev_instr or instr_ptr, as stored */
	__u8 owner;
	__u8 pad[7];
};

/* A Python thread's frames at the instant it switched out. */
struct pytrace_switch_event {
	__u64 time_ns; /* CLOCK_MONOTONIC, like perf's records */
	__u32 pid, tid;
	__u32 nframes;
	__u32 truncated; /* the chain went on past PYTRACE_BPF_MAX_FRAMES */
	struct pytrace_raw_frame frames[PYTRACE_BPF_MAX_FRAMES];
};

enum pytrace_bpf_stat {
	PYTRACE_STAT_EVENTS,
	PYTRACE_STAT_RINGBUF_FULL,
	PYTRACE_STAT_READ_ERRORS,
	PYTRACE_STAT_COUNT,
};

#endif
