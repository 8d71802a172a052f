/*
 * Tests of the CPython reader without a live interpreter: hand-built line tables of the
 * three formats, a synthetic 3.14 process image built from the 3.14 layout (tagged code
 * references, renumbered shim owners, UCS-2 names), and random or truncated garbage fed
 * to every decoder under ASan.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../cpython/cpython.h"
#include "../common/support.h"

/* ---- a synthetic address space ---- */

#define IMAGE_BASE 0x10000000ULL
#define IMAGE_SIZE (64 * 1024)

struct image {
	uint8_t bytes[IMAGE_SIZE];
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *im = ctx;

	if (addr < IMAGE_BASE || addr - IMAGE_BASE > IMAGE_SIZE ||
	    len > IMAGE_SIZE - (addr - IMAGE_BASE))
		return -EFAULT;
	memcpy(buf, im->bytes + (addr - IMAGE_BASE), len);
	return 0;
}

static void put(struct image *im, uint64_t addr, const void *data, size_t len)
{
	assert_true(addr >= IMAGE_BASE && addr + len <= IMAGE_BASE + IMAGE_SIZE);
	memcpy(im->bytes + (addr - IMAGE_BASE), data, len);
}

static void put_u64(struct image *im, uint64_t addr, uint64_t v)
{
	put(im, addr, &v, 8);
}

static void put_u32(struct image *im, uint64_t addr, uint32_t v)
{
	put(im, addr, &v, 4);
}

/* ---- line tables, hand-built ---- */

struct line_case {
	int32_t lasti;
	uint32_t line;
};

static void check_lines(enum cpython_lines kind, const uint8_t *table, size_t len,
			uint32_t firstlineno, const struct line_case *cases, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		uint32_t got = cpython_line(kind, table, len, firstlineno, cases[i].lasti);

		if (got != cases[i].line)
			fail_msg("kind %d lasti %d: line %u, expected %u", kind, cases[i].lasti,
				 got, cases[i].line);
	}
}

static void test_cpython__lnotab(void **state)
{
	/* 3.8/3.9: (address increment, signed line increment) pairs. */
	static const uint8_t table[] = { 6, 1, 4, 2, 0, 0xff };
	static const struct line_case cases[] = {
		{ -1, 5 }, { 0, 5 }, { 5, 5 }, { 6, 6 }, { 9, 6 }, { 10, 7 }, { 40, 7 },
	};

	(void)state;
	check_lines(CPYTHON_LNOTAB, table, sizeof(table), 5, cases, 7);
}

static void test_cpython__linetable_310(void **state)
{
	/* 3.10: (start delta, line delta) pairs, -128 = no line for that range. */
	static const uint8_t table[] = { 4, 1, 6, 0x80, 2, 2 };
	static const struct line_case cases[] = {
		{ 0, 21 }, { 3, 21 }, { 4, 0 }, { 9, 0 }, { 10, 23 }, { 11, 23 }, { 12, 0 },
	};

	(void)state;
	check_lines(CPYTHON_LINETABLE, table, sizeof(table), 20, cases, 7);
}

/* A 3.11+ location table: one entry of each form. firstlineno 10. */
static const uint8_t location_table[] = {
	0x80 | (13 << 3) | 1, 0x02,		      /* no columns, 2 units, line +1 -> 11 */
	0x80 | (0 << 3) | 0,  0x00,		      /* short form, 1 unit, same line */
	0x80 | (11 << 3) | 2, 0x05, 0x09,	      /* one-line form, 3 units, line +1 -> 12 */
	0x80 | (14 << 3) | 0, 0x05, 0x00, 0x01, 0x02, /* long form, 1 unit, line -2 -> 10 */
	0x80 | (15 << 3) | 0,			      /* no location, 1 unit */
};

static void test_cpython__locations(void **state)
{
	static const struct line_case cases[] = {
		{ -1, 10 }, { 0, 11 },	{ 2, 11 }, { 4, 11 }, { 6, 12 },
		{ 10, 12 }, { 12, 10 }, { 14, 0 }, { 16, 0 },
	};

	(void)state;
	check_lines(CPYTHON_LOCATIONS, location_table, sizeof(location_table), 10, cases, 9);
}

/* ---- _Py_DebugOffsets decoding ---- */

/*
 * Index (in 8-byte words) of each 3.14 _Py_DebugOffsets section: cookie 0, version 1,
 * free_threaded 2, runtime_state 3 (3 words), interpreter_state 6 (16), thread_state 22
 * (9), interpreter_frame 31 (8), code_object 39 (11), pyobject 50 (2), type_object 52
 * (4), tuple 56 (3), list 59 (3), set 62 (4), dict 66 (3), float 69 (2), long 71 (3),
 * bytes 74 (3), unicode 77 (4).
 */
enum {
	D14_RUNTIME_INTERPS = 5,
	D14_INTERP_NEXT = 8,
	D14_INTERP_THREADS = 9,
	D14_TSTATE = 22,
	D14_FRAME = 31,
	D14_CODE = 39,
	D14_OBJECT = 50,
	D14_TYPE = 52,
	D14_BYTES = 74,
	D14_UNICODE = 77,
	D14_END = 81,
};

struct layout14 {
	uint64_t interp_next, interp_threads, tstate_next, tstate_interp, tstate_frame,
		tstate_native, frame_previous, frame_code, frame_instr, frame_owner, code_filename,
		code_name, code_qualname, code_linetable, code_firstlineno, code_adaptive;
};

