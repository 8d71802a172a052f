/*
 * Writes the seeds of fuzz_cpython_objects, fuzz_cpython_process and fuzz_btf into
 * DIR/<harness>/ (`make fuzz-seeds`: DIR is tests/fuzz/corpus): memory images of a
 * Python process laid out as each of 3.8 to 3.13 lays it out (a 3.13 runtime starts
 * with a real 3.13's _Py_DebugOffsets), and small BTF blobs made with libbpf.
 */
#include <bpf/btf.h>
#include <linux/btf.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "fuzz_layout.h"

#define IMAGE_SIZE (24 * 1024)
#define PID 4242 /* fuzz_cpython_process.c's */
#define WORKER_TID 4243
#define TYPES_AT 1024
#define ARENA_AT 1536
#define TPFLAGS_MANAGED_DICT (1UL << 4)
#define TPFLAGS_INLINE_VALUES (1UL << 2)

static void need(bool ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "gen_seeds: %s\n", what);
		exit(1);
	}
}

/* ---- an image of memory at FUZZ_BASE ---- */

struct image {
	uint8_t bytes[IMAGE_SIZE];
	size_t used, end; /* arena cursor; bytes written up to */
	const struct cpython_layout *l;
	struct cpython_types types;
	uint64_t code_type, module_type, function_type;
};

static void put(struct image *im, uint64_t addr, const void *data, size_t len)
{
	uint64_t at = addr - FUZZ_BASE;

	need(addr >= FUZZ_BASE && at + len <= IMAGE_SIZE, "image too small");
	memcpy(im->bytes + at, data, len);
	if (at + len > im->end)
		im->end = at + len;
}

static void w64(struct image *im, uint64_t addr, uint64_t v)
{
	put(im, addr, &v, 8);
}

static void w32(struct image *im, uint64_t addr, uint32_t v)
{
	put(im, addr, &v, 4);
}

static void w8(struct image *im, uint64_t addr, uint8_t v)
{
	put(im, addr, &v, 1);
}

static uint64_t alloc(struct image *im, size_t n)
{
	uint64_t at;

	im->used = (im->used + 15) & ~(size_t)15;
	need(im->used + n <= IMAGE_SIZE, "image too small");
	at = FUZZ_BASE + im->used;
	im->used += n;
	return at;
}

static void image_init(struct image *im, const struct cpython_layout *l, size_t arena_at)
{
	memset(im, 0, sizeof(*im));
	im->l = l;
	im->used = arena_at;
}

static void write_file(const char *dir, const char *harness, const char *name, const void *data,
		       size_t len)
{
	char path[512];
	FILE *f;

	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, harness);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", dir, harness, name);
	f = fopen(path, "wb");
	need(f && fwrite(data, 1, len, f) == len && !fclose(f), path);
}

/* ---- objects ---- */

static uint64_t mk_cstr(struct image *im, const char *s)
{
	uint64_t at = alloc(im, strlen(s) + 1);

	put(im, at, s, strlen(s) + 1);
	return at;
}

/* A type of @size bytes (the fields read lie at up to 880) named @name. */
static uint64_t mk_type(struct image *im, const char *name, size_t size, uint64_t flags,
			int64_t dictoffset)
{
	const struct cpython_layout *l = im->l;
	uint64_t type = alloc(im, size);

	w64(im, type, 1);
	w64(im, type + l->type_name, mk_cstr(im, name));
	if (size > l->type_flags)
		w64(im, type + l->type_flags, flags);
	if (size > l->type_dictoffset)
		w64(im, type + l->type_dictoffset, (uint64_t)dictoffset);
	if (size > l->type_basicsize)
		w64(im, type + l->type_basicsize, 48);
	return type;
}

static uint64_t mk_object(struct image *im, uint64_t type, size_t size)
{
	uint64_t obj = alloc(im, size + 32) + 32; /* room for 3.11+ pre-headers */

	w64(im, obj, 2);
	w64(im, obj + im->l->object_type, type);
	return obj;
}

