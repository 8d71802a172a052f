/* pytrace-sample's command line: parses options and hands them to the recording. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "cli.h"

#ifndef PYTRACE_VERSION
#define PYTRACE_VERSION "unknown"
#endif

static void usage(FILE *f)
{
	fprintf(f,
		"usage: pytrace-sample [options] -- CMD [ARGS...]   launch CMD and trace its whole process tree\n"
		"       pytrace-sample [options] -p PID[,PID...]    attach to running processes and their descendants\n"
		"       pytrace-sample dump -p PID[,PID...]         print every thread's Python stack once\n"
		"       pytrace-sample report [--json] TRACE        print the report of a written trace\n"
		"\n"
		"Samples the stacks of every thread of a process tree and writes a time-ordered flame chart\n"
		"(Chrome Trace Event Format): open it at https://ui.perfetto.dev or in Chrome DevTools >\n"
		"Performance > Load profile. Stops when the traced processes have all exited, after\n"
		"--duration, or on Ctrl-C; the trace written so far is always complete and valid.\n"
		"\n"
		"output:\n"
		"  -o, --output FILE     where to write (default: CMD-YYYYmmdd-HHMMSS.json in the current\n"
		"                        folder, never replacing a file). The ending picks the format:\n"
		"                        .json, .json.gz (gzip'd), .pftrace (Perfetto's protobuf, a third\n"
		"                        of the JSON's size and read as it streams: for long runs;\n"
		"                        ui.perfetto.dev only), .folded (collapsed stacks for flame\n"
		"                        graphs), .svg (a flame graph of the whole run: open it in a\n"
		"                        browser, click to zoom, Ctrl-F to search), .pb.gz (pprof's\n"
		"                        profile, for go tool pprof, Pyroscope, Parca). The last three\n"
		"                        sum stacks over the run: no timeline, no arrows. An existing\n"
		"                        FILE is refused (status 73) unless\n"
		"                        --force; a folder always is. Checked before CMD is started.\n"
		"      --force           replace an existing -o FILE\n"
		"      --format FMT      json, json.gz, perfetto, folded, svg or pprof, whatever the name\n"
		"      --flat            JSON: one process whose rows are every traced thread, named\n"
		"                        \"THREAD (pid PID, tid TID) PROCESS\": denser than a group per\n"
		"                        process, with the original pid and tid in each row's name\n"
		"      --max-size SIZE   stop writing slices, events and arrows once the file holds\n"
		"                        SIZE (e.g. 100M, 2G; gzip'd: its compressed size): the run\n"
		"                        goes on, the report still counts everything, the file stays\n"
		"                        valid and says what it left out (otherData)\n"
		"      --all-processes   show every process: by default a launched command's wrappers,\n"
		"                        processes that only exec or wait and never run Python (a\n"
		"                        pyenv shim and the helpers it runs, env, sh -c, timeout),\n"
		"                        are folded into the process they start, and counted\n"
		"\n"
		"sampling:\n"
		"  -p, --pid PID[,PID...]\n"
		"                        attach to these running processes, their descendants and every\n"
		"                        process they start from then on; they keep running when the\n"
		"                        recording ends\n"
		"  -F, --frequency HZ    samples per second of CPU time per thread (default 1000, at most 100000)\n"
		"      --backend B       auto (default): perf events plus the eBPF reader when it loads\n"
		"                        (root): the kernel reads each Python thread's stack at the\n"
		"                        instant of every sample and every switch-out, so both are\n"
		"                        exact; perf: without it (stacks read from outside, on-CPU\n"
		"                        ones tens of microseconds after the sample, later on a busy\n"
		"                        machine); bpf: require it\n"
		"      --mode MODE       wall (default): whole lives of threads, with off-CPU waits as exact\n"
		"                        spans labelled with why (sleep, lock wait, read, poll, preempted ...);\n"
		"                        cpu: on-CPU samples only\n"
		"      --kernel          add kernel frames; needs root: refused otherwise (status 77)\n"
		"      --native          in Python processes, native frames too: each interpreter frame\n"
		"                        is replaced by the Python frames it was running\n"
		"      --stack-size N    bytes of user stack copied per sample for unwinding (default 16384,\n"
		"                        at least 512, at most 65528, a multiple of 8); deeper native\n"
		"                        frames are cut\n"
		"      --no-args         don't read Python arguments: by default each Python frame's\n"
		"                        parameters (up to 8) are read with it, shown in its slice's\n"
		"                        args (ints, floats, bools, None, the first 64 characters of\n"
		"                        str and bytes, the length of containers, other types by\n"
		"                        name), and a call with other values is another slice;\n"
		"                        a multiprocessing.Pool worker's loop shows its task\n"
		"                        (pool_task, pool_job), a ProcessPoolExecutor worker's its\n"
		"                        work_id, so each task is its own slice\n"
		"      --no-flows        don't draw process pools' tasks as arrows: by default (eBPF)\n"
		"                        each multiprocessing.Pool or ProcessPoolExecutor task gets\n"
		"                        markers where the parent wrote it, a worker read it, the\n"
		"                        worker wrote its result and the parent read that, under\n"
		"                        the stacks then, joined by a flow arrow\n"
		"  -d, --duration SECS   stop after SECS seconds (the command keeps running)\n"
		"\n"
		"dump takes only -p and -v.\n"
		"\n"
		"report: at the end of a recording (unless -q), and with 'report' for a written trace\n"
		"(.json, .json.gz or .pftrace), a short report computed from the trace's slices. First\n"
		"the findings: the causes of slowness found (imbalance, serialization, task-overhead,\n"
		"worker-startup, gil-contention, oversubscription, cpu-starved, lock-contention,\n"
		"io-wait, sleep), each with its share of the work threads' time, its evidence, where to\n"
		"look and what to try; each pool's tasks and workers. Then per process and thread the\n"
		"wall time, the time on a CPU and the waits by reason (sleep, lock wait, read,\n"
		"preempted ...); the functions with the most self time; the longest waits with the\n"
		"stack that waited. 'report --json' prints the findings and pools as one JSON object\n"
		"instead, for scripts (docs/findings.md). Exit status: 0, 64 usage, 65 not a trace, 66\n"
		"no such file.\n"
		"\n"
		"other:\n"
		"  -q, --quiet           no progress line, summary or report, only errors\n"
		"  -v, --verbose         more diagnostics on stderr (twice for debug output)\n"
		"  -h, --help            show this help\n"
		"  -V, --version         print the version\n"
		"\n"
		"Python: CPython 3.8 to 3.15 processes show Python functions (qualified names from 3.11),\n"
		"files and lines, read from outside; nothing is written to or stops the target. As\n"
		"root (eBPF), the kernel reads a thread's Python stack at the instant of each sample\n"
		"and each switch-out: exact. Without root, a wait over ~2 ms is read while the thread\n"
		"cannot move (exact); an on-CPU sample is read as soon as the tool gets a CPU after\n"
		"it, tens of microseconds on an idle machine (approximate: code that ran for less\n"
		"than that may be shown under its neighbour; one read over two periods late gets\n"
		"only what the stacks around it share); a shorter wait gets the frames its thread\n"
		"had both before and after it.\n"
		"\n"
		"Ctrl-C stops the recording within about a second and writes what was processed (a\n"
		"backlog not yet processed is dropped, and the summary and otherData say so); when\n"
		"launching, it then waits for CMD (Ctrl-C again to stop waiting). A Ctrl-C before CMD\n"
		"has started exits with 130 without running it.\n"
		"\n"
		"Files: the trace is written to FILE.pytrace-PID-XXXXXX.tmp next to FILE (PID: this\n"
		"run's) and renamed to FILE when complete; the temporary of a run that was killed is\n"
		"removed by the next run writing into that folder. If the disk fills up, the trace\n"
		"is ended at its last complete event, valid, with otherData.events_lost_to_write_errors\n"
		"saying how much was lost, and the exit status is 74.\n"
		"\n"
		"Permissions: launching needs kernel.perf_event_paranoid <= 2 (Debian's default is 2 or 3);\n"
		"attaching to another user's processes, --kernel and exact off-CPU stacks need root.\n"
		"Under sudo, CMD runs as the invoking user and the trace file belongs to them.\n"
		"\n"
		"Exit status: CMD's own status when launching (128+N if killed by signal N), unless the\n"
		"output failed (73, 74); else 0. Our own: 64 usage, 66 no such process, 69 perf events\n"
		"unavailable, 70 internal error, 73 can't create the output (nothing written), 74 the\n"
		"trace was cut short by a write error (a full disk; the file is valid), 77 permission\n"
		"denied, 126 CMD not executable, 127 CMD not found, 130 interrupted before CMD started\n"
		"or while waiting for it.\n");
}

static int parse_pids(const char *arg, struct cli_opts *o)
{
	const char *p = arg;

	while (*p) {
		char *end;
		long v = strtol(p, &end, 10);
		pid_t *grown;

		if (end == p || v <= 0 || v > 4194304 || (*end && *end != ','))
			return -EINVAL;
		grown = realloc(o->pids, (o->npids + 1) * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		o->pids = grown;
		o->pids[o->npids++] = (pid_t)v;
		p = *end ? end + 1 : end;
	}
	return o->npids ? 0 : -EINVAL;
}

/* "100M", "2G", "512K" or bytes; at least 1 MiB, at most 1 TiB. */
static int parse_size(const char *arg, uint64_t *bytes)
{
	char *end;
	double v;
	uint64_t unit = 1;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || !(v > 0))
		return -EINVAL;
	if (*end == 'K' || *end == 'k')
		unit = 1ULL << 10;
	else if (*end == 'M' || *end == 'm')
		unit = 1ULL << 20;
	else if (*end == 'G' || *end == 'g')
		unit = 1ULL << 30;
	else if (*end)
		return -EINVAL;
	if (*end && end[1] && strcmp(end + 1, "B") && strcmp(end + 1, "iB"))
		return -EINVAL;
	if (v * (double)unit < (double)(1ULL << 20) || v * (double)unit > (double)(1ULL << 40))
		return -EINVAL;
	*bytes = (uint64_t)(v * (double)unit);
	return 0;
}

