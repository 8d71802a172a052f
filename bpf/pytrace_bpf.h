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
	/* To find a thread's state the first time it is seen: the main interpreter's list. */
	__u64 runtime; /* address of _PyRuntime */
	__u64 runtime_interpreters_head;
	__u64 interp_threads_head;
	__u64 tstate_next;
	__u64 tstate_id;   /* native_thread_id (3.11+) or thread_id (the pthread_t) */
	__u8 id_is_native; /* else the pthread_t: the thread's fs base on x86-64 glibc */
	__u8 via_cframe;
	__u8 code_tagged; /* mask the low bits of the code reference (3.14) */
	__u8 pad[5];
};

/*
 * Byte offsets of the kernel fields the programs read, found by user space in the running
 * kernel's BTF (sampler/kernel_layout.c) and set before loading: the programs then need
 * no CO-RE relocations, so libbpf never loads all of the kernel's BTF.
 */
struct pytrace_kernel_offsets {
	__u32 task_pid;	   /* task_struct.pid */
	__u32 task_tgid;   /* task_struct.tgid */
	__u32 task_fsbase; /* task_struct.thread.fsbase */
	__u32 regs_ip;	   /* pt_regs.ip, .sp, .ax, .orig_ax */
	__u32 regs_sp;
	__u32 regs_ax;
	__u32 regs_orig_ax;
	__u32 task_exit_code; /* task_struct.exit_code */
	__u32 regs_di;	      /* pt_regs.di: a system call's first argument */
	__u32 pad;
};

/* One frame as read in the kernel; user space turns it into names and lines. */
struct pytrace_raw_frame {
	__u64 code;
	__u64 fingerprint; /* co_filename ^ (co_name << 1) */
	__u64 instr;	   /* f_lasti, prev_instr or instr_ptr, as stored */
	__u8 owner;
	__u8 pad[7];
};

enum pytrace_event_kind {
	PYTRACE_EV_SWITCH, /* the thread switched out (tp_btf/sched_switch) */
	PYTRACE_EV_SAMPLE, /* a cpu-clock sample interrupted it (perf_event program) */
	PYTRACE_EV_EXIT,   /* a traced process ended (no frames; exit code in syscall) */
};

/*
 * A Python thread's frames at one instant. Only the header and @nframes frames are
 * sent: the ring holds events of different lengths.
 */
struct pytrace_event {
	__u64 time_ns; /* CLOCK_MONOTONIC, like perf's records */
	__u32 pid, tid;
	__u32 cpu;
	__u16 kind;	 /* enum pytrace_event_kind */
	__u16 truncated; /* the chain went on past PYTRACE_BPF_MAX_FRAMES */
	__u32 nframes;
	__u32 pad;
	/* The user registers perf records too: what joins a sample to perf's record of it. */
	__u64 user_ip, user_sp;
	__s64 syscall;	   /* switch-outs: the system call it waits in, or -1; exits: the exit
			  code as wait() reports it */
	__u64 syscall_arg; /* switch-outs: the system call's first argument (a futex's) */
	struct pytrace_raw_frame frames[PYTRACE_BPF_MAX_FRAMES];
};

#define PYTRACE_EVENT_HEADER_SIZE 64

enum pytrace_bpf_stat {
	PYTRACE_STAT_EVENTS,	     /* events sent */
	PYTRACE_STAT_RINGBUF_FULL,   /* events lost: the ring was full */
	PYTRACE_STAT_READ_ERRORS,    /* walks cut short by unreadable memory */
	PYTRACE_STAT_SAMPLES_KERNEL, /* samples whose Python frames the kernel read */
	PYTRACE_STAT_SAMPLES_PASSED, /* samples left to perf and user space (no state known) */
	PYTRACE_STAT_FORKS_FOLLOWED, /* processes whose walk set-up the kernel copied at fork */
	PYTRACE_STAT_THREADS_FOUND,  /* thread states the kernel found in the interpreter */
	PYTRACE_STAT_SWITCH_SAMPLES_DROPPED, /* perf switch samples not needed: read whole */
	PYTRACE_STAT_NO_FRAMES, /* walks of a known thread that ran no Python (start, exit) */
	PYTRACE_STAT_COUNT,
};

#endif