/* A compact str: ASCII, Latin-1 (kind 1, not ASCII) or UCS-2 of @n code points. */
static uint64_t mk_str_kind(struct image *im, const void *chars, size_t n, unsigned kind,
			    bool ascii)
{
	const struct cpython_layout *l = im->l;
	uint64_t str = mk_object(im, im->types.addr[CPYTHON_TYPE_STR],
				 l->unicode_compact_size + n * kind + 4);

	w32(im, str + l->unicode_state, kind << 2 | 1u << 5 | (ascii ? 1u << 6 : 0));
	w64(im, str + l->unicode_length, n);
	put(im, str + (ascii ? l->unicode_ascii_size : l->unicode_compact_size), chars, n * kind);
	return str;
}

static uint64_t mk_str(struct image *im, const char *s)
{
	return mk_str_kind(im, s, strlen(s), 1, true);
}

static uint64_t mk_int(struct image *im, int64_t v)
{
	const struct cpython_layout *l = im->l;
	uint64_t obj = mk_object(im, im->types.addr[CPYTHON_TYPE_INT], 40);
	uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v, n = 0;

	for (; m; m >>= 30, n++)
		w32(im, obj + l->long_digits + 4 * n, (uint32_t)(m & ((1u << 30) - 1)));
	if (l->long_tagged)
		w64(im, obj + l->long_size, n ? n << 3 | (v < 0 ? 2 : 0) : 1);
	else
		w64(im, obj + l->long_size, v < 0 ? 0 - n : n);
	return obj;
}

static uint64_t mk_bytes(struct image *im, const void *data, size_t n)
{
	const struct cpython_layout *l = im->l;
	uint64_t obj = mk_object(im, im->types.addr[CPYTHON_TYPE_BYTES], l->bytes_sval + n + 1);

	w64(im, obj + l->bytes_size, n);
	put(im, obj + l->bytes_sval, data, n);
	return obj;
}

static uint64_t mk_tuple(struct image *im, const uint64_t *items, size_t n)
{
	const struct cpython_layout *l = im->l;
	uint64_t obj = mk_object(im, im->types.addr[CPYTHON_TYPE_TUPLE], l->tuple_items + 8 * n);
	size_t i;

	w64(im, obj + 16, n);
	for (i = 0; i < n; i++)
		w64(im, obj + l->tuple_items + 8 * i, items[i]);
	return obj;
}

static uint64_t mk_float(struct image *im, double v)
{
	uint64_t obj = mk_object(im, im->types.addr[CPYTHON_TYPE_FLOAT], 24);

	put(im, obj + im->l->float_value, &v, 8);
	return obj;
}

enum keys_kind { KEYS_GENERAL, KEYS_UNICODE, KEYS_SPLIT };

/* A keys object of @n entries; KEYS_SPLIT: the values in a values array made in *@values. */
static uint64_t mk_keys(struct image *im, enum keys_kind kind, size_t n, const uint64_t *keys,
			const uint64_t *vals, uint64_t *values)
{
	const struct cpython_layout *l = im->l;
	unsigned log2 = 3, entry = (l->dicts == CPYTHON_DICTS_38 || kind == KEYS_GENERAL) ? 24 : 16;
	uint64_t obj, entries;
	size_t i;

	while ((1u << log2) * 2 / 3 < n)
		log2++;
	obj = alloc(im, 40 + (1u << log2) + n * entry);
	if (l->dicts == CPYTHON_DICTS_38) {
		w64(im, obj + 8, 1u << log2);
		w64(im, obj + 32, n);
		entries = obj + 40 + (1u << log2);
	} else {
		w8(im, obj + 8, (uint8_t)log2);
		w8(im, obj + 9, (uint8_t)log2);
		w8(im, obj + 10, (uint8_t)kind);
		w64(im, obj + 24, n);
		entries = obj + 32 + (1u << log2);
	}
	if (kind == KEYS_SPLIT) {
		*values = alloc(im, 8 + 8 * n);
		if (l->values_items)
			w8(im, *values + 3, 1); /* valid */
	}
	for (i = 0; i < n; i++) {
		uint64_t e = entries + i * entry, key_at = entry == 24 ? 8 : 0;

		w64(im, e + key_at, keys[i]);
		if (kind == KEYS_SPLIT)
			w64(im, *values + l->values_items + 8 * i, vals[i]);
		else
			w64(im, e + key_at + 8, vals[i]);
	}
	return obj;
}

