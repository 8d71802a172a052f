/* Target-controlled text (a thread's name, a command line, a function's name) made safe
 * for a terminal: it can hold escape sequences that would rewrite the user's screen. */
#ifndef PYTRACE_COMMON_TERM_H
#define PYTRACE_COMMON_TERM_H

#include <stddef.h>

/* Room term_escape() needs for @n bytes of text: each may become "\xNN". */
#define TERM_ESCAPED(n) (4 * (n) + 1)

/* Copies at most @max bytes of @s into @dst (@size bytes, NUL-terminated, cut on a
 * character boundary), writing C0 and C1 control characters, DEL, backslashes and bytes
 * that are not well-formed UTF-8 as "\xNN" ("\\" for a backslash). @s NULL is "". Returns
 * @dst. */
char *term_escape(char *dst, size_t size, const char *s, size_t max);

/* Like term_escape(), but when @s is longer than @max it keeps its tail: a trailing
 * "(...)" note such as "(pid 1 in its namespace)" survives, its head is cut with "...". */
char *term_escape_keep_tail(char *dst, size_t size, const char *s, size_t max);

#endif
