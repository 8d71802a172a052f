/* Internal to trace/: process and thread names, and when each first appeared. */
#ifndef PYTRACE_TRACE_NAMES_H
#define PYTRACE_TRACE_NAMES_H

#include <stddef.h>
#include <stdint.h>

struct name_entry {
	uint32_t pid, tid; /* tid 0 for a process */
	char *name;	   /* NULL until named */
	char *cmdline;	   /* a process's whole command line, or NULL */
	uint64_t first_ns; /* UINT64_MAX until seen */
};

struct names;

struct names *names__new(void);
void names__free(struct names *names);

/* Replace the name of a process (@tid 0) or thread. 0 or -ENOMEM. */
int names__set(struct names *names, uint32_t pid, uint32_t tid, const char *name);

/* A process's whole command line, kept beside its (shorter) name. 0 or -ENOMEM. */
int names__set_cmdline(struct names *names, uint32_t pid, const char *cmdline);

/* The command line set, or NULL. */
const char *names__cmdline(const struct names *names, uint32_t pid);

/* Notes that the thread and its process have content at @t_ns (keeps the earliest). */
int names__seen(struct names *names, uint32_t pid, uint32_t tid, uint64_t t_ns);

/* The name, or NULL when none was given; borrowed until the next change. */
const char *names__get(const struct names *names, uint32_t pid, uint32_t tid);

/*
 * The entries that were seen, processes (tid 0) and threads alike, ordered by first
 * appearance (ties by pid, tid). Caller frees the array, not the entries, which are
 * borrowed until the next change.
 */
struct name_entry **names__sorted(const struct names *names, size_t *count);

#endif