static uint64_t mk_dict(struct image *im, uint64_t keys, uint64_t values, size_t used)
{
	const struct cpython_layout *l = im->l;
	uint64_t dict = mk_object(im, im->types.addr[CPYTHON_TYPE_DICT], 48);

	w64(im, dict + l->dict_used, used);
	w64(im, dict + l->dict_keys, keys);
	w64(im, dict + l->dict_values, values);
	return dict;
}

/* A dict of str keys @names: combined (unicode keys from 3.11). */
static uint64_t mk_str_dict(struct image *im, size_t n, const char *const *names,
			    const uint64_t *vals)
{
	uint64_t keys[8];
	size_t i;

	need(n <= 8, "dict too large");
	for (i = 0; i < n; i++)
		keys[i] = mk_str(im, names[i]);
	return mk_dict(im,
		       mk_keys(im, im->l->dicts == CPYTHON_DICTS_38 ? KEYS_GENERAL : KEYS_UNICODE,
			       n, keys, vals, NULL),
		       0, n);
}

/*
 * The type of objects whose _name is kept in a __dict__ at tp_dictoffset (3.8-3.10), a
 * managed dict (3.11+) or, @split, values laid out by the type's shared keys.
 */
static uint64_t mk_named_type(struct image *im, const char *name, bool split)
{
	const struct cpython_layout *l = im->l;
	uint64_t type, key;

	if (l->managed == CPYTHON_MANAGED_NONE)
		return mk_type(im, name, l->type_dictoffset + 8, 0, 16);
	type = mk_type(im, name, l->heaptype_cached_keys + 8,
		       TPFLAGS_MANAGED_DICT | (split ? TPFLAGS_INLINE_VALUES : 0), 0);
	if (split) {
		uint64_t unused = 0, values;

		key = mk_str(im, "_name");
		w64(im, type + l->heaptype_cached_keys,
		    mk_keys(im, KEYS_SPLIT, 1, &key, &unused, &values));
	}
	return type;
}

/* An object of @type (mk_named_type()) whose _name is @name. */
static uint64_t mk_named(struct image *im, uint64_t type, const char *name, bool split)
{
	const struct cpython_layout *l = im->l;
	static const char *const attr[] = { "_name" };
	uint64_t value = mk_str(im, name), obj = mk_object(im, type, 64), values;

	if (l->managed == CPYTHON_MANAGED_NONE) {
		w64(im, obj + 16, mk_str_dict(im, 1, attr, &value));
		return obj;
	}
	if (!split) {
		w64(im, obj - 24, mk_str_dict(im, 1, attr, &value));
		return obj;
	}
	switch (l->managed) {
	case CPYTHON_MANAGED_311:
	case CPYTHON_MANAGED_312:
		values = alloc(im, 16);
		w64(im, values + l->values_items, value);
		if (l->managed == CPYTHON_MANAGED_311)
			w64(im, obj - 32, values);
		else
			w64(im, obj - 24, values - 1); /* tagged with bit 0 */
		break;
	default: /* 3.13: inline, right after the object (tp_basicsize 48) */
		w8(im, obj + 48 + 3, 1);
		w64(im, obj + 48 + l->values_items, value);
		break;
	}
	return obj;
}