static const struct layout14 l14 = {
	.interp_next = 8,
	.interp_threads = 16,
	.tstate_next = 8,
	.tstate_interp = 16,
	.tstate_frame = 72,
	.tstate_native = 160,
	.frame_previous = 8,
	.frame_code = 0,
	.frame_instr = 56,
	.frame_owner = 74,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_linetable = 136,
	.code_firstlineno = 68,
	.code_adaptive = 208,
};

/* Writes a 3.14 _Py_DebugOffsets at @addr describing l14. */
static void put_debug_offsets_314(struct image *im, uint64_t addr, uint64_t free_threaded)
{
	uint64_t w[D14_END] = { 0 };

	w[1] = 0x030E00F0; /* 3.14.0 final */
	w[2] = free_threaded;
	w[D14_RUNTIME_INTERPS] = 1024; /* after the offsets, as in _PyRuntimeState */
	w[D14_INTERP_NEXT] = l14.interp_next;
	w[D14_INTERP_THREADS] = l14.interp_threads;
	w[D14_TSTATE + 2] = l14.tstate_next;
	w[D14_TSTATE + 3] = l14.tstate_interp;
	w[D14_TSTATE + 4] = l14.tstate_frame;
	w[D14_TSTATE + 5] = 152;
	w[D14_TSTATE + 6] = l14.tstate_native;
	w[D14_FRAME + 1] = l14.frame_previous;
	w[D14_FRAME + 2] = l14.frame_code;
	w[D14_FRAME + 3] = l14.frame_instr;
	w[D14_FRAME + 4] = 80;
	w[D14_FRAME + 5] = l14.frame_owner;
	w[D14_CODE + 1] = l14.code_filename;
	w[D14_CODE + 2] = l14.code_name;
	w[D14_CODE + 3] = l14.code_qualname;
	w[D14_CODE + 4] = l14.code_linetable;
	w[D14_CODE + 5] = l14.code_firstlineno;
	w[D14_CODE + 6] = 48; /* co_argcount; co_kwonlyargcount 8 bytes on */
	w[D14_CODE + 9] = l14.code_adaptive;
	w[D14_OBJECT + 1] = 8;	 /* ob_type */
	w[D14_TYPE + 1] = 24;	 /* tp_name */
	w[D14_BYTES + 1] = 16;	 /* ob_size */
	w[D14_BYTES + 2] = 32;	 /* ob_sval */
	w[D14_UNICODE + 1] = 32; /* state */
	w[D14_UNICODE + 2] = 16; /* length */
	w[D14_UNICODE + 3] = 40; /* sizeof(PyASCIIObject) */
	w[69 + 1] = 16;		 /* float: ob_fval */
	w[71 + 1] = 16;		 /* long: lv_tag */
	w[71 + 2] = 24;		 /* long: ob_digit */
	put(im, addr, w, sizeof(w));
	put(im, addr, "xdebugpy", 8);
}

static void test_cpython__decode_debug_offsets(void **state)
{
	static struct image image;
	struct image *im = &image;
	struct cpython_layout l;
	uint8_t bytes[CPYTHON_DEBUG_OFFSETS_BYTES];

	(void)state;
	put_debug_offsets_314(im, IMAGE_BASE, 0);
	memcpy(bytes, im->bytes, sizeof(bytes));
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 14, &l), 0);
	assert_int_equal(l.minor, 14);
	assert_true(l.code_tagged);
	assert_int_equal(l.owner_first_skipped, 3);
	assert_int_equal(l.instr, CPYTHON_INSTR_PTR);
	assert_int_equal(l.interp_threads_head, l14.interp_threads);
	assert_int_equal(l.tstate_native_thread_id, l14.tstate_native);
	assert_int_equal(l.frame_owner, l14.frame_owner);
	assert_int_equal(l.code_qualname, l14.code_qualname);
	assert_int_equal(l.code_adaptive, l14.code_adaptive);
	assert_int_equal(l.unicode_compact_size, 56);
	/* Another minor than asked, a wrong cookie, free-threading, absurd offsets: refused. */
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 13, &l), -EINVAL);
	assert_int_equal(cpython_decode_debug_offsets(bytes, 16, 14, &l), -EINVAL);
	bytes[0] = 'X';
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 14, &l), -EINVAL);
	put_debug_offsets_314(im, IMAGE_BASE, 1);
	memcpy(bytes, im->bytes, sizeof(bytes));
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 14, &l), -ENOTSUP);
	put_debug_offsets_314(im, IMAGE_BASE, 0);
	/* A version after the ones we decode: told apart from a bad image, to say so. */
	put_u64(im, IMAGE_BASE + 8, 0x031000f0);
	memcpy(bytes, im->bytes, sizeof(bytes));
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 0, &l),
			 -EPROTONOSUPPORT);
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 16, &l),
			 -EPROTONOSUPPORT);
	put_debug_offsets_314(im, IMAGE_BASE, 0);
	put_u64(im, IMAGE_BASE + 8 * (D14_CODE + 1), 1ULL << 40);
	memcpy(bytes, im->bytes, sizeof(bytes));
	assert_int_equal(cpython_decode_debug_offsets(bytes, sizeof(bytes), 14, &l), -EINVAL);
}

/* ---- a whole synthetic 3.14 process ---- */

#define RUNTIME (IMAGE_BASE + 0x0000)
#define INTERP (IMAGE_BASE + 0x2000)
#define TSTATE (IMAGE_BASE + 0x3000)
#define FRAMES (IMAGE_BASE + 0x4000)
#define CODES (IMAGE_BASE + 0x6000)
#define STRINGS (IMAGE_BASE + 0xa000)
#define TABLES (IMAGE_BASE + 0xe000)
#define CODE_TYPE (IMAGE_BASE + 0x9000) /* PyCode_Type, named at +0x100 */
#define INT_TYPE (IMAGE_BASE + 0x9200)
#define STR_TYPE (IMAGE_BASE + 0x9300)
#define OBJECTS (IMAGE_BASE + 0x9400) /* inner's arguments: an int, a str */
#define TID 4242

