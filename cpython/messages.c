/* Telling a process pool's task and result messages from their first pickled bytes. */
#include "messages.h"

#include <stdbool.h>
#include <string.h>

/* The pickle opcodes a message's start is made of (Lib/pickle.py). */
enum {
	OP_MARK = '(',
	OP_BININT = 'J',  /* 4-byte signed */
	OP_BININT1 = 'K', /* 1-byte unsigned */
	OP_BININT2 = 'M', /* 2-byte unsigned */
	OP_PROTO = 0x80,
	OP_LONG1 = 0x8a, /* a length byte, then that many bytes, two's complement */
	OP_NEWTRUE = 0x88,
	OP_NEWFALSE = 0x89,
	OP_FRAME = 0x95,	    /* an 8-byte length (protocol 4 and later) */
	OP_SHORT_BINUNICODE = 0x8c, /* a length byte, then UTF-8 */
	OP_MEMOIZE = 0x94,
	OP_STACK_GLOBAL = 0x93,
	OP_EMPTY_TUPLE = ')',
	OP_NEWOBJ = 0x81,
	OP_EMPTY_DICT = '}',
};

struct cursor {
	const uint8_t *p, *end;
};

static bool take(struct cursor *c, size_t n, const uint8_t **at)
{
	if ((size_t)(c->end - c->p) < n)
		return false;
	*at = c->p;
	c->p += n;
	return true;
}

static uint64_t little_endian(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* An int the pickler writes for a small integer; false for anything else. */
static bool take_int(struct cursor *c, int64_t *v)
{
	const uint8_t *op, *at;
	uint64_t u;
	size_t n;

	if (!take(c, 1, &op))
		return false;
	switch (*op) {
	case OP_BININT1:
		if (!take(c, 1, &at))
			return false;
		*v = at[0];
		return true;
	case OP_BININT2:
		if (!take(c, 2, &at))
			return false;
		*v = (int64_t)little_endian(at, 2);
		return true;
	case OP_BININT:
		if (!take(c, 4, &at))
			return false;
		*v = (int32_t)(uint32_t)little_endian(at, 4);
		return true;
	case OP_LONG1:
		if (!take(c, 1, &at) || at[0] == 0 || at[0] > 8)
			return false;
		n = at[0];
		if (!take(c, n, &at))
			return false;
		u = little_endian(at, n);
		if (n < 8 && (at[n - 1] & 0x80)) /* negative: extend the sign */
			u |= ~0ULL << (8 * n);
		*v = (int64_t)u;
		return true;
	default:
		return false;
	}
}

/*
 * A short str equal to @s, and the memo op the pickler writes after each; @c moves
 * past them only when they are there.
 */
static bool take_text(struct cursor *c, const char *s)
{
	struct cursor at_text = *c;
	const uint8_t *at;
	size_t len = strlen(s);

	if (!take(&at_text, 2, &at) || at[0] != OP_SHORT_BINUNICODE || at[1] != len ||
	    !take(&at_text, len, &at) || memcmp(at, s, len))
		return false;
	if (at_text.p < at_text.end && *at_text.p == OP_MEMOIZE)
		at_text.p++;
	*c = at_text;
	return true;
}

/* An opcode (with no argument) @op, and the memo op that may follow it. */
static bool take_op(struct cursor *c, uint8_t op)
{
	const uint8_t *at;

	if (!take(c, 1, &at) || at[0] != op)
		return false;
	if (c->p < c->end && *c->p == OP_MEMOIZE)
		c->p++;
	return true;
}

/*
 * concurrent.futures.process._CallItem or _ResultItem, pickled as an object whose
 * state dict starts with its work id: returns its kind, the work id in @out->task.
 */
static enum cpython_message_kind executor_message(struct cursor c, struct cpython_message *out)
{
	enum cpython_message_kind kind;

	if (!take_text(&c, "concurrent.futures.process"))
		return CPYTHON_MESSAGE_NONE;
	if (take_text(&c, "_CallItem"))
		kind = CPYTHON_MESSAGE_EXECUTOR_TASK;
	else if (take_text(&c, "_ResultItem"))
		kind = CPYTHON_MESSAGE_EXECUTOR_RESULT;
	else
		return CPYTHON_MESSAGE_NONE;
	if (!take_op(&c, OP_STACK_GLOBAL) || !take_op(&c, OP_EMPTY_TUPLE) ||
	    !take_op(&c, OP_NEWOBJ) || !take_op(&c, OP_EMPTY_DICT) || !take_op(&c, OP_MARK) ||
	    !take_text(&c, "work_id") || !take_int(&c, &out->task))
		return CPYTHON_MESSAGE_NONE;
	out->kind = kind;
	return kind;
}

enum cpython_message_kind cpython_message_parse(const uint8_t *buf, size_t n,
						struct cpython_message *out)
{
	struct cursor c = { buf, buf + n };
	const uint8_t *at;
	bool mark = false;

	memset(out, 0, sizeof(*out));
	/* multiprocessing's length header: under 16 MB, its first byte is 0. */
	if (n >= 5 && buf[0] == 0 && buf[4] == OP_PROTO)
		c.p += 4;
	if (!take(&c, 2, &at) || at[0] != OP_PROTO || at[1] < 2)
		return CPYTHON_MESSAGE_NONE;
	if (c.p < c.end && *c.p == OP_FRAME && !take(&c, 9, &at))
		return CPYTHON_MESSAGE_NONE;
	if (c.p < c.end && *c.p == OP_SHORT_BINUNICODE)
		return executor_message(c, out);
	/* A tuple of more than 3 items starts with a mark; one of 2 or 3 does not. */
	if (c.p < c.end && *c.p == OP_MARK) {
		mark = true;
		c.p++;
	}
	if (!take_int(&c, &out->job) || !take_int(&c, &out->task) || !take(&c, 1, &at))
		return CPYTHON_MESSAGE_NONE;
	if (mark) /* (job, i, func, args, kwds) */
		out->kind = CPYTHON_MESSAGE_POOL_TASK;
	else if (at[0] == OP_NEWTRUE || at[0] == OP_NEWFALSE) /* (job, i, (ok, value)) */
		out->kind = CPYTHON_MESSAGE_POOL_RESULT;
	return out->kind;
}
