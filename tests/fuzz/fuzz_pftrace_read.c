/*
 * Fuzzes `pytrace-sample report FILE.pftrace`: a Perfetto trace someone sent, read back by
 * trace_summary__read_pftrace() (trace/pftrace_read.c) and turned into the report and its
 * JSON, printed to /dev/null.
 */
#include "fuzz.h"

#include "../../common/log.h"
#include "../../trace/trace.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);

/* A file cut short is warned about: not for every input. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	log_set_level(LOG_ERROR);
	return 0;
}

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
	if (!trace_summary__read_pftrace(s, path)) {
		trace_summary__print(s, devnull);
		trace_summary__print_json(s, devnull);
	}
	trace_summary__free(s);
	return 0;
}
