/*
 * The one header shared by the kernel-side programs and user space: fixed-width types
 * and fixed arrays only.
 */
#ifndef PYTRACE_BPF_PYTRACE_BPF_H
#define PYTRACE_BPF_PYTRACE_BPF_H

/*
 * An event carries at most MAX_FRAMES frames; a walk reads at most WALK_FRAMES. Of a stack
 * deeper than MAX_FRAMES the root-most are sent (the innermost are the ones cut), of one
 * deeper than WALK_FRAMES the innermost MAX_FRAMES of those read (its root is missing).
 */
#define PYTRACE_BPF_MAX_FRAMES 1024
#define PYTRACE_BPF_WALK_FRAMES 8192
#define PYTRACE_BPF_SPAN 256	     /* bytes of a frame or a code object read at once */
#define PYTRACE_BPF_MAX_ARGS 8	     /* parameters read per frame */
#define PYTRACE_BPF_ARG_TEXT 64	     /* bytes of a str's or a bytes' contents read */
#define PYTRACE_BPF_ARGS_BYTES 16384 /* room for an event's arguments */
#define PYTRACE_BPF_NAMES_BYTES 4096 /* ... and for its code objects' names */

/*
 * How to walk one process's Python frames: offsets from cpython/, per process. A frame's
 * fields are read in one read of frame_span_len bytes from frame_span_at, a code
 * object's in one from code_span_at; the frame_* and code_* offsets are from those.
 */
struct pytrace_py_cfg {
	__u64 tstate_frame;	    /* tstate -> frame, cframe or current_frame */
	__u64 cframe_current_frame; /* used when via_cframe */
	__u64 frame_previous;
	__u64 frame_code;
	__u64 frame_instr;
	__u64 frame_owner; /* 0: no owner field (<= 3.10) */
	__u64 code_filename;
	__u64 code_name;
	/*
	 * co_version (3.12-3.13), from the code span too: the low 16 bits go above co_name's
	 * pointer in the frame's name word (cpython_name_word()); version_mask 0: none.
	 */
	__u64 code_version, version_mask;
	__u64 code_argcount; /* int; co_kwonlyargcount 8 bytes on */
	__u64 frame_span_at, frame_span_len, code_span_at, code_span_len;
	__u64 frame_localsplus; /* from the frame itself: its parameters' slots */
	/*
	 * When slots_in_span, the frame's span holds its first PYTRACE_BPF_MAX_ARGS slots
	 * too, from frame_slots in it; a frame whose memory ends before them (at the end of
	 * its stack chunk) is read again without, frame_base_len bytes.
	 */
	__u64 frame_slots, frame_base_len;
	/* Arguments: str and bytes objects are the ones whose contents are read. */
	__u64 str_type, bytes_type;
	__u64 str_length, str_state, str_ascii_data, str_compact_data; /* from the object */
	__u64 bytes_size, bytes_data;
	/* Pool worker loops: their frames' task locals are read too (at these slots). */
	__u64 task_code[2];
	__u64 task_slot[2][2];
	/* To find a thread's state the first time it is seen: the main interpreter's list. */
	__u64 runtime; /* address of _PyRuntime */
	__u64 runtime_interpreters_head;
	__u64 interp_threads_head;
	__u64 tstate_next;
	__u64 tstate_id;   /* native_thread_id (3.11+) or thread_id (the pthread_t) */
	__u8 id_is_native; /* else the pthread_t: the thread's fs base on x86-64 glibc */
	__u8 via_cframe;
	__u8 code_tagged; /* mask the low bits of stack references: code, locals (3.14+) */
	__u8 read_args;	  /* read each frame's parameters' values */
	__u8 slots_in_span;
	__u8 pad[3];
	/*
	 * An executor's worker loop (task_item[k] set): slot 0 holds its work item, whose
	 * first instance attribute (laid out by its class's shared keys) is the work id. How
	 * to find an object's attribute values: enum pytrace_attr_mode, with these offsets.
	 */
	__u8 task_item[2];
	__u8 attr_mode;
	__u8 pad2[5];
	__u64 type_flags, type_basicsize, type_dictoffset, dict_values, values_items;
	/*
	 * 3.13+ (PYTRACE_ATTR_313): the work id is found by its name in the keys that lay
	 * out the values (3.14 orders a class's shared keys otherwise than its __init__ sets
	 * them): PyHeapTypeObject.ht_cached_keys, PyDictObject.ma_keys, sizeof(PyASCIIObject).
	 */
	__u64 heaptype_cached_keys, dict_keys, unicode_ascii_size;
	/*
	 * The GIL's `locked` flag (a 4-byte int) and `last_holder` (a thread state), in the
	 * target; 0 until user space found them (cpython_gil_addrs()).
	 */
	__u64 gil_locked, gil_holder;
	/*
	 * A process in another pid namespace (a container): its native thread ids are that
	 * namespace's, stat() of /proc/PID/ns/pid names it. 0 and 0: ours.
	 */
	__u64 pidns_dev, pidns_ino;
};

enum pytrace_attr_mode {
	PYTRACE_ATTR_NONE,
	PYTRACE_ATTR_DICTOFFSET, /* <= 3.10: the dict at obj + tp_dictoffset, split */
	PYTRACE_ATTR_311,	 /* values pointer at obj - 32, else the dict at obj - 24 */
	PYTRACE_ATTR_312,	 /* obj - 24: a dict, or values - 1 (bit 0 set) */
	PYTRACE_ATTR_313,	 /* a dict at obj - 24, else values inline at tp_basicsize */
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
	__u32 regs_si;	      /* pt_regs.si: its second */
};

