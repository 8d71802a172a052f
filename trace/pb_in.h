/*
 * Internal to trace/: reading protobuf bytes that may be anything (a .pftrace someone
 * sent): varints of at most 10 bytes, every length checked against the bytes left, no
 * allocation before that.
 */
#ifndef PYTRACE_TRACE_PB_IN_H
#define PYTRACE_TRACE_PB_IN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

/* Bytes of a message being decoded. */
struct pb_in {
	const uint8_t *p, *end;
};

struct pb_field {
	uint32_t num, wire;
	uint64_t v;	    /* varint and fixed values */
	struct pb_in bytes; /* a length-delimited field's */
};

/* A varint of at most 10 bytes; false when cut short or longer. */
static inline bool get_varint(struct pb_in *in, uint64_t *v)
{
	uint64_t x = 0;
	int i;

	for (i = 0; i < 10 && in->p < in->end; i++) {
		uint8_t b = *in->p++;

		if (i == 9 && b > 1)
			return false; /* past 64 bits */
		x |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false;
}

static inline uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* The next field of @in: 1, 0 at its end, -EINVAL when it is not protobuf. */
static inline int next_field(struct pb_in *in, struct pb_field *f)
{
	uint64_t tag, len;
	size_t left;

	if (in->p >= in->end)
		return 0;
	if (!get_varint(in, &tag) || tag >> 3 == 0 || tag >> 3 > (1u << 29) - 1)
		return -EINVAL;
	f->num = (uint32_t)(tag >> 3);
	f->wire = (uint32_t)(tag & 7);
	left = (size_t)(in->end - in->p);
	switch (f->wire) {
	case WIRE_VARINT:
		return get_varint(in, &f->v) ? 1 : -EINVAL;
	case WIRE_FIXED64:
	case WIRE_FIXED32:
		len = f->wire == WIRE_FIXED64 ? 8 : 4;
		if (left < len)
			return -EINVAL;
		f->v = get_le(in->p, (int)len);
		in->p += len;
		return 1;
	case WIRE_BYTES:
		if (!get_varint(in, &len) || len > (uint64_t)(in->end - in->p))
			return -EINVAL;
		f->bytes = (struct pb_in){ in->p, in->p + len };
		in->p += len;
		return 1;
	default:
		return -EINVAL; /* groups (3, 4) and 6, 7 are not written by anyone */
	}
}

static inline bool is_varint(const struct pb_field *f, uint32_t num)
{
	return f->num == num && f->wire == WIRE_VARINT;
}

static inline bool is_bytes(const struct pb_field *f, uint32_t num)
{
	return f->num == num && f->wire == WIRE_BYTES;
}

static inline size_t in_len(struct pb_in b)
{
	return (size_t)(b.end - b.p);
}

static inline bool bytes_eq(struct pb_in b, const char *s)
{
	return in_len(b) == strlen(s) && !memcmp(b.p, s, in_len(b));
}

/* The bytes as a string, up to a NUL in them; NULL on ENOMEM. */
static inline char *bytes_dup(struct pb_in b)
{
	const uint8_t *nul = memchr(b.p, 0, in_len(b));

	return strndup((const char *)b.p, nul ? (size_t)(nul - b.p) : in_len(b));
}

#endif