/* The built-in types, their addresses also at FUZZ_BASE + @table_at when not 0. */
static void mk_types(struct image *im, uint64_t table_at)
{
	static const char *const names[CPYTHON_TYPE_COUNT] = {
		"int", "bool", "float", "str", "bytes", "tuple", "list", "dict", "set", "frozenset",
	};
	int i;

	for (i = 0; i < CPYTHON_NONE; i++)
		im->types.addr[i] = mk_type(im, names[i], 32, 0, 0);
	im->types.addr[CPYTHON_NONE] = mk_object(im, mk_type(im, "NoneType", 32, 0, 0), 8);
	im->code_type = mk_type(im, "code", 32, 0, 0);
	im->module_type = mk_type(im, "module", 32, 0, 0);
	im->function_type = mk_type(im, "function", 32, 0, 0);
	if (table_at)
		put(im, FUZZ_BASE + table_at, im->types.addr, sizeof(im->types.addr));
}

/* A line table of @l's kind for a function of 3 lines. */
static uint64_t mk_linetable(struct image *im)
{
	static const uint8_t lnotab[] = { 6, 1, 4, 2, 8, 0xff };
	static const uint8_t linetable[] = { 4, 1, 6, 0x80, 2, 2, 8, 1 };
	static const uint8_t locations[] = {
		0x80 | (13 << 3) | 1, 0x02,		      /* no columns, line +1 */
		0x80 | (0 << 3) | 0,  0x00,		      /* short form */
		0x80 | (11 << 3) | 2, 0x05, 0x09,	      /* one line, +1 */
		0x80 | (14 << 3) | 0, 0x05, 0x00, 0x01, 0x02, /* long form, -2 */
		0x80 | (15 << 3) | 0,			      /* no location */
	};

	switch (im->l->lines) {
	case CPYTHON_LNOTAB:
		return mk_bytes(im, lnotab, sizeof(lnotab));
	case CPYTHON_LINETABLE:
		return mk_bytes(im, linetable, sizeof(linetable));
	default:
		return mk_bytes(im, locations, sizeof(locations));
	}
}

/* A code object @name of @file with parameters (@argcount, @kwonly) named by @varnames. */
static uint64_t mk_code(struct image *im, const char *name, const char *file, int32_t argcount,
			int32_t kwonly, const char *const *varnames, size_t nvarnames)
{
	const struct cpython_layout *l = im->l;
	uint64_t code = mk_object(im, im->code_type,
				  (l->code_adaptive > 144 ? l->code_adaptive : 144) + 64);
	uint64_t names[8];
	int32_t counts[3] = { argcount, 0, kwonly };
	size_t i;

	need(nvarnames <= 8, "too many varnames");
	w64(im, code + l->code_filename, mk_str(im, file));
	w64(im, code + l->code_name,
	    mk_str(im, strrchr(name, '.') ? strrchr(name, '.') + 1 : name));
	if (l->code_qualname)
		w64(im, code + l->code_qualname, mk_str(im, name));
	w32(im, code + l->code_firstlineno, 10);
	w64(im, code + l->code_linetable, mk_linetable(im));
	if (l->code_version)
		w32(im, code + l->code_version, 0x1234);
	put(im, code + l->code_argcount, counts, sizeof(counts));
	for (i = 0; i < nvarnames; i++)
		names[i] = mk_str(im, varnames[i]);
	w64(im, code + l->code_varnames, mk_tuple(im, names, nvarnames));
	return code;
}

/* The frames a walk reads: @slots are its first fast locals. */
static uint64_t mk_frame(struct image *im, uint64_t code, uint64_t previous, int32_t lasti,
			 uint8_t owner, const uint64_t *slots, size_t nslots)
{
	const struct cpython_layout *l = im->l;
	size_t size = l->frame_localsplus + 8 * CPYTHON_MAX_ARGS;
	uint64_t frame, i;

	frame = alloc(im, (size > l->frame_size ? size : l->frame_size) + 8);
	w64(im, frame + l->frame_code, code);
	w64(im, frame + l->frame_previous, previous);
	if (l->instr == CPYTHON_LASTI_BYTES)
		w32(im, frame + l->frame_instr, (uint32_t)lasti);
	else if (l->instr == CPYTHON_LASTI_UNITS)
		w32(im, frame + l->frame_instr, (uint32_t)lasti / 2);
	else if (code)
		w64(im, frame + l->frame_instr, code + l->code_adaptive + (uint64_t)lasti);
	if (l->frame_owner)
		w8(im, frame + l->frame_owner, owner);
	if (l->frame_is_entry)
		w8(im, frame + l->frame_is_entry, previous ? 0 : 1);
	if (l->live == CPYTHON_LIVE_EXECUTING)
		w8(im, frame + l->frame_live, 1);
	for (i = 0; i < nslots; i++)
		w64(im, frame + l->frame_localsplus + 8 * i, slots[i]);
	return frame;
}

