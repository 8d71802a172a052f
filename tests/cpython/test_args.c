/*
 * Tests of the argument reader and decoder (cpython/args.c) without a live interpreter:
 * objects laid out by each built-in layout (3.8 to 3.12; the e2e tests read real ones on
 * every installed version), frames whose slots point at freed or unmapped memory, and
 * random bytes fed to the decoder under ASan, checking that nothing is ever shown as a
 * value of a type it was not read as, and that the canonical form a value is kept in
 * decodes the same and does not depend on what changes in an object (its other fields).
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
#include "frame_args.h"

#define T_INT 0x1000
#define T_BOOL 0x2000
#define T_FLOAT 0x3000
#define T_STR 0x4000
#define T_BYTES 0x5000
#define T_TUPLE 0x6000
#define T_LIST 0x7000
#define T_DICT 0x8000
#define T_SET 0x9000
#define T_FROZENSET 0xa000
#define NONE_OBJ 0x100d00 /* OBJ_AT(5) */
#define T_OTHER 0xc000	  /* a type not among the built-ins shown by value */

static const struct cpython_types types = { {
	[CPYTHON_TYPE_INT] = T_INT,
	[CPYTHON_TYPE_BOOL] = T_BOOL,
	[CPYTHON_TYPE_FLOAT] = T_FLOAT,
	[CPYTHON_TYPE_STR] = T_STR,
	[CPYTHON_TYPE_BYTES] = T_BYTES,
	[CPYTHON_TYPE_TUPLE] = T_TUPLE,
	[CPYTHON_TYPE_LIST] = T_LIST,
	[CPYTHON_TYPE_DICT] = T_DICT,
	[CPYTHON_TYPE_SET] = T_SET,
	[CPYTHON_TYPE_FROZENSET] = T_FROZENSET,
	[CPYTHON_NONE] = NONE_OBJ,
} };

static const unsigned minors[] = { 8, 9, 10, 11, 12 };

/* ---- objects, as a layout places their fields ---- */

struct object {
	uint8_t bytes[256]; /* from the object's start */
	uint32_t text_len;  /* of what a reader keeps after the header */
};

static void set_field(struct object *o, uint64_t at, const void *v, size_t len)
{
	assert_true(at + len <= sizeof(o->bytes));
	memcpy(o->bytes + at, v, len);
}

static void set_u64(struct object *o, uint64_t at, uint64_t v)
{
	set_field(o, at, &v, 8);
}

static struct object new_object(const struct cpython_layout *l, uint64_t type)
{
	struct object o;

	memset(&o, 0, sizeof(o));
	set_u64(&o, 0, 1); /* refcount */
	set_u64(&o, l->object_type, type);
	return o;
}

/* An int of @ndigits 30-bit digits, as the layout stores its sign and size. */
static struct object int_object(const struct cpython_layout *l, uint64_t type, bool negative,
				const uint32_t *digits, unsigned ndigits)
{
	struct object o = new_object(l, type);

	if (l->long_tagged)
		set_u64(&o, l->long_size,
			(uint64_t)ndigits << 3 | (negative  ? 2
						  : ndigits ? 0
							    : 1));
	else
		set_u64(&o, l->long_size, (uint64_t)(negative ? -(int64_t)ndigits : ndigits));
	set_field(&o, l->long_digits, digits, ndigits * 4);
	return o;
}

static struct object small_int(const struct cpython_layout *l, int64_t v)
{
	uint64_t m = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
	uint32_t digits[3] = { 0 };
	unsigned n = 0;

	while (m) {
		digits[n++] = m & ((1u << 30) - 1);
		m >>= 30;
	}
	return int_object(l, T_INT, v < 0, digits, n);
}

/* A compact str of @len characters of @kind bytes each, at @chars. */
static struct object str_object(const struct cpython_layout *l, uint32_t kind, bool ascii,
				const void *chars, uint32_t len)
{
	struct object o = new_object(l, T_STR);
	uint32_t state = 1u << 5 | kind << 2 | (ascii ? 1u << 6 : 0);
	uint64_t at = ascii ? l->unicode_ascii_size : l->unicode_compact_size;
	uint32_t keep = len * kind > CPYTHON_ARG_TEXT ? CPYTHON_ARG_TEXT : len * kind;

	set_u64(&o, l->unicode_length, len);
	set_field(&o, l->unicode_state, &state, 4);
	set_field(&o, at, chars, keep);
	return o;
}

