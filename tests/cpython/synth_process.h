/*
 * A synthetic CPython process for unit tests, in any layout: the built-in 3.8-3.12 ones
 * or a 3.13-3.15 _Py_DebugOffsets of our making. One thread (SYNTH_TID) whose frames,
 * code objects and objects the test lays out with the helpers below, each placing fields
 * where the process's layout says; read through synth_read() (64 KiB from SYNTH_BASE,
 * anything else unreadable). One image per test binary: build one process at a time.
 * Include after <cmocka.h>: the helpers assert.
 */
#ifndef PYTRACE_TESTS_CPYTHON_SYNTH_PROCESS_H
#define PYTRACE_TESTS_CPYTHON_SYNTH_PROCESS_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../../cpython/cpython.h"

/* ---- the address space ---- */

#define SYNTH_BASE 0x10000000ULL
#define SYNTH_SIZE (64 * 1024)
#define SYNTH_END (SYNTH_BASE + SYNTH_SIZE)
#define SYNTH_RUNTIME (SYNTH_BASE + 0x0000) /* 3.13+: _Py_DebugOffsets, interpreters at +1024 */
#define SYNTH_INTERP (SYNTH_BASE + 0x0800)
#define SYNTH_TSTATE (SYNTH_BASE + 0x0c00)
#define SYNTH_CFRAME (SYNTH_BASE + 0x0e00)  /* 3.11, 3.12 */
#define SYNTH_PTHREAD (SYNTH_BASE + 0x1000) /* <= 3.10: glibc's struct pthread, tid at 0x2d0 */
#define SYNTH_FRAMES (SYNTH_BASE + 0x2000)  /* frame k at SYNTH_FRAMES + k * 0x400 */
#define SYNTH_CODES (SYNTH_BASE + 0x4000)   /* code k at SYNTH_CODES + k * 0x200 */
#define SYNTH_TYPES (SYNTH_BASE + 0x5000)   /* type k at SYNTH_TYPE(k), its name at +0x100 */
#define SYNTH_OBJECTS (SYNTH_BASE + 0x8000) /* objects, 0x100 each, up to SYNTH_OBJECTS_END */
#define SYNTH_OBJECTS_END (SYNTH_BASE + 0xe000)
#define SYNTH_UNMAPPED 0x7f0000000000ULL
#define SYNTH_TID 4242

/* Types by enum cpython_type_id, then these. */
enum {
	SYNTH_T_NONETYPE = CPYTHON_NONE,
	SYNTH_T_WIDGET,
	SYNTH_T_CALL_ITEM,
	SYNTH_T_CODE, /* what a code object's ob_type points at (cpython/codes.c checks it) */
	SYNTH_T_COUNT
};
#define SYNTH_TYPE(k) (SYNTH_TYPES + (uint64_t)(k)*0x200)
static const char *const synth_type_names[SYNTH_T_COUNT] = {
	"int",	"bool", "float",     "str",	 "bytes",  "tuple",	"list",
	"dict", "set",	"frozenset", "NoneType", "Widget", "_CallItem", "code",
};

static uint8_t synth_image[SYNTH_SIZE];

static inline int synth_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	if (addr < SYNTH_BASE || addr > SYNTH_END || len > SYNTH_END - addr)
		return -EFAULT;
	memcpy(buf, synth_image + (addr - SYNTH_BASE), len);
	return 0;
}

static inline void synth_put(uint64_t addr, const void *data, size_t len)
{
	assert_true(addr >= SYNTH_BASE && addr + len <= SYNTH_END);
	memcpy(synth_image + (addr - SYNTH_BASE), data, len);
}

static inline void synth_put_u64(uint64_t addr, uint64_t v)
{
	synth_put(addr, &v, 8);
}

static inline void synth_put_u32(uint64_t addr, uint32_t v)
{
	synth_put(addr, &v, 4);
}

/* ---- 3.13+: the runtime describes itself ---- */

/* Where each _Py_DebugOffsets section starts, in 8-byte words (see cpython/layout.c). */
struct synth_sections {
	unsigned words, tstate, tstate_tid, frame, code, object, type, tuple, list, dict, floats,
		longs, bytes, unicode;
};

static const struct synth_sections synth_sections[] = {
	[13] = { 73, 19, 5, 28, 34, 44, 46, 50, 53, 56, 59, 61, 64, 67 },
	[14] = { 81, 22, 5, 31, 39, 50, 52, 56, 59, 66, 69, 71, 74, 77 },
	[15] = { 111, 22, 8, 39, 47, 58, 60, 68, 71, 78, 81, 83, 86, 89 },
};

