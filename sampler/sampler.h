/*
 * The sampler: arms perf events on a process tree (launched or attached), follows every
 * descendant through the kernel's own inheritance and task records, and hands out a
 * time-ordered stream of records: on-CPU samples, off-CPU spans, fork, exec, exit, comm
 * and mmap. Records carry the user registers and a copy of the user stack for unwinding.
 */
#ifndef PYTRACE_SAMPLER_SAMPLER_H
#define PYTRACE_SAMPLER_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../cpython/cpython.h"
#include "../cpython/messages.h"

enum sampler_mode {
	SAMPLER_MODE_WALL, /* on-CPU samples and off-CPU spans: a thread's whole life */
	SAMPLER_MODE_CPU,  /* on-CPU samples only */
};

enum sampler_backend {
	SAMPLER_BACKEND_AUTO, /* perf, with the eBPF switch-out reader when it loads */
	SAMPLER_BACKEND_PERF, /* perf only */
	SAMPLER_BACKEND_BPF,  /* perf with the eBPF switch-out reader, or fail */
};

struct arg_store; /* sampler/argstore.h */

struct sampler_opts {
	enum sampler_backend backend;
	uint32_t frequency_hz; /* samples per second of CPU time per thread */
	enum sampler_mode mode;
	bool kernel_stacks;   /* kernel callchains too (needs privilege) */
	bool native;	      /* Python processes' samples keep their user stack copies too */
	uint32_t stack_bytes; /* user stack copied per sample: multiple of 8, <= 65528 */
	uint32_t buffer_kb;   /* ring buffer per CPU; 0: a default that fits the rate */
	bool read_args;	      /* Python frames carry their arguments' values */
	bool read_messages;   /* process pools' task and result messages (eBPF) */
};

/* Who a launched command runs as (under sudo: the invoking user). */
struct sampler_creds {
	uid_t uid;
	gid_t gid;
	const char *user; /* for its supplementary groups; may be NULL */
};

/* x86-64 user registers in perf's order (sample_regs_user = 0xff01ff). */
enum sampler_reg {
	SREG_AX,
	SREG_BX,
	SREG_CX,
	SREG_DX,
	SREG_SI,
	SREG_DI,
	SREG_BP,
	SREG_SP,
	SREG_IP,
	SREG_R8,
	SREG_R9,
	SREG_R10,
	SREG_R11,
	SREG_R12,
	SREG_R13,
	SREG_R14,
	SREG_R15,
	SREG_COUNT,
};

struct sampler_ustack {
	bool valid;		   /* false: no user state (kernel thread, failed copy) */
	uint64_t regs[SREG_COUNT]; /* registers at the moment captured */
	const uint8_t *data;	   /* copy of the stack from regs[SREG_SP] */
	uint64_t size;		   /* bytes in @data */
	uint32_t nkernel;	   /* kernel return addresses, leaf first */
	const uint64_t *kernel_ips;
};

enum sampler_wait {
	SAMPLER_WAIT_BLOCKED,	/* switched out to sleep: I/O, lock, sleep ... */
	SAMPLER_WAIT_PREEMPTED, /* switched out while runnable: CPU contention */
};

/*
 * Where a record's Python frames come from. A guess is sampler/waitpolicy.c's, from the
 * thread's reads around the record.
 */
enum sampler_py_source {
	SAMPLER_PY_READ,   /* read for it: at its sample, at its switch, or while it waited */
	SAMPLER_PY_SHARED, /* what the reads before and after it share (held throughout) */
	SAMPLER_PY_BEFORE, /* the latest read before it, recent enough to stand for it */
};

/* Whether a Python thread held its interpreter's GIL, sampled or waiting (eBPF reads it). */
enum sampler_gil {
	SAMPLER_GIL_UNKNOWN,
	SAMPLER_GIL_HELD,
	SAMPLER_GIL_RELEASED, /* on the CPU without it */
};