/* ---- a synthetic address space: objects, a code object, a frame ---- */

#define SPACE_BASE 0x100000ULL
#define SPACE_SIZE 4096
#define FRAME_AT (SPACE_BASE)
#define CODE_AT (SPACE_BASE + 1024)
#define OBJ_AT(i) (SPACE_BASE + 2048 + (i)*256ULL)

struct space {
	uint8_t bytes[SPACE_SIZE];
	const struct object *objects[6]; /* at OBJ_AT(i), read from their start */
};

static int space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct space *sp = ctx;
	unsigned i;

	for (i = 0; i < 6; i++) {
		if (sp->objects[i] && addr >= OBJ_AT(i) && addr + len <= OBJ_AT(i) + 256) {
			memcpy(buf, sp->objects[i]->bytes + (addr - OBJ_AT(i)), len);
			return 0;
		}
	}
	if (addr < SPACE_BASE || addr + len > SPACE_BASE + 2048)
		return -EFAULT;
	memcpy(buf, sp->bytes + (addr - SPACE_BASE), len);
	return 0;
}

/* Reads the arguments of a frame whose slots hold @slots (n of them), decoded into @v. */
static int read_frame(const struct cpython_layout *l, struct space *sp, int32_t argcount,
		      int32_t kwonly, const uint64_t *slots, unsigned n, struct cpython_value *v,
		      unsigned max)
{
	struct cpython_mem mem = { .read = space_read, .ctx = sp };
	int32_t counts[3] = { argcount, 0, kwonly };
	uint8_t buf[16 * CPYTHON_RAW_ARG_MAX];
	struct cpython_args_out out = { buf, sizeof(buf), 0 };
	struct cpython_raw_arg a;
	const uint8_t *text;
	uint32_t at = 0;
	int got;
	unsigned k = 0;

	memcpy(sp->bytes + (CODE_AT - SPACE_BASE) + l->code_argcount, counts, sizeof(counts));
	memcpy(sp->bytes + (FRAME_AT - SPACE_BASE) + l->frame_localsplus, slots, n * 8);
	got = frame_args(l, &mem, &types, FRAME_AT, CODE_AT, &out);
	if (got < 0)
		return got;
	while (k < max && cpython_next_arg(buf, out.used, &at, &a, &text)) {
		assert_int_equal(a.index, k);
		cpython_arg_value(l, &types, &a, text, &v[k++]);
	}
	assert_int_equal(k, got);
	assert_int_equal(at, out.used);
	return got;
}

/* One object as the only argument, decoded. */
static struct cpython_value value_of(const struct cpython_layout *l, const struct object *o)
{
	struct space *sp = calloc(1, sizeof(*sp));
	uint64_t slot = OBJ_AT(0);
	struct cpython_value v;

	assert_non_null(sp);
	sp->objects[0] = o;
	assert_int_equal(read_frame(l, sp, 1, 0, &slot, 1, &v, 1), 1);
	free(sp);
	return v;
}

static void test_args__ints(void **state)
{
	const int64_t values[] = { 0, 1, -1, 5, 1 << 30, -(1LL << 45), INT64_MAX, INT64_MIN };
	size_t m, i;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		const struct cpython_layout *l = cpython_builtin_layout(minors[m]);
		const uint32_t big[3] = { 0, 0, 16 }, bad_digit[1] = { 1u << 30 };
		struct object o;
		struct cpython_value v;

		assert_non_null(l);
		for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
			o = small_int(l, values[i]);
			v = value_of(l, &o);
			assert_int_equal(v.kind, CPYTHON_VALUE_INT);
			assert_true(v.i == values[i]);
		}
		o = int_object(l, T_INT, false, big, 3); /* 2^64 */
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_BIG_INT);
		o = int_object(l, T_INT, false, bad_digit, 1); /* no digit has bit 30 set */
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);

		o = small_int(l, 1);
		set_u64(&o, l->object_type, T_BOOL);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_BOOL);
		assert_int_equal(v.i, 1);
		o = small_int(l, 2); /* no bool is 2 */
		set_u64(&o, l->object_type, T_BOOL);
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);
	}
}

