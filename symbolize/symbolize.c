/* The symbolizer's front: processes and their address spaces, stacks, wait reasons. */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "internal.h"

struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts, struct frame_table *frames)
{
	struct symbolizer *sym = calloc(1, sizeof(*sym));

	if (!sym)
		return NULL;
	sym->frames = frames;
	sym->max_native =
		opts->max_native_frames && opts->max_native_frames < SYMBOLIZE_MAX_NATIVE_FRAMES
			? opts->max_native_frames
			: SYMBOLIZE_MAX_NATIVE_FRAMES;
	sym->processes = hashmap__new();
	sym->python_names = hashmap__new();
	sym->images = image_set__new();
	sym->scratch = calloc(SYMBOLIZE_MAX_NATIVE_FRAMES, sizeof(*sym->scratch));
	sym->native = opts->native;
	if (!sym->processes || !sym->python_names || !sym->images || !sym->scratch) {
		symbolizer__free(sym);
		errno = ENOMEM;
		return NULL;
	}
	if (opts->kernel)
		sym->kernel = kernel_syms__load();
	elf_version(EV_CURRENT);
	return sym;
}

static void put_addrspace_value(void *as)
{
	native_addrspace_put(as);
}

void symbolizer__free(struct symbolizer *sym)
{
	if (!sym)
		return;
	/* The processes first: they hold references to the images. */
	hashmap__free_all(sym->processes, put_addrspace_value);
	python_names_free(sym);
	image_set__free(sym->images);
	free(sym->scratch);
	free(sym->args_seen);
	kernel_syms__free(sym->kernel);
	free(sym);
}

static struct addrspace *process_addrspace(struct symbolizer *sym, pid_t pid)
{
	struct addrspace *as = hashmap__get(sym->processes, (uint64_t)pid);

	if (as)
		return as;
	as = native_addrspace_new(pid);
	if (as && hashmap__set(sym->processes, (uint64_t)pid, as)) {
		native_addrspace_put(as);
		return NULL;
	}
	return as;
}

static void forget_process(struct symbolizer *sym, pid_t pid)
{
	native_addrspace_put(hashmap__remove(sym->processes, (uint64_t)pid));
	python_forget(sym, pid);
}

int symbolizer__track(struct symbolizer *sym, const struct sampler_rec *rec)
{
	struct addrspace *as;
	pid_t pid = (pid_t)rec->pid;

	switch (rec->kind) {
	case SREC_FORK:
		if (rec->pid == rec->fork.ppid || rec->synthetic)
			return 0; /* a thread, or a process we describe from its maps */
		as = hashmap__get(sym->processes, rec->fork.ppid);
		forget_process(sym, pid);
		if (!as)
			return 0;
		/* A forked child maps what its parent maps: share until one of them changes. */
		return hashmap__set(sym->processes, (uint64_t)pid, native_addrspace_share(as));
	case SREC_EXEC:
		forget_process(sym, pid);
		return 0;
	case SREC_MMAP:
		as = process_addrspace(sym, pid);
		if (!as)
			return -ENOMEM;
		if (native_map(sym, &as, pid, rec))
			return -ENOMEM;
		return hashmap__set(sym->processes, (uint64_t)pid, as);
	case SREC_EXIT:
		if (rec->exit.last_in_process)
			forget_process(sym, pid);
		return 0;
	default:
		return 0;
	}
}

/* Appends kernel frames (outermost first) after the user frames. */
static uint32_t add_kernel_frames(struct symbolizer *sym, const struct sampler_ustack *st,
				  struct trace_frame *frames, uint32_t n, uint32_t max)
{
	uint32_t i;

	for (i = st->nkernel; i-- > 0 && n < max;) {
		uint64_t ip = st->kernel_ips[i];
		const char *name;
		struct frame_info info = { .kind = FRAME_KERNEL, .file = "[kernel]" };

		if (ip >= (uint64_t)-4095)
			continue; /* a context marker, not an address */
		name = kernel_syms__find(sym->kernel, ip);
		info.name = name ? name : "[unknown kernel]";
		frames[n].func = frame_table__intern(sym->frames, &info);
		frames[n].line = 0;
		frames[n].callsite = i + 1 < st->nkernel ? st->kernel_ips[i + 1] : 0;
		frames[n].args = 0;
		if (frames[n].func)
			n++;
	}
	return n;
}

/* Native frames of @rec root first; remembers the innermost for wait reasons. */
static int native_frames(struct symbolizer *sym, const struct sampler_rec *rec,
			 struct trace_frame *frames, uint32_t max)
{
	struct addrspace *as = hashmap__get(sym->processes, rec->pid);
	int n = 0;

	if (as)
		n = native_unwind(sym, as, (pid_t)rec->tid, &rec->sample.stack, frames, max);
	else if (rec->sample.stack.valid)
		sym->stats.no_user_state++;
	if (n > 0)
		sym->wait_hint = frames[n - 1].func;
	return n;
}

