/* Internal to trace/: a growable buffer and the protobuf wire encoding we write into it. */
#ifndef PYTRACE_TRACE_PB_H
#define PYTRACE_TRACE_PB_H

#include <stddef.h>
#include <stdint.h>

/*
 * Bytes of one message being built. After an allocation failure every later call is a
 * no-op and @err holds -ENOMEM: check it once, when the message is complete.
 */
struct pb_buf {
	uint8_t *data;
	size_t len, cap;
	int err;
};

/* Empties @b, keeping its memory. */
void pb_buf__reset(struct pb_buf *b);
/* Frees the memory. */
void pb_buf__release(struct pb_buf *b);

/* Wire types 0 (varint), 1 (64-bit), 2 (length-delimited). */
void pb_uint(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_int(struct pb_buf *b, uint32_t field, int64_t v); /* int64: two's complement */
void pb_double(struct pb_buf *b, uint32_t field, double v);
void pb_fixed64(struct pb_buf *b, uint32_t field, uint64_t v);
void pb_string(struct pb_buf *b, uint32_t field, const char *s); /* UTF-8 fixed up */
void pb_bytes(struct pb_buf *b, uint32_t field, const void *data, size_t len);

/*
 * A nested message: pb_begin() writes the tag and returns where its length goes; the
 * fields follow; pb_end() with that value writes the length in front of them.
 */
size_t pb_begin(struct pb_buf *b, uint32_t field);
void pb_end(struct pb_buf *b, size_t start);

#endif