static void test_args__floats_none_sized_other(void **state)
{
	const struct {
		uint64_t type;
		enum cpython_type_id id;
	} sized[] = {
		{ T_TUPLE, CPYTHON_TYPE_TUPLE },	 { T_LIST, CPYTHON_TYPE_LIST },
		{ T_DICT, CPYTHON_TYPE_DICT },		 { T_SET, CPYTHON_TYPE_SET },
		{ T_FROZENSET, CPYTHON_TYPE_FROZENSET },
	};
	size_t m, i;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		const struct cpython_layout *l = cpython_builtin_layout(minors[m]);
		struct object o = new_object(l, T_FLOAT);
		struct space *sp = calloc(1, sizeof(*sp));
		struct cpython_value v;
		double f = -2.5;
		uint64_t slot = NONE_OBJ;

		set_field(&o, l->float_value, &f, 8);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_FLOAT);
		assert_true(v.f == f);

		for (i = 0; i < sizeof(sized) / sizeof(sized[0]); i++) {
			uint64_t at = sized[i].id == CPYTHON_TYPE_DICT ? l->dict_used
				      : sized[i].id == CPYTHON_TYPE_SET ||
						      sized[i].id == CPYTHON_TYPE_FROZENSET
					      ? l->set_used
					      : 16;

			o = new_object(l, sized[i].type);
			set_u64(&o, at, 3 + i);
			v = value_of(l, &o);
			assert_int_equal(v.kind, CPYTHON_VALUE_SIZED);
			assert_int_equal(v.sized, sized[i].id);
			assert_int_equal(v.i, 3 + i);
			set_u64(&o, at, (uint64_t)-1);
			assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);
		}

		o = new_object(l, T_OTHER);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_OTHER);
		assert_int_equal(v.type, T_OTHER);

		/* None is known by its address, whatever type its bytes say. */
		assert_non_null(sp);
		o = new_object(l, T_OTHER);
		sp->objects[5] = &o;
		assert_int_equal(read_frame(l, sp, 1, 0, &slot, 1, &v, 1), 1);
		assert_int_equal(v.kind, CPYTHON_VALUE_NONE);
		free(sp);
	}
}

static void test_args__strs_and_bytes(void **state)
{
	const uint16_t ucs2[] = { 0x65e5, 0x672c };
	const uint32_t ucs4[] = { 0x1f600, 'x' };
	const uint8_t latin1[] = { 'c', 'a', 'f', 0xe9 };
	char long_text[101];
	size_t m;

	(void)state;
	memset(long_text, 'a', 100);
	long_text[100] = '\0';
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		const struct cpython_layout *l = cpython_builtin_layout(minors[m]);
		struct object o = str_object(l, 1, true, "hello", 5);
		struct cpython_value v = value_of(l, &o);
		uint32_t state_bits;

		assert_int_equal(v.kind, CPYTHON_VALUE_STR);
		assert_string_equal(v.text, "hello");
		assert_false(v.cut);

		o = str_object(l, 1, false, latin1, 4);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_STR);
		assert_string_equal(v.text, "caf\xc3\xa9");

		o = str_object(l, 2, false, ucs2, 2);
		v = value_of(l, &o);
		assert_string_equal(v.text, "\xe6\x97\xa5\xe6\x9c\xac");

		o = str_object(l, 4, false, ucs4, 2);
		v = value_of(l, &o);
		assert_string_equal(v.text, "\xf0\x9f\x98\x80x");

		o = str_object(l, 1, true, long_text, 100);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_STR);
		assert_int_equal(strlen(v.text), CPYTHON_ARG_TEXT);
		assert_int_equal(v.i, 100);
		assert_true(v.cut);

		/* ASCII said, a byte that is not: unreadable, not shown. */
		o = str_object(l, 1, true, latin1, 4);
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);
		/* A kind that does not exist. */
		o = str_object(l, 1, false, "abc", 3);
		state_bits = 1u << 5 | 3u << 2;
		set_field(&o, l->unicode_state, &state_bits, 4);
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);

		o = new_object(l, T_BYTES);
		set_u64(&o, l->bytes_size, 4);
		set_field(&o, l->bytes_sval, "a\0\\z", 4);
		v = value_of(l, &o);
		assert_int_equal(v.kind, CPYTHON_VALUE_BYTES);
		assert_string_equal(v.text, "a\\x00\\x5cz");
		set_u64(&o, l->bytes_size, (uint64_t)-4);
		assert_int_equal(value_of(l, &o).kind, CPYTHON_VALUE_UNREADABLE);
	}
}

