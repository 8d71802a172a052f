/* A Python process: finding its threads and walking their frame chains. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../common/hashmap.h"
#include "cpython.h"

#define MAX_CODES_PER_ADDRESS 4

struct cpython_codes {
	int refs;
	struct hashmap *by_address; /* code address -> newest struct cpython_code_entry */
	/* Entries pushed out of a chain: still referenced, maybe, until the cache goes. */
	struct cpython_code_entry *retired;
};

static struct cpython_codes *codes__new(void)
{
	struct cpython_codes *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->refs = 1;
	c->by_address = hashmap__new();
	if (!c->by_address) {
		free(c);
		return NULL;
	}
	return c;
}

static void entry_chain_free(struct cpython_code_entry *e)
{
	while (e) {
		struct cpython_code_entry *older = e->older;

		free(e->info.linetable);
		free(e);
		e = older;
	}
}

static void free_chain_value(void *e)
{
	entry_chain_free(e);
}

static void codes__put(struct cpython_codes *c)
{
	if (!c || --c->refs > 0)
		return;
	hashmap__free_all(c->by_address, free_chain_value);
	entry_chain_free(c->retired);
	free(c);
}

struct cpython_code_entry *cpython_code_lookup(struct cpython_process *p, uint64_t code,
					       uint64_t fingerprint)
{
	struct cpython_code_entry *e = p->codes ? hashmap__get(p->codes->by_address, code) : NULL;

	for (; e; e = e->older) {
		if (e->fingerprint == fingerprint)
			return e;
	}
	return NULL;
}

/*
 * Whether a live code object is at @code: a freed one keeps most of its fields (and so
 * its fingerprint), but an allocator writes its links over the object's head. pymalloc
 * puts a pointer (or NULL) in ob_refcnt, glibc its links in ob_refcnt and ob_type; a
 * live object has a modest count (immortal ones 2^32 at most) and the type named
 * "code". ob_refcnt opens every object of the builds we read (not free-threaded).
 */
#define MAX_REFCNT (1ULL << 40)

static bool live_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code)
{
	uint64_t refcnt, type, tp_name;
	char name[5];

	if (mem->read(mem->ctx, code, &refcnt, 8) ||
	    mem->read(mem->ctx, code + p->layout.object_type, &type, 8) || !refcnt ||
	    refcnt >= MAX_REFCNT)
		return false;
	if (p->code_type)
		return type == p->code_type;
	if (mem->read(mem->ctx, type + p->layout.type_name, &tp_name, 8) ||
	    mem->read(mem->ctx, tp_name, name, sizeof(name)) || memcmp(name, "code", 5))
		return false;
	p->code_type = type;
	return true;
}

static bool same_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code,
		      uint64_t fingerprint)
{
	uint64_t filename, name;

	return live_code(p, mem, code) &&
	       !mem->read(mem->ctx, code + p->layout.code_filename, &filename, 8) &&
	       !mem->read(mem->ctx, code + p->layout.code_name, &name, 8) &&
	       (filename ^ (name << 1)) == fingerprint;
}

/* Reads a code object into the cache unless it is there already. */
static void cache_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code,
		       uint64_t fingerprint)
{
	struct cpython_code_entry *e, *newest, *last;
	int depth = 0;

	if (!p->codes || cpython_code_lookup(p, code, fingerprint))
		return;
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->code = code;
	e->fingerprint = fingerprint;
	p->codes_read++;
	/*
	 * Frames were read a while ago (at the end of a drain, or by the kernel at a
	 * switch): the object at @code must still be alive and the one they saw, or the
	 * names read would be another object's (seen: a module's <module> named after a
	 * function whose name string took the freed one's place).
	 */
	if (!same_code(p, mem, code, fingerprint) ||
	    cpython_read_code(&p->layout, mem, code, &e->info)) {
		e->unreadable = true;
		p->codes_unreadable++;
	}
	newest = hashmap__get(p->codes->by_address, code);
	e->older = newest;
	if (hashmap__set(p->codes->by_address, code, e)) {
		e->older = NULL;
		entry_chain_free(e);
		return;
	}
	/*
	 * Bound the chain of reused addresses; the oldest are the least likely. They are
	 * retired, not freed: a record on its way may still point at one.
	 */
	for (last = e; last->older && ++depth < MAX_CODES_PER_ADDRESS; last = last->older)
		;
	if (last->older) {
		struct cpython_code_entry *tail = last->older;

		while (tail->older)
			tail = tail->older;
		tail->older = p->codes->retired;
		p->codes->retired = last->older;
		last->older = NULL;
	}
}