enum sampler_rec_kind {
	SREC_SAMPLE,  /* on-CPU sample at time_ns */
	SREC_OFF_CPU, /* a wait from time_ns to end_ns */
	SREC_FORK,    /* a new process (pid != ppid) or thread */
	SREC_EXEC,
	SREC_COMM,    /* a thread's name changed */
	SREC_EXIT,    /* a thread ended; @last_in_process when its process is gone */
	SREC_MMAP,    /* an executable mapping */
	SREC_MESSAGE, /* a process pool's task or result written or read, with the stack (eBPF) */
	SREC_NOTE,    /* a process runs a CPython we can't read: @note says which and why */
	SREC_PYNAME,  /* a new Python thread's threading name, in @note, read on its arrival */
};

/*
 * One argument read with a Python frame, decoded while its process could still be asked
 * (sampler/argstore.h keeps each list once): values, nothing that points into a process.
 */
struct sampler_arg {
	uint8_t index;	 /* the parameter's position; CPYTHON_ARG_TASK + k: a task's local k */
	uint64_t object; /* its address: tells apart objects shown alike (by type, by length) */
	enum cpython_value_kind kind;
	int64_t i;		    /* INT, BOOL (0, 1); STR, BYTES, SIZED: the length */
	double f;		    /* FLOAT */
	enum cpython_type_id sized; /* SIZED: which */
	bool cut;		    /* STR, BYTES: longer than @text */
	const char *text; /* STR: UTF-8; BYTES: printable, escaped; OTHER: its type's name, or
			     NULL when not read */
};

/* Whether a wait in futex(2) was on the waiting thread's own interpreter's GIL. */
enum sampler_gil_wait {
	SAMPLER_GIL_WAIT_NONE,	  /* not, or not known */
	SAMPLER_GIL_WAIT_TAKE,	  /* waiting to take it (its condition or its mutex) */
	SAMPLER_GIL_WAIT_HANDOFF, /* dropped it, waiting until another thread took it */
};

struct sampler_rec {
	enum sampler_rec_kind kind;
	uint32_t pid, tid, cpu;
	uint64_t time_ns;    /* CLOCK_MONOTONIC */
	bool synthetic;	     /* describes what existed when we attached, not an event */
	const char *cmdline; /* SREC_FORK of a process, SREC_EXEC: read as soon as the
				record left the kernel's buffer; NULL if already gone */
	const char *note;    /* SREC_NOTE: one line, for stderr and the trace; SREC_PYNAME */
	/*
	 * SREC_MESSAGE: what was written or read, at the system call's end; its thread's
	 * Python stack then is in sample (py_frames ...), the rest of sample unused.
	 */
	struct {
		enum cpython_message_kind kind;
		bool sent;	   /* written; else read */
		int64_t job, task; /* the pool's numbers */
	} message;
	union {
		struct {
			uint64_t end_ns;	/* SREC_OFF_CPU */
			enum sampler_wait wait; /* SREC_OFF_CPU */
			bool stack_at_switch;	/* stack captured when it switched out */
			/*
			 * SREC_OFF_CPU: its start is the kernel's reading of a switch-out
			 * perf wrote no record of (an estimate: see take_kernel_out()).
			 */
			bool start_estimated;
			int64_t syscall;      /* the syscall it waits in, -1 unknown */
			uint64_t syscall_arg; /* ... its first argument, when known */
			struct sampler_ustack stack;
			/*
			 * Python processes: frames innermost first, read from the target, as
			 * values. Nothing read through here is changed by the sampler's drainer
			 * thread once handed out (tests/e2e/test_thread_safety.py).
			 */
			const struct cpython_frame *py_frames;
			/*
			 * Their code objects as read when walked (NULL: unreadable): entries
			 * of the sampler's cache whose code, fingerprint and info are never
			 * written after they are made (only the cache's own links are).
			 */
			const struct cpython_code_entry *const *py_codes;
			uint32_t npy;
			enum cpython_lines py_lines; /* how their line tables are written */
			/*
			 * Their arguments as read and decoded with them: py_frames[i].args is
			 * an id here (arg_store__values()), 0 when it has none. Stays valid
			 * until sampler__free().
			 */
			const struct arg_store *py_args;
			/* The interpreter they were read from: where its runtime is, 3.minor. */
			uint64_t py_runtime;
			unsigned py_minor;
			/* SREC_OFF_CPU: a wait in futex(2) on its interpreter's GIL. */
			enum sampler_gil_wait gil_wait;
			enum sampler_py_source py_source; /* read for it, or a guess */
			uint64_t py_at_ns; /* the moment they were read for (a guess: its read's) */
			enum sampler_gil gil; /* as sampled, or as it switched out to wait */
		} sample;
		struct {
			uint32_t ppid, ptid;
		} fork;
		struct {
			const char *comm;
		} comm; /* SREC_COMM and SREC_EXEC */
		struct {
			bool last_in_process;
			int status; /* last_in_process: exit status as a shell shows it (128 +
				       signal when killed), or -1 when not known */
		} exit;
		struct {
			uint64_t start, len, pgoff;
			const char *path;
			uint8_t build_id[20];
			uint8_t build_id_size; /* 0: none */
		} mmap;
	};
};

