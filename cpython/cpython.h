/*
 * Everything about CPython's memory layout, in one place: finding the runtime in a
 * process, its threads, their frame chains, code objects, strings and line tables, for
 * CPython 3.8 through 3.14. Every read goes through a reader that may fail; every loop
 * over target memory is bounded and cycle-checked. Used by sampler/ (frame walks) and
 * symbolize/ (names and lines).
 */
#ifndef PYTRACE_CPYTHON_CPYTHON_H
#define PYTRACE_CPYTHON_CPYTHON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../common/fingerprint.h"
#include "../common/pidns.h"

#define CPYTHON_MAX_FRAMES 1024	 /* frames a walk returns: the root-most of a deeper stack */
#define CPYTHON_WALK_FRAMES 8192 /* frames a walk reads at most */
#define CPYTHON_MAX_THREADS 4096
#define CPYTHON_MAX_ARGS 8  /* parameters read per frame: positional, then keyword-only */
#define CPYTHON_ARG_TEXT 64 /* bytes of a str's or a bytes' contents kept */
#define CPYTHON_PARAM_NAME 48

/*
 * Pool workers whose tasks the trace tells apart: the loop's frame has locals that say
 * which task it runs (multiprocessing.pool.worker: job and i), read with it as arguments
 * of index CPYTHON_ARG_TASK + which. A ProcessPoolExecutor's worker holds its task as
 * an object: its local call_item, whose first attribute is the executor's work id.
 */
enum cpython_task_kind {
	CPYTHON_TASK_NONE,
	CPYTHON_TASK_MP_POOL,	 /* multiprocessing.pool.worker: job, i */
	CPYTHON_TASK_CF_PROCESS, /* concurrent.futures.process._process_worker: call_item */
};
#define CPYTHON_TASK_LOCALS 2
#define CPYTHON_ARG_TASK 0x80
#define CPYTHON_TASK_CODES 2 /* per process */

struct cpython_types;

enum cpython_instr {
	CPYTHON_LASTI_BYTES, /* 3.8, 3.9: f_lasti in bytes */
	CPYTHON_LASTI_UNITS, /* 3.10: f_lasti in code units */
	CPYTHON_PREV_INSTR,  /* 3.11, 3.12: prev_instr pointer into co_code_adaptive */
	CPYTHON_INSTR_PTR,   /* 3.13+: instr_ptr pointer into co_code_adaptive */
};

enum cpython_lines {
	CPYTHON_LNOTAB,	   /* 3.8, 3.9 */
	CPYTHON_LINETABLE, /* 3.10 (PEP 626) */
	CPYTHON_LOCATIONS, /* 3.11+ location table */
};

