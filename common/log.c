/* The logging helper behind log.h. */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>

static enum log_level log_threshold = LOG_WARN;

void log_set_level(enum log_level level)
{
	log_threshold = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	va_list ap;

	if (level > log_threshold)
		return;
	fprintf(stderr, "pytrace-sample: %s: ", names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