static bool is_eval_loop(struct symbolizer *sym, uint32_t func)
{
	const struct frame_info *f = frame_table__get(sym->frames, func);

	return f && f->kind == FRAME_NATIVE && !strncmp(f->name, "_PyEval_EvalFrameDefault", 24);
}

/*
 * --native: each native eval-loop frame gives way to the Python frames it ran. Python
 * frames come in groups, one per C-level eval call, each starting at an entry frame.
 * When the counts disagree the Python frames alone are kept.
 */
static int interleave(struct symbolizer *sym, const struct trace_frame *nat, int nnat,
		      const struct trace_frame *py, int npy, const struct sampler_rec *rec,
		      struct trace_frame *out, uint32_t max)
{
	int i, p = 0, groups = 0, evals = 0;
	uint32_t n = 0;

	for (i = 0; i < npy; i++)
		groups += rec->sample.py_frames[rec->sample.npy - 1 - i].entry || !i;
	for (i = 0; i < nnat; i++)
		evals += is_eval_loop(sym, nat[i].func);
	if (evals < groups) {
		sym->stats.interleave_mismatches++;
		memcpy(out, py, (size_t)npy * sizeof(*out));
		return npy;
	}
	for (i = 0; i < nnat && n < max; i++) {
		if (!is_eval_loop(sym, nat[i].func) || p >= npy) {
			out[n++] = nat[i];
			continue;
		}
		/* This eval call ran Python frames p.. up to the next entry frame. */
		do {
			out[n++] = py[p++];
		} while (p < npy && n < max &&
			 !rec->sample.py_frames[rec->sample.npy - 1 - p].entry);
	}
	return (int)n;
}

int symbolizer__stack(struct symbolizer *sym, const struct sampler_rec *rec,
		      struct trace_frame *frames, uint32_t max)
{
	const struct sampler_ustack *st = &rec->sample.stack;
	int n = 0, npy;

	sym->wait_hint = 0;
	if (rec->sample.npy) {
		npy = python_frames(sym, rec, frames, max);
		if (npy < 0)
			return npy;
		if (sym->native) {
			int nnat =
				native_frames(sym, rec, sym->scratch, SYMBOLIZE_MAX_NATIVE_FRAMES);
			struct trace_frame *py = malloc((size_t)npy * sizeof(*py) + 1);

			if (!py)
				return -ENOMEM;
			memcpy(py, frames, (size_t)npy * sizeof(*py));
			n = nnat > 0
				    ? interleave(sym, sym->scratch, nnat, py, npy, rec, frames, max)
				    : npy;
			free(py);
		} else {
			/* Python frames only; the native stack just names what a wait waits in. */
			if (rec->kind == SREC_OFF_CPU && rec->sample.syscall < 0)
				native_frames(sym, rec, sym->scratch, SYMBOLIZE_MAX_NATIVE_FRAMES);
			n = npy;
		}
	} else {
		n = native_frames(sym, rec, frames, max);
		if (n < 0)
			return n;
	}
	if (sym->kernel && st->nkernel)
		n = (int)add_kernel_frames(sym, st, frames, (uint32_t)n, max);
	return n;
}

struct wait_name {
	const char *pattern; /* in a libc function name, or a syscall name */
	const char *reason;
};

static const struct wait_name wait_names[] = {
	{ "nanosleep", "sleep" },
	{ "futex", "lock wait (futex)" },
	{ "pthread_cond", "lock wait (futex)" },
	{ "pthread_mutex", "lock wait (futex)" },
	{ "sem_", "lock wait (futex)" },
	{ "lll_lock", "lock wait (futex)" },
	{ "epoll", "poll" },
	{ "poll", "poll" },
	{ "select", "poll" },
	{ "wait4", "wait for child" },
	{ "waitpid", "wait for child" },
	{ "waitid", "wait for child" },
	{ "pthread_join", "join thread" },
	{ "thread", "blocked" }, /* not "read" */
	{ "accept", "accept" },
	{ "connect", "connect" },
	{ "recv", "read" },
	{ "read", "read" },
	{ "send", "write" },
	{ "write", "write" },
	{ "fsync", "fsync" },
	{ "flock", "file lock" },
	{ "pause", "pause" },
	{ "sigsuspend", "signal wait" },
	{ "sigtimedwait", "signal wait" },
	{ "msgrcv", "read" },
};

/* x86-64 syscall numbers of the common blocking calls. */
static const char *syscall_name(int64_t nr)
{
	switch (nr) {
	case 0:
		return "read";
	case 1:
		return "write";
	case 7:
		return "poll";
	case 17:
		return "read";
	case 19:
		return "read";
	case 23:
		return "select";
	case 34:
		return "pause";
	case 35:
		return "nanosleep";
	case 42:
		return "connect";
	case 43:
		return "accept";
	case 45:
		return "recv";
	case 47:
		return "recv";
	case 61:
		return "wait4";
	case 73:
		return "flock";
	case 74:
		return "fsync";
	case 128:
		return "sigtimedwait";
	case 130:
		return "sigsuspend";
	case 202:
		return "futex";
	case 230:
		return "nanosleep";
	case 232:
		return "epoll";
	case 247:
		return "waitid";
	case 270:
		return "select";
	case 271:
		return "poll";
	case 281:
		return "epoll";
	case 288:
		return "accept";
	case 441:
		return "epoll";
	default:
		return NULL;
	}
}