/* ---- fuzz_cpython_objects: a code object, its frame, a named object, a dict ---- */

struct objects_head {
	uint8_t minor;
	uint8_t task_kind;
	uint16_t task_slots[CPYTHON_TASK_LOCALS];
	uint8_t pad[2];
	uint64_t code, str, obj, dict, frame, lasti;
	uint64_t types[CPYTHON_TYPE_COUNT];
};

/* Arguments of every kind decoded: int, big int, bool, str (3 kinds), bytes, float ... */
static void mk_args(struct image *im, uint64_t *slots)
{
	static const uint16_t ucs2[] = { 'm', 0xe9, 't', 'h', 0x263a };
	static const uint8_t latin1[] = { 'c', 'a', 'f', 0xe9 };
	uint64_t items[2];

	slots[0] = mk_int(im, -123456789012LL);
	slots[1] = mk_str_kind(im, ucs2, 5, 2, false);
	slots[2] = mk_bytes(im,
			    "\x00"
			    "ab\\\x7f",
			    5);
	slots[3] = mk_float(im, 1.5);
	items[0] = mk_int(im, 1);
	items[1] = mk_str_kind(im, latin1, 4, 1, false);
	slots[4] = mk_tuple(im, items, 2);
	slots[5] = im->types.addr[CPYTHON_NONE];
	slots[6] = mk_object(im, im->types.addr[CPYTHON_TYPE_BOOL], 32);
	w64(im, slots[6] + im->l->long_size, im->l->long_tagged ? 1 << 3 : 1);
	w32(im, slots[6] + im->l->long_digits, 1);
	slots[7] = 0; /* unbound */
}

static void objects_seed(const char *dir, unsigned minor, bool task)
{
	static const char *const params[] = { "a", "b", "c", "d", "e", "f", "g", "k", "job", "i" };
	static struct image image;
	struct image *im = &image;
	struct cpython_layout l;
	struct objects_head h = { 0 };
	uint64_t slots[CPYTHON_MAX_ARGS + 2];
	static const char *const attr[] = { "_name" };
	char name[64];

	fuzz_layout(minor, &l);
	image_init(im, &l, 160);
	mk_types(im, 0);
	h.minor = (uint8_t)(minor - 8);
	h.task_kind = 0; /* a multiprocessing.pool worker: job, i */
	h.task_slots[0] = 8;
	h.task_slots[1] = 9;
	h.code = task ? mk_code(im, "worker", "/usr/lib/python3/multiprocessing/pool.py", 1, 0,
				params + 7, 3)
		      : mk_code(im, "Cls.method", "/app/objects.py", 7, 1, params, 8);
	mk_args(im, slots);
	slots[8] = mk_int(im, 3);
	slots[9] = mk_int(im, 17);
	h.frame = mk_frame(im, h.code, 0, 6, 0, slots, 10);
	h.str = mk_str(im, "a plain ASCII name");
	h.obj = task ? mk_int(im, 0x7f12345678LL)
		     : mk_named(im, mk_named_type(im, "Thread", false), "MainThread", false);
	h.dict = mk_str_dict(im, 1, attr, &h.str);
	h.lasti = 4;
	memcpy(h.types, im->types.addr, sizeof(h.types));
	put(im, FUZZ_BASE, &h, sizeof(h));
	snprintf(name, sizeof(name), "py3%u-%s", minor, task ? "pool-worker" : "method");
	write_file(dir, "cpython_objects", name, im->bytes, im->end);
}

/* ---- fuzz_cpython_process: a whole process of two threads ---- */

struct process_parts {
	uint64_t interp, tstates[2], idents[2];
};