/* A compact str: ASCII (kind 1, ascii) or UCS-2 (kind 2). Returns its address. */
static uint64_t put_str(struct image *im, uint64_t *cursor, const char *ascii, const uint16_t *ucs2,
			size_t n)
{
	uint64_t addr = *cursor;
	uint32_t state = ascii ? (1u << 2 | 1u << 5 | 1u << 6) : (2u << 2 | 1u << 5);

	put_u32(im, addr + 32, state);
	put_u64(im, addr + 16, n);
	if (ascii)
		put(im, addr + 40, ascii, n);
	else
		put(im, addr + 56, ucs2, n * 2);
	*cursor += 64 + n * 2 + 8;
	*cursor = (*cursor + 15) & ~15ULL;
	return addr;
}

static uint64_t put_bytes_obj(struct image *im, uint64_t *cursor, const uint8_t *data, size_t n)
{
	uint64_t addr = *cursor;

	put_u64(im, addr + 16, n);
	put(im, addr + 32, data, n);
	*cursor += 32 + n + 16;
	*cursor = (*cursor + 15) & ~15ULL;
	return addr;
}

/* Three code objects: outer (ASCII), Cls.méthode (UCS-2), inner. */
static void build_314(struct image *im)
{
	static const uint16_t meth[] = { 'C', 'l', 's', '.', 'm', 0xe9, 't', 'h', 'o', 'd', 'e' };
	uint64_t strings = STRINGS, tables = TABLES;
	uint64_t file = put_str(im, &strings, "/app/synthetic.py", NULL, 17);
	uint64_t names[3], table;
	int i;

	names[0] = put_str(im, &strings, "outer", NULL, 5);
	names[1] = put_str(im, &strings, NULL, meth, 11);
	names[2] = put_str(im, &strings, "outer.<locals>.inner", NULL, 20);
	table = put_bytes_obj(im, &tables, location_table, sizeof(location_table));
	put_debug_offsets_314(im, RUNTIME, 0);
	put_u64(im, RUNTIME + 1024, INTERP);
	put_u64(im, INTERP + l14.interp_threads, TSTATE);
	put_u64(im, TSTATE + l14.tstate_interp, INTERP);
	put_u64(im, TSTATE + l14.tstate_native, TID);
	put_u64(im, TSTATE + l14.tstate_frame, FRAMES);
	put_u64(im, CODE_TYPE + 24, CODE_TYPE + 0x100);
	put(im, CODE_TYPE + 0x100, "code", 5);
	for (i = 0; i < 3; i++) {
		uint64_t code = CODES + (uint64_t)i * 0x400;

		put_u64(im, code, 3); /* ob_refcnt */
		put_u64(im, code + 8, CODE_TYPE);
		put_u64(im, code + l14.code_filename, file);
		put_u64(im, code + l14.code_name, names[i]);
		put_u64(im, code + l14.code_qualname, names[i]);
		put_u64(im, code + l14.code_linetable, table);
		put_u32(im, code + l14.code_firstlineno, 10);
	}
	/*
	 * Frames, innermost first: inner (at byte 6 -> line 12), a C-stack shim (owner 4),
	 * Cls.méthode (byte 12 -> line 10), an interpreter-owned base frame (owner 3),
	 * outer (byte 0 -> line 11). Code references carry 3.14's tag bit.
	 */
	struct {
		int code;
		uint8_t owner;
		uint64_t lasti;
	} chain[] = { { 2, 0, 6 }, { -1, 4, 0 }, { 1, 0, 12 }, { -1, 3, 0 }, { 0, 0, 0 } };
	for (i = 0; i < 5; i++) {
		uint64_t frame = FRAMES + (uint64_t)i * 0x100;
		uint64_t code = chain[i].code < 0 ? 0 : CODES + (uint64_t)chain[i].code * 0x400;

		put_u64(im, frame + l14.frame_code, code ? code | 1 : 0);
		put_u64(im, frame + l14.frame_previous, i < 4 ? frame + 0x100 : 0);
		put_u64(im, frame + l14.frame_instr, code + l14.code_adaptive + chain[i].lasti);
		put(im, frame + l14.frame_owner, &chain[i].owner, 1);
	}
	/* inner(n, name, *, gone): 42, 'hi' and an empty slot (localsplus at 80). */
	put_u32(im, CODES + 2 * 0x400 + 48, 2);
	put_u32(im, CODES + 2 * 0x400 + 56, 1);
	put_u64(im, OBJECTS + 8, INT_TYPE);
	put_u64(im, OBJECTS + 16, 1 << 3); /* one digit, positive */
	put_u32(im, OBJECTS + 24, 42);
	put_u64(im, OBJECTS + 0x80 + 8, STR_TYPE);
	put_str(im, &(uint64_t){ OBJECTS + 0x80 }, "hi", NULL, 2);
	put_u64(im, FRAMES + 80, OBJECTS);
	put_u64(im, FRAMES + 88, OBJECTS + 0x80);
	put_u64(im, FRAMES + 96, 0);
}