struct sampler_stats {
	uint64_t samples;		/* on-CPU samples delivered */
	uint64_t off_cpu_spans;		/* delivered */
	uint64_t lost_records;		/* the kernel's count of records dropped (full buffers) */
	uint64_t lost_samples;		/* PERF_RECORD_LOST_SAMPLES */
	uint64_t throttled;		/* times the kernel throttled sampling */
	uint64_t unpaired_switches;	/* switch records without their other half */
	uint64_t python_walks;		/* Python stacks read */
	uint64_t pool_messages;		/* process pools' tasks and results written or read */
	uint64_t stale_captures;	/* waits read from outside too late, discarded */
	uint64_t late_reads_in_waits;	/* waits given a sample's read that fell inside them */
	uint64_t late_reads_mended;	/* late reads that stand for their samples after all */
	uint64_t reads_after_blocks;	/* reads that began after their threads blocked and woke */
	uint64_t reads_overtaken;	/* reads the kernel saw other calls before */
	uint64_t messages_restamped;	/* writes followed after their reads, moved before */
	uint64_t sample_walks;		/* samples whose stack was read from outside */
	uint64_t prompt_walks;		/* ... within one sampling period of the sample */
	uint64_t late_walks;		/* ... over two periods after it: cut to what held */
	uint64_t bracketed_samples;	/* ... not read: given what reads before and after share */
	uint64_t kernel_switch_stacks;	/* Python stacks read by the kernel at switch-outs */
	uint64_t kernel_switch_misses;	/* Python threads' switch-outs it did not read */
	uint64_t kernel_switches_early; /* ... it read, perf's record of them milliseconds later */
	uint64_t kernel_args_of_parent; /* ... of a fork not followed yet: read as its parent's */
	uint64_t kernel_samples;	/* samples whose Python stacks the kernel read */
	uint64_t kernel_samples_lost;	/* ... of processes not yet known to run CPython */
	uint64_t kernel_events_lost;	/* the kernel-side reader's ring was full */
	uint64_t kernel_read_errors;	/* its walks cut short by unreadable memory */
	uint64_t kernel_empty_walks;	/* ... that found no Python frame (start-up, shutdown) */
	uint64_t kernel_messages;	/* reads and writes sent as maybe pickled messages */
	uint64_t kernel_threads_found;	/* thread states it found in an interpreter itself */
	uint64_t kernel_forks_followed; /* processes it followed into at fork */
	uint64_t python_walk_errors;	/* reads that failed (a thread state or frame moved) */
	uint64_t cut_stacks;	  /* Python stacks deeper than kept: their innermost frames cut */
	uint64_t cut_frames;	  /* ... the frames cut in all */
	uint64_t rootless_stacks; /* ... deeper than a walk reads: their root-most missing too */
	uint64_t exits_assumed;	  /* processes that died without an exit record (lost) */
	uint64_t args_not_kept;	  /* frames whose arguments found no room (memory) */
	uint32_t processes;	  /* alive now */
	uint32_t threads;	  /* alive now */
	uint32_t processes_seen;  /* since the start */
	uint32_t threads_seen;
	uint32_t events_open; /* perf event file descriptors */
};