/* Offsets of one CPython minor version, from built-in tables or _Py_DebugOffsets. */
struct cpython_layout {
	unsigned minor; /* 8 .. 14 */
	uint64_t runtime_interpreters_head;
	uint64_t interp_next, interp_threads_head;
	uint64_t tstate_next, tstate_interp, tstate_thread_id, tstate_native_thread_id;
	uint64_t tstate_frame; /* frame, cframe (3.11, 3.12) or current_frame */
	/* 3.15+: the thread state's own GIL flags (int holds_gil, gil_requested); 0: none */
	uint64_t tstate_holds_gil, tstate_gil_requested;
	bool frame_via_cframe; /* 3.11, 3.12: tstate->cframe->current_frame */
	uint64_t cframe_current_frame;
	uint64_t frame_previous, frame_code, frame_instr, frame_owner; /* owner: 3.11+ */
	uint64_t frame_is_entry; /* 3.11 only: the is_entry flag */
	/*
	 * Before 3.11 a frame is an object that is freed (or parked for reuse) when its call
	 * returns, so a chain read while the thread runs can lead into dead frames: 3.8 and
	 * 3.9 mark a running frame with f_executing == 1, 3.10 with f_state EXECUTING (0)
	 * or UNWINDING (2). 0: no such field (3.11+ frames live on the thread's own stack).
	 */
	uint64_t frame_live;
	enum cpython_live { CPYTHON_LIVE_NONE, CPYTHON_LIVE_EXECUTING, CPYTHON_LIVE_STATE } live;
	/*
	 * 3.11+: a generator's frame lies inside the generator object, whose frame state
	 * (int8_t gi_frame_state, gen_executing while it runs) is this many bytes before
	 * the frame. A frame owned by a generator that is not running was read after it
	 * yielded: its previous pointer is gone (NULL) or about to be. 0: not checked.
	 */
	uint64_t gen_frame_state_back;
	int8_t gen_executing; /* the running state: FRAME_EXECUTING, 0 until 3.14, 4 in 3.15 */
	uint64_t frame_size;  /* bytes to read per frame */
	/*
	 * 3.14+: f_executable and the fast locals are _PyStackRefs, whose low bits tag
	 * (Py_TAG_BITS: 1 in 3.14, 3 in 3.15; an immortal object such as a small int or
	 * None has bit 0 set, and 3.14's NULL is 1): cpython_untag() masks them.
	 */
	bool code_tagged;
	unsigned owner_first_skipped; /* owners >= this are C-stack/interpreter shims */
	enum cpython_instr instr;
	uint64_t code_filename, code_name, code_qualname, code_firstlineno, code_linetable;
	/*
	 * 3.8-3.10: co_flags (int), read for a chain's root frame: one whose code is a
	 * generator's or coroutine's was read as it yielded (it has no previous frame
	 * then), as gen_frame_state_back tells 3.11+. 0: not read.
	 */
	uint64_t code_flags;
	uint64_t code_version;	/* 3.12-3.13: uint32_t co_version (cpython_name_word()); 0: none */
	uint64_t code_adaptive; /* 3.11+: offset of the bytecode inside the code object */
	enum cpython_lines lines;
	uint64_t object_type, type_name; /* PyObject.ob_type, PyTypeObject.tp_name */
	uint64_t unicode_state, unicode_length, unicode_ascii_size, unicode_compact_size;
	uint64_t bytes_size, bytes_sval;
	/*
	 * Objects read for names (cpython/names.c) and the GIL (cpython/gil.c); a version
	 * whose offsets are not known has names_supported false.
	 */
	bool names_supported;
	enum cpython_dicts {
		CPYTHON_DICTS_38,  /* 3.8-3.10: dk_size, indices at 40, 24-byte entries */
		CPYTHON_DICTS_311, /* 3.11+: dk_log2_size, dk_kind, unicode entries of 16 */
	} dicts;
	enum cpython_managed {
		CPYTHON_MANAGED_NONE, /* <= 3.10: the dict at obj + tp_dictoffset */
		CPYTHON_MANAGED_311,  /* values pointer at obj - 32, dict at obj - 24 */
		CPYTHON_MANAGED_312,  /* obj - 24: a dict, or values tagged with bit 0 */
		CPYTHON_MANAGED_313,  /* dict at obj - 24, else values inline at tp_basicsize */
	} managed;
	uint64_t interp_modules; /* sys.modules: interp->modules or interp->imports.modules */
	uint64_t runtime_gil;	 /* <= 3.11: the GIL inside _PyRuntime (ceval.gil) */
	uint64_t interp_gil;	 /* 3.12+: interp->ceval.gil, a pointer to it */
	uint64_t gil_locked, gil_last_holder, gil_cond, gil_mutex, gil_switch_cond; /* in it */
	uint64_t type_flags, type_basicsize, type_dictoffset, heaptype_cached_keys;
	uint64_t dict_keys, dict_values;
	uint64_t values_items; /* PyDictValues: 0 before 3.13, 8 after its header */
	uint64_t module_dict;
	uint64_t long_size, long_digits; /* ob_size before 3.12, lv_tag after */
	bool long_tagged;
	/* Arguments (cpython/args.c): where a frame's locals and a code's parameters are. */
	uint64_t frame_localsplus; /* a frame's fast locals, parameters first */
	uint64_t code_argcount;	   /* int co_argcount; co_kwonlyargcount 8 bytes on */
	uint64_t code_varnames;	   /* co_varnames (<= 3.10) or co_localsplusnames: a tuple */
	uint64_t tuple_items, float_value, dict_used, set_used;
	uint64_t function_code; /* PyFunctionObject.func_code */
};

/* The object a frame slot or f_executable refers to (see code_tagged). */
static inline uint64_t cpython_untag(const struct cpython_layout *l, uint64_t ref)
{
	return l->code_tagged ? ref & ~(uint64_t)3 : ref;
}