/* A _Py_DebugOffsets of 3.@minor at SYNTH_RUNTIME with offsets of our choosing. */
static inline void synth_debug_offsets(unsigned minor)
{
	const struct synth_sections *sec = &synth_sections[minor];
	uint64_t w[111] = { 0 };

	w[1] = 0x030000f0 | (uint64_t)minor << 16;
	w[3 + 2] = 1024;			    /* interpreters_head */
	w[6 + 2] = 8;				    /* interp: next */
	w[6 + 3] = 16;				    /* threads_head */
	w[6 + (minor >= 14 ? 6 : 5)] = 64;	    /* imports_modules: sys.modules */
	w[sec->tstate + 2] = 8;			    /* next */
	w[sec->tstate + 3] = 16;		    /* interp */
	w[sec->tstate + 4] = 72;		    /* current_frame */
	w[sec->tstate + sec->tstate_tid] = 152;	    /* thread_id */
	w[sec->tstate + sec->tstate_tid + 1] = 160; /* native_thread_id */
	w[sec->frame + 1] = 8;			    /* previous */
	w[sec->frame + 2] = 0;			    /* executable */
	w[sec->frame + 3] = 56;			    /* instr_ptr */
	w[sec->frame + 4] = 80;			    /* localsplus */
	w[sec->frame + 5] = 74;			    /* owner */
	w[sec->code + 1] = 112;			    /* filename */
	w[sec->code + 2] = 120;			    /* name */
	w[sec->code + 3] = 128;			    /* qualname */
	w[sec->code + 4] = 136;			    /* linetable */
	w[sec->code + 5] = 68;			    /* firstlineno */
	w[sec->code + 6] = minor >= 15 ? 400 : 48;  /* argcount ...: 3.15, far from the names */
	w[sec->code + 7] = 96;			    /* localsplusnames */
	w[sec->code + 8] = 104;			    /* localspluskinds */
	w[sec->code + 9] = 208;			    /* co_code_adaptive */
	w[sec->object + 1] = 8;			    /* ob_type */
	w[sec->type + 1] = 24;			    /* tp_name */
	w[sec->type + 3] = 168;			    /* tp_flags */
	w[sec->tuple + 1] = w[sec->list + 1] = 24;  /* ob_item */
	w[sec->tuple + 2] = w[sec->list + 2] = 16;  /* ob_size */
	w[sec->dict + 1] = 32;			    /* ma_keys */
	w[sec->dict + 2] = 40;			    /* ma_values */
	w[sec->floats + 1] = 16;		    /* ob_fval */
	w[sec->longs + 1] = 16;			    /* lv_tag */
	w[sec->longs + 2] = 24;			    /* ob_digit */
	w[sec->bytes + 1] = 16;			    /* ob_size */
	w[sec->bytes + 2] = 32;			    /* ob_sval */
	w[sec->unicode + 1] = 32;		    /* state */
	w[sec->unicode + 2] = 16;		    /* length */
	w[sec->unicode + 3] = 40;		    /* sizeof(PyASCIIObject) */
	if (minor >= 15) {
		w[sec->type + 4] = 32;	  /* tp_basicsize */
		w[sec->type + 5] = 288;	  /* tp_dictoffset */
		w[sec->type + 7] = 880;	  /* heap type: ht_cached_keys */
		w[sec->unicode + 4] = 56; /* sizeof(PyCompactUnicodeObject) */
	}
	synth_put(SYNTH_RUNTIME, w, 8 * sec->words);
	synth_put(SYNTH_RUNTIME, "xdebugpy", 8);
}

/* ---- a process: a thread whose frames' slots point at objects ---- */

/*
 * A process of 3.@minor read through @mem: its layout, its reader (cpython_process__new_mem();
 * the caller puts it with synth__free()), where the next object goes.
 */
struct synth {
	unsigned minor;
	struct cpython_layout l;
	struct cpython_process *p;
	struct cpython_mem mem;
	uint64_t cursor;
};

static inline uint64_t synth__object(struct synth *s, uint64_t type)
{
	uint64_t addr = s->cursor;

	assert_true(addr + 0x100 <= SYNTH_OBJECTS_END);
	s->cursor += 0x100;
	synth_put_u64(addr, 1); /* ob_refcnt */
	synth_put_u64(addr + s->l.object_type, type);
	return addr;
}

/* An int (or a bool, by @type) of up to three 30-bit digits, as the layout stores it. */
static inline uint64_t synth__int(struct synth *s, int64_t v, uint64_t type)
{
	uint64_t obj = synth__object(s, type), m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	uint32_t digits[3] = { 0 };
	uint64_t n = 0;

	while (m) {
		digits[n++] = m & ((1u << 30) - 1);
		m >>= 30;
	}
	if (s->l.long_tagged)
		synth_put_u64(obj + s->l.long_size, n << 3 | (v < 0 ? 2 : n ? 0 : 1));
	else
		synth_put_u64(obj + s->l.long_size, v < 0 ? 0 - n : n);
	synth_put(obj + s->l.long_digits, digits, sizeof(digits));
	return obj;
}

