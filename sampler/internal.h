/* Internal to sampler/: the state its files share and the functions they call across. */
#ifndef PYTRACE_SAMPLER_INTERNAL_H
#define PYTRACE_SAMPLER_INTERNAL_H

#include <linux/perf_event.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/hashmap.h"
#include "argstore.h"
#include "bpf_reader.h"
#include "launch.h"
#include "waitpolicy.h"
#include "ring.h"
#include "sampler.h"

#define REGS_MASK 0xff01ffULL /* AX..IP, R8..R15: see enum sampler_reg */
/*
 * Records are handed out this long after they happened: enough for every CPU's buffer
 * to have them, and for the stack a thread resumed with to be read before its wait is
 * handed out (see emit_off_cpu).
 */
#define REORDER_MARGIN_NS (30 * 1000000ULL)
#define MAX_CPUS 1024
#define ATTACH_ROUNDS 20
/* Room for the raw arguments of one walk from outside: past it, a frame has none. */
#define ARGS_SCRATCH                                                                               \
	(CPYTHON_MAX_FRAMES * (CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS) * CPYTHON_RAW_ARG_MAX)
#define DRAIN_INTERVAL_MS 1	  /* while a traced process runs CPython */
#define SLOW_DRAIN_INTERVAL_MS 20 /* otherwise */

/* Records we make ourselves for what existed before we attached. */
#define SYNTH_RECORD 0x7f00
/* An event of the kernel-side reader (struct pytrace_event) after the header. */
#define KERNEL_EVENT_RECORD 0x7f01
/* Longer than the kernel takes from stamping an event to sending it. */
#define KERNEL_EVENT_MARGIN_NS 1000000ULL
/* A thread whose sample the kernel read this recently has the next ones read too. */
#define KERNEL_READS_NS 10000000ULL

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

/*
 * Stacks read before a thread's latest kept, to find one read before a moment that the
 * latest was read after: a drainer that reads each sample about a period late has read
 * the sample before a switch-out after it too. Without root, under load, a run of a
 * thread's samples can all be read late (up to 13 ms, 6 samples, seen with four
 * computing pool workers on two cores): the read before the first of them is further
 * back.
 */
#define OLDER_READS 12