/*
 * How to read the target's memory: @read returns 0 when all @len bytes were read.
 * @read_blocks (optional) reads @n blocks of @size bytes, the k-th at @addrs[k] into
 * @buf + k * @size, in one go, and returns how many were read whole: it stops at the
 * first that can't be.
 */
struct cpython_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
	uint32_t (*read_blocks)(void *ctx, const uint64_t *addrs, uint32_t n, void *buf,
				size_t size);
};

/* A reader over a live process with process_vm_readv; @ctx must point at the pid. */
int cpython_read_process(void *pid_ptr, uint64_t addr, void *buf, size_t len);

/* The built-in layout of 3.@minor (8..12), or NULL. */
const struct cpython_layout *cpython_builtin_layout(unsigned minor);

/*
 * Decodes a 3.13, 3.14 or 3.15 _Py_DebugOffsets image (the first bytes of _PyRuntime):
 * checks the cookie, the version against @minor (0: any) and refuses free-threaded builds.
 * 0 or -EINVAL (not such an image, implausible offsets), -ENOTSUP (free-threaded),
 * -EPROTONOSUPPORT (a version we have no decoder for).
 */
int cpython_decode_debug_offsets(const uint8_t *image, size_t len, unsigned minor,
				 struct cpython_layout *out);

/* Bytes of _PyRuntime needed by cpython_decode_debug_offsets(). */
#define CPYTHON_DEBUG_OFFSETS_BYTES 1024

/*
 * Looks in the ELF file open at @fd (named @path: the minor version may come from its
 * name) for _PyRuntime in .dynsym (never running the file). On success stores its file
 * address (before load bias), the minor version (from Py_Version, else the file name; 0
 * when unknown), whether the file is ET_EXEC and, when @types is not NULL, the file
 * addresses of the built-in types (0 for those not found). -ENOENT when the file holds
 * no CPython runtime; -ENODATA (*@minor set from its name) when it is a CPython
 * interpreter "python3.N" whose symbols are stripped and that loads no libpython.
 */
int cpython_find_runtime(int fd, const char *path, uint64_t *runtime_vaddr, unsigned *minor,
			 bool *is_exec, struct cpython_types *types);

/*
 * For an executable mapping in process @pid of @path (as the process sees it: see
 * common/target_file.h) at @start (file offset @pgoff): when the file is CPython's
 * interpreter or libpython, the address of _PyRuntime in that process and the minor
 * version (0 when unknown), and where the built-in types are (@types may be NULL).
 * -ENOENT otherwise; -ENOEXEC when the path is not a regular file; -ENODATA (and
 * *@minor) for a CPython without its symbols (see cpython_find_runtime()).
 */
int cpython_locate(pid_t pid, const char *path, uint64_t start, uint64_t pgoff, uint64_t *runtime,
		   unsigned *minor, struct cpython_types *types);

/* What a code object says about itself. Strings are UTF-8, truncated, NUL-terminated. */
struct cpython_code {
	char name[256]; /* qualified name from 3.11 */
	char filename[512];
	uint32_t firstlineno;
	uint8_t nparams; /* positional and keyword-only parameters named below (at most 8) */
	char params[CPYTHON_MAX_ARGS][CPYTHON_PARAM_NAME];
	enum cpython_task_kind task_kind;	  /* a pool worker's loop, or NONE */
	uint16_t task_slots[CPYTHON_TASK_LOCALS]; /* ... the slots of its task's locals */
	uint8_t *linetable;			  /* malloc'd copy; caller frees */
	uint32_t linetable_len;
};

/*
 * A code object as read when one of its frames was first walked, kept while the
 * process lives. Entries never change: another code object at a reused address gets
 * an entry of its own (a different fingerprint).
 */
struct cpython_code_entry {
	uint64_t code, fingerprint;
	bool unreadable;
	struct cpython_code info;
	struct cpython_code_entry *older; /* earlier code objects at the same address */
};

struct cpython_codes; /* the cache: shared by a process and its forked children */

/*
 * Arguments (cpython/args.c): the values of a frame's parameters, read with the frame (in
 * the kernel, or from outside) as raw bytes, and decoded later without the process.
 */