static inline uint64_t synth__float(struct synth *s, double f)
{
	uint64_t obj = synth__object(s, SYNTH_TYPE(CPYTHON_TYPE_FLOAT));

	synth_put(obj + s->l.float_value, &f, 8);
	return obj;
}

/* A compact str of @n characters of @kind bytes at @chars; ASCII when @ascii. */
static inline uint64_t synth__str(struct synth *s, unsigned kind, bool ascii, const void *chars,
				  uint64_t n)
{
	uint64_t obj = synth__object(s, SYNTH_TYPE(CPYTHON_TYPE_STR));

	synth_put_u32(obj + s->l.unicode_state, kind << 2 | 1u << 5 | (ascii ? 1u << 6 : 0));
	synth_put_u64(obj + s->l.unicode_length, n);
	synth_put(obj + (ascii ? s->l.unicode_ascii_size : s->l.unicode_compact_size), chars,
		  n * kind);
	return obj;
}

static inline uint64_t synth__list(struct synth *s, uint64_t len)
{
	uint64_t obj = synth__object(s, SYNTH_TYPE(CPYTHON_TYPE_LIST));

	synth_put_u64(obj + 16, len); /* ob_size */
	return obj;
}

/* A bytes object whose ob_size says @size, holding the @n bytes at @data. */
static inline uint64_t synth__bytes(struct synth *s, int64_t size, const void *data, size_t n)
{
	uint64_t obj = synth__object(s, SYNTH_TYPE(CPYTHON_TYPE_BYTES));

	assert_true(s->l.bytes_sval + n <= 0x100);
	synth_put_u64(obj + s->l.bytes_size, (uint64_t)size);
	if (n)
		synth_put(obj + s->l.bytes_sval, data, n);
	return obj;
}

/*
 * A combined dict of @n (at most 8) items, @keys[k] to @values[k]; @str_keys: every key
 * is a str (3.11+: a unicode table of key, value entries, else hash, key, value).
 */
static inline uint64_t synth__dict(struct synth *s, const uint64_t *keys, const uint64_t *values,
				   unsigned n, bool str_keys)
{
	uint64_t dict = synth__object(s, SYNTH_TYPE(CPYTHON_TYPE_DICT)), table = s->cursor;
	unsigned k;

	assert_true(n <= 8 && table + 0x100 <= SYNTH_OBJECTS_END);
	s->cursor += 0x100;
	synth_put_u64(dict + s->l.dict_used, n);
	synth_put_u64(dict + s->l.dict_keys, table);
	if (s->l.dicts == CPYTHON_DICTS_38) {
		synth_put_u64(table + 8, 8);  /* dk_size */
		synth_put_u64(table + 32, n); /* dk_nentries; 8 one-byte indices at 40 */
		for (k = 0; k < n; k++) {
			synth_put_u64(table + 48 + 24 * k + 8, keys[k]);
			synth_put_u64(table + 48 + 24 * k + 16, values[k]);
		}
	} else {
		/* log2 sizes, then the kind: DICT_KEYS_UNICODE (1) or GENERAL (0) */
		synth_put(table + 8, (const uint8_t[]){ 3, 3, str_keys ? 1 : 0 }, 3);
		synth_put_u64(table + 24, n); /* dk_nentries; 8 one-byte indices at 32 */
		for (k = 0; k < n; k++) {
			uint64_t entry = table + 40 + (str_keys ? 16 : 24) * k + (str_keys ? 0 : 8);

			synth_put_u64(entry, keys[k]);
			synth_put_u64(entry + 8, values[k]);
		}
	}
	return dict;
}

/* An object whose __dict__ (at tp_dictoffset 16, no managed dict) maps @key to @value. */
static inline uint64_t synth__with_attr(struct synth *s, uint64_t type, const char *key,
					uint64_t value)
{
	uint64_t obj = synth__object(s, type), name = synth__str(s, 1, true, key, strlen(key));

	synth_put_u64(type + s->l.type_dictoffset, 16);
	synth_put_u64(obj + 16, synth__dict(s, &name, &value, 1, true));
	return obj;
}

/* What a frame slot holds for @obj: 3.14+ tag immortal objects (and NULL) with bit 0. */
static inline uint64_t synth__ref(const struct synth *s, uint64_t obj, bool immortal)
{
	return s->l.code_tagged && (immortal || !obj) ? obj | 1 : obj;
}

static inline uint64_t synth_frame_at(unsigned k)
{
	return SYNTH_FRAMES + (uint64_t)k * 0x400;
}