/* The thread states of the main thread and a worker, as this version links them. */
static void mk_threads(struct image *im, struct process_parts *pp)
{
	const struct cpython_layout *l = im->l;
	int i;

	for (i = 0; i < 2; i++) {
		pp->tstates[i] = alloc(im, 176 + 8);
		w64(im, pp->tstates[i] + l->tstate_interp, pp->interp);
		if (l->tstate_native_thread_id) {
			pp->idents[i] = 0x7f0000001000ULL * (uint64_t)(i + 1);
			w64(im, pp->tstates[i] + l->tstate_native_thread_id, i ? WORKER_TID : PID);
		} else {
			/* <= 3.10: thread_id is the pthread_t, whose struct holds the tid. */
			pp->idents[i] = alloc(im, 0x2d0 + 8);
			w32(im, pp->idents[i] + 0x2d0, i ? WORKER_TID : PID);
		}
		w64(im, pp->tstates[i] + l->tstate_thread_id, pp->idents[i]);
	}
	w64(im, pp->interp + l->interp_threads_head, pp->tstates[1]);
	w64(im, pp->tstates[1] + l->tstate_next, pp->tstates[0]);
}

/* Points thread state @tstate at its innermost frame. */
static void set_frame(struct image *im, uint64_t tstate, uint64_t frame)
{
	const struct cpython_layout *l = im->l;

	if (l->frame_via_cframe) {
		uint64_t cframe = alloc(im, 32);

		w64(im, tstate + l->tstate_frame, cframe);
		w64(im, cframe + l->cframe_current_frame, frame);
	} else {
		w64(im, tstate + l->tstate_frame, frame);
	}
}

/* The threads' frames; returns the worker loop's code object. */
static uint64_t mk_stacks(struct image *im, const struct process_parts *pp)
{
	static const char *const inner_names[] = { "a", "b", "c", "d", "e", "f", "g", "k" };
	static const char *const worker_names[] = { "inqueue", "job", "i" };
	static const char *const none[] = { "" };
	uint64_t slots[CPYTHON_MAX_ARGS], root = 0, frame, code, worker;
	uint8_t shim = (uint8_t)im->l->owner_first_skipped;

	/* Main thread: [a C-stack shim], <module>, outer(xs), Cls.inner(a .. g, *, k). */
	if (im->l->frame_owner)
		root = mk_frame(im, 0, 0, 0, shim, NULL, 0);
	code = mk_code(im, "<module>", "/app/main.py", 0, 0, none, 0);
	frame = mk_frame(im, code, root, 2, 0, NULL, 0);
	code = mk_code(im, "outer", "/app/main.py", 1, 0, inner_names, 1);
	slots[0] = mk_tuple(im, slots, 0);
	frame = mk_frame(im, code, frame, 4, 0, slots, 1);
	if (im->l->frame_owner)
		frame = mk_frame(im, 0, frame, 0, shim, NULL, 0);
	code = mk_code(im, "Cls.inner", "/app/main.py", 7, 1, inner_names, 8);
	mk_args(im, slots);
	frame = mk_frame(im, code, frame, 12, 0, slots, 8);
	set_frame(im, pp->tstates[0], frame);
	/* Worker: multiprocessing.pool.worker, its task in job and i. */
	worker = mk_code(im, "worker", "/usr/lib/python3/multiprocessing/pool.py", 1, 0,
			 worker_names, 3);
	slots[0] = mk_str(im, "queue");
	slots[1] = mk_int(im, 4);
	slots[2] = mk_int(im, 9);
	set_frame(im, pp->tstates[1], mk_frame(im, worker, 0, 6, 0, slots, 3));
	return worker;
}