/* Slots that are empty, or point at memory that is gone: said so, never a value. */
static void test_args__unbound_and_freed(void **state)
{
	const struct cpython_layout *l = cpython_builtin_layout(11);
	struct space *sp = calloc(1, sizeof(*sp));
	struct object o = small_int(l, 42);
	uint64_t slots[10] = { OBJ_AT(0), 0, 0xdead0000, OBJ_AT(0) };
	struct cpython_value v[10];
	unsigned i;

	(void)state;
	assert_non_null(sp);
	sp->objects[0] = &o;
	assert_int_equal(read_frame(l, sp, 3, 1, slots, 4, v, 10), 4);
	assert_int_equal(v[0].kind, CPYTHON_VALUE_INT);
	assert_int_equal(v[1].kind, CPYTHON_VALUE_UNBOUND);
	assert_int_equal(v[2].kind, CPYTHON_VALUE_UNREADABLE);
	assert_int_equal(v[3].kind, CPYTHON_VALUE_INT); /* the keyword-only one */

	/* More parameters than are read: the first CPYTHON_MAX_ARGS. */
	for (i = 0; i < 10; i++)
		slots[i] = OBJ_AT(0);
	assert_int_equal(read_frame(l, sp, 7, 3, slots, 10, v, 10), CPYTHON_MAX_ARGS);
	/* Counts no code object has. */
	assert_int_equal(read_frame(l, sp, -1, 0, slots, 1, v, 10), -EFAULT);
	/* The object freed and its memory reused by something else: another type, shown so. */
	set_u64(&o, l->object_type, 0xfeed0000);
	assert_int_equal(read_frame(l, sp, 1, 0, slots, 1, v, 10), 1);
	assert_int_equal(v[0].kind, CPYTHON_VALUE_OTHER);
	free(sp);
}

