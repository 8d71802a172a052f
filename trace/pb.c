/* Protocol buffers' wire format, written by hand: varints, fixed64 and nested lengths. */
#include "pb.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* A nested message's length is written in this many bytes first, moved up if shorter. */
#define PB_LEN_ROOM 5

void pb_buf__reset(struct pb_buf *b)
{
	b->len = 0;
	b->err = 0;
}

void pb_buf__release(struct pb_buf *b)
{
	free(b->data);
	*b = (struct pb_buf){ 0 };
}

static int room(struct pb_buf *b, size_t more)
{
	uint8_t *grown;
	size_t cap;

	if (b->err)
		return b->err;
	if (b->cap - b->len >= more)
		return 0;
	cap = b->cap ? b->cap : 256;
	while (cap - b->len < more)
		cap *= 2;
	grown = realloc(b->data, cap);
	if (!grown)
		return b->err = -ENOMEM;
	b->data = grown;
	b->cap = cap;
	return 0;
}

static size_t varint_at(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static void put_varint(struct pb_buf *b, uint64_t v)
{
	if (room(b, 10))
		return;
	b->len += varint_at(b->data + b->len, v);
}

static void put_tag(struct pb_buf *b, uint32_t field, unsigned int wire_type)
{
	put_varint(b, (uint64_t)field << 3 | wire_type);
}

void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v)
{
	put_tag(b, field, 0);
	put_varint(b, v);
}

void pb_int(struct pb_buf *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v);
}

void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t v)
{
	int i;

	put_tag(b, field, 1);
	if (room(b, 8))
		return;
	for (i = 0; i < 8; i++)
		b->data[b->len++] = (uint8_t)(v >> (8 * i));
}

void pb_double(struct pb_buf *b, uint32_t field, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	pb_fixed64(b, field, bits);
}

void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len)
{
	put_tag(b, field, 2);
	put_varint(b, len);
	if (!len || room(b, len))
		return;
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

/* A proto3 string must be UTF-8: bytes that are not become U+FFFD, as in the JSON. */
void pb_string(struct pb_buf *b, uint32_t field, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	size_t start = pb_begin(b, field);

	while (*p && !room(b, 4)) {
		size_t len = *p < 0x80 ? 1 : utf8_valid_length(p);

		if (len) {
			memcpy(b->data + b->len, p, len);
			b->len += len;
			p += len;
		} else {
			memcpy(b->data + b->len, "\xef\xbf\xbd", 3);
			b->len += 3;
			p++;
		}
	}
	pb_end(b, start);
}

size_t pb_begin(struct pb_buf *b, uint32_t field)
{
	put_tag(b, field, 2);
	if (room(b, PB_LEN_ROOM))
		return 0;
	b->len += PB_LEN_ROOM;
	return b->len;
}

void pb_end(struct pb_buf *b, size_t start)
{
	uint8_t len_bytes[10];
	size_t body, n;

	if (b->err)
		return;
	body = b->len - start;
	n = varint_at(len_bytes, body);
	memcpy(b->data + start - PB_LEN_ROOM, len_bytes, n);
	memmove(b->data + start - PB_LEN_ROOM + n, b->data + start, body);
	b->len -= PB_LEN_ROOM - n;
}
