/* Internal to cli/: one recording's state, shared by record.c and output.c. */
#ifndef PYTRACE_CLI_SESSION_H
#define PYTRACE_CLI_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "../common/frames.h"
#include "../common/hashmap.h"
#include "../common/procname.h"
#include "../cpython/cpython.h"
#include "../symbolize/symbolize.h"
#include "cli.h"

/* A stack's frames: native ones, Python ones (the root-most kept), a wait's marker. */
#define MAX_FRAMES (SYMBOLIZE_MAX_NATIVE_FRAMES + CPYTHON_MAX_FRAMES + 1)

#define WRAPPER_NAMES_MAX 8

/* The wrapper processes folded: how many, under which names (cli/wrappers.c). */
struct wrapper_names {
	unsigned processes, threads;
	unsigned others; /* processes under names past the first 8 */
	unsigned n;
	struct {
		char comm[16];
		unsigned count;
	} names[WRAPPER_NAMES_MAX];
};

struct session {
	const struct cli_opts *opts;
	struct frame_table *frames;
	struct symbolizer *sym;
	struct sampler *sampler;
	struct trace *trace;
	/* The report at the end (not printed with -q), and the findings the trace gets. */
	struct trace_summary *summary;
	char output[4096];
	struct hashmap *last_stacks; /* tid -> struct last_stack: for waits with no stack */
	struct hashmap *pynames;     /* pid -> Python's names for it, read now and then */
	struct hashmap *unnamed;     /* pid -> struct late_name: an exec's command line to read */
	struct hashmap *wrappers;    /* pid -> a process held back; NULL: none folded */
	struct hashmap *parents;     /* pid -> its parent's pid + 1, for processes forked */
	struct wrapper_names folded;
	bool root_seen, python_shown;
	uint64_t period_ns;
	struct trace_frame stack[MAX_FRAMES];
	uint64_t started_ns, last_progress_ns;
	bool child_reaped; /* the launched command, reaped when its exit was seen */
	int child_status;
	bool progress_shown;
	int record_errors;
	uint64_t stop_seen_ns;	  /* when a stop request was first seen; 0: none */
	uint64_t processed_ns;	  /* time of the last record processed */
	uint64_t records_dropped; /* left unprocessed when a stop request's budget ran out */
	bool count_incomplete;	  /* ... at least that many */
	bool had_output;	  /* -o named an existing file (--force) ... */
	struct stat old_output;	  /* ... this one */
};

/* The name the trace gives a process (@tid 0) or thread, or NULL; setting it. */
const char *session__name(struct session *s, uint32_t pid, uint32_t tid);
void session__set_name(struct session *s, uint32_t pid, uint32_t tid, const char *name);

/*
 * Python's own names (cli/pynames.c): threading's thread names and multiprocessing's
 * process name, read from outside as records of a Python process go out.
 */
void pynames__observe(struct session *s, const struct sampler_rec *r);
void pynames__tick(struct session *s, uint64_t now_ns); /* reads again what is due */
void pynames__gone(struct session *s, uint32_t pid);
/* Whether @tid's name is Python's: not one a new thread inherits, as it does a comm. */
bool pynames__named(struct session *s, uint32_t pid, uint32_t tid);
/* Names a thread by the threading name the sampler read as it arrived (SREC_PYNAME). */
void pynames__name_thread(struct session *s, uint32_t pid, uint32_t tid, const char *name);
void pynames__free_all(struct session *s);

/* Names process @pid from @cmdline (its short name) and keeps the whole line with it. */
void session__name_command(struct session *s, uint32_t pid, const char *cmdline);

/*
 * Wrappers (cli/wrappers.c): a launched command's processes that only exec or wait,
 * held back from the trace until they show they are more, else folded. Called before
 * and after each record is dispatched; wrappers__end() before the trace is closed.
 */
void wrappers__before(struct session *s, const struct sampler_rec *r);
void wrappers__after(struct session *s, const struct sampler_rec *r);
void wrappers__end(struct session *s);
/* "N wrapper processes folded ...", if any. */
void wrappers__print(const struct session *s, FILE *f);

/* A file name from the command and the time that names no existing file. */
void session__default_output(const struct cli_opts *o, char *buf, size_t size);

/*
 * Creates the temporary output after checking -o (under sudo, @as_user: a place that
 * user could write, the file given to them by descriptor); -1 to go on, or an exit status.
 */
int session__open_output(struct session *s, const struct sampler_creds *as_user);

/* Ends the trace and says how it went; returns 0, or the exit status of a failure. */
int session__close_output(struct session *s);

/* The progress line on a terminal (at most twice a second unless @force), and its end. */
void session__show_progress(struct session *s, bool force);
void session__clear_progress(struct session *s);

#endif
