/*
 * Fuzzes `pytrace-sample report FILE`: a Trace Event JSON trace (gzip'd or not) someone
 * sent, read back by trace_summary__read_json() (trace/json_read.c) and turned into the
 * report and its JSON (trace/summary.c, analyze/), printed to /dev/null.
 */
#include "fuzz.h"

#include "../../trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static FILE *devnull;
	struct trace_summary *s;
	char path[64];

	if (!devnull)
		devnull = fopen("/dev/null", "w");
	if (!devnull || fuzz_file(data, size, path, sizeof(path)) < 0)
		return 0;
	s = trace_summary__new();
	if (!s)
		return 0;
	if (!trace_summary__read_json(s, path)) {
		trace_summary__print(s, devnull);
		trace_summary__print_json(s, devnull);
	}
	trace_summary__free(s);
	return 0;
}
