/*
 * Arguments: the values of a frame's parameters, read as raw bytes together with the
 * frame (the kernel reads the same bytes, see bpf/pytrace.bpf.c), decoded later by
 * type. Every field decoded is checked: a value that makes no sense is unreadable,
 * never shown as something it was not.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cpython.h"

#define WORDS_AT 8 /* cpython_raw_arg.words holds the object's bytes from 8 (ob_type) on */
#define WORDS_END (WORDS_AT + 4 * 8)
#define DIGIT_BITS 30 /* a PyLong digit on 64-bit builds */

/* state bits of a str: interned:2 kind:3 compact:1 ascii:1, the same from 3.8 to 3.14. */
#define STR_KIND(state) (((state) >> 2) & 7)
#define STR_COMPACT(state) (((state) >> 5) & 1)
#define STR_ASCII(state) (((state) >> 6) & 1)

/* Where a str's or a bytes' contents start, and how many bytes of them are kept; 0: none. */
static uint64_t text_of(const struct cpython_layout *l, const struct cpython_types *t,
			const struct cpython_raw_arg *a, uint32_t *len)
{
	uint64_t type = a->words[0];
	int64_t size;
	uint32_t state;

	*len = 0;
	if (t->addr[CPYTHON_TYPE_STR] && type == t->addr[CPYTHON_TYPE_STR]) {
		memcpy(&size, (const uint8_t *)a->words + l->unicode_length - WORDS_AT, 8);
		memcpy(&state, (const uint8_t *)a->words + l->unicode_state - WORDS_AT, 4);
		if (!STR_COMPACT(state) || size <= 0 ||
		    (STR_KIND(state) != 1 && STR_KIND(state) != 2 && STR_KIND(state) != 4))
			return 0;
		*len = size > CPYTHON_ARG_TEXT / STR_KIND(state) ? CPYTHON_ARG_TEXT
								 : (uint32_t)size * STR_KIND(state);
		return a->object +
		       (STR_ASCII(state) ? l->unicode_ascii_size : l->unicode_compact_size);
	}
	if (t->addr[CPYTHON_TYPE_BYTES] && type == t->addr[CPYTHON_TYPE_BYTES]) {
		memcpy(&size, (const uint8_t *)a->words + l->bytes_size - WORDS_AT, 8);
		if (size <= 0)
			return 0;
		*len = size > CPYTHON_ARG_TEXT ? CPYTHON_ARG_TEXT : (uint32_t)size;
		return a->object + l->bytes_sval;
	}
	return 0;
}

/* Whether the fields decoded below lie in the bytes an argument keeps. */
static bool layout_fits(const struct cpython_layout *l)
{
	const uint64_t ends[] = {
		l->object_type + 8, l->unicode_length + 8, l->unicode_state + 4,
		l->bytes_size + 8,  l->long_size + 8,	   l->long_digits + 12,
		l->float_value + 8, l->dict_used + 8,	   l->set_used + 8,
	};
	size_t i;

	if (l->object_type != WORDS_AT)
		return false;
	for (i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		if (ends[i] > WORDS_END || ends[i] < WORDS_AT + 4)
			return false;
	}
	return true;
}

/* Appends the argument at @object to @out as a raw record; false when out of room. */
static bool read_one(const struct cpython_layout *l, const struct cpython_mem *mem,
		     const struct cpython_types *t, uint64_t object, uint8_t index,
		     struct cpython_args_out *out)
{
	struct cpython_raw_arg a;
	uint64_t text;
	uint32_t len;

	if (out->used + CPYTHON_RAW_ARG_MAX > out->size)
		return false;
	memset(&a, 0, sizeof(a));
	object = cpython_untag(l, object);
	a.index = index;
	a.object = object;
	if (!object) {
		a.flags = CPYTHON_ARG_UNBOUND;
	} else if (mem->read(mem->ctx, object + WORDS_AT, a.words, sizeof(a.words))) {
		memset(a.words, 0, sizeof(a.words));
		a.flags = CPYTHON_ARG_UNREADABLE;
	} else {
		text = text_of(l, t, &a, &len);
		if (text && len) {
			uint8_t *to = out->buf + out->used + sizeof(a);

			memset(to, 0, (len + 7u) & ~7u);
			if (mem->read(mem->ctx, text, to, len))
				a.flags = CPYTHON_ARG_UNREADABLE;
			else
				a.text_len = (uint8_t)len;
		}
	}
	memcpy(out->buf + out->used, &a, sizeof(a));
	out->used += (uint32_t)cpython_raw_arg_size(&a);
	return true;
}