/* sys.modules: threading (_active), multiprocessing.process, multiprocessing.pool. */
static void mk_modules(struct image *im, const struct process_parts *pp, uint64_t worker)
{
	static const char *const modules[] = { "threading", "multiprocessing.process",
					       "multiprocessing.pool" };
	static const char *const threading[] = { "_active" };
	static const char *const process[] = { "_current_process" };
	static const char *const pool[] = { "worker" };
	const struct cpython_layout *l = im->l;
	uint64_t mods[3], keys[2], threads[2], value, func,
		type = mk_named_type(im, "Thread", false);
	int i;

	for (i = 0; i < 2; i++) {
		keys[i] = mk_int(im, (int64_t)pp->idents[i]);
		threads[i] =
			mk_named(im, type, i ? "ForkPoolWorker-1:worker" : "MainThread", false);
	}
	value = mk_dict(im, mk_keys(im, KEYS_GENERAL, 2, keys, threads, NULL), 0, 2);
	mods[0] = mk_object(im, im->module_type, 32);
	w64(im, mods[0] + l->module_dict, mk_str_dict(im, 1, threading, &value));
	value = mk_named(im, mk_named_type(im, "ForkProcess", true), "ForkPoolWorker-1", true);
	mods[1] = mk_object(im, im->module_type, 32);
	w64(im, mods[1] + l->module_dict, mk_str_dict(im, 1, process, &value));
	func = mk_object(im, im->function_type, l->function_code + 8);
	w64(im, func + l->function_code, worker);
	mods[2] = mk_object(im, im->module_type, 32);
	w64(im, mods[2] + l->module_dict, mk_str_dict(im, 1, pool, &func));
	w64(im, pp->interp + l->interp_modules, mk_str_dict(im, 3, modules, mods));
}

/* The GIL, held by the worker: in _PyRuntime (<= 3.11), else pointed at by the interp. */
static void mk_gil(struct image *im, const struct process_parts *pp)
{
	const struct cpython_layout *l = im->l;
	uint64_t gil;

	if (l->runtime_gil) {
		gil = FUZZ_BASE + l->runtime_gil;
	} else {
		gil = alloc(im, 256);
		w64(im, pp->interp + l->interp_gil, gil);
	}
	w32(im, gil + l->gil_locked, 1);
	w64(im, gil + l->gil_last_holder, pp->tstates[1]);
}

static void process_seed(const char *dir, unsigned minor)
{
	static struct image image;
	struct image *im = &image;
	struct process_parts pp;
	struct cpython_layout l;
	size_t interp_size;
	char name[32];

	fuzz_layout(minor, &l);
	image_init(im, &l, ARENA_AT);
	if (minor >= 13) {
		put(im, FUZZ_BASE, py313_debug_offsets, sizeof(py313_debug_offsets));
	} else {
		w8(im, FUZZ_BASE, (uint8_t)(minor - 8)); /* fuzz_cpython_process: 8 + b % 5 */
	}
	mk_types(im, TYPES_AT);
	interp_size =
		l.interp_modules > l.interp_threads_head ? l.interp_modules : l.interp_threads_head;
	interp_size = interp_size > l.interp_next ? interp_size : l.interp_next;
	interp_size = interp_size > l.interp_gil ? interp_size : l.interp_gil;
	pp.interp = alloc(im, interp_size + 8);
	w64(im, FUZZ_BASE + l.runtime_interpreters_head, pp.interp);
	mk_threads(im, &pp);
	mk_modules(im, &pp, mk_stacks(im, &pp));
	mk_gil(im, &pp);
	snprintf(name, sizeof(name), "py3%u-two-threads", minor);
	write_file(dir, "cpython_process", name, im->bytes, im->end);
}

/* ---- fuzz_btf: the kernel types the programs read, in shapes the kernel has used ---- */

enum btf_shape { BTF_PLAIN, BTF_NESTED, BTF_MISSING };

