/* The name a user knows a process by, from its command line. */
#ifndef PYTRACE_COMMON_PROCNAME_H
#define PYTRACE_COMMON_PROCNAME_H

#include <stddef.h>

/*
 * From @cmdline (arguments joined by spaces, untrusted), into @out (@size bytes, cut):
 * a Python process by its script's file name ("pool_jobs.py"), its module ("-m
 * http.server": "http.server") or its role in multiprocessing ("forkserver",
 * "resource_tracker"); any other program by @cmdline itself. A trailing note such as
 * "(pid 1 in its namespace)" is kept. Returns 0, or 1 when the command line says the
 * process keeps the name it had (a multiprocessing spawned child: its parent's).
 */
int procname_short(const char *cmdline, char *out, size_t size);

#endif