static int parse_format(const char *arg, enum trace_format *format)
{
	if (!strcmp(arg, "json"))
		*format = TRACE_FORMAT_JSON;
	else if (!strcmp(arg, "json.gz") || !strcmp(arg, "gz"))
		*format = TRACE_FORMAT_JSON_GZ;
	else if (!strcmp(arg, "folded"))
		*format = TRACE_FORMAT_FOLDED;
	else if (!strcmp(arg, "perfetto") || !strcmp(arg, "pftrace"))
		*format = TRACE_FORMAT_PERFETTO;
	else if (!strcmp(arg, "svg"))
		*format = TRACE_FORMAT_SVG;
	else if (!strcmp(arg, "pprof"))
		*format = TRACE_FORMAT_PPROF;
	else
		return -EINVAL;
	return 0;
}

static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int bad_usage(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "pytrace-sample: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'pytrace-sample --help'.\n");
	return EXIT_USAGE;
}

/* The long name of short option @c. */
static const char *short_name(int c, const struct option *opts)
{
	for (; opts->name; opts++) {
		if (opts->val == c)
			return opts->name;
	}
	return "?";
}

/* Fills @o from the command line; returns -1 to go on, or an exit status. */
static int parse_args(int argc, char **argv, struct cli_opts *o)
{
	enum {
		OPT_FORMAT = 256,
		OPT_MODE,
		OPT_KERNEL,
		OPT_STACK,
		OPT_NATIVE,
		OPT_BACKEND,
		OPT_FORCE,
		OPT_FLAT,
		OPT_NO_ARGS,
		OPT_NO_FLOWS,
		OPT_ALL_PROCESSES,
		OPT_MAX_SIZE
	};
	static const struct option long_opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "force", no_argument, NULL, OPT_FORCE },
		{ "flat", no_argument, NULL, OPT_FLAT },
		{ "all-processes", no_argument, NULL, OPT_ALL_PROCESSES },
		{ "max-size", required_argument, NULL, OPT_MAX_SIZE },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "frequency", required_argument, NULL, 'F' },
		{ "mode", required_argument, NULL, OPT_MODE },
		{ "kernel", no_argument, NULL, OPT_KERNEL },
		{ "native", no_argument, NULL, OPT_NATIVE },
		{ "no-args", no_argument, NULL, OPT_NO_ARGS },
		{ "no-flows", no_argument, NULL, OPT_NO_FLOWS },
		{ "backend", required_argument, NULL, OPT_BACKEND },
		{ "stack-size", required_argument, NULL, OPT_STACK },
		{ "duration", required_argument, NULL, 'd' },
		{ "pid", required_argument, NULL, 'p' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *not_for_dump = NULL; /* the first option seen that dump does not use */
	char *end;
	int c, index;

	if (argc > 1 && !strcmp(argv[1], "report")) {
		o->report_json = argc == 4 && !strcmp(argv[2], "--json");
		if (argc != 3 + o->report_json || argv[argc - 1][0] == '-')
			return bad_usage("%s", "usage: pytrace-sample report [--json] TRACE");
		o->report = argv[argc - 1];
		return -1;
	}
	if (argc > 1 && !strcmp(argv[1], "dump")) {
		o->dump = true;
		argv++;
		argc--;
	}
	while ((index = -1, c = getopt_long(argc, argv, "+o:F:d:p:qvhV", long_opts, &index)) !=
	       -1) {
		if (!not_for_dump && c != 'p' && c != 'v' && c != 'h' && c != 'V' && c != '?')
			not_for_dump =
				index >= 0 ? long_opts[index].name : short_name(c, long_opts);
		switch (c) {
		case 'o':
			o->output = optarg;
			break;
		case OPT_FORCE:
			o->force = true;
			break;
		case OPT_ALL_PROCESSES:
			o->all_processes = true;
			break;
		case OPT_MAX_SIZE:
			if (parse_size(optarg, &o->max_bytes))
				return bad_usage("bad size '%s' (e.g. 100M, 2G; at least 1M)",
						 optarg);
			break;
		case OPT_FLAT:
			o->flat = true;
			break;
		case OPT_FORMAT:
			if (parse_format(optarg, &o->format))
				return bad_usage(
					"unknown format '%s' (json, json.gz, perfetto, folded, svg "
					"or pprof)",
					optarg);
			break;
		case 'F': {
			long hz = strtol(optarg, &end, 10);

			if (*end || hz < 1 || hz > 100000)
				return bad_usage("bad frequency '%s' (1 to 100000 Hz)", optarg);
			o->sampler.frequency_hz = (uint32_t)hz;
			break;
		}
		case OPT_MODE:
			if (!strcmp(optarg, "wall"))
				o->sampler.mode = SAMPLER_MODE_WALL;
			else if (!strcmp(optarg, "cpu"))
				o->sampler.mode = SAMPLER_MODE_CPU;
			else
				return bad_usage("unknown mode '%s' (wall or cpu)", optarg);
			break;
		case OPT_KERNEL:
			o->sampler.kernel_stacks = true;
			break;
		case OPT_NO_ARGS:
			o->sampler.read_args = false;
			break;
		case OPT_NO_FLOWS:
			o->sampler.read_messages = false;
			break;
		case OPT_NATIVE:
			o->native = true;
			o->sampler.native = true;
			break;
		case OPT_BACKEND:
			if (!strcmp(optarg, "auto"))
				o->sampler.backend = SAMPLER_BACKEND_AUTO;
			else if (!strcmp(optarg, "perf"))
				o->sampler.backend = SAMPLER_BACKEND_PERF;
			else if (!strcmp(optarg, "bpf"))
				o->sampler.backend = SAMPLER_BACKEND_BPF;
			else
				return bad_usage("unknown backend '%s' (auto, perf or bpf)",
						 optarg);
			break;
		case OPT_STACK: {
			long n = strtol(optarg, &end, 10);

			if (*end || n < 512 || n > 65528 || n % 8)
				return bad_usage(
					"bad stack size '%s' (512 to 65528, a multiple of 8)",
					optarg);
			o->sampler.stack_bytes = (uint32_t)n;
			break;
		}
		case 'd':
			o->duration_s = strtod(optarg, &end);
			if (*end || !(o->duration_s > 0))
				return bad_usage("bad duration '%s' (seconds, > 0)", optarg);
			break;
		case 'p':
			if (parse_pids(optarg, o))
				return bad_usage("bad pid list '%s' (e.g. 1234 or 1234,5678)",
						 optarg);
			break;
		case 'q':
			o->quiet = true;
			break;
		case 'v':
			o->verbosity++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("pytrace-sample %s\n", PYTRACE_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'pytrace-sample --help'.\n");
			return EXIT_USAGE;
		}
	}
	if (optind < argc)
		o->argv = argv + optind;
	if (o->dump && not_for_dump)
		return bad_usage("dump does not take --%s (only -p PID and -v)", not_for_dump);
	if (o->dump && (o->argv || !o->npids))
		return bad_usage("%s", "dump needs -p PID and no command");
	if (!o->argv == !o->npids)
		return bad_usage("%s",
				 o->npids ? "give either -p PID or -- CMD, not both"
					  : "nothing to trace: give -- CMD [ARGS...] or -p PID");
	return -1;
}

int main(int argc, char **argv)
{
	struct cli_opts opts = {
		.sampler = {
			.frequency_hz = 1000,
			.read_args = true,
			.read_messages = true,
			.mode = SAMPLER_MODE_WALL,
			.stack_bytes = 16384,
		},
	};
	int status = parse_args(argc, argv, &opts);

	if (status < 0) {
		log_set_level(opts.verbosity >= 2 ? LOG_DEBUG
			      : opts.verbosity	  ? LOG_INFO
						  : LOG_WARN);
		/* Never ask a debuginfod server: no network, and no waiting on one. */
		unsetenv("DEBUGINFOD_URLS");
		status = opts.report ? cli_report(opts.report, opts.report_json)
			 : opts.dump ? cli_dump(&opts)
				     : cli_record(&opts);
	}
	free(opts.pids);
	return status;
}