bool cpython_next_arg(const uint8_t *p, uint32_t len, uint32_t *at, struct cpython_raw_arg *a,
		      const uint8_t **text)
{
	if (*at + sizeof(*a) > len)
		return false;
	memcpy(a, p + *at, sizeof(*a));
	if (a->text_len > CPYTHON_ARG_TEXT || *at + cpython_raw_arg_size(a) > len)
		return false;
	*text = p + *at + sizeof(*a);
	*at += (uint32_t)cpython_raw_arg_size(a);
	return true;
}

int cpython_param_count(const int32_t counts[3])
{
	if (counts[0] < 0 || counts[2] < 0 || counts[0] > 65535 || counts[2] > 65535)
		return -EFAULT;
	if (counts[0] + counts[2] > CPYTHON_MAX_ARGS)
		return CPYTHON_MAX_ARGS;
	return counts[0] + counts[2];
}

int cpython_read_arg_slots(const struct cpython_layout *l, const struct cpython_mem *mem,
			   const struct cpython_types *t, const uint64_t *slots, uint32_t n,
			   struct cpython_args_out *out)
{
	uint32_t i;

	if (!layout_fits(l))
		return 0;
	for (i = 0; i < n && i < CPYTHON_MAX_ARGS; i++) {
		if (!read_one(l, mem, t, slots[i], (uint8_t)i, out))
			break;
	}
	return (int)i;
}

int cpython_read_task_locals(const struct cpython_layout *l, const struct cpython_mem *mem,
			     const struct cpython_types *t, uint64_t frame,
			     const struct cpython_task_code *task, struct cpython_args_out *out)
{
	uint64_t objects[CPYTHON_TASK_LOCALS];
	unsigned i;

	if (!l->frame_localsplus || !layout_fits(l) ||
	    out->used + CPYTHON_TASK_LOCALS * CPYTHON_RAW_ARG_MAX > out->size)
		return 0;
	for (i = 0; i < CPYTHON_TASK_LOCALS; i++) {
		if (mem->read(mem->ctx, frame + l->frame_localsplus + task->slots[i] * 8ULL,
			      &objects[i], 8))
			return 0;
		objects[i] = cpython_untag(l, objects[i]);
	}
	if (task->kind == CPYTHON_TASK_CF_PROCESS) {
		/*
		 * call_item.work_id; no task between tasks (call_item unbound). A work item
		 * whose id can't be read shows as no task too: read from outside after the
		 * worker moved on (a freed item), taking it as unknown would let the task's
		 * slice run on into the next one's.
		 */
		uint64_t work_id = 0;

		if (objects[0] && cpython_attr_get(l, mem, objects[0], "work_id", &work_id))
			work_id = 0;
		objects[0] = work_id;
		objects[1] = 0;
	}
	for (i = 0; i < CPYTHON_TASK_LOCALS; i++)
		read_one(l, mem, t, objects[i], (uint8_t)(CPYTHON_ARG_TASK + i), out);
	return CPYTHON_TASK_LOCALS;
}

const char *cpython_task_local_name(enum cpython_task_kind kind, unsigned which)
{
	static const char *const mp_pool[CPYTHON_TASK_LOCALS] = { "pool_job", "pool_task" };

	if (kind == CPYTHON_TASK_CF_PROCESS)
		return which == 0 ? "work_id" : NULL;
	return kind == CPYTHON_TASK_MP_POOL && which < CPYTHON_TASK_LOCALS ? mp_pool[which] : NULL;
}

