/* A Python process: its code objects, its threads, their states. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../common/hashmap.h"
#include "cpython.h"
#include "internal.h"

/*
 * Code objects kept findable at one address (the newest first). Records go out ~30 ms
 * after their frames were read, and an import-heavy start-up makes a new module body
 * at one address every few ms (with 4, 30 imports in a row left most of their bodies
 * unnamed). Older ones are kept, not found.
 */
#define MAX_CODES_PER_ADDRESS 64

struct cpython_codes {
	int refs;
	struct hashmap *by_address; /* code address -> newest struct cpython_code_entry */
	/* Entries pushed out of a chain: still referenced, maybe, until the cache goes. */
	struct cpython_code_entry *retired;
	struct hashmap *type_names; /* type address -> its tp_name, malloc'd */
	/* note_key() -> struct noted_name: read by the kernel, kept until it is cached */
	struct hashmap *names;
};

struct noted_name {
	uint64_t code, fingerprint;
	const char *file; /* in text, after the name; "" when not known */
	char text[];	  /* the name, then the file */
};

/* Several code objects can follow each other at one address in one drain: one note each. */
static uint64_t note_key(uint64_t code, uint64_t fingerprint)
{
	return code ^ (fingerprint * 0x9e3779b97f4a7c15ULL);
}

static struct noted_name *noted(struct cpython_process *p, uint64_t code, uint64_t fingerprint)
{
	struct noted_name *n = hashmap__get(p->codes->names, note_key(code, fingerprint));

	return n && n->code == code && n->fingerprint == fingerprint ? n : NULL;
}

static struct cpython_codes *codes__new(void)
{
	struct cpython_codes *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->refs = 1;
	c->by_address = hashmap__new();
	c->type_names = hashmap__new();
	c->names = hashmap__new();
	if (!c->by_address || !c->type_names || !c->names) {
		hashmap__free(c->by_address);
		hashmap__free(c->type_names);
		hashmap__free(c->names);
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
	hashmap__free_all(c->type_names, free);
	hashmap__free_all(c->names, free);
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

static bool live_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t refcnt,
		      uint64_t type)
{
	uint64_t tp_name;
	char name[5];

	if (!refcnt || refcnt >= MAX_REFCNT)
		return false;
	if (p->code_type)
		return type == p->code_type;
	if (mem->read(mem->ctx, type + p->layout.type_name, &tp_name, 8) ||
	    mem->read(mem->ctx, tp_name, name, sizeof(name)) || memcmp(name, "code", 5))
		return false;
	p->code_type = type;
	return true;
}

/* The bytes of @head at @offset, @len of them (at most 8), as a little-endian number. */
static uint64_t head_field(const uint8_t *head, uint32_t offset, size_t len)
{
	uint64_t v = 0;

	memcpy(&v, head + offset, len);
	return v;
}

/*
 * Whether the code object at @code is still the one of @fingerprint: the head of the
 * object, up to the last field looked at, in one read (once per code object seen new).
 */
static bool same_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code,
		      uint64_t fingerprint)
{
	const struct cpython_layout *l = &p->layout;
	uint8_t head[512];
	size_t span = 8;
	uint64_t version;

	if (l->object_type + 8 > span)
		span = l->object_type + 8;
	if (l->code_filename + 8 > span)
		span = l->code_filename + 8;
	if (l->code_name + 8 > span)
		span = l->code_name + 8;
	if (l->code_version && l->code_version + 4 > span)
		span = l->code_version + 4;
	if (span > sizeof(head) || mem->read(mem->ctx, code, head, span) ||
	    !live_code(p, mem, head_field(head, 0, 8), head_field(head, l->object_type, 8)))
		return false;
	version = l->code_version ? head_field(head, l->code_version, 4) : 0;
	return cpython_fingerprint(head_field(head, l->code_filename, 8),
				   cpython_name_word(head_field(head, l->code_name, 8), version)) ==
	       fingerprint;
}

/* A pool worker's loop: its walks read its task locals from now on. */
static void note_task_code(struct cpython_process *p, const struct cpython_code_entry *e)
{
	uint32_t i;

	for (i = 0; i < p->ntask_codes; i++) {
		if (p->task_codes[i].code == e->code)
			return;
	}
	if (p->ntask_codes == CPYTHON_TASK_CODES)
		return;
	p->task_codes[p->ntask_codes].code = e->code;
	p->task_codes[p->ntask_codes].kind = e->info.task_kind;
	memcpy(p->task_codes[p->ntask_codes].slots, e->info.task_slots, sizeof(e->info.task_slots));
	p->ntask_codes++;
}