#define MAX_INTERPRETERS 64
/* A thread not in the cached list may be new, or a forked child not yet renamed. */
#define THREAD_REFRESH_NS (1000000ULL)

int cpython_read_process(void *pid_ptr, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	if (!addr)
		return -EFAULT;
	return process_vm_readv(*(pid_t *)pid_ptr, &local, 1, &remote, 1, 0) == (ssize_t)len
		       ? 0
		       : -EFAULT;
}

static int read_u64(const struct cpython_mem *mem, uint64_t addr, uint64_t *v)
{
	return mem->read(mem->ctx, addr, v, sizeof(*v));
}

struct cpython_process *cpython_process__new(pid_t pid, uint64_t runtime, unsigned minor)
{
	return cpython_process__new_mem(pid, runtime, minor, NULL);
}

struct cpython_process *cpython_process__new_mem(pid_t pid, uint64_t runtime, unsigned minor,
						 const struct cpython_mem *mem)
{
	struct cpython_process *p = calloc(1, sizeof(*p));
	const struct cpython_layout *builtin = cpython_builtin_layout(minor);

	if (!p)
		return NULL;
	p->refs = 1;
	p->pid = pid;
	p->runtime = runtime;
	p->codes = codes__new();
	if (!p->codes) {
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	if (builtin) {
		p->layout = *builtin;
	} else {
		/* 3.13+: the runtime describes itself. */
		uint8_t image[CPYTHON_DEBUG_OFFSETS_BYTES];
		struct cpython_mem own = { cpython_read_process, &p->pid };

		if (!mem)
			mem = &own;
		if (mem->read(mem->ctx, runtime, image, sizeof(image)) ||
		    cpython_decode_debug_offsets(image, sizeof(image), minor, &p->layout)) {
			codes__put(p->codes);
			free(p);
			errno = EINVAL;
			return NULL;
		}
	}
	return p;
}

struct cpython_process *cpython_process__fork(const struct cpython_process *parent, pid_t pid)
{
	struct cpython_process *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->refs = 1;
	p->pid = pid;
	p->runtime = parent->runtime;
	p->layout = parent->layout;
	p->pthread_tid_offset = parent->pthread_tid_offset;
	/* A forked child starts with its parent's code objects, at the same addresses. */
	p->codes = parent->codes;
	if (p->codes)
		p->codes->refs++;
	return p;
}

struct cpython_process *cpython_process__get(struct cpython_process *p)
{
	if (p)
		p->refs++;
	return p;
}

void cpython_process__put(struct cpython_process *p)
{
	if (!p || --p->refs > 0)
		return;
	codes__put(p->codes);
	free(p->threads);
	free(p);
}

/*
 * Before 3.11 a thread state knows its pthread_t, not its kernel tid. glibc's struct
 * pthread (which pthread_t points to) holds the tid; where is learnt from the main
 * thread's descriptor, the only one holding the pid: at 0x2d0 in glibc 2.x, else the
 * first plausible place.
 */
static void learn_tid_offset(struct cpython_process *p, const struct cpython_mem *mem,
			     const uint64_t *pthreads, size_t n)
{
	uint32_t words[512];
	size_t i, w;

	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		uint32_t tid;

		if (!mem->read(mem->ctx, pthreads[i] + 0x2d0, &tid, 4) && tid == (uint32_t)p->pid)
			p->pthread_tid_offset = 0x2d0;
	}
	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		if (mem->read(mem->ctx, pthreads[i], words, sizeof(words)))
			continue;
		for (w = 16; w < 512; w++) {
			if (words[w] == (uint32_t)p->pid) {
				p->pthread_tid_offset = w * 4;
				break;
			}
		}
	}
}