/* Appends code point @c as UTF-8 (U+FFFD for what can't be one); false when out of room. */
static bool put_char(char *out, size_t size, size_t *at, uint32_t c)
{
	char buf[4];
	size_t n;

	if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80) {
		buf[0] = (char)c;
		n = 1;
	} else if (c < 0x800) {
		buf[0] = (char)(0xc0 | c >> 6);
		buf[1] = (char)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		buf[0] = (char)(0xe0 | c >> 12);
		buf[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		buf[2] = (char)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		buf[0] = (char)(0xf0 | c >> 18);
		buf[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		buf[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		buf[3] = (char)(0x80 | (c & 0x3f));
		n = 4;
	}
	if (*at + n >= size)
		return false;
	memcpy(out + *at, buf, n);
	*at += n;
	return true;
}

static bool decode_str(const struct cpython_layout *l, const struct cpython_raw_arg *a,
		       const uint8_t *text, struct cpython_value *v)
{
	uint32_t state, kind, i, chars, want;
	int64_t size;
	size_t at = 0;

	memcpy(&size, (const uint8_t *)a->words + l->unicode_length - WORDS_AT, 8);
	memcpy(&state, (const uint8_t *)a->words + l->unicode_state - WORDS_AT, 4);
	kind = STR_KIND(state);
	if (size < 0 || (kind != 1 && kind != 2 && kind != 4) || (STR_ASCII(state) && kind != 1))
		return false;
	v->kind = CPYTHON_VALUE_STR;
	v->i = size;
	if (!STR_COMPACT(state)) {
		v->cut = size > 0; /* a legacy string: its contents are elsewhere, not read */
		return true;
	}
	want = size > CPYTHON_ARG_TEXT / kind ? CPYTHON_ARG_TEXT : (uint32_t)size * kind;
	if (a->text_len != want)
		return false;
	chars = want / kind;
	for (i = 0; i < chars; i++) {
		uint32_t c = 0;

		if (kind == 1)
			c = text[i];
		else if (kind == 2)
			c = (uint32_t)text[2 * i] | (uint32_t)text[2 * i + 1] << 8;
		else
			memcpy(&c, text + 4 * i, 4);
		if (STR_ASCII(state) && c >= 0x80)
			return false;
		if (!put_char(v->text, sizeof(v->text), &at, c))
			break;
	}
	v->text[at] = '\0';
	v->cut = (int64_t)i < size;
	return true;
}

static bool decode_bytes(const struct cpython_layout *l, const struct cpython_raw_arg *a,
			 const uint8_t *text, struct cpython_value *v)
{
	int64_t size;
	uint32_t i, want;
	size_t at = 0;

	memcpy(&size, (const uint8_t *)a->words + l->bytes_size - WORDS_AT, 8);
	if (size < 0)
		return false;
	want = size > CPYTHON_ARG_TEXT ? CPYTHON_ARG_TEXT : (uint32_t)size;
	if (a->text_len != want)
		return false;
	v->kind = CPYTHON_VALUE_BYTES;
	v->i = size;
	/* As Python shows it, without b'': printable ASCII, else \xNN. */
	for (i = 0; i < want && at + 5 < sizeof(v->text); i++) {
		uint8_t c = text[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			v->text[at++] = (char)c;
		else
			at += (size_t)snprintf(v->text + at, 5, "\\x%02x", c);
	}
	v->text[at] = '\0';
	v->cut = (int64_t)i < size;
	return true;
}

/* How many of an int's digits the bytes read hold (at most 3). */
static unsigned long_digits(const struct cpython_layout *l, const struct cpython_raw_arg *a)
{
	int64_t size;
	uint64_t n;

	memcpy(&size, (const uint8_t *)a->words + l->long_size - WORDS_AT, 8);
	if (l->long_tagged)
		n = (uint64_t)size >> 3;
	else
		n = size < 0 ? 0 - (uint64_t)size : (uint64_t)size;
	return n > 3 ? 3 : (unsigned)n;
}

static bool decode_int(const struct cpython_layout *l, const struct cpython_raw_arg *a,
		       struct cpython_value *v)
{
	const uint8_t *w = (const uint8_t *)a->words;
	uint64_t ndigits, magnitude = 0;
	uint32_t digits[3];
	bool negative;
	unsigned i;

	if (l->long_tagged) {
		uint64_t tag;

		memcpy(&tag, w + l->long_size - WORDS_AT, 8);
		if ((tag & 3) == 3)
			return false;
		ndigits = tag >> 3;
		negative = (tag & 3) == 2;
	} else {
		int64_t size;

		memcpy(&size, w + l->long_size - WORDS_AT, 8);
		negative = size < 0;
		/* Negated unsigned: -INT64_MIN overflows (fuzz_cpython_objects). */
		ndigits = negative ? 0 - (uint64_t)size : (uint64_t)size;
	}
	v->kind = CPYTHON_VALUE_INT;
	if (ndigits > 3) {
		v->kind = CPYTHON_VALUE_BIG_INT;
		return true;
	}
	memcpy(digits, w + l->long_digits - WORDS_AT, sizeof(digits));
	for (i = 0; i < ndigits; i++) {
		if (digits[i] >> DIGIT_BITS)
			return false;
	}
	if (ndigits == 3 && digits[2] >= 16) {
		v->kind = CPYTHON_VALUE_BIG_INT;
		return true;
	}
	for (i = (unsigned)ndigits; i-- > 0;)
		magnitude = magnitude << DIGIT_BITS | digits[i];
	if (magnitude > (uint64_t)INT64_MAX + negative) {
		v->kind = CPYTHON_VALUE_BIG_INT;
		return true;
	}
	v->i = negative ? (int64_t)(0 - magnitude) : (int64_t)magnitude;
	return true;
}

static bool decode_sized(const struct cpython_layout *l, const struct cpython_raw_arg *a,
			 enum cpython_type_id id, struct cpython_value *v)
{
	uint64_t at = id == CPYTHON_TYPE_DICT				       ? l->dict_used
		      : id == CPYTHON_TYPE_SET || id == CPYTHON_TYPE_FROZENSET ? l->set_used
									       : 16;
	int64_t size;

	memcpy(&size, (const uint8_t *)a->words + at - WORDS_AT, 8);
	if (size < 0)
		return false;
	v->kind = CPYTHON_VALUE_SIZED;
	v->sized = id;
	v->i = size;
	return true;
}

void cpython_arg_value(const struct cpython_layout *l, const struct cpython_types *t,
		       const struct cpython_raw_arg *a, const uint8_t *text,
		       struct cpython_value *v)
{
	enum cpython_type_id id;
	bool ok = true;

	memset(v, 0, sizeof(*v));
	v->kind = CPYTHON_VALUE_UNREADABLE;
	if (a->flags & CPYTHON_ARG_UNBOUND) {
		v->kind = CPYTHON_VALUE_UNBOUND;
		return;
	}
	if ((a->flags & CPYTHON_ARG_UNREADABLE) || !layout_fits(l) || !a->words[0])
		return;
	v->type = a->words[0];
	if (t->addr[CPYTHON_NONE] && a->object == t->addr[CPYTHON_NONE]) {
		v->kind = CPYTHON_VALUE_NONE;
		return;
	}
	for (id = 0; id < CPYTHON_NONE; id++) {
		if (t->addr[id] && t->addr[id] == v->type)
			break;
	}
	switch (id) {
	case CPYTHON_TYPE_INT:
		ok = decode_int(l, a, v);
		break;
	case CPYTHON_TYPE_BOOL:
		ok = decode_int(l, a, v) && v->kind == CPYTHON_VALUE_INT &&
		     (v->i == 0 || v->i == 1);
		v->kind = CPYTHON_VALUE_BOOL;
		break;
	case CPYTHON_TYPE_FLOAT:
		memcpy(&v->f, (const uint8_t *)a->words + l->float_value - WORDS_AT, 8);
		v->kind = CPYTHON_VALUE_FLOAT;
		break;
	case CPYTHON_TYPE_STR:
		ok = decode_str(l, a, text, v);
		break;
	case CPYTHON_TYPE_BYTES:
		ok = decode_bytes(l, a, text, v);
		break;
	case CPYTHON_TYPE_TUPLE:
	case CPYTHON_TYPE_LIST:
	case CPYTHON_TYPE_DICT:
	case CPYTHON_TYPE_SET:
	case CPYTHON_TYPE_FROZENSET:
		ok = decode_sized(l, a, id, v);
		break;
	default:
		v->kind = CPYTHON_VALUE_OTHER;
		break;
	}
	if (!ok) {
		memset(v, 0, sizeof(*v));
		v->kind = CPYTHON_VALUE_UNREADABLE;
	}
}

/* Copies @len bytes at @at of the object from @from's words to @to's. */
static void keep(struct cpython_raw_arg *to, const struct cpython_raw_arg *from, uint64_t at,
		 uint64_t len)
{
	if (at >= WORDS_AT && at + len <= WORDS_END)
		memcpy((uint8_t *)to->words + (at - WORDS_AT),
		       (const uint8_t *)from->words + (at - WORDS_AT), len);
}

void cpython_arg_canonical(const struct cpython_layout *l, const struct cpython_types *t,
			   struct cpython_raw_arg *a)
{
	struct cpython_raw_arg was = *a;
	enum cpython_type_id id;
	uint32_t state;

	a->frame = 0;
	a->pad = 0;
	if (!layout_fits(l) || (a->flags & (CPYTHON_ARG_UNBOUND | CPYTHON_ARG_UNREADABLE)))
		return;
	memset(&a->words[1], 0, sizeof(a->words) - 8);
	for (id = 0; id < CPYTHON_NONE; id++) {
		if (t->addr[id] && t->addr[id] == was.words[0])
			break;
	}
	switch (id) {
	case CPYTHON_TYPE_INT:
	case CPYTHON_TYPE_BOOL:
		/* Only its digits: past them lies another object (small ints are an array). */
		keep(a, &was, l->long_size, 8);
		keep(a, &was, l->long_digits, 4 * long_digits(l, &was));
		break;
	case CPYTHON_TYPE_FLOAT:
		keep(a, &was, l->float_value, 8);
		break;
	case CPYTHON_TYPE_STR:
		/* Not its hash (computed when first needed) nor whether it is interned. */
		keep(a, &was, l->unicode_length, 8);
		memcpy(&state, (const uint8_t *)was.words + l->unicode_state - WORDS_AT, 4);
		state &= 7u << 2 | 1u << 5 | 1u << 6;
		memcpy((uint8_t *)a->words + l->unicode_state - WORDS_AT, &state, 4);
		break;
	case CPYTHON_TYPE_BYTES:
		keep(a, &was, l->bytes_size, 8);
		break;
	case CPYTHON_TYPE_DICT:
		keep(a, &was, l->dict_used, 8);
		break;
	case CPYTHON_TYPE_SET:
	case CPYTHON_TYPE_FROZENSET:
		keep(a, &was, l->set_used, 8);
		break;
	case CPYTHON_TYPE_TUPLE:
	case CPYTHON_TYPE_LIST:
		keep(a, &was, 16, 8);
		break;
	default:
		break; /* shown by its type and known by its address */
	}
}

int cpython_read_type_name(const struct cpython_layout *l, const struct cpython_mem *mem,
			   uint64_t type, char *buf, size_t size)
{
	uint64_t name;
	size_t at, i;

	if (!size)
		return -EINVAL;
	buf[0] = '\0';
	if (!type || mem->read(mem->ctx, type + l->type_name, &name, 8) || !name)
		return -EFAULT;
	/* A C string of unknown length: read in small steps, so the end of a page stops none. */
	for (at = 0; at + 1 < size; at += 16) {
		char chunk[16];
		size_t n = size - 1 - at < sizeof(chunk) ? size - 1 - at : sizeof(chunk);

		if (mem->read(mem->ctx, name + at, chunk, n))
			return at ? 0 : -EFAULT;
		for (i = 0; i < n; i++) {
			if (!chunk[i]) {
				buf[at + i] = '\0';
				return at + i ? 0 : -EINVAL;
			}
			if (chunk[i] < 0x20 || chunk[i] > 0x7e) {
				buf[at] = '\0';
				return -EINVAL;
			}
			buf[at + i] = chunk[i];
			buf[at + i + 1] = '\0';
		}
	}
	return 0;
}