static const char *classify(const char *name)
{
	size_t i;

	for (i = 0; name && i < sizeof(wait_names) / sizeof(wait_names[0]); i++) {
		if (strstr(name, wait_names[i].pattern))
			return wait_names[i].reason;
	}
	return NULL;
}

/* What the sampler found a wait in futex(2) to be: for the GIL, or none of it. */
static const char *gil_wait(const struct sampler_rec *rec)
{
	switch (rec->sample.gil_wait) {
	case SAMPLER_GIL_WAIT_TAKE:
		return "GIL wait";
	case SAMPLER_GIL_WAIT_HANDOFF:
		return "GIL handoff";
	default:
		return NULL;
	}
}

uint32_t symbolizer__wait_marker(struct symbolizer *sym, const struct sampler_rec *rec,
				 const struct trace_frame *frames, uint32_t nframes)
{
	struct frame_info info = { .kind = FRAME_OFF_CPU, .file = "" };
	const char *reason = NULL, *gil;
	char held[96];
	uint32_t i;

	if (rec->sample.wait == SAMPLER_WAIT_PREEMPTED) {
		info.name = "preempted (runnable, waiting for a CPU)";
		return frame_table__intern(sym->frames, &info);
	}
	reason = gil = gil_wait(rec);
	if (!reason && rec->sample.syscall >= 0)
		reason = classify(syscall_name(rec->sample.syscall));
	/* Else the innermost user function, usually the libc wrapper it blocked in. */
	if (!reason && sym->wait_hint) {
		const struct frame_info *f = frame_table__get(sym->frames, sym->wait_hint);

		reason = f ? classify(f->name) : NULL;
	}
	for (i = nframes; !reason && i-- > 0;) {
		const struct frame_info *f = frame_table__get(sym->frames, frames[i].func);

		if (f && f->kind == FRAME_NATIVE)
			reason = classify(f->name);
		if (f && f->kind == FRAME_NATIVE)
			break;
	}
	info.name = reason ? reason : "blocked";
	/*
	 * Blocked holding the GIL (C code that did not let it go: every other thread of
	 * the interpreter waits too). Preempted threads hold it as a rule: not said; nor
	 * for the GIL's own waits (dropping it, a thread holds it until it has its mutex).
	 */
	if (rec->sample.gil == SAMPLER_GIL_HELD && !gil) {
		snprintf(held, sizeof(held), "holding the GIL: %s", info.name);
		info.name = held;
	}
	return frame_table__intern(sym->frames, &info);
}

uint32_t symbolizer__gil_marker(struct symbolizer *sym, const struct sampler_rec *rec)
{
	struct frame_info info = { "running without the GIL", "", 0, FRAME_NO_GIL };

	if (rec->kind != SREC_SAMPLE || rec->sample.gil != SAMPLER_GIL_RELEASED)
		return 0;
	if (!sym->no_gil_marker) /* interned once, not at each such sample */
		sym->no_gil_marker = frame_table__intern(sym->frames, &info);
	return sym->no_gil_marker;
}

uint32_t symbolizer__message_marker(struct symbolizer *sym, const struct sampler_rec *rec,
				    uint32_t *args)
{
	static const char *const names[2][2][2] = {
		/* [executor][result][sent] */
		{ { "pool task received", "pool task sent" },
		  { "pool result received", "pool result sent" } },
		{ { "executor task received", "executor task sent" },
		  { "executor result received", "executor result sent" } },
	};
	enum cpython_message_kind kind = rec->message.kind;
	bool executor =
		kind == CPYTHON_MESSAGE_EXECUTOR_TASK || kind == CPYTHON_MESSAGE_EXECUTOR_RESULT;
	bool result =
		kind == CPYTHON_MESSAGE_POOL_RESULT || kind == CPYTHON_MESSAGE_EXECUTOR_RESULT;
	struct frame_info info = { names[executor][result][rec->message.sent], "", 0,
				   FRAME_MESSAGE };
	/* Named as the worker loop's slice shows them. */
	const struct arg_item pool[2] = {
		{ .name = "pool_job", .kind = ARG_INT, .i = rec->message.job },
		{ .name = "pool_task", .kind = ARG_INT, .i = rec->message.task },
	};
	const struct arg_item work = { .name = "work_id", .kind = ARG_INT, .i = rec->message.task };

	*args = args_table__intern(frame_table__args(sym->frames), executor ? &work : pool,
				   executor ? 1 : 2);
	return *args ? frame_table__intern(sym->frames, &info) : 0;
}

void symbolizer__stats(const struct symbolizer *sym, struct symbolizer_stats *stats)
{
	struct image_stats images;

	image_set__stats(sym->images, &images);
	*stats = sym->stats;
	stats->images_opened = images.opened;
	stats->symtabs_built = images.symtabs;
	stats->pc_cache_hits = images.name_hits;
	stats->pc_cache_misses = images.name_misses;
}