struct sampler;

/*
 * Starts @argv (argv[0] looked up in PATH) with every event armed before its first
 * instruction, as @creds when not NULL. NULL with errno set: ENOENT for a command not
 * found, ENOEXEC for one that can't run, EACCES/EPERM when perf events are not allowed. Free with sampler__free().
 */
struct sampler *sampler__launch(const struct sampler_opts *opts, char *const argv[],
				const struct sampler_creds *creds);

/*
 * Attaches to every thread of @pids and of all their descendants, existing and future.
 * NULL with errno set: ESRCH for a pid that doesn't exist, EACCES/EPERM without
 * permission. The failing pid is stored in *@bad_pid.
 */
struct sampler *sampler__attach(const struct sampler_opts *opts, const pid_t *pids, size_t npids,
				pid_t *bad_pid);

/* The launched command's pid, or 0 when attached. */
pid_t sampler__child(const struct sampler *s);

/*
 * Waits about @timeout_ms (a signal cuts it short). A thread of the sampler's own drains
 * the kernel's buffers and reads Python stacks about every millisecond meanwhile.
 */
int sampler__poll(struct sampler *s, int timeout_ms);

/*
 * The next record in time order that is safe to hand out (older than anything still in
 * flight), or NULL. Borrowed until the next call.
 */
const struct sampler_rec *sampler__next(struct sampler *s);

/*
 * A stop is coming (a stop request): the drainer takes no more rounds, so that what is
 * left is handed out without it (a real-time drainer behind a backlog kept the lock
 * from the thread handing records out for seconds). sampler__stop() still follows.
 */
void sampler__stopping(struct sampler *s);

/* Stops sampling (the target runs on untouched); every queued record becomes available. */
void sampler__stop(struct sampler *s);

/* True when every traced process has exited. */
bool sampler__done(struct sampler *s);

void sampler__stats(struct sampler *s, struct sampler_stats *stats);

/* Closes every event and frees; the target is left exactly as it was. Accepts NULL. */
void sampler__free(struct sampler *s);

/* @pid and all its descendants now, @pid first. Caller frees *@pids. 0 or -errno. */
int sampler_list_tree(pid_t pid, pid_t **pids, size_t *count);

/* The threads of @pid now. Caller frees *@tids. 0 or -errno (-ESRCH: no such process). */
int sampler_list_threads(pid_t pid, pid_t **tids, size_t *count);

/*
 * Runs @check(@arg) in a child that has become @creds' user (groups, gid, uid, as the
 * launched command does): 0 when it returned 0, 1 when it returned non-zero, -errno
 * when the child could not become them (*@failed names the step: "initgroups" ...).
 */
int sampler_as_user(const struct sampler_creds *creds, int (*check)(void *arg), void *arg,
		    const char **failed);

/*
 * Why the eBPF reader could not load when --backend bpf required it (an errno: ENOENT
 * for a kernel without BTF), or 0: the sampler's failure was another step's.
 */
int sampler_bpf_error(void);

/* The command line of a live process, NULs as spaces. 0 or -errno. */
int sampler_read_cmdline(pid_t pid, char *buf, size_t size);
/* The same, only while the process still runs the program named @comm; -ESTALE else. */
int sampler_read_cmdline_of(pid_t pid, const char *comm, char *buf, size_t size);

/* The exit status of a process that is gone but not yet reaped (a zombie), or -1. */
int sampler_read_exit_status(pid_t pid);

/* Current CLOCK_MONOTONIC time in ns (the clock records are stamped with). */
uint64_t sampler_now_ns(void);

#endif