/* Built-in types a value is shown by, and None; their addresses in a process. */
enum cpython_type_id {
	CPYTHON_TYPE_INT,
	CPYTHON_TYPE_BOOL,
	CPYTHON_TYPE_FLOAT,
	CPYTHON_TYPE_STR,
	CPYTHON_TYPE_BYTES,
	CPYTHON_TYPE_TUPLE,
	CPYTHON_TYPE_LIST,
	CPYTHON_TYPE_DICT,
	CPYTHON_TYPE_SET,
	CPYTHON_TYPE_FROZENSET,
	CPYTHON_NONE, /* the None object itself */
	CPYTHON_TYPE_COUNT,
};

/* Their addresses in one process (0: not known; such values show by type name). */
struct cpython_types {
	uint64_t addr[CPYTHON_TYPE_COUNT];
};

enum cpython_arg_flags {
	CPYTHON_ARG_UNBOUND = 1,    /* the slot was empty (deleted, or a cell's) */
	CPYTHON_ARG_UNREADABLE = 2, /* the object could not be read */
};

/*
 * One parameter's value as read with its frame (by the kernel, or by a walk from
 * outside): the object's first bytes, undecoded, followed by text_len bytes of a str's
 * or a bytes' contents (as stored) padded to 8 bytes. A frame's arguments are records
 * one after the other. The layout of bpf/pytrace_bpf.h's struct pytrace_raw_arg.
 */
struct cpython_raw_arg {
	uint8_t pad;
	uint8_t index;	   /* the parameter's position */
	uint8_t flags;	   /* enum cpython_arg_flags */
	uint8_t text_len;  /* at most CPYTHON_ARG_TEXT */
	uint32_t frame;	   /* the kernel's index of the frame; not used here */
	uint64_t object;   /* its address */
	uint64_t words[4]; /* its bytes 8 to 40: the type, then size and value */
};

#define CPYTHON_RAW_ARG_MAX (sizeof(struct cpython_raw_arg) + CPYTHON_ARG_TEXT)

/* The bytes an argument takes with its text. */
static inline size_t cpython_raw_arg_size(const struct cpython_raw_arg *a)
{
	return sizeof(*a) + ((a->text_len + 7u) & ~7u);
}

/*
 * The next argument of the @len bytes at @p, from *@at on: a copy in @a and its text in
 * *@text. False at the end, or when the bytes are not whole records.
 */
bool cpython_next_arg(const uint8_t *p, uint32_t len, uint32_t *at, struct cpython_raw_arg *a,
		      const uint8_t **text);

/* Where a walk appends the arguments it reads: raw records. */
struct cpython_args_out {
	uint8_t *buf;
	uint32_t size, used;
};

enum cpython_value_kind {
	CPYTHON_VALUE_INT,
	CPYTHON_VALUE_BIG_INT, /* an int beyond 64 bits: not shown */
	CPYTHON_VALUE_BOOL,
	CPYTHON_VALUE_FLOAT,
	CPYTHON_VALUE_NONE,
	CPYTHON_VALUE_STR,
	CPYTHON_VALUE_BYTES,
	CPYTHON_VALUE_SIZED, /* a tuple, list, dict, set or frozenset: its length */
	CPYTHON_VALUE_OTHER, /* anything else: its type, named by cpython_type_name() */
	CPYTHON_VALUE_UNBOUND,
	CPYTHON_VALUE_UNREADABLE,
};

struct cpython_value {
	enum cpython_value_kind kind;
	int64_t i;			     /* INT, BOOL (0, 1); STR, BYTES, SIZED: the length */
	double f;			     /* FLOAT */
	uint64_t type;			     /* the type's address */
	enum cpython_type_id sized;	     /* SIZED: which */
	char text[4 * CPYTHON_ARG_TEXT + 1]; /* STR: UTF-8; BYTES: printable, escaped */
	bool cut;			     /* STR, BYTES: longer than @text */
};

/*
 * Decodes an argument read with @l's layout, knowing the types @t; @text is its text. Never fails: what can't be trusted is UNREADABLE (a size out of range,
 * a str's state that makes no sense).
 */
void cpython_arg_value(const struct cpython_layout *l, const struct cpython_types *t,
		       const struct cpython_raw_arg *a, const uint8_t *text,
		       struct cpython_value *v);

/*
 * Clears what of @a its value does not depend on (an object's other fields, a str's hash
 * computed later), so that equal values read at two moments have equal bytes.
 */
void cpython_arg_canonical(const struct cpython_layout *l, const struct cpython_types *t,
			   struct cpython_raw_arg *a);

