/* One logging helper for every module: library code reports through it, never to stdio. */
#ifndef PYTRACE_COMMON_LOG_H
#define PYTRACE_COMMON_LOG_H

enum log_level {
	LOG_ERROR,
	LOG_WARN,
	LOG_INFO,
	LOG_DEBUG,
};

/* Messages above @level are dropped. Default: LOG_WARN. Set once by cli/ at start-up. */
void log_set_level(enum log_level level);

/* Writes "pytrace-sample: <level>: <message>\n" to stderr when @level is enabled. */
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define pr_err(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define pr_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define pr_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define pr_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
