/*
 * A process's name as a user knows it, from its command line: a Python process by its
 * script ("pool_jobs.py"), its module ("-m http.server": "http.server") or its role in
 * multiprocessing ("forkserver", "resource_tracker"); any other program by its command
 * line as it is. The whole command line stays in the trace beside it.
 */
#include "procname.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The word at @p (up to a space or the end), as a length. */
static size_t word_len(const char *p)
{
	return strcspn(p, " ");
}

static const char *next_word(const char *p)
{
	p += word_len(p);
	return p + strspn(p, " ");
}

/* Whether the program @argv0 (a path) is a Python interpreter: python, python3.12 ... */
static bool is_python(const char *argv0, size_t len)
{
	const char *base = argv0, *p;

	for (p = argv0; p < argv0 + len; p++) {
		if (*p == '/')
			base = p + 1;
	}
	return argv0 + len - base >= 6 && !strncmp(base, "python", 6);
}

/* Options of the interpreter's that take the next word as their value. */
static bool takes_value(const char *opt, size_t len)
{
	return len == 2 && (opt[1] == 'X' || opt[1] == 'W' || opt[1] == 'Q');
}

/* "(pid 1 in its namespace)" and such, said after a container's command line. */
static const char *trailing_note(const char *cmdline)
{
	const char *note = strstr(cmdline, " (pid ");

	return note && cmdline[strlen(cmdline) - 1] == ')' ? note : NULL;
}

int procname_short(const char *cmdline, char *out, size_t size)
{
	const char *note = trailing_note(cmdline), *p = cmdline, *base, *q;
	int end = note ? (int)(note - cmdline) : (int)strlen(cmdline);
	size_t len = word_len(p);

	if (!is_python(p, len)) {
		snprintf(out, size, "%s", cmdline);
		return 0;
	}
	for (p = next_word(p); *p == '-' && p < cmdline + end; p = next_word(p)) {
		len = word_len(p);
		if (len == 2 && p[1] == 'c') {
			p = next_word(p);
			/* multiprocessing's helpers, and its spawned children, by role. */
			if (strstr(p, "multiprocessing.forkserver"))
				snprintf(out, size, "forkserver%s", note ? note : "");
			else if (strstr(p, "multiprocessing.resource_tracker"))
				snprintf(out, size, "resource_tracker%s", note ? note : "");
			else if (strstr(p, "multiprocessing.spawn") ||
				 strstr(p, "--multiprocessing-fork"))
				return 1; /* the name its parent gave it: its script's */
			else
				snprintf(out, size, "%.*s", end, cmdline);
			return 0;
		}
		if (len == 2 && p[1] == 'm') {
			p = next_word(p);
			snprintf(out, size, "%.*s%s", (int)word_len(p), p, note ? note : "");
			return 0;
		}
		if (len == 2 && p[1] == '-') { /* "--": the script follows */
			p = next_word(p);
			break;
		}
		if (takes_value(p, len))
			p = next_word(p);
	}
	if (!*p || p >= cmdline + end) { /* the interpreter alone: a REPL, or stdin */
		snprintf(out, size, "%s", cmdline);
		return 0;
	}
	len = word_len(p);
	for (base = p, q = p; q + 1 < p + len; q++) {
		if (*q == '/')
			base = q + 1;
	}
	snprintf(out, size, "%.*s%s", (int)(p + len - base), base, note ? note : "");
	return 0;
}