/*
 * The same in two steps, for a walk that read the code's counts and the frame's slots
 * with what it reads anyway: how many parameters are read of a code whose co_argcount,
 * co_posonlyargcount and co_kwonlyargcount are @counts (-EFAULT: none has those), then
 * the values of the @n objects in @slots.
 */
int cpython_param_count(const int32_t counts[3]);
int cpython_read_arg_slots(const struct cpython_layout *l, const struct cpython_mem *mem,
			   const struct cpython_types *t, const uint64_t *slots, uint32_t n,
			   struct cpython_args_out *out);

/*
 * Reads the task locals of pool worker loop @task in its frame at @frame (for an
 * executor's worker, its work item's work_id), as arguments of index
 * CPYTHON_ARG_TASK + which, appended to @out. Returns how many (0 when the frame can't
 * be read or there is no room).
 */
struct cpython_task_code;
int cpython_read_task_locals(const struct cpython_layout *l, const struct cpython_mem *mem,
			     const struct cpython_types *t, uint64_t frame,
			     const struct cpython_task_code *task, struct cpython_args_out *out);

/* What task local @which of a pool worker of @kind shows as ("pool_task" ...). */
const char *cpython_task_local_name(enum cpython_task_kind kind, unsigned which);

/* The name (tp_name) of the type at @type. 0 or -errno. */
int cpython_read_type_name(const struct cpython_layout *l, const struct cpython_mem *mem,
			   uint64_t type, char *buf, size_t size);

/* A Python process: its runtime and layout, shared (refcounted) by whoever reads it. */
struct cpython_gil_addrs {
	uint64_t state;		      /* struct _gil_runtime_state */
	uint64_t locked, last_holder; /* int, PyThreadState * */
	uint64_t cond, mutex;	      /* pthread_cond_t, pthread_mutex_t */
	uint64_t switch_cond;	      /* pthread_cond_t: a dropper waits for a taker here */
};

/* Pages a walk reads up front in one call: those the process's latest walk read. */
#define CPYTHON_HOT_PAGES 12

struct cpython_process {
	int refs;
	pid_t pid;
	uint64_t runtime; /* address of _PyRuntime in the process */
	struct cpython_layout layout;
	uint64_t pthread_tid_offset;	/* <= 3.10: where glibc keeps the tid */
	struct cpython_thread *threads; /* cached tid -> thread state */
	size_t nthreads;
	uint64_t threads_read_ns;
	struct cpython_codes *codes;
	uint64_t codes_read, codes_unreadable;
	struct cpython_types types; /* where the built-in types are (for arguments) */
	/* Pool worker loops seen (their code objects), whose task locals walks read too. */
	struct cpython_task_code {
		uint64_t code;
		enum cpython_task_kind kind;
		uint16_t slots[CPYTHON_TASK_LOCALS];
	} task_codes[CPYTHON_TASK_CODES];
	uint32_t ntask_codes;
	uint32_t task_codes_sent;     /* the caller's: how many it passed on */
	uint64_t task_codes_tried_ns; /* the caller's: when it last looked for them */
	bool pool_child; /* the caller's: started by multiprocessing or imported it (forks too) */
	uint64_t modules_seen;	     /* the caller's: sys.modules' size when it last looked */
	uint64_t code_type;	     /* PyCode_Type's address, once seen */
	uint64_t threads_generation; /* bumped each time the thread list is read */
	uint64_t since_ns;	     /* the caller's: when it was found */
	/* Where its GIL is (cpython_gil_addrs()), once a caller found it. */
	struct cpython_gil_addrs gil;
	bool gil_known;
	uint64_t gil_tried_ns; /* the caller's clock */
	/* The pages the latest walk read, read in one call at the start of the next. */
	uint64_t hot_pages[CPYTHON_HOT_PAGES];
	uint32_t nhot;
	/*
	 * In another pid namespace (a container), its thread states hold the ids it sees:
	 * read_threads() gives ours, through @ns_tids. @ns_pid: its pid as it sees it.
	 */
	bool other_pidns;
	struct pidns_id pidns;
	pid_t ns_pid;
	struct pidns_map ns_tids;
};

struct cpython_thread {
	uint32_t tid;
	uint64_t tstate;
};

/*
 * Makes the reader of a Python process whose runtime is at @runtime in memory, reading
 * 3.13+ offsets from the target. NULL with errno set: EFAULT (its runtime can't be read,
 * yet or at all), EINVAL (not a valid runtime), ENOTSUP (a free-threaded build),
 * EPROTONOSUPPORT (a version this reader does not know: before 3.8, after 3.15).
 */
