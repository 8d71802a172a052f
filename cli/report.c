/* pytrace-sample report [--json] TRACE: the end-of-run report of a written JSON trace. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_report(const char *path, bool json)
{
	struct trace_summary *s = trace_summary__new();
	int err, status = 0;

	if (!s)
		return EXIT_INTERNAL;
	err = trace_summary__read_json(s, path);
	if (err == -EINVAL) {
		fprintf(stderr,
			"pytrace-sample: %s is not a Trace Event JSON trace (report reads .json "
			"and .json.gz traces)\n",
			path);
		status = EXIT_NOT_A_TRACE;
	} else if (err == -ENOMEM) {
		fprintf(stderr, "pytrace-sample: out of memory reading %s\n", path);
		status = EXIT_INTERNAL;
	} else if (err) {
		fprintf(stderr, "pytrace-sample: cannot read %s: %s\n", path, strerror(-err));
		status = EXIT_NO_PROCESS; /* 66: no input */
	} else if (json ? trace_summary__print_json(s, stdout) : trace_summary__print(s, stdout)) {
		status = EXIT_INTERNAL;
	}
	trace_summary__free(s);
	return status;
}
