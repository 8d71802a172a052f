/* Helpers shared by the test binaries: temporary folders and running commands. */
#ifndef PYTRACE_TESTS_SUPPORT_H
#define PYTRACE_TESTS_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

/* Creates a fresh folder under /tmp; caller frees the path and removes it with support_rmdir(). */
char *support_tempdir(void);
void support_rmdir(char *dir);

/* Runs @cmd through sh, returns its stdout (caller frees) and stores the exit status. */
char *support_run(const char *cmd, int *status);

/*
 * Parses the trace at @path with tests/tools/trace_text.py (an independent JSON parser)
 * and returns one canonical line per event; NULL when the file is not valid.
 */
char *support_trace_text(const char *path);

/* True when @text has a line equal to @line. */
bool support_has_line(const char *text, const char *line);

/* Number of lines of @text that start with @prefix. */
int support_count_prefix(const char *text, const char *prefix);

/* True when @s is well-formed UTF-8 (what the readers promise for any input). */
bool support_valid_utf8(const char *s);

/* A xorshift64 draw from 0 to @n - 1; @state is the caller's (non-zero) seed. */
uint32_t support_rand(uint64_t *state, uint32_t n);

#endif