struct cpython_process *cpython_process__new(pid_t pid, uint64_t runtime, unsigned minor);

/* A reader of @p's memory, the live process's (process_vm_readv). */
struct cpython_mem cpython_process_mem(struct cpython_process *p);

/* The same, reading the 3.13+ offsets through @mem (NULL: the process itself). */
struct cpython_process *cpython_process__new_mem(pid_t pid, uint64_t runtime, unsigned minor,
						 const struct cpython_mem *mem);

/*
 * Finds the runtime of a live process from /proc/PID/maps. NULL with errno set: ENOENT
 * when it maps no CPython; when it maps one it can't read, why (ENODATA, ENOTSUP,
 * EPROTONOSUPPORT, EFAULT, EINVAL: see cpython_locate() and cpython_process__new())
 * with *@minor its version (0: unknown); @minor may be NULL.
 */
struct cpython_process *cpython_process__find(pid_t pid, unsigned *minor);

/*
 * In words, for the user, why a CPython 3.@minor (0: unknown) found in a process can't
 * be read (errno @err from cpython_process__find() and the functions it names). Returns
 * @buf.
 */
const char *cpython_unreadable_why(int err, unsigned minor, char *buf, size_t size);

/* The same interpreter in a forked child: same addresses, other pid. */
struct cpython_process *cpython_process__fork(const struct cpython_process *parent, pid_t pid);
struct cpython_process *cpython_process__get(struct cpython_process *p);
void cpython_process__put(struct cpython_process *p);

/* Re-reads the process's thread list (p->threads). 0 or -errno; @mem NULL: the process. */
int cpython_threads_read(struct cpython_process *p, const struct cpython_mem *mem);

/* The tid of the thread whose state is at @tstate in the list last read, or 0. */
uint32_t cpython_thread_tid(const struct cpython_process *p, uint64_t tstate);

/* The main interpreter's address (the first made, the tail of the list). 0 or -errno. */
int cpython_main_interp(const struct cpython_process *p, const struct cpython_mem *mem,
			uint64_t *interp);

/*
 * What tells a code object from another made at its address after it was freed: its
 * co_filename's and co_name's pointers and (3.12-3.13) the low 16 bits of co_version,
 * drawn from a counter over all code objects made, which a new code object whose
 * strings took the freed one's places does not share. The name's word is co_name's
 * pointer with the version above it (bits 48-63, unused by user addresses), as the
 * kernel sends it.
 */
static inline uint64_t cpython_name_word(uint64_t name, uint64_t version)
{
	return name | (version & 0xffff) << 48;
}

static inline uint64_t cpython_fingerprint(uint64_t filename, uint64_t name_word)
{
	return PYTRACE_FINGERPRINT(filename, name_word);
}

/* A Python frame as read from the target: enough to name it later. */
struct cpython_frame {
	uint64_t code;	      /* code object address */
	uint64_t fingerprint; /* cpython_fingerprint(): to catch a reused address */
	uint64_t filename;    /* ... co_filename's: names the code's file once it is gone */
	int32_t lasti;	      /* instruction offset in bytes, -1 before the first */
	bool entry;	      /* the first frame run by its C-level eval call */
	uint16_t args_len;    /* its arguments' raw records read with it: their bytes, */
	uint32_t args_at;     /* ... at this offset of the walk's buffer (cpython_walk_args) */
	uint32_t args;	      /* free for the caller: the sampler keeps an id of them here */
};

/*
 * Reads of a running thread's chain before giving up with -EAGAIN (see cpython_walk).
 * Tries fail together more often than apart: of sid 3.15's summed generator expression
 * (tests/fixtures/py_genexpr.py, -F 2000) 2-21 of ~1,250 walks failed 4 tries, 0-5
 * failed 6, at 1.46 tries per walk.
 */
#define CPYTHON_WALK_TRIES 6

/*
 * Walks the frames of thread @tid, innermost first, into @frames (at most @max; of a
 * deeper stack the root-most @max; @max at most CPYTHON_MAX_FRAMES): the frame chain only, so it is quick. Returns the
 * count (0: not a Python thread, or no frames), or -errno. @mem reads the target (NULL:
 * the process itself). A chain read while the thread runs can lead into frames it has
 * returned from (before 3.11, where they are freed) or into memory that can't be read:
 * such a walk is read again, up to CPYTHON_WALK_TRIES times, then fails (-EAGAIN,
 * -EFAULT) rather than return a stack that is not whole.
 */
