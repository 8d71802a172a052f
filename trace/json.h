/* Internal to trace/: JSON text for Trace Event files. */
#ifndef PYTRACE_TRACE_JSON_H
#define PYTRACE_TRACE_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "out.h"

/*
 * Writes @s as a quoted JSON string: quotes, backslashes and control characters escaped,
 * each byte that is not part of valid UTF-8 replaced by U+FFFD.
 */
void json_put_string(struct out_file *out, const char *s);
/* The same, quotes included, handed to @put in pieces. */
void json_escape(const char *s, void (*put)(void *ctx, const char *buf, size_t n), void *ctx);

/* Length of the valid UTF-8 sequence at @p (lead byte >= 0x80), or 0 when invalid. */
size_t utf8_valid_length(const unsigned char *p);

#endif
