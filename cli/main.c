/* pytrace-sample's command line: parses options and wires the stages together. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

#ifndef PYTRACE_VERSION
#define PYTRACE_VERSION "unknown"
#endif

enum exit_code {
	EXIT_USAGE = 2,
	EXIT_UNSUPPORTED = 3,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pytrace-sample [options] -- CMD [ARGS...]   launch CMD and trace its process tree\n"
		"       pytrace-sample [options] -p PID[,PID...]    attach to running processes\n"
		"\n"
		"Samples the stacks of every thread of a process tree and writes a time-ordered\n"
		"flame chart (Chrome Trace Event Format) to open in ui.perfetto.dev or the\n"
		"Chrome DevTools Performance panel.\n"
		"\n"
		"options:\n"
		"  -h, --help       show this help and exit\n"
		"  -V, --version    print the version and exit\n"
		"  -v, --verbose    more diagnostics on stderr (repeat for debug output)\n"
		"\n"
		"This build has the trace stage only: sampling arrives with the perf backend.\n");
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 },
	};
	int verbosity = 0, c;

	while ((c = getopt_long(argc, argv, "+hVv", long_opts, NULL)) != -1) {
		switch (c) {
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("pytrace-sample %s\n", PYTRACE_VERSION);
			return 0;
		case 'v':
			verbosity++;
			break;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	log_set_level(verbosity >= 2 ? LOG_DEBUG : verbosity ? LOG_INFO : LOG_WARN);
	fprintf(stderr, "pytrace-sample: no sampling backend in this build yet\n");
	return EXIT_UNSUPPORTED;
}