static void btf_seed(const char *dir, const char *name, enum btf_shape shape)
{
	struct btf *btf = btf__new_empty();
	int s32, u64, pid_t_id, thread, task, inner, regs, proto, var;
	const void *raw;
	__u32 size;

	need(btf != NULL, "btf__new_empty");
	s32 = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	u64 = btf__add_int(btf, "long unsigned int", 8, 0);
	pid_t_id = btf__add_typedef(btf, "pid_t", s32);
	if (shape == BTF_NESTED) {
		/* What a lookup must step over: every kind, a forward and an empty task_struct. */
		btf__add_fwd(btf, "task_struct", BTF_FWD_STRUCT);
		btf__add_struct(btf, "task_struct", 0);
		btf__add_ptr(btf, u64);
		btf__add_array(btf, s32, u64, 4);
		btf__add_enum(btf, "state", 4);
		btf__add_enum_value(btf, "RUNNING", 0);
		btf__add_enum64(btf, "big", 8, false);
		btf__add_enum64_value(btf, "HUGE", 1ULL << 40);
		proto = btf__add_func_proto(btf, s32);
		btf__add_func_param(btf, "x", s32);
		btf__add_func(btf, "f", BTF_FUNC_GLOBAL, proto);
		var = btf__add_var(btf, "v", BTF_VAR_GLOBAL_ALLOCATED, s32);
		btf__add_float(btf, "double", 8);
		btf__add_decl_tag(btf, "tag", s32, -1);
		pid_t_id = btf__add_type_tag(btf, "user", btf__add_volatile(btf, pid_t_id));
		btf__add_datasec(btf, ".data", 4);
		btf__add_datasec_var_info(btf, var, 0, 4);
	}
	thread = btf__add_struct(btf, "thread_struct", 64);
	btf__add_field(btf, "sp", u64, 0, 0);
	btf__add_field(btf, "fsbase", u64, 16 * 8, 0);
	if (shape == BTF_NESTED)
		thread = btf__add_const(btf, thread);
	if (shape == BTF_NESTED) {
		/* randomized_struct_fields: the fields inside an anonymous struct. */
		inner = btf__add_struct(btf, NULL, 128);
		btf__add_field(btf, "state", s32, 0, 0);
		btf__add_field(btf, "flags", s32, 32, 3);
		btf__add_field(btf, "pid", pid_t_id, 8 * 8, 0);
		btf__add_field(btf, "tgid", pid_t_id, 12 * 8, 0);
		btf__add_field(btf, "exit_code", s32, 16 * 8, 0);
		btf__add_field(btf, "thread", thread, 64 * 8, 0);
		task = btf__add_struct(btf, "task_struct", 256);
		btf__add_field(btf, NULL, inner, 0, 0);
	} else {
		task = btf__add_struct(btf, "task_struct", 256);
		btf__add_field(btf, "state", s32, 0, 0);
		btf__add_field(btf, "pid", pid_t_id, 8 * 8, 0);
		btf__add_field(btf, "tgid", pid_t_id, 12 * 8, 0);
		if (shape != BTF_MISSING)
			btf__add_field(btf, "exit_code", s32, 16 * 8, 0);
		btf__add_field(btf, "thread", thread, 64 * 8, 0);
	}
	regs = btf__add_struct(btf, "pt_regs", 168);
	btf__add_field(btf, "ax", u64, 10 * 64, 0);
	btf__add_field(btf, "si", u64, 13 * 64, 0);
	btf__add_field(btf, "di", u64, 14 * 64, 0);
	btf__add_field(btf, "orig_ax", u64, 15 * 64, 0);
	btf__add_field(btf, "ip", u64, 16 * 64, 0);
	btf__add_field(btf, "sp", u64, 19 * 64, 0);
	need(regs > 0 && task > 0, "btf__add_struct");
	raw = btf__raw_data(btf, &size);
	need(raw != NULL, "btf__raw_data");
	write_file(dir, "btf", name, raw, size);
	btf__free(btf);
}

int main(int argc, char **argv)
{
	unsigned minor;

	need(argc == 2, "usage: gen_seeds DIR (tests/fuzz/corpus)");
	for (minor = 8; minor <= 13; minor++) {
		objects_seed(argv[1], minor, false);
		objects_seed(argv[1], minor, true);
		process_seed(argv[1], minor);
	}
	btf_seed(argv[1], "plain", BTF_PLAIN);
	btf_seed(argv[1], "nested", BTF_NESTED);
	btf_seed(argv[1], "missing-exit-code", BTF_MISSING);
	return 0;
}