static uint32_t tid_of_pthread(const struct cpython_process *p, const struct cpython_mem *mem,
			       uint64_t pthread)
{
	uint32_t tid;

	if (!p->pthread_tid_offset ||
	    mem->read(mem->ctx, pthread + p->pthread_tid_offset, &tid, sizeof(tid)))
		return 0;
	return tid;
}

/* Re-reads every interpreter's thread list into p->threads. */
static int read_threads(struct cpython_process *p, const struct cpython_mem *mem)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_thread *list = calloc(CPYTHON_MAX_THREADS, sizeof(*list));
	uint64_t *pthreads = calloc(CPYTHON_MAX_THREADS, sizeof(*pthreads));
	uint64_t interp, tstate, check;
	size_t n = 0, ninterp = 0, guard;

	if (!list || !pthreads) {
		free(list);
		free(pthreads);
		return -ENOMEM;
	}
	if (read_u64(mem, p->runtime + l->runtime_interpreters_head, &interp))
		goto out_fail;
	/* Bounded walks: a corrupt or cyclic list ends at the bound, never hangs. */
	for (; interp && ninterp < MAX_INTERPRETERS; ninterp++) {
		if (read_u64(mem, interp + l->interp_threads_head, &tstate))
			break;
		for (guard = 0; tstate && n < CPYTHON_MAX_THREADS && guard < CPYTHON_MAX_THREADS;
		     guard++) {
			uint64_t id = 0;
			uint32_t tid = 0;

			if (read_u64(mem, tstate + l->tstate_interp, &check) || check != interp)
				break; /* not a thread state of this interpreter */
			if (l->tstate_native_thread_id) {
				if (!read_u64(mem, tstate + l->tstate_native_thread_id, &id))
					tid = (uint32_t)id;
			} else if (!read_u64(mem, tstate + l->tstate_thread_id, &id)) {
				tid = (uint32_t)-1; /* mapped below, once all are known */
				pthreads[n] = id;
			}
			if (tid)
				list[n++] = (struct cpython_thread){ tid, tstate };
			if (read_u64(mem, tstate + l->tstate_next, &tstate))
				break;
		}
		if (read_u64(mem, interp + l->interp_next, &interp))
			break;
	}
	if (!l->tstate_native_thread_id) {
		size_t i, kept = 0;

		learn_tid_offset(p, mem, pthreads, n);
		for (i = 0; i < n; i++) {
			list[i].tid = tid_of_pthread(p, mem, pthreads[i]);
			if (list[i].tid)
				list[kept++] = list[i];
		}
		n = kept;
	}
	free(pthreads);
	free(p->threads);
	p->threads = list;
	p->nthreads = n;
	p->threads_generation++;
	return 0;
out_fail:
	free(pthreads);
	free(list);
	return -EFAULT;
}

static uint64_t find_tstate(const struct cpython_process *p, uint32_t tid)
{
	size_t i;

	for (i = 0; i < p->nthreads; i++) {
		if (p->threads[i].tid == tid)
			return p->threads[i].tstate;
	}
	return 0;
}

int cpython_threads_read(struct cpython_process *p, const struct cpython_mem *mem)
{
	struct cpython_mem own = { cpython_read_process, &p->pid };

	return read_threads(p, mem ? mem : &own);
}