static void test_cpython__synthetic_314(void **state)
{
	static struct image image;
	struct image *im = &image;
	struct cpython_mem mem = { .read = image_read, .ctx = NULL };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	static const struct {
		const char *name;
		uint32_t line;
	} want[] = { { "outer.<locals>.inner", 12 },
		     { "Cls.m\xc3\xa9thode", 10 },
		     { "outer", 11 } };
	int n, i;

	(void)state;
	mem.ctx = im;
	build_314(im);
	/* Why a reader can't be made, for the user: a version without layouts, free-threaded */
	errno = 0;
	assert_null(cpython_process__new_mem(1, RUNTIME, 7, &mem));
	assert_int_equal(errno, EPROTONOSUPPORT);
	assert_null(cpython_process__new_mem(1, RUNTIME + 8, 14, &mem));
	assert_int_equal(errno, EINVAL);
	p = cpython_process__new_mem(1, RUNTIME, 14, &mem);
	assert_non_null(p);
	assert_int_equal(p->layout.minor, 14);
	n = cpython_walk(p, &mem, TID, 1, frames, 16);
	assert_int_equal(n, 3);
	cpython_read_codes(p, &mem, frames, (uint32_t)n);
	for (i = 0; i < n; i++) {
		const struct cpython_code_entry *e =
			cpython_code_lookup(p, frames[i].code, frames[i].fingerprint);

		assert_non_null(e);
		assert_false(e->unreadable);
		assert_string_equal(e->info.name, want[i].name);
		assert_string_equal(e->info.filename, "/app/synthetic.py");
		assert_int_equal(cpython_line(p->layout.lines, e->info.linetable,
					      e->info.linetable_len, e->info.firstlineno,
					      frames[i].lasti),
				 want[i].line);
	}
	/* The same walk with arguments: inner's, decoded; the others have none. */
	p->types.addr[CPYTHON_TYPE_INT] = INT_TYPE;
	p->types.addr[CPYTHON_TYPE_STR] = STR_TYPE;
	{
		uint8_t buf[16 * CPYTHON_RAW_ARG_MAX];
		struct cpython_args_out out = { buf, sizeof(buf), 0 };
		struct cpython_raw_arg a;
		struct cpython_value v[3];
		const uint8_t *text;
		uint32_t at = 0, k = 0;

		assert_int_equal(cpython_walk_args(p, &mem, TID, 1, frames, 16, &out, NULL), 3);
		assert_int_equal(frames[1].args_len, 0);
		assert_int_equal(frames[2].args_len, 0);
		while (k < 3 && cpython_next_arg(buf + frames[0].args_at, frames[0].args_len, &at,
						 &a, &text))
			cpython_arg_value(&p->layout, &p->types, &a, text, &v[k++]);
		assert_int_equal(k, 3);
		assert_int_equal(v[0].kind, CPYTHON_VALUE_INT);
		assert_int_equal(v[0].i, 42);
		assert_int_equal(v[1].kind, CPYTHON_VALUE_STR);
		assert_string_equal(v[1].text, "hi");
		assert_int_equal(v[2].kind, CPYTHON_VALUE_UNBOUND);
	}
	/* The frame before each shim began its C-level eval call. */
	assert_true(frames[0].entry);
	assert_true(frames[1].entry);
	assert_true(frames[2].entry);
	/* An unknown thread has no frames; a cyclic chain ends, and is no stack. */
	assert_int_equal(cpython_walk(p, &mem, 9999, 2, frames, 16), 0);
	put_u64(im, FRAMES + 0x400 + l14.frame_previous, FRAMES);
	n = cpython_walk(p, &mem, TID, 3, frames, 16);
	assert_int_equal(n, -EAGAIN);
	cpython_process__put(p);
}

/*
 * A code object gone by the time its frames are named (a module's body, freed right
 * after it ran) is named from what the kernel read while it ran: its name, and its
 * file from the pointer read with the frame while that is still a str naming a file,
 * else the file's last characters as the kernel read them. Without that, unreadable,
 * until the kernel's names come (a process read from outside before the kernel knew it).
 */
static void test_cpython__gone_code_named_from_notes(void **state)
{
	static struct image image;
	struct image *im = &image;
	struct cpython_mem mem = { .read = image_read, .ctx = NULL };
	struct cpython_frame frames[16];
	const struct cpython_code_entry *e, *before = NULL;
	struct cpython_process *p;
	uint64_t code, file;
	int n, round;

	(void)state;
	mem.ctx = im;
	for (round = 0; round < 4; round++) {
		build_314(im);
		p = cpython_process__new_mem(1, RUNTIME, 14, &mem);
		assert_non_null(p);
		p->types.addr[CPYTHON_TYPE_STR] = STR_TYPE;
		n = cpython_walk(p, &mem, TID, 1, frames, 16);
		assert_int_equal(n, 3);
		code = frames[0].code;
		file = frames[0].filename;
		assert_int_not_equal(file, 0);
		put_u64(im, code, 0); /* freed: no reference left */
		/* The file's str: still one (round 1), or its memory reused (round 2). */
		put_u64(im, file + 8, round == 2 ? INT_TYPE : STR_TYPE);
		if (round == 3) {
			cpython_read_codes(p, &mem, frames, 1);
			before = cpython_code_lookup(p, code, frames[0].fingerprint);
			assert_non_null(before);
			assert_true(before->unreadable);
			assert_true(cpython_all_read(p, frames, 1));
		}
		if (round)
			cpython_code_name_seen(p, code, frames[0].fingerprint, "<module>",
					       "...hetic.py");
		/* Named since: to be read again (a caller skips stacks all read). */
		if (round == 3)
			assert_false(cpython_all_read(p, frames, 1));
		cpython_read_codes(p, &mem, frames, 1);
		e = cpython_code_lookup(p, code, frames[0].fingerprint);
		assert_non_null(e);
		if (!round) {
			assert_true(e->unreadable);
		} else {
			/* Round 3: a new entry; the old one stays as it was for its records. */
			if (round == 3) {
				assert_ptr_not_equal(e, before);
				assert_true(before->unreadable);
			}
			assert_false(e->unreadable);
			assert_string_equal(e->info.name, "<module>");
			assert_string_equal(e->info.filename,
					    round == 2 ? "...hetic.py" : "/app/synthetic.py");
			assert_int_equal(e->info.firstlineno, 0);
		}
		cpython_process__put(p);
	}
}