int cpython_walk(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
		 uint64_t now_ns, struct cpython_frame *frames, uint32_t max);

/* What a walk left out of a stack deeper than the frames it could return. */
struct cpython_cut {
	uint32_t frames; /* the innermost frames left out */
	bool rootless;	 /* deeper than CPYTHON_WALK_FRAMES: the root-most are missing too */
};

/*
 * cpython_walk() that also reads each frame's arguments into @args (NULL: none) and
 * says what it left out in @cut (NULL: not needed).
 */
int cpython_walk_args(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
		      uint64_t now_ns, struct cpython_frame *frames, uint32_t max,
		      struct cpython_args_out *args, struct cpython_cut *cut);

/*
 * Turns frames read elsewhere (the kernel, at a context switch) into walked frames:
 * drops shim frames, marks entry frames, computes instruction offsets. @code, @instr and
 * @owner are as read from the frame; returns the count written.
 */
struct cpython_raw_frame {
	uint64_t code, filename, name,
		instr; /* co_filename; co_name's word (cpython_name_word()) */
	uint8_t owner;
	uint32_t args; /* passed on to cpython_frame.args */
};
int cpython_frames_from_raw(const struct cpython_layout *l, const struct cpython_raw_frame *raw,
			    uint32_t nraw, struct cpython_frame *frames, uint32_t max);

/*
 * Reads the names of the types of the raw arguments in the @len bytes at @args (other
 * than the built-ins) that the process's
 * cache lacks; cpython_type_name() then gives one (NULL when not read), as long as @p
 * lives. A type freed and another made at its address keeps the first name.
 */
void cpython_read_type_names(struct cpython_process *p, const struct cpython_mem *mem,
			     const uint8_t *args, uint32_t len);
const char *cpython_type_name(const struct cpython_process *p, uint64_t type);

/*
 * Whether everything cpython_read_codes() would read for these frames is read already
 * (then they need not be kept for it).
 */
bool cpython_all_read(struct cpython_process *p, const struct cpython_frame *frames, uint32_t n);

/*
 * Looks for the pool worker loops in the process's modules (multiprocessing.pool.worker),
 * so that walks read their task locals before one of their frames was seen. 0 when
 * found, -ENOENT when the module isn't imported (yet), or -errno.
 */
int cpython_find_task_codes(struct cpython_process *p, const struct cpython_mem *mem);

/*
 * Code objects and line-table bytes not kept, over every process, because a cache was
 * full (see cpython/process.c): their frames unnamed, their lines the first one.
 */
void cpython_cache_losses(uint64_t *codes, uint64_t *linetables);
/* Tests: a smaller cache for @p (and the processes that share it). */
void cpython_process__cache_limits(struct cpython_process *p, size_t entries, uint64_t bytes);

/* Reads the code objects of walked frames that the process's cache lacks. */
void cpython_read_codes(struct cpython_process *p, const struct cpython_mem *mem,
			const struct cpython_frame *frames, uint32_t n);

/* The cached code object of a walked frame, or NULL. Valid while @p lives. */
struct cpython_code_entry *cpython_code_lookup(struct cpython_process *p, uint64_t code,
					       uint64_t fingerprint);

/*
 * The name @name and file @file (NULL: not known; else its last characters, "..." first
 * when cut) of code object @code (@fingerprint), as the kernel read them while the code
 * ran: they name it should it be gone when its frames are named.
 */
void cpython_code_name_seen(struct cpython_process *p, uint64_t code, uint64_t fingerprint,
			    const char *name, const char *file);

/* Reads a code object. 0 or -errno (garbage gives -EINVAL, never a crash). */
int cpython_read_code(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t code,
		      struct cpython_code *out);

/* Reads a str object as UTF-8 into @buf (always NUL-terminated). 0 or -errno. */
int cpython_read_string(const struct cpython_layout *l, const struct cpython_mem *mem,
			uint64_t addr, char *buf, size_t size);

/*
 * Objects read by hand (cpython/objects.c). Any pointer may be garbage: types are checked
 * by name, sizes bounded; a value that can't be read gives -EFAULT or -EINVAL, one that
 * isn't there -ENOENT, a version whose layouts are not known -ENOTSUP.
 */