uint32_t cpython_thread_tid(const struct cpython_process *p, uint64_t tstate)
{
	size_t i;

	for (i = 0; tstate && i < p->nthreads; i++) {
		if (p->threads[i].tstate == tstate)
			return p->threads[i].tid;
	}
	return 0;
}

int cpython_main_interp(const struct cpython_process *p, const struct cpython_mem *mem,
			uint64_t *interp)
{
	uint64_t next, at;
	int n;

	/* The list is newest first: the main interpreter, made first, is its tail. */
	if (read_u64(mem, p->runtime + p->layout.runtime_interpreters_head, &at) || !at)
		return -EFAULT;
	for (n = 0; n < MAX_INTERPRETERS; n++) {
		if (read_u64(mem, at + p->layout.interp_next, &next))
			return -EFAULT;
		if (!next) {
			*interp = at;
			return 0;
		}
		at = next;
	}
	return -ELOOP;
}

static uint64_t first_frame(const struct cpython_layout *l, const struct cpython_mem *mem,
			    uint64_t tstate)
{
	uint64_t frame = 0;

	if (read_u64(mem, tstate + l->tstate_frame, &frame))
		return 0;
	if (l->frame_via_cframe && frame && read_u64(mem, frame + l->cframe_current_frame, &frame))
		return 0;
	return frame;
}

/* The instruction offset in bytes of a frame whose raw bytes are @buf. */
static int32_t frame_lasti(const struct cpython_layout *l, const uint8_t *buf, uint64_t code)
{
	int32_t lasti;
	uint64_t ptr;

	switch (l->instr) {
	case CPYTHON_LASTI_BYTES:
		memcpy(&lasti, buf + l->frame_instr, 4);
		return lasti;
	case CPYTHON_LASTI_UNITS:
		memcpy(&lasti, buf + l->frame_instr, 4);
		return lasti < 0 ? -1 : lasti * 2;
	default:
		memcpy(&ptr, buf + l->frame_instr, 8);
		if (ptr < code + l->code_adaptive || ptr - (code + l->code_adaptive) > (1u << 30))
			return -1;
		return (int32_t)(ptr - (code + l->code_adaptive));
	}
}

/* The instruction offset in bytes from a frame's raw instr field (see frame_lasti). */
static int32_t raw_lasti(const struct cpython_layout *l, uint64_t instr, uint64_t code)
{
	if (l->instr == CPYTHON_LASTI_BYTES || l->instr == CPYTHON_LASTI_UNITS) {
		int32_t lasti = (int32_t)(uint32_t)instr;

		return l->instr == CPYTHON_LASTI_BYTES ? lasti : (lasti < 0 ? -1 : lasti * 2);
	}
	if (instr < code + l->code_adaptive || instr - (code + l->code_adaptive) > (1u << 30))
		return -1;
	return (int32_t)(instr - (code + l->code_adaptive));
}

int cpython_frames_from_raw(const struct cpython_layout *l, const struct cpython_raw_frame *raw,
			    uint32_t nraw, struct cpython_frame *frames, uint32_t max)
{
	uint32_t i, n = 0;

	for (i = 0; i < nraw && n < max; i++) {
		if (l->frame_owner && raw[i].owner >= l->owner_first_skipped) {
			if (n)
				frames[n - 1].entry =
					true; /* the frame before a shim began a call */
			continue;
		}
		if (!raw[i].code)
			break;
		frames[n].code = raw[i].code;
		frames[n].fingerprint = raw[i].fingerprint;
		frames[n].lasti = raw_lasti(l, raw[i].instr, raw[i].code);
		/* Before 3.11 every frame has its own C-level call; 3.11's is_entry is not read. */
		frames[n].entry = l->instr <= CPYTHON_LASTI_UNITS;
		n++;
	}
	if (n)
		frames[n - 1].entry = true;
	return (int)n;
}

