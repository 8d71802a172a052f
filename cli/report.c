/* pytrace-sample report [--json] TRACE: the end-of-run report of a written trace. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && !strcmp(s + n - m, suffix);
}

/*
 * Whether @path is a Perfetto trace: by its first bytes (a JSON trace starts with '{' or,
 * gzip'd, 1f 8b; a Perfetto trace with a TracePacket's tag, 0x0a), else by its name.
 */
static bool is_pftrace(const char *path)
{
	unsigned char head[2];
	FILE *f = fopen(path, "rb");
	size_t n = f ? fread(head, 1, sizeof(head), f) : 0;

	if (f)
		fclose(f);
	if (n >= 1 && head[0] == '{')
		return false;
	if (n == 2 && head[0] == 0x1f && head[1] == 0x8b)
		return false;
	if (n >= 1 && head[0] == 0x0a)
		return true;
	return ends_with(path, ".pftrace") || ends_with(path, ".perfetto-trace");
}

int cli_report(const char *path, bool json)
{
	struct trace_summary *s = trace_summary__new();
	bool pftrace = is_pftrace(path);
	int err, status = 0;

	if (!s)
		return EXIT_INTERNAL;
	err = pftrace ? trace_summary__read_pftrace(s, path) : trace_summary__read_json(s, path);
	if (err == -EINVAL) {
		fprintf(stderr,
			"pytrace-sample: %s is not a %s trace (report reads .json, .json.gz and "
			".pftrace traces)\n",
			path, pftrace ? "Perfetto" : "Trace Event JSON");
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