struct task_state {
	uint32_t pid, tid;
	struct qrec *switch_sample; /* the latest context-switch sample (owned) */
	bool out;		    /* switched out and not back yet */
	bool was_out;		    /* a switch-out of it was followed */
	uint64_t out_time;
	bool out_estimated; /* out_time is the kernel's reading of an unrecorded switch */
	enum sampler_wait wait;
	struct qrec *out_sample; /* the sample taken as it switched out (owned) */
	/*
	 * A wait seen from outside: the thread was blocked when we attached, or was still
	 * switched out when its switch record was drained. Its stack can't change while
	 * it waits, so reading it with process_vm_readv is exact.
	 */
	int64_t outside_syscall;
	uint64_t outside_syscall_arg;
	uint64_t outside_regs[SREG_COUNT];
	uint8_t *outside_stack;
	uint64_t outside_stack_size;
	uint64_t outside_read_ns;
	struct py_stack *outside_py;
	struct py_stack *last_py; /* of the latest sample followed: the drainer's view */
	struct py_stack *older_py[OLDER_READS]; /* the ones before it, newest first */
	struct py_stack *out_py;       /* last_py as of the switch-out: a guess for short waits */
	struct py_fifo kernel_outs;    /* read by the kernel at switch-outs */
	struct py_fifo kernel_samples; /* read by the kernel at samples perf also kept */
	uint64_t chain_start;	       /* the first switch-in since the last stack read, or 0 */
	uint64_t waited_ns;	       /* its preemptions followed so far, summed (drainer) */
	uint64_t drain_out_ns;	       /* ... the one it is in, from here, or 0 */
	uint64_t seen_ns;	       /* its latest sample or switch-in followed */
	uint64_t kernel_sample_ns;     /* its latest sample the kernel read (kept for perf's) */
	bool sampled;		       /* a sample of it was followed */
	bool name_asked, name_sent;    /* threadnames.c: its threading name asked for, sent */
	uint64_t name_at_ns;	       /* ... at its first Python stack */
	/*
	 * The trial of the latest sample whose stack was read from outside (readtrial.c):
	 * the read as the policy sees it (known: a trial is open; at_ns, the sample), its
	 * calls (hashed), the read itself when it came late (owned; the sample carries a
	 * guess meanwhile), the wait the thread began after the sample; and the stacks
	 * decided for samples still queued, by their times, taken as they go out.
	 */
	struct policy_read trial;
	uint64_t trial_calls;
	struct py_stack *late_read;
	uint64_t trial_out_ns;
	bool trial_blocked;
	struct py_fifo restacked;
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
	uint64_t walk_ns;   /* read from outside: how long the walk took */
	uint64_t at_ns;	    /* the record it was read for: a sample or a switch-out */
	uint64_t waited_ns; /* its thread's waits, summed, before at_ns (task_state.waited_ns) */
	uint64_t ran_ns;    /* a guess (guess_at()): its thread's running time since the read */
	bool extended;	    /* at_ns moved to the end of the wait it was read in */
	bool kernel;	    /* read by the kernel at a switch-out (copies are not) */
	bool early;	    /* ... well before perf's record of that switch: at_ns is its time */
	bool exact;
	uint64_t user_ip, user_sp;     /* kernel samples: the user registers perf saw too */
	int64_t syscall;	       /* kernel switch-outs: the system call it waits in, or -1 */
	uint64_t syscall_arg;	       /* ... and its first argument */
	enum sampler_gil gil;	       /* kernel readings: whether the thread held the GIL */
	enum sampler_py_source source; /* read for its record, or a guess (guess_at()) */
	/*
	 * A switch-out's guess: the first read that ended after the switch, whole (owned).
	 * Made from outside for an earlier sample, late, it may lie inside the wait: then
	 * it is the wait's stack, exactly (see emit_off_cpu).
	 */
	struct py_stack *late;
	uint32_t n;
	struct cpython_code_entry **codes; /* resolved as the record goes out, under the lock */
	struct cpython_frame frames[];
};

/*
 * A drain consumes all the kernel's events before it follows perf's records, so a fifo
 * holds up to one drain's worth for its thread (bounded: the oldest go first).
 */
#define PY_FIFO_MAX 4096

/*
 * A runtime found in a new mapping whose description could not be read yet: 3.13+
 * describe themselves in _PyRuntime, which the loader may not have mapped in place when
 * the executable segment's record is followed. Tried again at the process's samples.
 */
struct unread_runtime {
	uint64_t runtime;
	unsigned minor;
	struct cpython_types types;
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
	uint64_t syscall_arg;
	uint64_t regs[SREG_COUNT];
	uint8_t *stack;
	uint64_t stack_size;
};

/* Records copied out of the rings, in (time, seq) order: a min-heap. */
struct queue {
	struct qrec **heap;
	size_t count, capacity;
	uint64_t next_seq;
};

struct proc_state {
	uint32_t ntasks;
	/*
	 * Seen dead in /proc at @gone_ns (by the drainer, ahead of the hand-out): its exit
	 * record, if it comes, is stamped before that. Kept until the exit goes out.
	 */
	bool gone;
	uint64_t gone_ns;
	uint8_t name_reads;	/* drains left to read its threads' names in (threadnames.c) */
	uint32_t names_waiting; /* ... threads that asked and have none yet */
};

/*
 * How far past a process was seen dead the hand-out must be before its exit record
 * counts as lost and one is made up: beyond the reorder margin, in case its ring was
 * drained late.
 */