void cpython_read_codes(struct cpython_process *p, const struct cpython_mem *mem,
			const struct cpython_frame *frames, uint32_t n)
{
	struct cpython_mem own = { cpython_read_process, &p->pid };
	uint32_t i;

	for (i = 0; i < n; i++)
		cache_code(p, mem ? mem : &own, frames[i].code, frames[i].fingerprint);
}

/* Whether the frame whose raw bytes are @buf is running (see cpython_layout.frame_live). */
static bool frame_is_live(const struct cpython_layout *l, const uint8_t *buf)
{
	int8_t state;

	switch (l->live) {
	case CPYTHON_LIVE_EXECUTING:
		return buf[l->frame_live] == 1;
	case CPYTHON_LIVE_STATE:
		memcpy(&state, buf + l->frame_live, 1);
		return state == 0 || state == 2;
	default:
		return true;
	}
}

/*
 * One walk from @frame. Returns the frames read, -EAGAIN when the chain led into a frame
 * that is no longer running (the thread returned from it while we read: what we hold is
 * then a mix of its stack at two moments), or -EFAULT when a frame or its code could not
 * be read: either way the stack would be cut short, and a cut stack is never returned
 * as whole.
 */
static int walk_chain(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t frame,
		      struct cpython_frame *frames, uint32_t max)
{
	uint64_t mark = 0;
	uint32_t n = 0, steps, power = 1, since_mark = 0;
	uint8_t buf[4096];

	for (steps = 0; frame && n < max && steps < CPYTHON_MAX_FRAMES * 2; steps++) {
		uint64_t code, previous, names[2];
		uint8_t owner = 0;

		/* Brent's cycle check: any cycle, however long, comes back to the mark. */
		if (frame == mark)
			return (int)n;
		if (++since_mark == power) {
			mark = frame;
			power *= 2;
			since_mark = 0;
		}
		if (mem->read(mem->ctx, frame, buf, l->frame_size))
			return -EFAULT;
		if (!frame_is_live(l, buf))
			return -EAGAIN;
		memcpy(&code, buf + l->frame_code, 8);
		memcpy(&previous, buf + l->frame_previous, 8);
		if (l->code_tagged)
			code &= ~(uint64_t)3;
		if (l->frame_owner)
			owner = buf[l->frame_owner];
		if (owner >= l->owner_first_skipped) {
			/* A shim: the frame before it began a C-level eval call. */
			if (n)
				frames[n - 1].entry = true;
			frame = previous;
			continue;
		}
		if (!code || read_u64(mem, code + l->code_filename, &names[0]) ||
		    read_u64(mem, code + l->code_name, &names[1]))
			return -EFAULT;
		frames[n].code = code;
		frames[n].fingerprint = names[0] ^ (names[1] << 1);
		frames[n].lasti = frame_lasti(l, buf, code);
		frames[n].entry = l->frame_is_entry ? buf[l->frame_is_entry] != 0
						    : l->instr <= CPYTHON_LASTI_UNITS;
		n++;
		frame = previous;
	}
	if (n)
		frames[n - 1].entry = true;
	return (int)n;
}

int cpython_walk(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
		 uint64_t now_ns, struct cpython_frame *frames, uint32_t max)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_mem own = { cpython_read_process, &p->pid };
	uint64_t tstate;
	int n = -EAGAIN, tries;

	if (!mem)
		mem = &own;
	tstate = find_tstate(p, tid);
	if (!tstate && (!p->threads_read_ns || now_ns - p->threads_read_ns > THREAD_REFRESH_NS)) {
		p->threads_read_ns = now_ns;
		if (read_threads(p, mem))
			return -EFAULT;
		tstate = find_tstate(p, tid);
	}
	if (!tstate)
		return 0;
	/* A running thread can return from frames while we read them: read again. */
	for (tries = 0; tries < CPYTHON_WALK_TRIES && n < 0; tries++)
		n = walk_chain(l, mem, first_frame(l, mem, tstate), frames, max);
	return n;
}
