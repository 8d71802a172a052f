/* JSON strings and numbers as the Trace Event writer needs them. */
#include "json.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

size_t utf8_valid_length(const unsigned char *p)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len, i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf) {
		len = 2;
	} else if (p[0] >= 0xe0 && p[0] <= 0xef) {
		len = 3;
		if (p[0] == 0xe0)
			lo = 0xa0; /* overlong */
		if (p[0] == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
		len = 4;
		if (p[0] == 0xf0)
			lo = 0x90; /* overlong */
		if (p[0] == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < len; i++) {
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	}
	return len;
}

void json_escape(const char *s, void (*put)(void *ctx, const char *buf, size_t n), void *ctx)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	char buf[256];
	size_t n = 0;

	buf[n++] = '"';
	while (*p) {
		size_t len;

		if (n > sizeof(buf) - 8) {
			put(ctx, buf, n);
			n = 0;
		}
		if (*p == '"' || *p == '\\') {
			buf[n++] = '\\';
			buf[n++] = (char)*p++;
		} else if (*p == '\n') {
			buf[n++] = '\\';
			buf[n++] = 'n';
			p++;
		} else if (*p == '\t') {
			buf[n++] = '\\';
			buf[n++] = 't';
			p++;
		} else if (*p < 0x20) {
			memcpy(buf + n, "\\u00", 4);
			buf[n + 4] = hex[*p >> 4];
			buf[n + 5] = hex[*p & 0xf];
			n += 6;
			p++;
		} else if (*p < 0x80) {
			buf[n++] = (char)*p++;
		} else if ((len = utf8_valid_length(p))) {
			memcpy(buf + n, p, len);
			n += len;
			p += len;
		} else {
			memcpy(buf + n, "\xef\xbf\xbd", 3);
			n += 3;
			p++;
		}
	}
	buf[n++] = '"';
	put(ctx, buf, n);
}

static void put_out(void *ctx, const char *buf, size_t n)
{
	out_file__write(ctx, buf, n);
}

void json_put_string(struct out_file *out, const char *s)
{
	json_escape(s, put_out, out);
}