/* ---- a synthetic 3.9 process: frames are objects that die when their call returns ---- */

#define PTHREAD (IMAGE_BASE + 0x8000)
#define PID39 77

/* A thread whose chain is @n frames from FRAMES, 0x100 apart, all running. */
static void build_39(struct image *im, const struct cpython_layout *l, int n)
{
	int i;

	memset(im->bytes, 0, sizeof(im->bytes));
	put_u64(im, RUNTIME + l->runtime_interpreters_head, INTERP);
	put_u64(im, INTERP + l->interp_threads_head, TSTATE);
	put_u64(im, TSTATE + l->tstate_interp, INTERP);
	put_u64(im, TSTATE + l->tstate_thread_id, PTHREAD); /* pthread_t */
	put_u32(im, PTHREAD + 0x2d0, PID39);		    /* glibc's tid in struct pthread */
	put_u64(im, TSTATE + l->tstate_frame, FRAMES);
	for (i = 0; i < n; i++) {
		uint64_t frame = FRAMES + (uint64_t)i * 0x100;
		uint64_t code = CODES + (uint64_t)(i % 3) * 0x400;
		uint8_t running = 1;

		put_u64(im, frame + l->frame_code, code);
		put_u64(im, frame + l->frame_previous, i + 1 < n ? frame + 0x100 : 0);
		put(im, frame + l->frame_live, &running, 1);
		put_u64(im, code + l->code_filename, STRINGS);
		put_u64(im, code + l->code_name, STRINGS + 0x100);
	}
}

struct counting_image {
	struct image *im;
	unsigned reads;
};

static int counting_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct counting_image *c = ctx;

	c->reads++;
	return image_read(c->im, addr, buf, len);
}

/*
 * A chain read while the thread runs can reach a frame it has returned from (freed, or
 * parked for reuse with a stale f_back): the walk is read again and, if it stays so,
 * fails rather than show a stack cut short as whole (issue 14, D14).
 */
static void test_cpython__dead_frame_39(void **state)
{
	static struct image image;
	const struct cpython_layout *l = cpython_builtin_layout(9);
	struct counting_image counting = { &image, 0 };
	struct cpython_mem mem = { .read = counting_read, .ctx = &counting };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	uint8_t dead = 0;

	(void)state;
	assert_non_null(l);
	assert_int_equal(l->live, CPYTHON_LIVE_EXECUTING);
	build_39(&image, l, 5);
	p = cpython_process__new_mem(PID39, RUNTIME, 9, &mem);
	assert_non_null(p);
	assert_int_equal(cpython_walk(p, &mem, PID39, 1, frames, 16), 5);
	/* The third frame returned meanwhile: its f_back now leads nowhere. */
	put(&image, FRAMES + 0x200 + l->frame_live, &dead, 1);
	put_u64(&image, FRAMES + 0x200 + l->frame_previous, 0);
	counting.reads = 0;
	assert_int_equal(cpython_walk(p, &mem, PID39, 2, frames, 16), -EAGAIN);
	/* Read again before giving up: each try reads the leaf's pointer and three frames. */
	assert_true(counting.reads >= CPYTHON_WALK_TRIES * 3);
	/* A chain that leads into memory that can't be read is not whole either. */
	build_39(&image, l, 5);
	put_u64(&image, FRAMES + 0x200 + l->frame_previous, 0x7f0000000000ULL);
	assert_int_equal(cpython_walk(p, &mem, PID39, 3, frames, 16), -EFAULT);
	cpython_process__put(p);
}

/*
 * A stack deeper than the frames asked for keeps its root-most ones (a trace's slices
 * grow from the root): of 30 frames and room for 16, frames 14 to 29, and says so.
 */
static void test_cpython__deep_chain_keeps_root(void **state)
{
	static struct image image;
	const struct cpython_layout *l = cpython_builtin_layout(9);
	struct cpython_mem mem = { .read = image_read, .ctx = &image };
	struct cpython_frame frames[16];
	struct cpython_cut cut = { 99, true };
	struct cpython_process *p;
	int i;

	(void)state;
	build_39(&image, l, 30);
	p = cpython_process__new_mem(PID39, RUNTIME, 9, &mem);
	assert_non_null(p);
	assert_int_equal(cpython_walk_args(p, &mem, PID39, 1, frames, 16, NULL, &cut), 16);
	assert_int_equal(cut.frames, 14);
	assert_false(cut.rootless);
	for (i = 0; i < 16; i++)
		assert_int_equal(frames[i].code, CODES + (uint64_t)((14 + i) % 3) * 0x400);
	assert_true(frames[15].entry);
	/* Room for all: nothing cut. */
	build_39(&image, l, 16);
	assert_int_equal(cpython_walk_args(p, &mem, PID39, 2, frames, 16, NULL, &cut), 16);
	assert_int_equal(cut.frames, 0);
	assert_int_equal(frames[0].code, CODES);
	cpython_process__put(p);
}