void cpython_code_name_seen(struct cpython_process *p, uint64_t code, uint64_t fingerprint,
			    const char *name, const char *file)
{
	struct cpython_code_entry *e;
	struct noted_name *n;
	size_t len = strlen(name), flen = file ? strlen(file) : 0;

	if (!p->codes || noted(p, code, fingerprint))
		return;
	/* Kept for one found unreadable too (read late, from outside): see cache_code(). */
	e = cpython_code_lookup(p, code, fingerprint);
	if (e && !e->unreadable)
		return;
	n = malloc(sizeof(*n) + len + flen + 2);
	if (!n)
		return;
	n->code = code;
	n->fingerprint = fingerprint;
	memcpy(n->text, name, len + 1);
	memcpy(n->text + len + 1, file ? file : "", flen + 1);
	n->file = n->text + len + 1;
	free(hashmap__remove(p->codes->names, note_key(code, fingerprint))); /* a collision */
	if (hashmap__set(p->codes->names, note_key(code, fingerprint), n))
		free(n);
}

/*
 * Names a code object that is gone (a module's or a class's body is freed right after
 * it ran, often before its frames were named from outside) from what the kernel read
 * while it ran (cpython_code_name_seen()). Its co_filename is read from the pointer read
 * with its frame, @filename, while that is still a str that names a file (shared with
 * the module's functions' code, it outlives the body as a rule); else it is the last
 * bytes the kernel read of it. Its co_name is never read from the pointer: it dies with
 * the code (seen: a module's "<module>" read as "format_stack"). No line is known.
 */
static int name_gone(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code,
		     uint64_t fingerprint, uint64_t filename, struct cpython_code *out)
{
	uint64_t str = p->types.addr[CPYTHON_TYPE_STR], type;
	struct noted_name *n = noted(p, code, fingerprint);

	memset(out, 0, sizeof(*out));
	if (!n)
		return -ENOENT;
	if (!str || !filename || mem->read(mem->ctx, filename + p->layout.object_type, &type, 8) ||
	    type != str ||
	    cpython_read_string(&p->layout, mem, filename, out->filename, sizeof(out->filename)) ||
	    (out->filename[0] != '/' && out->filename[0] != '<'))
		snprintf(out->filename, sizeof(out->filename), "%s", n->file);
	if (!out->filename[0])
		return -ENOENT;
	snprintf(out->name, sizeof(out->name), "%s", n->text);
	return 0;
}

/*
 * Reads a code object into the cache unless it is there already; one that is gone by
 * now is named by name_gone() (@filename: its co_filename's pointer as read with its
 * frame, 0 when not known), if it can be, and found unreadable, once it can be.
 */
static void cache_code(struct cpython_process *p, const struct cpython_mem *mem, uint64_t code,
		       uint64_t fingerprint, uint64_t filename)
{
	struct cpython_code_entry *e, *newest, *last;
	int depth = 0;

	if (!p->codes)
		return;
	e = cpython_code_lookup(p, code, fingerprint);
	/*
	 * One found unreadable (read from outside after it was gone, before the kernel
	 * read the process) that the kernel named since gets a new entry, found first from
	 * now on; the old one stays for the records that point at it.
	 */
	if (e && !(e->unreadable && noted(p, code, fingerprint))) {
		/* Read for another process sharing the cache (a forked sibling). */
		if (!e->unreadable && e->info.task_kind)
			note_task_code(p, e);
		return;
	}
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
		free(e->info.linetable);
		if (name_gone(p, mem, code, fingerprint, filename, &e->info)) {
			e->unreadable = true;
			p->codes_unreadable++;
		}
	}
	if (noted(p, code, fingerprint)) /* the entry has what it needed */
		free(hashmap__remove(p->codes->names, note_key(code, fingerprint)));
	if (!e->unreadable && e->info.task_kind)
		note_task_code(p, e);
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

static uint32_t read_process_blocks(void *pid_ptr, const uint64_t *addrs, uint32_t n, void *buf,
				    size_t size)
{
	struct iovec local[CPYTHON_HOT_PAGES], remote[CPYTHON_HOT_PAGES];
	ssize_t got;
	uint32_t k;

	n = n < CPYTHON_HOT_PAGES ? n : CPYTHON_HOT_PAGES;
	for (k = 0; k < n; k++) {
		local[k] = (struct iovec){ (uint8_t *)buf + k * size, size };
		remote[k] = (struct iovec){ (void *)(uintptr_t)addrs[k], size };
	}
	/* A remote block that can't be read ends the read there (process_vm_readv(2)). */
	got = n ? process_vm_readv(*(pid_t *)pid_ptr, local, n, remote, n, 0) : 0;
	return got > 0 ? (uint32_t)((size_t)got / size) : 0;
}

