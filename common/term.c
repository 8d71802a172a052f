/* Terminal escaping for target-controlled text; see term.h. */
#include "term.h"

#include <stdio.h>
#include <string.h>

/* Length of the well-formed UTF-8 sequence at @s (1-4), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	size_t n, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (n > left)
		return 0;
	for (i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0; /* overlong, a surrogate, or past U+10FFFF */
	return n;
}

/* Appends @s[0..@len) escaped to @dst at *@at, never past @size - 1. */
static void append(char *dst, size_t size, size_t *at, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, n;
	char esc[5];

	while (i < len && u[i]) {
		n = utf8_len(u + i, len - i);
		if (n == 1 && u[i] >= 0x20 && u[i] != 0x7f && u[i] != '\\') {
			if (*at + 1 >= size)
				return;
			dst[(*at)++] = (char)u[i++];
			continue;
		}
		if (n >= 2 && !(n == 2 && u[i] == 0xc2 && u[i + 1] < 0xa0)) {
			if (*at + n >= size)
				return; /* U+0080..U+009F are the C1 controls: escaped below */
			memcpy(dst + *at, u + i, n);
			*at += n;
			i += n;
			continue;
		}
		if (u[i] == '\\')
			memcpy(esc, "\\\\", 3);
		else
			snprintf(esc, sizeof(esc), "\\x%02x", u[i]);
		if (*at + strlen(esc) >= size)
			return;
		memcpy(dst + *at, esc, strlen(esc));
		*at += strlen(esc);
		i++;
	}
}

char *term_escape(char *dst, size_t size, const char *s, size_t max)
{
	size_t at = 0, len;

	if (!size)
		return dst;
	if (!s)
		s = "";
	len = strnlen(s, max);
	while (len && s[len] && ((unsigned char)s[len] & 0xc0) == 0x80)
		len--; /* cut before a continuation byte, not inside a character */
	append(dst, size, &at, s, len);
	dst[at] = '\0';
	return dst;
}

char *term_escape_keep_tail(char *dst, size_t size, const char *s, size_t max)
{
	size_t at = 0, len, tail, head;
	const char *open;

	if (!size)
		return dst;
	if (!s)
		s = "";
	len = strlen(s);
	open = strrchr(s, '(');
	if (len <= max || !open || s[len - 1] != ')' || (size_t)(s + len - open) + 3 > max)
		return term_escape(dst, size, s, max);
	tail = (size_t)(s + len - open);
	head = max - tail - 3;
	while (head && ((unsigned char)s[head] & 0xc0) == 0x80)
		head--; /* cut before a continuation byte, not inside a character */
	append(dst, size, &at, s, head);
	append(dst, size, &at, "...", 3);
	append(dst, size, &at, open, tail);
	dst[at] = '\0';
	return dst;
}