/*
 * 3.8-3.10: a chain whose root frame runs a generator's code was read as it resumed (its
 * f_back set again after the read of it): read again, and kept only at the last try (a
 * thread whose first Python code is a generator run from C). Any other root: read once.
 */
static void test_cpython__generator_root_39(void **state)
{
	static struct image image;
	const struct cpython_layout *l = cpython_builtin_layout(9);
	struct counting_image counting = { &image, 0 };
	struct cpython_mem mem = { .read = counting_read, .ctx = &counting };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	unsigned once;

	(void)state;
	build_39(&image, l, 3);
	p = cpython_process__new_mem(PID39, RUNTIME, 9, &mem);
	assert_non_null(p);
	assert_int_equal(cpython_walk(p, &mem, PID39, 1, frames, 16), 3);
	counting.reads = 0;
	assert_int_equal(cpython_walk(p, &mem, PID39, 2, frames, 16), 3);
	once = counting.reads;
	/* The root frame's code (the third, CODES + 0x800) a generator's: CO_GENERATOR. */
	put_u32(&image, CODES + 0x800 + l->code_flags, 0x20 | 0x3);
	counting.reads = 0;
	assert_int_equal(cpython_walk(p, &mem, PID39, 3, frames, 16), 3);
	assert_int_equal(frames[2].code, CODES + 0x800);
	assert_true(counting.reads >= CPYTHON_WALK_TRIES * once);
	cpython_process__put(p);
}

/*
 * A cache has bounds (issue 31): past its entries a code object is neither read nor kept,
 * past its line-table bytes it is kept without its table; both counted.
 */
static void test_cpython__cache_bounded_314(void **state)
{
	static struct image image;
	struct cpython_mem mem = { .read = image_read, .ctx = &image };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	uint64_t codes0, tables0, codes, tables;
	int n, i, kept = 0;

	(void)state;
	build_314(&image);
	p = cpython_process__new_mem(1, RUNTIME, 14, &mem);
	assert_non_null(p);
	cpython_process__cache_limits(p, 2, 0);
	cpython_cache_losses(&codes0, &tables0);
	n = cpython_walk(p, &mem, TID, 1, frames, 16);
	assert_int_equal(n, 3);
	cpython_read_codes(p, &mem, frames, (uint32_t)n);
	for (i = 0; i < n; i++) {
		const struct cpython_code_entry *e =
			cpython_code_lookup(p, frames[i].code, frames[i].fingerprint);

		if (!e)
			continue;
		kept++;
		assert_null(e->info.linetable); /* no bytes for tables */
		assert_int_equal(cpython_line(p->layout.lines, e->info.linetable,
					      e->info.linetable_len, e->info.firstlineno,
					      frames[i].lasti),
				 10);
	}
	assert_int_equal(kept, 2);
	cpython_cache_losses(&codes, &tables);
	assert_true(codes >= codes0 + 1);
	assert_true(tables >= tables0 + 2);
	/* Full, it reads no more and says the frames need nothing more read. */
	assert_true(cpython_all_read(p, frames, (uint32_t)n));
	cpython_process__put(p);
}

/*
 * 3.12+: a running generator's frame always has a previous one (its caller's, or the shim
 * of the C call that resumed it). Read with none, it was read as it yielded or resumed
 * (3.15 marks it running before it links it, and unmarks it after it unlinks): the walk
 * fails rather than return the generator alone (1 walk in 10 of a summed generator
 * expression on sid's 3.15, 0-9 such stacks kept per 0.6 s run before this check). A
 * generator run from C with no Python caller ends at its shim: kept at the last try.
 */
static void test_cpython__generator_unlinked_314(void **state)
{
	static struct image image;
	struct counting_image counting = { &image, 0 };
	struct cpython_mem mem = { .read = counting_read, .ctx = &counting };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	const uint8_t generator = 1, thread = 0;
	const int8_t executing = 0;

	(void)state;
	build_314(&image);
	p = cpython_process__new_mem(1, RUNTIME, 14, &mem);
	assert_non_null(p);
	/* inner is a running generator's frame, its state byte 5 bytes before it. */
	put(&image, FRAMES + l14.frame_owner, &generator, 1);
	put(&image, FRAMES - 5, &executing, 1);
	assert_int_equal(cpython_walk(p, &mem, TID, 1, frames, 16), 3);
	/* Unlinked from its caller while still marked running: never the generator alone. */
	put_u64(&image, FRAMES + l14.frame_previous, 0);
	assert_int_equal(cpython_walk(p, &mem, TID, 2, frames, 16), -EAGAIN);
	/* Resumed by C with no Python caller: the generator, then its shim, then nothing. */
	put_u64(&image, FRAMES + l14.frame_previous, FRAMES + 0x100);
	put_u64(&image, FRAMES + 0x100 + l14.frame_previous, 0);
	counting.reads = 0;
	assert_int_equal(cpython_walk(p, &mem, TID, 3, frames, 16), 1);
	assert_int_equal(frames[0].code, CODES + 2 * 0x400);
	assert_true(counting.reads >= CPYTHON_WALK_TRIES);
	/* A thread's own frame with no previous one is an ordinary root. */
	put(&image, FRAMES + l14.frame_owner, &thread, 1);
	put_u64(&image, FRAMES + l14.frame_previous, 0);
	assert_int_equal(cpython_walk(p, &mem, TID, 4, frames, 16), 1);
	cpython_process__put(p);
}

