/* The logging helper behind log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

#include "term.h"

static enum log_level log_threshold = LOG_WARN;

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char msg[1024], esc[TERM_ESCAPED(sizeof(msg))];
	va_list ap;

	if (level > log_threshold)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* messages quote the target's names and paths: no escape sequence reaches a terminal */
	fprintf(stderr, "pytrace-sample: %s: %s\n", names[level],
		term_escape(esc, sizeof(esc), msg, sizeof(msg)));
}