struct cpython_mem cpython_process_mem(struct cpython_process *p)
{
	return (struct cpython_mem){ cpython_read_process, &p->pid, read_process_blocks };
}

int cpython_read_u64(const struct cpython_mem *mem, uint64_t addr, uint64_t *v)
{
	return mem->read(mem->ctx, addr, v, sizeof(*v));
}

/* A process read as it runs: is it in a pid namespace of its own? */
static void note_pidns(struct cpython_process *p)
{
	p->other_pidns = pidns_probe(p->pid, &p->pidns, &p->ns_pid) == 1;
	p->ns_tids.pid = p->pid;
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
	bool live = !mem; /* read as it runs, not from a test's memory */

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
		struct cpython_mem own = cpython_process_mem(p);
		int err;

		if (!mem)
			mem = &own;
		if (minor && minor < 13)
			err = -EPROTONOSUPPORT; /* no built-in layout, and no debug offsets yet */
		else if (mem->read(mem->ctx, runtime, image, sizeof(image)))
			err = -EFAULT;
		else
			err = cpython_decode_debug_offsets(image, sizeof(image), minor, &p->layout);
		if (err) {
			codes__put(p->codes);
			free(p);
			errno = -err;
			return NULL;
		}
	}
	if (live)
		note_pidns(p);
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
	p->types = parent->types;
	memcpy(p->task_codes, parent->task_codes, sizeof(p->task_codes));
	p->ntask_codes = parent->ntask_codes;
	p->pool_child = parent->pool_child;
	p->pthread_tid_offset = parent->pthread_tid_offset;
	note_pidns(p);
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
	pidns_map__clear(&p->ns_tids);
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
	uint32_t words[512], own_id = (uint32_t)(p->other_pidns ? p->ns_pid : p->pid);
	size_t i, w;

	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		uint32_t tid;

		if (!mem->read(mem->ctx, pthreads[i] + 0x2d0, &tid, 4) && tid == own_id)
			p->pthread_tid_offset = 0x2d0;
	}
	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		if (mem->read(mem->ctx, pthreads[i], words, sizeof(words)))
			continue;
		for (w = 16; w < 512; w++) {
			if (words[w] == own_id) {
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

/*
 * In another pid namespace: the @n threads' ids as ours (those that can't be matched,
 * gone or not yet in /proc, are dropped; the tid map is re-read once when one misses).
 * How many are kept.
 */
static size_t host_tids(struct cpython_process *p, struct cpython_thread *list, size_t n)
{
	bool refreshed = false;
	size_t i, kept = 0;

	for (i = 0; i < n; i++) {
		uint32_t host = pidns_map__host(&p->ns_tids, list[i].tid);

		if (!host && !refreshed) {
			refreshed = true;
			if (!pidns_map__refresh(&p->ns_tids))
				host = pidns_map__host(&p->ns_tids, list[i].tid);
		}
		if (host)
			list[kept++] = (struct cpython_thread){ host, list[i].tstate };
	}
	return kept;
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
	if (cpython_read_u64(mem, p->runtime + l->runtime_interpreters_head, &interp))
		goto out_fail;
	/* Bounded walks: a corrupt or cyclic list ends at the bound, never hangs. */
	for (; interp && ninterp < MAX_INTERPRETERS; ninterp++) {
		if (cpython_read_u64(mem, interp + l->interp_threads_head, &tstate))
			break;
		for (guard = 0; tstate && n < CPYTHON_MAX_THREADS && guard < CPYTHON_MAX_THREADS;
		     guard++) {
			uint64_t id = 0;
			uint32_t tid = 0;

			if (cpython_read_u64(mem, tstate + l->tstate_interp, &check) ||
			    check != interp)
				break; /* not a thread state of this interpreter */
			if (l->tstate_native_thread_id) {
				if (!cpython_read_u64(mem, tstate + l->tstate_native_thread_id,
						      &id))
					tid = (uint32_t)id;
			} else if (!cpython_read_u64(mem, tstate + l->tstate_thread_id, &id)) {
				tid = (uint32_t)-1; /* mapped below, once all are known */
				pthreads[n] = id;
			}
			if (tid)
				list[n++] = (struct cpython_thread){ tid, tstate };
			if (cpython_read_u64(mem, tstate + l->tstate_next, &tstate))
				break;
		}
		if (cpython_read_u64(mem, interp + l->interp_next, &interp))
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
	if (p->other_pidns)
		n = host_tids(p, list, n);
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
	struct cpython_mem own = cpython_process_mem(p);

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
	if (cpython_read_u64(mem, p->runtime + p->layout.runtime_interpreters_head, &at) || !at)
		return -EFAULT;
	for (n = 0; n < MAX_INTERPRETERS; n++) {
		if (cpython_read_u64(mem, at + p->layout.interp_next, &next))
			return -EFAULT;
		if (!next) {
			*interp = at;
			return 0;
		}
		at = next;
	}
	return -ELOOP;
}

/* Whether @type is a built-in type of enum cpython_type_id. */
static bool builtin_type(const struct cpython_process *p, uint64_t type)
{
	int id;

	for (id = 0; id < CPYTHON_NONE; id++) {
		if (p->types.addr[id] == type)
			return true;
	}
	return false;
}

/* Whether @p walks read the task locals of the pool worker loop @e already. */
static bool task_code_noted(const struct cpython_process *p, const struct cpython_code_entry *e)
{
	uint32_t i;

	for (i = 0; i < p->ntask_codes; i++) {
		if (p->task_codes[i].code == e->code)
			return true;
	}
	return false;
}

bool cpython_all_read(struct cpython_process *p, const struct cpython_frame *frames, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct cpython_code_entry *e =
			cpython_code_lookup(p, frames[i].code, frames[i].fingerprint);

		/* A code found gone that the kernel named since is read again (cache_code()). */
		if (!e || (!e->unreadable && e->info.task_kind && !task_code_noted(p, e)) ||
		    (e->unreadable && noted(p, e->code, e->fingerprint)))
			return false;
	}
	return true;
}

const char *cpython_type_name(const struct cpython_process *p, uint64_t type)
{
	return p->codes ? hashmap__get(p->codes->type_names, type) : NULL;
}

void cpython_read_type_names(struct cpython_process *p, const struct cpython_mem *mem,
			     const uint8_t *args, uint32_t len)
{
	struct cpython_mem own = cpython_process_mem(p);
	char name[CPYTHON_NAME_MAX], *copy;
	struct cpython_raw_arg a;
	const uint8_t *text;
	uint32_t at = 0;

	while (p->codes && cpython_next_arg(args, len, &at, &a, &text)) {
		uint64_t type = a.words[0];

		if (a.flags || !type || builtin_type(p, type) ||
		    hashmap__get(p->codes->type_names, type))
			continue;
		if (cpython_read_type_name(&p->layout, mem ? mem : &own, type, name, sizeof(name)))
			continue;
		copy = strdup(name);
		if (copy && hashmap__set(p->codes->type_names, type, copy))
			free(copy);
	}
}

/* Reads the code of function @name of module @module, once it is imported. */
static int find_task_code(struct cpython_process *p, const struct cpython_mem *mem,
			  const char *module, const char *name)
{
	uint64_t func, code, names[2];
	int err = cpython_module_global(p, mem, module, name, &func);

	if (err)
		return err;
	if (!p->layout.function_code ||
	    cpython_read_u64(mem, func + p->layout.function_code, &code) || !code ||
	    cpython_read_u64(mem, code + p->layout.code_filename, &names[0]) ||
	    cpython_read_u64(mem, code + p->layout.code_name, &names[1]))
		return -EFAULT;
	cache_code(p, mem, code, names[0] ^ (names[1] << 1), 0);
	return 0;
}

int cpython_find_task_codes(struct cpython_process *p, const struct cpython_mem *mem)
{
	struct cpython_mem own = cpython_process_mem(p);
	int err, err2;

	if (!mem)
		mem = &own;
	err = find_task_code(p, mem, "multiprocessing.pool", "worker");
	err2 = find_task_code(p, mem, "concurrent.futures.process", "_process_worker");
	if (p->ntask_codes)
		return 0;
	return err != -ENOENT ? err : err2 ? err2 : -ENOENT;
}

void cpython_read_codes(struct cpython_process *p, const struct cpython_mem *mem,
			const struct cpython_frame *frames, uint32_t n)
{
	struct cpython_mem own = cpython_process_mem(p);
	uint32_t i;

	for (i = 0; i < n; i++)
		cache_code(p, mem ? mem : &own, frames[i].code, frames[i].fingerprint,
			   frames[i].filename);
}

uint64_t cpython_tstate_for(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
			    uint64_t now_ns, int *err)
{
	uint64_t tstate = find_tstate(p, tid);

	*err = 0;
	if (!tstate && (!p->threads_read_ns || now_ns - p->threads_read_ns > THREAD_REFRESH_NS)) {
		p->threads_read_ns = now_ns;
		*err = read_threads(p, mem);
		if (*err)
			return 0;
		tstate = find_tstate(p, tid);
	}
	return tstate;
}