/* 3.10 marks a running frame with f_state EXECUTING (0) or UNWINDING (2). */
static void test_cpython__dead_frame_310(void **state)
{
	static struct image image;
	const struct cpython_layout *l = cpython_builtin_layout(10);
	struct cpython_mem mem = { .read = image_read, .ctx = &image };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	static const struct {
		int8_t state;
		int want;
	} cases[] = { { 0, 4 }, { 2, 4 }, { 1, -EAGAIN }, { 4, -EAGAIN }, { -2, -EAGAIN } };
	size_t i;

	(void)state;
	assert_non_null(l);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		build_39(&image, l, 4);
		/* build_39 marks frames running with 1, 3.8/3.9's flag: 3.10 needs its state. */
		for (int f = 0; f < 4; f++)
			put(&image, FRAMES + (uint64_t)f * 0x100 + l->frame_live,
			    f == 1 ? &cases[i].state : &(int8_t){ 0 }, 1);
		p = cpython_process__new_mem(PID39, RUNTIME, 10, &mem);
		assert_non_null(p);
		assert_int_equal(cpython_walk(p, &mem, PID39, 1, frames, 16), cases[i].want);
		cpython_process__put(p);
	}
}

/*
 * A cycle longer than any fixed window of remembered frames still ends the walk, and is
 * not taken for a stack (a dump once showed 51 frames of a 23-frame recursion).
 */
static void test_cpython__long_cycle_ends(void **state)
{
	static struct image image;
	const struct cpython_layout *l = cpython_builtin_layout(9);
	struct cpython_mem mem = { .read = image_read, .ctx = &image };
	struct cpython_frame frames[CPYTHON_MAX_FRAMES];
	struct cpython_process *p;
	int n;

	(void)state;
	build_39(&image, l, 20);
	put_u64(&image, FRAMES + 19 * 0x100 + l->frame_previous, FRAMES + 3 * 0x100);
	p = cpython_process__new_mem(PID39, RUNTIME, 9, &mem);
	assert_non_null(p);
	n = cpython_walk(p, &mem, PID39, 1, frames, CPYTHON_MAX_FRAMES);
	assert_int_equal(n, -EAGAIN);
	cpython_process__put(p);
}

/*
 * Code objects are read after the frames naming them: one freed in between keeps its
 * fields, fingerprint included, but not its head. It must not be named from them.
 */
static void test_cpython__freed_code_unread(void **state)
{
	static struct image image;
	struct image *im = &image;
	struct cpython_mem mem = { .read = image_read, .ctx = NULL };
	struct cpython_frame frames[16];
	struct cpython_process *p;
	const struct cpython_code_entry *e;
	int n;

	(void)state;
	mem.ctx = im;
	build_314(im);
	p = cpython_process__new_mem(1, RUNTIME, 14, &mem);
	assert_non_null(p);
	n = cpython_walk(p, &mem, TID, 1, frames, 16);
	assert_int_equal(n, 3);
	/* Freed by pymalloc: its free-list link (arenas are mmap'd, high) over ob_refcnt. */
	put_u64(im, CODES + 1 * 0x400, 0x7f3a12345670ULL);
	/* Freed by glibc: links over ob_refcnt and ob_type (a tcache key is random). */
	put_u64(im, CODES + 0 * 0x400, 0);
	put_u64(im, CODES + 0 * 0x400 + 8, 0x5a5a5a5a5a5a5a5aULL);
	cpython_read_codes(p, &mem, frames, (uint32_t)n);
	e = cpython_code_lookup(p, frames[0].code, frames[0].fingerprint);
	assert_non_null(e);
	assert_false(e->unreadable); /* inner: alive */
	assert_string_equal(e->info.name, "outer.<locals>.inner");
	e = cpython_code_lookup(p, frames[1].code, frames[1].fingerprint);
	assert_non_null(e);
	assert_true(e->unreadable);
	e = cpython_code_lookup(p, frames[2].code, frames[2].fingerprint);
	assert_non_null(e);
	assert_true(e->unreadable);
	cpython_process__put(p);
}

/* ---- garbage in ---- */

static uint64_t rng = 88172645463325252ULL;

static uint32_t rnd(uint32_t n)
{
	return support_rand(&rng, n);
}

/* Long-form entries whose line deltas are 2^62 each: the sum is no line, and no overflow. */
static void test_cpython__huge_line_deltas(void **state)
{
	uint8_t table[3 * 12];
	const struct line_case cases[] = { { 0, 0 }, { 2, 0 }, { 4, 0 } };
	const struct line_case down[] = { { 0, 0 }, { 4, 0 } };
	int e, k;

	(void)state;
	for (e = 0; e < 3; e++) {
		table[12 * e] = 0x80 | 14 << 3; /* an entry's start, long form, 1 code unit */
		for (k = 1; k < 11; k++)
			table[12 * e + k] = 64; /* 6 zero bits, more to come */
		table[12 * e + 11] = 8;		/* bit 63 of the svarint: +2^62 */
	}
	/* Signed overflow aborts under the UBSan build: this would have, at the third. */
	check_lines(CPYTHON_LOCATIONS, table, sizeof(table), 10, cases, 3);
	for (e = 0; e < 3; e++)
		table[12 * e + 1] = 65; /* odd: -2^62 */
	check_lines(CPYTHON_LOCATIONS, table, sizeof(table), 10, down, 2);
}