static inline uint64_t synth_code_at(unsigned k)
{
	return SYNTH_CODES + (uint64_t)k * 0x200;
}

/* co_argcount, co_posonlyargcount, co_kwonlyargcount of code @code. */
static inline void synth__counts(const struct synth *s, uint64_t code, int32_t argcount,
				 int32_t posonly, int32_t kwonly)
{
	const int32_t counts[3] = { argcount, posonly, kwonly };

	synth_put(code + s->l.code_argcount, counts, sizeof(counts));
}

/* A running frame at @frame of @code, called from @previous, its first @n slots @slots. */
static inline void synth__frame(const struct synth *s, uint64_t frame, uint64_t code,
				uint64_t previous, const uint64_t *slots, unsigned n)
{
	const struct cpython_layout *l = &s->l;
	uint8_t running = 1, executing = 0;

	synth_put_u64(frame + l->frame_code, l->code_tagged ? code | 1 : code);
	synth_put_u64(frame + l->frame_previous, previous);
	if (l->instr > CPYTHON_LASTI_UNITS)
		synth_put_u64(frame + l->frame_instr, code + l->code_adaptive);
	if (l->live == CPYTHON_LIVE_EXECUTING)
		synth_put(frame + l->frame_live, &running, 1);
	else if (l->live == CPYTHON_LIVE_STATE)
		synth_put(frame + l->frame_live, &executing, 1);
	synth_put(frame + l->frame_localsplus, slots, 8 * n);
	synth_put_u64(code + l->code_filename, code + 0x1f0);
	synth_put_u64(code + l->code_name, code + 0x1f8);
}

/* Makes the thread's current frame @frame. */
static inline void synth__first_frame(const struct synth *s, uint64_t frame)
{
	if (s->l.frame_via_cframe) {
		synth_put_u64(SYNTH_TSTATE + s->l.tstate_frame, SYNTH_CFRAME);
		synth_put_u64(SYNTH_CFRAME + s->l.cframe_current_frame, frame);
	} else {
		synth_put_u64(SYNTH_TSTATE + s->l.tstate_frame, frame);
	}
}

/* The runtime, its interpreter and thread, the types; no frames yet. */
static inline void synth__build(struct synth *s, unsigned minor)
{
	const struct cpython_layout *l;
	unsigned k;

	memset(synth_image, 0, sizeof(synth_image));
	memset(s, 0, sizeof(*s));
	s->minor = minor;
	s->mem = (struct cpython_mem){ .read = synth_read };
	s->cursor = SYNTH_OBJECTS;
	if (minor >= 13) {
		synth_debug_offsets(minor);
		assert_int_equal(cpython_decode_debug_offsets(
					 synth_image, CPYTHON_DEBUG_OFFSETS_BYTES, minor, &s->l),
				 0);
	} else {
		assert_non_null(cpython_builtin_layout(minor));
		s->l = *cpython_builtin_layout(minor);
	}
	l = &s->l;
	synth_put_u64(SYNTH_RUNTIME + l->runtime_interpreters_head, SYNTH_INTERP);
	synth_put_u64(SYNTH_INTERP + l->interp_threads_head, SYNTH_TSTATE);
	synth_put_u64(SYNTH_TSTATE + l->tstate_interp, SYNTH_INTERP);
	if (l->tstate_native_thread_id) {
		synth_put_u64(SYNTH_TSTATE + l->tstate_native_thread_id, SYNTH_TID);
	} else {
		synth_put_u64(SYNTH_TSTATE + l->tstate_thread_id, SYNTH_PTHREAD);
		synth_put_u32(SYNTH_PTHREAD + 0x2d0, SYNTH_TID);
	}
	for (k = 0; k < SYNTH_T_COUNT; k++) {
		synth_put_u64(SYNTH_TYPE(k) + l->type_name, SYNTH_TYPE(k) + 0x100);
		synth_put(SYNTH_TYPE(k) + 0x100, synth_type_names[k],
			  strlen(synth_type_names[k]) + 1);
	}
	s->p = cpython_process__new_mem(SYNTH_TID, SYNTH_RUNTIME, minor, &s->mem);
	assert_non_null(s->p);
	assert_int_equal(s->p->layout.frame_localsplus, l->frame_localsplus);
	for (k = 0; k < CPYTHON_TYPE_COUNT; k++)
		s->p->types.addr[k] = SYNTH_TYPE(k);
	s->p->types.addr[CPYTHON_NONE] = synth__object(s, SYNTH_TYPE(SYNTH_T_NONETYPE));
}

static inline void synth__free(struct synth *s)
{
	cpython_process__put(s->p);
	s->p = NULL;
}

#endif