#define EXIT_GRACE_NS (100 * 1000000ULL)

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
	size_t procs_names_due;		 /* how many have name_reads left */
	struct hashmap *cmdlines;	 /* record -> command line read at drain time */
	struct hashmap *pending_outs;	 /* tid -> struct pending_out, during one drain */
	struct hashmap *captures;	 /* tid -> struct outside_capture */
	struct hashmap *pythons;	 /* pid -> struct cpython_process */
	struct hashmap *unread_runtimes; /* pid -> struct unread_runtime: found, not yet readable */
	struct hashmap *exit_codes;	 /* pid -> wait() code + 1, sent by the kernel at its end */
	struct hashmap *messages;	 /* tid -> struct pending_message (kernel.c): a pool's
					    message, until the stack the kernel sends after it */
	struct hashmap *message_ends;	 /* message -> struct message_end (kernel.c): one end
					    of a message, until its other end is followed */
	struct bpf_reader *bpf;		 /* Python frames read by the kernel at switch-outs */
	bool kernel_samples;	    /* ... and at samples: it is attached to the clock events */
	size_t nfds_sampled;	    /* clock events it was attached to (or tried) */
	uint64_t clock_id;	    /* a cpu-clock event's id, for the samples it reads */
	struct hashmap *bpf_synced; /* pid -> thread list generation + 1 mirrored there */
	pthread_t drainer;	    /* drains, follows and walks every ~1 ms */
	bool drainer_running;
	pid_t handout_tid;    /* the thread that started the drainer, which hands records out */
	bool handout_reniced; /* ... was given a lower priority than the drainer's */
	bool drainer_stop;    /* read and written atomically: the two threads' */
	pthread_mutex_t lock; /* everything here, between the drainer and sampler__next() */
	uint64_t handout_waiting_since; /* when sampler__next() began to wait for it, or 0 */
	uint64_t drainer_waiting_since; /* when the drainer began to wait for it, or 0 */
	struct qrec **batch;		/* records of the drain in progress */
	size_t batch_count, batch_capacity;
	uint64_t batch_seq;
	struct cpython_frame *py_scratch;
	uint8_t *args_scratch;	/* ARGS_SCRATCH bytes: one walk's raw arguments */
	struct arg_store *args; /* every frame's arguments, by id (frames[i].args) */
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
	uint32_t ngone;		/* processes in @procs that are gone */
	uint64_t first_gone_ns; /* the earliest gone_ns of those, or UINT64_MAX */
	/* What the last handed-out record points into, freed on the next call. */
	struct qrec *held[2];
	uint8_t *held_stack;
	struct sampler_rec rec;
	struct sampler_stats stats;
};

struct sample_view {
	uint64_t id;
	uint32_t pid, tid, cpu;
	uint64_t time;
	struct sampler_ustack stack;
};