static void test_cpython__line_tables_garbage(void **state)
{
	uint8_t table[96];
	int i, k;

	(void)state;
	for (i = 0; i < 30000; i++) {
		size_t len = rnd(sizeof(table) + 1);
		enum cpython_lines kind = (enum cpython_lines)rnd(3);
		int32_t lasti = (int32_t)rnd(400) - 5;
		uint8_t *copy;

		for (k = 0; k < (int)len; k++)
			table[k] = (uint8_t)rnd(256);
		/* An exact-size heap copy, so ASan sees any read past the end. */
		copy = malloc(len ? len : 1);
		assert_non_null(copy);
		memcpy(copy, table, len);
		(void)cpython_line(kind, copy, len, rnd(100000), lasti);
		free(copy);
	}
	/* Truncated real tables: every prefix. */
	for (k = 0; k <= (int)sizeof(location_table); k++) {
		uint8_t *copy = malloc(k ? (size_t)k : 1);

		memcpy(copy, location_table, (size_t)k);
		for (i = -1; i < 20; i++)
			(void)cpython_line(CPYTHON_LOCATIONS, copy, (size_t)k, 10, i);
		free(copy);
	}
}

/* Random memory read as strings, code objects and whole processes: no crash, no hang. */
/* A frame's arguments as a walk of garbage kept them: within the buffer, decodable. */
static void check_frame_args(const struct cpython_process *p, const struct cpython_frame *f,
			     const uint8_t *buf, uint32_t used)
{
	struct cpython_raw_arg a;
	struct cpython_value v;
	const uint8_t *text;
	uint32_t at = 0;

	assert_true(f->args_at + f->args_len <= used);
	while (cpython_next_arg(buf + f->args_at, f->args_len, &at, &a, &text)) {
		cpython_arg_value(&p->layout, &p->types, &a, text, &v);
		if (v.kind == CPYTHON_VALUE_STR || v.kind == CPYTHON_VALUE_BYTES)
			assert_true(support_valid_utf8(v.text));
		if (v.kind == CPYTHON_VALUE_INT)
			assert_true(a.words[0] == p->types.addr[CPYTHON_TYPE_INT]);
	}
	assert_int_equal(at, f->args_len);
}

static void test_cpython__memory_garbage(void **state)
{
	struct image *im = calloc(1, sizeof(*im));
	struct cpython_mem mem = { .read = image_read, .ctx = NULL };
	const struct cpython_layout *l = cpython_builtin_layout(12);
	struct cpython_frame frames[64];
	static uint8_t args_buf[64 * 10 * CPYTHON_RAW_ARG_MAX];
	struct cpython_args_out args = { args_buf, sizeof(args_buf), 0 };
	int round, i, k;

	(void)state;
	assert_non_null(im);
	mem.ctx = im;
	for (round = 0; round < 40; round++) {
		struct cpython_process *p;

		for (i = 0; i < IMAGE_SIZE; i++)
			im->bytes[i] = (uint8_t)rnd(256);
		/* Make pointers likely to land inside the image now and then. */
		for (i = 0; i < 2000; i++)
			put_u64(im, IMAGE_BASE + 8 * rnd(IMAGE_SIZE / 8),
				IMAGE_BASE + 8 * rnd(IMAGE_SIZE / 8));
		for (i = 0; i < 300; i++) {
			char buf[64];
			struct cpython_code code;
			uint64_t addr = IMAGE_BASE + rnd(IMAGE_SIZE + 64);

			if (!cpython_read_string(l, &mem, addr, buf, sizeof(buf))) {
				assert_true(strlen(buf) < sizeof(buf));
				assert_true(support_valid_utf8(buf));
			}
			if (!cpython_read_code(l, &mem, addr, &code)) {
				assert_true(support_valid_utf8(code.name));
				assert_true(support_valid_utf8(code.filename));
				free(code.linetable);
			}
		}
		p = cpython_process__new_mem(1, IMAGE_BASE + 8 * rnd(IMAGE_SIZE / 8),
					     8 + (unsigned)rnd(5), &mem);
		assert_non_null(p);
		/* Types somewhere in the image: values decoded from garbage as such. */
		for (i = 0; i < CPYTHON_TYPE_COUNT; i++)
			p->types.addr[i] = rnd(2) ? IMAGE_BASE + 8 * rnd(IMAGE_SIZE / 8) : 0;
		for (i = 0; i < 20; i++) {
			int n = cpython_walk_args(p, &mem, rnd(5000), (uint64_t)i * 10000000,
						  frames, 64, i % 2 ? &args : NULL, NULL);

			assert_true(n <= 64);
			if (n > 0)
				cpython_read_codes(p, &mem, frames, (uint32_t)n);
			for (k = 0; i % 2 && k < n; k++)
				check_frame_args(p, &frames[k], args.buf, args.used);
		}
		cpython_process__put(p);
	}
	free(im);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cpython__lnotab),
		cmocka_unit_test(test_cpython__huge_line_deltas),
		cmocka_unit_test(test_cpython__linetable_310),
		cmocka_unit_test(test_cpython__locations),
		cmocka_unit_test(test_cpython__decode_debug_offsets),
		cmocka_unit_test(test_cpython__synthetic_314),
		cmocka_unit_test(test_cpython__generator_unlinked_314),
		cmocka_unit_test(test_cpython__cache_bounded_314),
		cmocka_unit_test(test_cpython__freed_code_unread),
		cmocka_unit_test(test_cpython__dead_frame_39),
		cmocka_unit_test(test_cpython__generator_root_39),
		cmocka_unit_test(test_cpython__dead_frame_310),
		cmocka_unit_test(test_cpython__long_cycle_ends),
		cmocka_unit_test(test_cpython__deep_chain_keeps_root),
		cmocka_unit_test(test_cpython__gone_code_named_from_notes),
		cmocka_unit_test(test_cpython__line_tables_garbage),
		cmocka_unit_test(test_cpython__memory_garbage),
	};

	return cmocka_run_group_tests_name("cpython", tests, NULL, NULL);
}
