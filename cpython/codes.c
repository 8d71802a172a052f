/*
 * A Python process's code objects: read once when a frame of theirs is first walked and
 * kept, bounded, findable by address and fingerprint; and the names of the types its
 * arguments are shown by. Shared by a process and its forked children.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * What one cache keeps at most: an entry is 1,216 bytes (sizeof, names and
 * parameters), so 65,536 of them 76 MiB, and line tables (up to 256 KiB each) 64 MiB in
 * all. A target that makes millions of code objects (generated functions) or crafted
 * tables can't make the root-run tool take more: past them, a code is named no more
 * (its frames unnamed), past the bytes, its lines are its first line; both counted
 * (cpython_cache_losses()).
 */
#define MAX_CODES 65536
#define MAX_LINETABLE_BYTES (64ULL << 20)

static _Atomic uint64_t codes_not_kept, linetables_not_kept;

void cpython_cache_losses(uint64_t *codes, uint64_t *linetables)
{
	*codes = codes_not_kept;
	*linetables = linetables_not_kept;
}

struct cpython_codes {
	int refs;
	struct hashmap *by_address; /* code address -> newest struct cpython_code_entry */
	/* Entries pushed out of a chain: still referenced, maybe, until the cache goes. */
	struct cpython_code_entry *retired;
	struct hashmap *type_names; /* type address -> its tp_name, malloc'd */
	/* note_key() -> struct noted_name: read by the kernel, kept until it is cached */
	struct hashmap *names;
	size_t entries, max_entries; /* retired ones included: still memory */
	uint64_t linetable_bytes, max_linetable_bytes;
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

struct cpython_codes *cpython_codes__new(void)
{
	struct cpython_codes *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->refs = 1;
	c->max_entries = MAX_CODES;
	c->max_linetable_bytes = MAX_LINETABLE_BYTES;
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

void cpython_codes__get(struct cpython_codes *c)
{
	c->refs++;
}

void cpython_codes__put(struct cpython_codes *c)
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
	/*
	 * A full cache makes no entry (cache_code()), so a note would never be taken nor
	 * freed: one per new code object the kernel names, unbounded (a process making
	 * generated functions). Notes waiting are bounded as entries are.
	 */
	if (p->codes->entries >= p->codes->max_entries ||
	    hashmap__count(p->codes->names) >= p->codes->max_entries)
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
	if (p->codes->entries >= p->codes->max_entries) {
		codes_not_kept++; /* not even read: a full cache costs no reads */
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
	if (e->info.linetable &&
	    p->codes->linetable_bytes + e->info.linetable_len > p->codes->max_linetable_bytes) {
		free(e->info.linetable);
		e->info.linetable = NULL;
		e->info.linetable_len = 0;
		linetables_not_kept++;
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
	p->codes->entries++;
	p->codes->linetable_bytes += e->info.linetable_len;
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

		/* A full cache reads no more. */
		if (!e && p->codes && p->codes->entries >= p->codes->max_entries)
			continue;
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
	uint32_t version = 0;
	int err = cpython_module_global(p, mem, module, name, &func);

	if (err)
		return err;
	if (!p->layout.function_code ||
	    cpython_read_u64(mem, func + p->layout.function_code, &code) || !code ||
	    cpython_read_u64(mem, code + p->layout.code_filename, &names[0]) ||
	    cpython_read_u64(mem, code + p->layout.code_name, &names[1]) ||
	    (p->layout.code_version &&
	     mem->read(mem->ctx, code + p->layout.code_version, &version, sizeof(version))))
		return -EFAULT;
	/* The fingerprint the walk makes: with co_version on 3.12-3.13, else same_code()
	 * refused the entry there and the task code was never noted (fuzz_cpython_objects). */
	cache_code(p, mem, code,
		   cpython_fingerprint(names[0], cpython_name_word(names[1], version)), 0);
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

void cpython_process__cache_limits(struct cpython_process *p, size_t entries, uint64_t bytes)
{
	if (p->codes) {
		p->codes->max_entries = entries;
		p->codes->max_linetable_bytes = bytes;
	}
}