/* One value read at two moments, other fields of the objects changed: equal bytes. */
static void test_args__canonical(void **state)
{
	size_t m;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		const struct cpython_layout *l = cpython_builtin_layout(minors[m]);
		struct object objs[3] = { str_object(l, 1, true, "hello", 5),
					  new_object(l, T_OTHER), new_object(l, T_LIST) };
		struct object later[3];
		uint64_t slots[3] = { OBJ_AT(0), OBJ_AT(1), OBJ_AT(2) };
		struct space *sp = calloc(1, sizeof(*sp));
		struct cpython_mem mem = { .read = space_read, .ctx = sp };
		int32_t counts[3] = { 3, 0, 0 };
		uint8_t a[4 * CPYTHON_RAW_ARG_MAX], b[4 * CPYTHON_RAW_ARG_MAX];
		struct cpython_args_out out_a = { a, sizeof(a), 0 }, out_b = { b, sizeof(b), 0 };
		struct cpython_raw_arg ra, rb;
		const uint8_t *ta, *tb;
		uint32_t at_a = 0, at_b = 0, state_bits;
		unsigned i;

		assert_non_null(sp);
		set_u64(&objs[2], 16, 3);
		memcpy(later, objs, sizeof(objs));
		set_u64(&later[0], 24, 0x1234);		       /* its hash, computed meanwhile */
		state_bits = 1u << 5 | 1u << 2 | 1u << 6 | 1u; /* and interned */
		set_field(&later[0], l->unicode_state, &state_bits, 4);
		set_u64(&later[1], 24, 99);	    /* an object's own field */
		set_u64(&later[2], 24, 0xbeef0000); /* a list's item array, moved */
		memcpy(sp->bytes + (CODE_AT - SPACE_BASE) + l->code_argcount, counts,
		       sizeof(counts));
		memcpy(sp->bytes + (FRAME_AT - SPACE_BASE) + l->frame_localsplus, slots,
		       sizeof(slots));
		for (i = 0; i < 3; i++)
			sp->objects[i] = &objs[i];
		assert_int_equal(frame_args(l, &mem, &types, FRAME_AT, CODE_AT, &out_a), 3);
		for (i = 0; i < 3; i++)
			sp->objects[i] = &later[i];
		assert_int_equal(frame_args(l, &mem, &types, FRAME_AT, CODE_AT, &out_b), 3);
		assert_int_equal(out_a.used, out_b.used);
		assert_memory_not_equal(a, b, out_a.used);
		while (cpython_next_arg(a, out_a.used, &at_a, &ra, &ta) &&
		       cpython_next_arg(b, out_b.used, &at_b, &rb, &tb)) {
			cpython_arg_canonical(l, &types, &ra);
			cpython_arg_canonical(l, &types, &rb);
			assert_memory_equal(&ra, &rb, sizeof(ra));
		}
		/* A value that did change is still told apart. */
		set_u64(&later[2], 16, 4);
		out_b.used = 0;
		assert_int_equal(frame_args(l, &mem, &types, FRAME_AT, CODE_AT, &out_b), 3);
		at_a = at_b = 0;
		for (i = 0; i < 3; i++) {
			assert_true(cpython_next_arg(a, out_a.used, &at_a, &ra, &ta));
			assert_true(cpython_next_arg(b, out_b.used, &at_b, &rb, &tb));
		}
		cpython_arg_canonical(l, &types, &ra);
		cpython_arg_canonical(l, &types, &rb);
		assert_memory_not_equal(&ra, &rb, sizeof(ra));
		free(sp);
	}
}

static void test_args__next_arg_bounds(void **state)
{
	uint8_t buf[3 * CPYTHON_RAW_ARG_MAX];
	struct cpython_raw_arg a, got;
	const uint8_t *text;
	uint32_t at = 0, used = 0;

	(void)state;
	memset(buf, 0, sizeof(buf));
	memset(&a, 0, sizeof(a));
	a.text_len = 5;
	memcpy(buf, &a, sizeof(a));
	memcpy(buf + sizeof(a), "hello", 5);
	used = (uint32_t)cpython_raw_arg_size(&a);
	assert_int_equal(used, sizeof(a) + 8);
	a.index = 1;
	a.text_len = 0;
	memcpy(buf + used, &a, sizeof(a));
	used += sizeof(a);

	assert_true(cpython_next_arg(buf, used, &at, &got, &text));
	assert_int_equal(got.text_len, 5);
	assert_memory_equal(text, "hello", 5);
	assert_true(cpython_next_arg(buf, used, &at, &got, &text));
	assert_int_equal(got.index, 1);
	assert_false(cpython_next_arg(buf, used, &at, &got, &text));

	/* A record cut short, or one that claims more text than is kept: the end. */
	at = 0;
	assert_false(cpython_next_arg(buf, sizeof(a) + 4, &at, &got, &text));
	a.text_len = CPYTHON_ARG_TEXT + 1;
	memcpy(buf, &a, sizeof(a));
	at = 0;
	assert_false(cpython_next_arg(buf, sizeof(buf), &at, &got, &text));
}