struct task_record {
	struct perf_event_header header;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

/* ---- pystack.c: Python stacks and their fifos ---- */
/* Frees a record and what it owns. Accepts NULL. */
void qrec_free(struct qrec *q);
void py_stack_free(struct py_stack *ps);
void resolve_codes(struct py_stack *ps);
struct py_stack *py_stack_copy(const struct py_stack *src);
/* A stack of copies of @frames; other fields 0. */
struct py_stack *py_stack_new(struct cpython_process *proc, uint32_t n,
			      const struct cpython_frame *frames);
/*
 * Keeps the raw arguments of each of @n @frames (their args_len bytes at args_at of
 * @bytes, @len of them) in the sampler's store, setting frames[i].args to the id (0:
 * none), and reads the names of the types a new list holds from @proc.
 */
void store_args(struct sampler *s, struct cpython_process *proc, struct cpython_frame *frames,
		uint32_t n, const uint8_t *bytes, uint32_t len);
/* A stack deeper than kept: @frames innermost cut; @rootless, its root-most missing too. */
void count_cut(struct sampler *s, uint32_t frames, bool rootless);
/* The id of the one frame's raw arguments in the @len bytes at @bytes (0: none kept). */
uint32_t store_list(struct sampler *s, struct cpython_process *proc, const uint8_t *bytes,
		    uint32_t len);
bool find_pool_workers(struct sampler *s, uint64_t now);
void py_fifo_push(struct py_fifo *f, struct py_stack *ps);
struct py_stack *py_fifo_take(struct py_fifo *f, uint64_t time, uint64_t within);
struct py_stack *py_fifo_match(struct py_fifo *f, uint64_t time, uint64_t ip, uint64_t sp);
void py_fifo_clear(struct py_fifo *f);

/* ---- sampler.c: lifecycle ---- */
struct sampler *sampler__new(const struct sampler_opts *opts);

/* ---- events.c: perf events ---- */
uint32_t online_cpus(void);
uint64_t sample_type(const struct sampler_opts *opts);
void build_attrs(struct sampler *s, bool privileged);
int open_task_events(struct sampler *s, pid_t tid);

/* ---- tasks.c: task and process liveness ---- */
struct task_state *task_get(struct sampler *s, uint32_t pid, uint32_t tid, bool create);
void task_free(struct task_state *t);
void proc_add_task(struct sampler *s, uint32_t pid, bool starts);
bool proc_remove_task(struct sampler *s, uint32_t pid, uint32_t tid);
void proc_forget(struct sampler *s, uint32_t pid);
int take_exit_status(struct sampler *s, uint32_t pid);
const struct sampler_rec *emit_lost_exit(struct sampler *s, uint64_t horizon);
void check_liveness(struct sampler *s);

/* ---- decode.c: PERF_RECORD_* decoding (pure) ---- */
bool decode_sample(const uint8_t *rec, uint32_t size, bool callchain, struct sample_view *v);
uint64_t record_time(const struct perf_event_header *hdr, void *ctx);
/*
 * How to copy a PERF_RECORD_SAMPLE without the user stack bytes the kernel reserved but
 * did not fill: its first @size - 8 bytes, up to the stack's first @keep, then
 * stack_cut_apply() (the stack's size field at @size_at made @keep, and @dyn, its
 * dynamic size, last).
 */
struct stack_cut {
	uint32_t size_at, keep, size;
	uint64_t dyn;
};

/*
 * The cut of a sample of @size bytes read through @read(@src, offset, ...), laid out as
 * decode_sample() reads it; false to copy it whole (no stack, or not as expected).
 */
bool sample_stack_cut(void (*read)(const void *src, uint32_t off, void *buf, size_t len),
		      const void *src, uint32_t size, bool callchain, struct stack_cut *cut);
/* Makes @rec, @cut->size bytes holding the sample's first @cut->size - 8, the cut sample. */
void stack_cut_apply(const struct stack_cut *cut, uint8_t *rec);
uint32_t record_pid(const struct qrec *q);
/* An exit code as wait() reports it, as a shell shows it: 128 + signal when killed. */
int decode_exit_code(uint32_t code);

/* ---- drainer.c: the drainer thread ---- */
/* ring__drain()'s copier: @sampler's records, samples' stack copies cut (stack_cut). */
struct qrec *copy_record(const struct ring_rec *r, void *sampler);
void drain_rings(struct sampler *s, bool last);
int start_drainer(struct sampler *s);
void stop_drainer(struct sampler *s);

/* ---- order.c: time order ---- */
int queue__push(struct queue *q, struct qrec *rec);
struct qrec *queue__peek(const struct queue *q);
struct qrec *queue__pop(struct queue *q);
void queue__clear(struct queue *q);
void take_record(struct qrec *rec, void *ctx);
void batch_sort(struct qrec **recs, size_t count);

enum order_verdict {
	ORDER_WAIT, /* may still have older records in flight: not yet */
	ORDER_TAKE, /* hand it out */
	ORDER_DROP, /* after the stop: not part of the trace */
};

/*
 * What to do with the oldest queued record, stamped @time: records are safe to hand out
 * once older than @watermark (every CPU's buffer has whatever came before). 0 stamps
 * (synthetic records of what existed at attach) always go out.
 */
enum order_verdict order_verdict(uint64_t time, uint64_t watermark, bool stopped, uint64_t stop_ns);

/* ---- python.c: CPython processes, drain-time walks ---- */
void fresh_stack(struct sampler *s, const struct py_stack *walked);
void read_fresh_codes(struct sampler *s);
/*
 * Says once (an SREC_NOTE) that process @pid maps a CPython 3.@minor (0: unknown) it
 * can't read, errno @err saying why (cpython_process__new(), cpython_locate()).
 */
void note_unreadable(struct sampler *s, uint32_t pid, uint64_t time, unsigned minor, int err);

/* ---- threadnames.c: a new Python thread's threading name, read at once ---- */
/* @t's stack @ps was followed: its first Python one asks for its name. */
void thread_name_due(struct sampler *s, struct task_state *t, const struct py_stack *ps);
/* Reads the names asked for in this drain and queues them as SREC_PYNAME records. */
void read_due_names(struct sampler *s);
struct py_stack *walk_python(struct sampler *s, uint32_t pid, uint32_t tid, bool exact,
			     uint64_t at_ns);
void set_python(struct sampler *s, uint32_t pid, struct cpython_process *proc, uint64_t found_ns);
void track_python(struct sampler *s, struct qrec *q);
void find_gil(struct sampler *s, struct cpython_process *proc, uint64_t time);

/* ---- drainer.c ---- */
/*
 * The lock's other user has waited for it since *@waiting_since (0: it does not) for over
 * @after_ns: wait until it took it, up to 1 ms. A mutex is not fair either way.
 */
void let_waiter_in(const uint64_t *waiting_since, uint64_t after_ns);

/* ---- waitstack.c: the stack a wait gets ---- */
void remember_py(struct task_state *t, const struct py_stack *ps);
struct py_stack *guess_at(struct sampler *s, const struct task_state *t, uint64_t at_ns,
			  bool keep_late);
uint64_t period_ns(const struct sampler *s);
struct sampler_rec *emit_off_cpu(struct sampler *s, struct task_state *t, uint64_t end,
				 uint32_t cpu);

/* ---- readtrial.c: whether a sample's read from outside stands for it ---- */
void trial_open(struct task_state *t, uint64_t sample_ns, const struct py_stack *read,
		struct py_stack *late_read);
void trial_next(struct sampler *s, struct task_state *t, uint64_t sample_ns);
void trial_out(struct task_state *t, uint64_t out_ns, bool blocked);
void trial_in(struct sampler *s, struct task_state *t, uint64_t in_ns);
void trial_seen(struct sampler *s, struct task_state *t, uint64_t seen_ns,
		const struct py_stack *ps);
struct py_stack *trial_restacked(struct task_state *t, uint64_t sample_ns);

/* ---- offcpu.c: switch pairing, waits read from outside ---- */
void track_switch(struct sampler *s, const struct qrec *q);
void capture_list_free(struct outside_capture *c);
void capture_waiting(struct sampler *s);
const struct sampler_rec *on_switch(struct sampler *s, struct qrec *q, uint32_t pid, uint32_t tid);

/* ---- kernel.c: the eBPF reader's events ---- */
void take_kernel_event(void *ctx, const struct pytrace_event *e);
struct qrec *follow_kernel_event(struct sampler *s, struct qrec *q);
struct py_stack *take_kernel_out(struct sampler *s, struct task_state *t, uint64_t out_time);
void order_message(struct sampler *s, struct qrec *q);
/* Message ends waiting for their other end past which the old ones are forgotten. */
#define MESSAGE_ENDS_MAX 4096

/* ---- handout.c: records as callers see them ---- */
void release_held(struct sampler *s);
/* @r gets the Python frames of @ps (which it borrows) as values. */
void out_python(struct sampler *s, struct sampler_rec *r, struct py_stack *ps);
struct sampler_rec *out_rec(struct sampler *s, enum sampler_rec_kind kind, uint32_t pid,
			    uint32_t tid, uint32_t cpu, uint64_t time);

/* ---- attach.c: attaching ---- */
uint8_t *read_stack(pid_t pid, uint64_t sp, uint64_t size, uint64_t *got);
/* Queues @rec (with a copy of @text, or none) to go out in time order. 0 or -ENOMEM. */
int push_synth(struct sampler *s, const struct sampler_rec *rec, const char *text);

#endif