#define CPYTHON_MAX_DICT_ENTRIES (1 << 16)

struct cpython_dict_item {
	uint64_t key, value; /* object addresses */
};

/* The value of the str key @name in the dict at @dict (combined or split). */
int cpython_dict_get(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t dict,
		     const char *name, uint64_t *value);

/* The items of the dict at @dict, in order, at most @max. Returns the count or -errno. */
int cpython_dict_items(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t dict,
		       struct cpython_dict_item *items, size_t max);

/*
 * The instance attribute @name of the object at @obj: from its __dict__ (tp_dictoffset),
 * or 3.11+ managed dicts and the values laid out by the type's shared keys (3.13: inline).
 */
int cpython_attr_get(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		     const char *name, uint64_t *value);

/* The int at @obj, if it is one from 0 to 2^64 - 1. 0, -EINVAL, -ERANGE or -EFAULT. */
int cpython_read_ulong(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		       uint64_t *v);

/* The str at @obj (its type checked) as UTF-8, truncated to @size - 1 bytes. 0 or -errno. */
int cpython_read_name(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		      char *buf, size_t size);

/*
 * Names (cpython/names.c), read fresh at each call so a name changed after start is
 * followed. -ENOENT: the module was not imported (or the process is not set up yet).
 */
#define CPYTHON_NAME_MAX 128

/* The value of global @name of module @module, found through sys.modules. */
int cpython_module_global(struct cpython_process *p, const struct cpython_mem *mem,
			  const char *module, const char *name, uint64_t *value);

/* How many modules sys.modules holds: a few reads, to tell whether any was imported. */
int cpython_modules_count(struct cpython_process *p, const struct cpython_mem *mem,
			  uint64_t *count);

struct cpython_thread_name {
	uint32_t tid;
	int err; /* 0: @name holds it; -ENOENT: not a threading thread; else unreadable */
	char name[CPYTHON_NAME_MAX];
};

/*
 * threading.Thread.name of every thread of the process's interpreters (found by its
 * ident in threading._active: main, started and dummy threads), one entry per Python
 * thread, at most @max. Returns the count or -errno for the whole process.
 */
int cpython_thread_names(struct cpython_process *p, const struct cpython_mem *mem,
			 struct cpython_thread_name *out, size_t max);

/* multiprocessing's name of the process (current_process().name). 0 or -errno. */
int cpython_process_name(struct cpython_process *p, const struct cpython_mem *mem, char *buf,
			 size_t size);

/*
 * The GIL (cpython/gil.c): addresses of its state and fields in the target, for telling
 * a wait on its condition variable (a futex inside @cond or @mutex) from other waits.
 * A field whose offset this version doesn't tell is 0.
 */

/* The main interpreter's GIL. 0, -ENOTSUP (unknown layout) or -errno. */
int cpython_gil_addrs(struct cpython_process *p, const struct cpython_mem *mem,
		      struct cpython_gil_addrs *out);

enum cpython_gil_part {
	CPYTHON_GIL_NONE,
	CPYTHON_GIL_COND,   /* take_gil() waits here for the holder to drop it */
	CPYTHON_GIL_MUTEX,  /* the mutex guarding the GIL's state, held briefly */
	CPYTHON_GIL_SWITCH, /* drop_gil() waits here until another thread took it */
};

/*
 * Whether the futex word at @uaddr (a thread blocked in futex(2) on it) lies inside the
 * GIL's condition variable or mutex: that thread waits for the GIL, not for a lock.
 */
enum cpython_gil_part cpython_gil_futex(const struct cpython_gil_addrs *gil, uint64_t uaddr);

struct cpython_gil_holder {
	bool locked;
	uint64_t tstate; /* the holder's thread state while locked, else 0 */
	uint32_t tid;	 /* its thread, 0 when not in the thread list */
};

/* Who holds the GIL right now (locked and last_holder, read consistently). 0 or -errno. */
int cpython_gil_holder(struct cpython_process *p, const struct cpython_mem *mem,
		       struct cpython_gil_holder *out);

/* The line executing at byte offset @lasti of a code object's line table; 0 if none. */
uint32_t cpython_line(enum cpython_lines kind, const uint8_t *table, size_t len,
		      uint32_t firstlineno, int32_t lasti);

#endif