static bool valid_utf8(const char *s)
{
	const uint8_t *p = (const uint8_t *)s;

	while (*p) {
		int n = *p < 0x80	      ? 0
			: (*p & 0xe0) == 0xc0 ? 1
			: (*p & 0xf0) == 0xe0 ? 2
			: (*p & 0xf8) == 0xf0 ? 3
					      : -1;

		if (n < 0)
			return false;
		for (p++; n > 0; n--, p++) {
			if ((*p & 0xc0) != 0x80)
				return false;
		}
	}
	return true;
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/*
 * Random records, half of them with a built-in type: decoding never reads past what it
 * was given (ASan), and a value only ever shows as a kind its type allows.
 */
static void test_args__random_records(void **state)
{
	static const uint64_t type_of[] = { T_INT,   T_BOOL, T_FLOAT, T_STR, T_BYTES,
					    T_TUPLE, T_LIST, T_DICT,  T_SET, T_FROZENSET };
	size_t m, round;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		const struct cpython_layout *l = cpython_builtin_layout(minors[m]);

		for (round = 0; round < 20000; round++) {
			uint8_t buf[2 * CPYTHON_RAW_ARG_MAX];
			uint8_t *copy;
			struct cpython_raw_arg a;
			struct cpython_value v;
			const uint8_t *text;
			uint32_t at = 0, i, len = (uint32_t)(rnd() % sizeof(buf));

			for (i = 0; i < sizeof(buf); i += 8) {
				uint64_t w = rnd();

				memcpy(buf + i, &w, 8);
			}
			buf[3] %= CPYTHON_ARG_TEXT + 2; /* text_len: mostly in range */
			if (rnd() & 1) {
				uint64_t type = type_of[rnd() % 10];

				memcpy(buf + 16, &type, 8); /* words[0] */
			}
			if (rnd() % 4 == 0)
				buf[2] = 0; /* flags */
			/* Exactly @len bytes, so that ASan sees any read past them. */
			copy = malloc(len ? len : 1);
			assert_non_null(copy);
			memcpy(copy, buf, len);
			while (cpython_next_arg(copy, len, &at, &a, &text)) {
				struct cpython_raw_arg canonical = a;
				struct cpython_value v2;

				cpython_arg_value(l, &types, &a, text, &v);
				/* What the store keeps decodes the same. */
				cpython_arg_canonical(l, &types, &canonical);
				cpython_arg_value(l, &types, &canonical, text, &v2);
				assert_memory_equal(&v, &v2, sizeof(v));
				switch (v.kind) {
				case CPYTHON_VALUE_INT:
				case CPYTHON_VALUE_BIG_INT:
					assert_true(a.words[0] == T_INT);
					break;
				case CPYTHON_VALUE_BOOL:
					assert_true(a.words[0] == T_BOOL);
					assert_true(v.i == 0 || v.i == 1);
					break;
				case CPYTHON_VALUE_FLOAT:
					assert_true(a.words[0] == T_FLOAT);
					break;
				case CPYTHON_VALUE_NONE:
					assert_true(a.object == NONE_OBJ);
					break;
				case CPYTHON_VALUE_STR:
					assert_true(a.words[0] == T_STR);
					assert_true(strlen(v.text) < sizeof(v.text));
					assert_true(valid_utf8(v.text));
					break;
				case CPYTHON_VALUE_BYTES:
					assert_true(a.words[0] == T_BYTES);
					for (i = 0; v.text[i]; i++)
						assert_true(v.text[i] >= 0x20 && v.text[i] < 0x7f);
					break;
				case CPYTHON_VALUE_SIZED:
					assert_true(v.i >= 0);
					assert_true(a.words[0] == type_of[v.sized]);
					break;
				case CPYTHON_VALUE_UNBOUND:
					assert_true(a.flags & CPYTHON_ARG_UNBOUND);
					break;
				default:
					break;
				}
				if (a.flags & CPYTHON_ARG_UNREADABLE &&
				    !(a.flags & CPYTHON_ARG_UNBOUND))
					assert_int_equal(v.kind, CPYTHON_VALUE_UNREADABLE);
			}
			free(copy);
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_args__ints),
		cmocka_unit_test(test_args__floats_none_sized_other),
		cmocka_unit_test(test_args__strs_and_bytes),
		cmocka_unit_test(test_args__unbound_and_freed),
		cmocka_unit_test(test_args__canonical),
		cmocka_unit_test(test_args__next_arg_bounds),
		cmocka_unit_test(test_args__random_records),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