/*
 * One frame as read in the kernel; user space turns it into names and lines. The code
 * object's co_filename and co_name (its word: the pointer with co_version's low bits
 * above it, see cpython_name_word()): what tells a code object from another made at its
 * address, and names it once it is gone (a module's body, freed right after it ran).
 */
struct pytrace_raw_frame {
	__u64 code;
	__u64 filename, name;
	__u64 instr; /* f_lasti, prev_instr or instr_ptr, as stored */
	__u8 owner;
	__u8 pad[3];
	__u32 args_id; /* not the kernel's: user space keeps its arguments' id here */
};

/* Argument records' indexes: parameters from 0, a pool loop's task locals from 0x80. */
#define PYTRACE_ARG_NAME 0xf0 /* not an argument: the frame's code's co_name */
#define PYTRACE_ARG_FILE 0xf1 /* ... its co_filename, the last bytes */

enum pytrace_arg_flags {
	PYTRACE_ARG_UNBOUND = 1,    /* an empty slot */
	PYTRACE_ARG_UNREADABLE = 2, /* the object or its contents could not be read */
};

/*
 * One parameter's value: the object's bytes 8 to 40 (its type, then size and value) and,
 * for str and bytes, text_len bytes of contents that follow, padded to 8 bytes.
 */
struct pytrace_raw_arg {
	__u8 pad;
	__u8 index; /* the parameter's position */
	__u8 flags;
	__u8 text_len;
	__u32 frame; /* the frame's place in the walk, 0 the innermost read */
	__u64 object;
	__u64 words[4];
};

/*
 * Room an argument may take (its text's length is masked to below 2 * ARG_TEXT): a walk
 * whose arguments came within it of PYTRACE_BPF_ARGS_BYTES read no more of them, and
 * the frames after the last one with arguments sent were not read for theirs.
 */
#define PYTRACE_BPF_ARG_MAX_BYTES (sizeof(struct pytrace_raw_arg) + 2 * PYTRACE_BPF_ARG_TEXT)

enum pytrace_event_kind {
	PYTRACE_EV_SWITCH, /* the thread switched out (tp_btf/sched_switch) */
	PYTRACE_EV_SAMPLE, /* a cpu-clock sample interrupted it (perf_event program) */
	PYTRACE_EV_EXIT,   /* a traced process ended (no frames; exit code in syscall) */
	/*
	 * A Python thread wrote or read what may be a pickled message, at the system
	 * call's end: no frames; syscall 1 for a write, 0 for a read; syscall_arg the
	 * bytes written or read, the first args_size (<= PYTRACE_MESSAGE_BYTES) of them
	 * after the header. Its stack follows as the next event of that thread.
	 */
	PYTRACE_EV_MESSAGE,
	PYTRACE_EV_MESSAGE_STACK, /* the thread's frames as the message went */
};

/*
 * A message's first bytes sent with it: a multiprocessing connection's length header
 * (4 bytes) and a pickle's protocol, frame and first items (a Pool's two task numbers;
 * an executor's class and work id) fit. Under 128 (see send_message()).
 */
#define PYTRACE_MESSAGE_BYTES 96

/*
 * Whether a sampled or switched-out thread held its interpreter's GIL: `locked` set and
 * `last_holder` its own thread state. Read in the thread's own context, so exact: only
 * the holder lets go (and a thread off the CPU holds it, or not, until it runs again).
 */
enum pytrace_gil {
	PYTRACE_GIL_UNKNOWN, /* the GIL's place not found yet, or not readable */
	PYTRACE_GIL_HELD,
	PYTRACE_GIL_RELEASED, /* on the CPU without it (C code that let it go, or taking it) */
};

/*
 * A Python thread's frames at one instant. Only the header and @nframes frames are
 * sent: the ring holds events of different lengths. The walk puts its i-th frame (0 the
 * innermost) in frames[i % PYTRACE_BPF_MAX_FRAMES]: when @cut frames were read before
 * the @nframes kept (a stack deeper than PYTRACE_BPF_MAX_FRAMES), the innermost kept is
 * in frames[cut % PYTRACE_BPF_MAX_FRAMES] and all of frames[] is sent.
 */
struct pytrace_event {
	__u64 time_ns; /* CLOCK_MONOTONIC, like perf's records */
	__u32 pid, tid;
	__u32 cpu;
	__u16 kind;	/* enum pytrace_event_kind */
	__u8 truncated; /* the chain went on past PYTRACE_BPF_WALK_FRAMES: no root */
	__u8 gil;	/* enum pytrace_gil: the thread's own at that instant */
	__u32 nframes;
	__u32 args_size; /* bytes of arguments after the frames */
	/* The user registers perf records too: what joins a sample to perf's record of it. */
	__u64 user_ip, user_sp;
	__s64 syscall;	   /* switch-outs: the system call it waits in, or -1; exits: the exit
			  code as wait() reports it */
	__u64 syscall_arg; /* switch-outs: the system call's first argument (a futex's) */
	__u32 cut;	   /* frames read and not sent: the innermost of a deep stack */
	__u32 names_size;  /* bytes of code names (PYTRACE_ARG_NAME, _FILE) after the arguments */
	struct pytrace_raw_frame frames[PYTRACE_BPF_MAX_FRAMES];
	/* The arguments follow frames[nframes]; room for a masked offset (see the sender). */
	__u8 tail[PYTRACE_BPF_ARGS_BYTES + PYTRACE_BPF_NAMES_BYTES +
		  PYTRACE_BPF_MAX_FRAMES * sizeof(struct pytrace_raw_frame)];
};

#define PYTRACE_EVENT_HEADER_SIZE 72

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
	PYTRACE_STAT_ARGS_CUT,	/* walks whose arguments did not all fit */
	PYTRACE_STAT_MESSAGES,	/* writes and reads sent as maybe pickled messages */
	PYTRACE_STAT_COUNT,
};

#endif
