/* Internal to cli/: the options of one run and the recording loop. */
#ifndef PYTRACE_CLI_CLI_H
#define PYTRACE_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../sampler/sampler.h"
#include "../trace/trace.h"

/* Exit codes of our own failures (sysexits.h values); a launched CMD's status otherwise. */
enum cli_exit {
	EXIT_USAGE = 64,
	EXIT_NOT_A_TRACE = 65, /* report: the file is not a trace we can read */
	EXIT_NO_PROCESS = 66,
	EXIT_UNAVAILABLE = 69,
	EXIT_INTERNAL = 70,
	EXIT_CANT_CREATE = 73,
	EXIT_CUT_SHORT = 74, /* the trace was written, but cut short by a write error */
	EXIT_NO_PERMISSION = 77,
	EXIT_NOT_EXECUTABLE = 126,
	EXIT_NOT_FOUND = 127,
	EXIT_INTERRUPTED = 130, /* Ctrl-C before the command ran, or while waiting for it */
};

struct cli_opts {
	struct sampler_opts sampler;
	const char *output; /* NULL: a new name from the command and the time */
	bool force;	    /* replace an existing output file */
	enum trace_format format;
	double duration_s; /* 0: until the tree exits or Ctrl-C */
	bool quiet;
	int verbosity;
	pid_t *pids;
	size_t npids;
	char **argv;	    /* the command to launch, or NULL */
	bool dump;	    /* the dump subcommand */
	const char *report; /* the report subcommand's trace, or NULL */
	bool report_json;   /* report --json: the findings and pools as JSON */
	bool flat;	    /* --flat */
	uint64_t max_bytes; /* --max-size; 0: none */
	bool all_processes; /* --all-processes: no wrapper folded */
	bool native;	    /* native frames too */
};

/* Prints the Python stacks of the -p trees once; returns the exit status. */
int cli_dump(const struct cli_opts *opts);

/* Prints the report of a written JSON trace (@json: its findings as JSON); the exit status. */
int cli_report(const char *path, bool json);

/* Runs one recording from start to summary; returns the process exit status. */
int cli_record(const struct cli_opts *opts);

#endif
