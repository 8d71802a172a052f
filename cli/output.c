/* One recording's output: -o checked, the trace opened and closed, progress and summary. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libgen.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../analyze/analyze.h"
#include "../common/log.h"
#include "../common/target_file.h"
#include "session.h"

/* A file name from the command and the time that names no existing file. */
void session__default_output(const struct cli_opts *o, char *buf, size_t size)
{
	const char *ext = o->format == TRACE_FORMAT_JSON_GZ    ? ".json.gz"
			  : o->format == TRACE_FORMAT_FOLDED   ? ".folded"
			  : o->format == TRACE_FORMAT_PERFETTO ? ".pftrace"
			  : o->format == TRACE_FORMAT_SVG      ? ".svg"
			  : o->format == TRACE_FORMAT_PPROF    ? ".pb.gz"
							       : ".json";
	char base[128], stamp[32];
	time_t now = time(NULL);
	struct stat st;
	int i;

	if (o->argv) {
		const char *slash = strrchr(o->argv[0], '/');

		snprintf(base, sizeof(base), "%s", slash ? slash + 1 : o->argv[0]);
	} else {
		snprintf(base, sizeof(base), "pid%d", o->pids[0]);
	}
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
	snprintf(buf, size, "%s-%s%s", base, stamp, ext);
	for (i = 2; !stat(buf, &st) && i < 1000; i++)
		snprintf(buf, size, "%s-%s-%d%s", base, stamp, i, ext);
}

void session__show_progress(struct session *s, bool force)
{
	struct sampler_stats st;
	uint64_t now = sampler_now_ns();

	if (s->opts->quiet || !isatty(STDERR_FILENO))
		return;
	if (!force && now - s->last_progress_ns < 500000000ULL)
		return;
	s->last_progress_ns = now;
	sampler__stats(s->sampler, &st);
	fprintf(stderr,
		"\r\033[Kpytrace-sample: %u processes, %u threads | %" PRIu64 " samples, %" PRIu64
		" waits | %" PRIu64 " lost | %.1f s (Ctrl-C to stop)",
		st.processes, st.threads, st.samples, st.off_cpu_spans,
		st.lost_records + st.lost_samples, (double)(now - s->started_ns) / 1e9);
	s->progress_shown = true;
}

void session__clear_progress(struct session *s)
{
	if (s->progress_shown)
		fprintf(stderr, "\r\033[K");
	s->progress_shown = false;
}

static enum trace_format format_of(const struct session *s)
{
	return s->opts->format ? s->opts->format : trace_format__from_path(s->output);
}

static void print_summary(struct session *s, int close_err, bool written,
			  const struct trace_stats *ts)
{
	struct sampler_stats st;
	uint64_t late;
	struct symbolizer_stats sy;

	sampler__stats(s->sampler, &st);
	symbolizer__stats(s->sym, &sy);
	session__clear_progress(s);
	if (s->records_dropped || s->count_incomplete) {
		uint64_t until = s->processed_ns > s->started_ns ? s->processed_ns : s->started_ns;

		fprintf(stderr,
			"pytrace-sample: stopped before working through the backlog: %s%" PRIu64
			" records, the last %.1f s of the recording, were dropped\n",
			s->count_incomplete ? "at least " : "", s->records_dropped,
			s->stop_seen_ns > until ? (double)(s->stop_seen_ns - until) / 1e9 : 0.0);
	}
	if (close_err && !written) {
		fprintf(stderr, "pytrace-sample: writing %s failed: %s; nothing was written\n",
			s->output, strerror(-close_err));
		return;
	}
	if (close_err)
		fprintf(stderr,
			"pytrace-sample: writing %s failed (%s): the trace ends at its last complete "
			"event; %" PRIu64 " events were lost (%s.events_lost_to_write_errors)\n",
			s->output, strerror(-close_err), ts->lost_to_write_errors,
			format_of(s) == TRACE_FORMAT_PERFETTO ? "statistics" : "otherData");
	if (!close_err && s->opts->quiet)
		return;
	if (s->summary)
		trace_summary__print(s->summary, stderr);
	fprintf(stderr,
		"pytrace-sample: wrote %s: %" PRIu64 " %s from %u processes, %u threads; %" PRIu64
		" samples, %" PRIu64 " off-CPU spans; %" PRIu64 " lost\n",
		s->output, trace_format__aggregated(format_of(s)) ? ts->stacks : ts->slices,
		trace_format__aggregated(format_of(s)) ? "distinct stacks" : "slices",
		st.processes_seen > s->folded.processes ? st.processes_seen - s->folded.processes
							: 0,
		st.threads_seen > s->folded.threads ? st.threads_seen - s->folded.threads : 0,
		st.samples, st.off_cpu_spans, st.lost_records + st.lost_samples);
	wrappers__print(s, stderr);
	if (ts->over_budget)
		fprintf(stderr,
			"pytrace-sample: the trace reached --max-size %.1f MB %.1f s into the run: "
			"%" PRIu64 " slices, events and arrows after that are in the report but "
			"not in the file (otherData.not_written_past_max_size)\n",
			(double)s->opts->max_bytes / 1e6,
			ts->over_budget_from_ns > s->started_ns
				? (double)(ts->over_budget_from_ns - s->started_ns) / 1e9
				: 0.0,
			ts->over_budget);
	if (st.lost_records + st.lost_samples)
		fprintf(stderr,
			"pytrace-sample: the kernel dropped records: lower -F or --stack-size\n");
	if (st.kernel_events_lost + st.kernel_samples_lost)
		fprintf(stderr,
			"pytrace-sample: %" PRIu64
			" Python stacks read by the kernel were lost (%" PRIu64
			" with its buffer full, %" PRIu64
			" of processes not yet known to run Python)\n",
			st.kernel_events_lost + st.kernel_samples_lost, st.kernel_events_lost,
			st.kernel_samples_lost);
	/*
	 * Stacks read from outside: say when the requested rate was not delivered, i.e.
	 * more than a tenth of them were read too late to stand for their samples.
	 */
	late = st.late_walks > st.late_reads_mended ? st.late_walks - st.late_reads_mended : 0;
	if (st.sample_walks >= 100 && late * 10 > st.sample_walks)
		fprintf(stderr,
			"pytrace-sample: %" PRIu64 " of %" PRIu64
			" Python stacks read from outside came over two sampling periods after "
			"their samples, after their threads ran on (a busy machine or too high a "
			"rate), and those samples show only what the stacks around them share: "
			"lower -F%s\n",
			late, st.sample_walks,
			st.kernel_samples ? "" : ", or run as root for the eBPF reader");
	if (st.throttled)
		fprintf(stderr,
			"pytrace-sample: the kernel throttled sampling %" PRIu64
			" times (kernel.perf_event_max_sample_rate): fewer samples than -F asked\n",
			st.throttled);
	if (st.cut_stacks)
		fprintf(stderr,
			"pytrace-sample: %" PRIu64
			" Python stacks deeper than %u frames kept their "
			"root-most %u (%" PRIu64 " frames cut in all%s)\n",
			st.cut_stacks, CPYTHON_MAX_FRAMES, CPYTHON_MAX_FRAMES, st.cut_frames,
			st.rootless_stacks ? "; some deeper than could be read, their root missing"
					   : "");
	/* A few at start-up and shutdown are usual (a frame half made); most are not. */
	if (sy.interleave_mismatches * 2 > sy.stacks)
		fprintf(stderr,
			"pytrace-sample: --native: in %" PRIu64
			" stacks the interpreter's eval loop had no name (a stripped CPython, "
			"such as a distribution's without its debug symbols): they show their "
			"Python frames alone (otherData.native_interleave_mismatches)\n",
			sy.interleave_mismatches);
	if (ts->slices_too_deep)
		fprintf(stderr,
			"pytrace-sample: %" PRIu64 " slices deeper than %u levels were left out, "
			"the root-most kept (%s.slices_too_deep)\n",
			ts->slices_too_deep, TRACE_DEFAULT_MAX_DEPTH,
			format_of(s) == TRACE_FORMAT_PERFETTO ? "statistics" : "otherData");
	if (format_of(s) == TRACE_FORMAT_PERFETTO)
		fprintf(stderr, "  open it at https://ui.perfetto.dev (Open trace file)\n");
	else if (format_of(s) == TRACE_FORMAT_SVG)
		fprintf(stderr,
			"  open it in a browser: click a frame to zoom, Ctrl-F to search\n");
	else if (format_of(s) == TRACE_FORMAT_PPROF)
		fprintf(stderr, "  read it with: go tool pprof -top %s\n", s->output);
	else if (format_of(s) != TRACE_FORMAT_FOLDED)
		fprintf(stderr, "  open it at https://ui.perfetto.dev (Open trace file) or in "
				"Chrome DevTools > Performance > Load profile\n");
	pr_info("symbolizer: %" PRIu64 " stacks, %" PRIu64 " frames, %" PRIu64 " unknown, %" PRIu64
		" truncated, %" PRIu64 " modules of %" PRIu64 " ELF files, name cache %" PRIu64
		"/%" PRIu64,
		sy.stacks, sy.frames, sy.unknown_frames, sy.truncated_stacks, sy.modules_loaded,
		sy.images_opened, sy.pc_cache_hits, sy.pc_cache_hits + sy.pc_cache_misses);
}

/* The tool's own CPU time so far, its threads' (not the target's). */
static uint64_t tool_cpu_ns(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ULL +
	       ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ULL;
}

static void note_losses(struct session *s)
{
	struct sampler_stats st;
	struct symbolizer_stats sy;
	uint64_t tool_ns = tool_cpu_ns(); /* one figure: the report and the file agree */

	sampler__stats(s->sampler, &st);
	symbolizer__stats(s->sym, &sy);
	trace__note(s->trace, "samples", st.samples);
	trace__note(s->trace, "cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
	trace__note(s->trace, "tool_cpu_ns", tool_ns);
	if (s->folded.processes)
		trace__note(s->trace, "wrapper_processes_folded", s->folded.processes);
	if (frame_table__losses(s->frames))
		trace__note(s->trace, "frames_past_table_bound", frame_table__losses(s->frames));
	if (s->summary)
		trace_summary__tool_cpu(s->summary, tool_ns);
	trace__note(s->trace, "off_cpu_spans", st.off_cpu_spans);
	trace__note(s->trace, "lost_records", st.lost_records);
	trace__note(s->trace, "lost_samples", st.lost_samples);
	trace__note(s->trace, "throttled", st.throttled);
	trace__note(s->trace, "kernel_switch_stacks", st.kernel_switch_stacks);
	trace__note(s->trace, "kernel_switch_misses", st.kernel_switch_misses);
	trace__note(s->trace, "kernel_switches_early", st.kernel_switches_early);
	trace__note(s->trace, "kernel_args_of_parent", st.kernel_args_of_parent);
	trace__note(s->trace, "kernel_samples", st.kernel_samples);
	trace__note(s->trace, "kernel_samples_lost", st.kernel_samples_lost);
	trace__note(s->trace, "kernel_events_lost", st.kernel_events_lost);
	trace__note(s->trace, "kernel_read_errors", st.kernel_read_errors);
	trace__note(s->trace, "python_cut_stacks", st.cut_stacks);
	{
		uint64_t codes, tables;

		cpython_cache_losses(&codes, &tables);
		trace__note(s->trace, "python_codes_not_kept", codes);
		trace__note(s->trace, "python_linetables_not_kept", tables);
		trace__note(s->trace, "target_files_refused", target_files_refused());
	}
	trace__note(s->trace, "python_cut_frames", st.cut_frames);
	trace__note(s->trace, "python_rootless_stacks", st.rootless_stacks);
	trace__note(s->trace, "exits_assumed", st.exits_assumed);
	trace__note(s->trace, "frames_args_not_kept", st.args_not_kept);
	trace__note(s->trace, "args_lists_lost", sy.python_args_lost);
	trace__note(s->trace, "kernel_empty_walks", st.kernel_empty_walks);
	trace__note(s->trace, "kernel_threads_found", st.kernel_threads_found);
	trace__note(s->trace, "kernel_forks_followed", st.kernel_forks_followed);
	trace__note(s->trace, "kernel_messages", st.kernel_messages);
	trace__note(s->trace, "pool_messages", st.pool_messages);
	trace__note(s->trace, "python_walks", st.python_walks);
	trace__note(s->trace, "sample_python_walks", st.sample_walks);
	trace__note(s->trace, "prompt_python_walks", st.prompt_walks);
	trace__note(s->trace, "late_python_walks", st.late_walks);
	trace__note(s->trace, "late_python_bracketed", st.bracketed_samples);
	trace__note(s->trace, "unpaired_switches", st.unpaired_switches);
	trace__note(s->trace, "stale_captures", st.stale_captures);
	trace__note(s->trace, "late_reads_in_waits", st.late_reads_in_waits);
	trace__note(s->trace, "late_reads_mended", st.late_reads_mended);
	trace__note(s->trace, "reads_after_blocks", st.reads_after_blocks);
	trace__note(s->trace, "reads_overtaken", st.reads_overtaken);
	trace__note(s->trace, "messages_restamped", st.messages_restamped);
	trace__note(s->trace, "frequency_hz", s->opts->sampler.frequency_hz);
	trace__note(s->trace, "unknown_native_frames", sy.unknown_frames);
	trace__note(s->trace, "native_interleave_mismatches", sy.interleave_mismatches);
	trace__note(s->trace, "stacks_without_user_state", sy.no_user_state);
	trace__note(s->trace, "record_errors", (uint64_t)s->record_errors);
	if (s->records_dropped || s->count_incomplete) {
		/* Stopped with a backlog: the trace ends at processed_until_ns. */
		trace__note(s->trace, "records_dropped_at_stop", s->records_dropped);
		trace__note(s->trace, "processed_until_ns", s->processed_ns);
	}
}

/* What the invoking user is asked under sudo: could they write -o themselves? */
struct write_check {
	const char *dir;
	const struct stat *existing; /* the file --force replaces, or NULL */
	uid_t uid;
};

/*
 * Run as them (so ACLs and supplementary groups count as the kernel counts them): 0 when
 * they could make the file, or replace the one there (a sticky folder such as /tmp lets
 * one replace only one's own). Root writes it and gives it to them: without this,
 * `sudo pytrace-sample --force -o /etc/passwd` would hand them any file.
 */
static int user_could_write(void *arg)
{
	const struct write_check *c = arg;
	struct stat dir;

	if (access(c->dir, W_OK | X_OK))
		return 1;
	return c->existing && !stat(c->dir, &dir) && (dir.st_mode & S_ISVTX) &&
	       c->existing->st_uid != c->uid && dir.st_uid != c->uid;
}

/*
 * Checks -o before anything runs: a name, not a folder, not an existing file unless
 * --force, under sudo a place its user may write; removes temporaries that killed runs
 * left in its folder. -1 to go on, or an exit status.
 */
static int check_output(struct session *s, const struct sampler_creds *as_user)
{
	const struct cli_opts *o = s->opts;
	struct stat st;
	int removed;

	if (o->output && !*o->output) {
		fprintf(stderr, "pytrace-sample: -o needs a file name\n");
		return EXIT_CANT_CREATE;
	}
	if (o->output && !stat(s->output, &st)) {
		if (S_ISDIR(st.st_mode)) {
			fprintf(stderr,
				"pytrace-sample: cannot write to %s: it is a folder (name a file, e.g. %s/trace.json)\n",
				s->output, s->output);
			return EXIT_CANT_CREATE;
		}
		if (!S_ISREG(st.st_mode)) {
			fprintf(stderr, "pytrace-sample: cannot write to %s: not a regular file\n",
				s->output);
			return EXIT_CANT_CREATE;
		}
		if (!o->force) {
			fprintf(stderr,
				"pytrace-sample: %s already exists: add --force to replace it, or choose another name\n",
				s->output);
			return EXIT_CANT_CREATE;
		}
		s->had_output = true;
		s->old_output = st;
	}
	if (as_user) {
		char *copy = strdup(s->output);
		struct write_check c = { copy ? dirname(copy) : ".", s->had_output ? &st : NULL,
					 as_user->uid };
		const char *step;
		int err = sampler_as_user(as_user, user_could_write, &c, &step);

		free(copy);
		if (err == 1) {
			fprintf(stderr,
				"pytrace-sample: refusing to %s %s for uid %d: that user could not "
				"%s it themselves (the trace is theirs; name a file in a folder they "
				"may write)\n",
				s->had_output ? "replace" : "create", s->output, (int)as_user->uid,
				s->had_output ? "replace" : "create");
			return EXIT_CANT_CREATE;
		}
		if (err) {
			fprintf(stderr,
				"pytrace-sample: cannot act as uid %d to check %s: %s%s%s\n",
				(int)as_user->uid, s->output, step ? step : "",
				step ? " failed: " : "", strerror(-err));
			return EXIT_NOT_EXECUTABLE; /* as when the command can't be run as them */
		}
	}
	removed = trace_remove_stale_temps(s->output);
	if (removed > 0 && !o->quiet)
		fprintf(stderr,
			"pytrace-sample: removed %d temporary file%s (*.pytrace-PID-*.tmp) left by "
			"killed runs\n",
			removed, removed > 1 ? "s" : "");
	return -1;
}

/*
 * How long a thread may go unobserved before its open calls are closed. With --mode cpu
 * a silence is time off the CPU: two periods. In wall mode leaving the CPU is recorded,
 * so a silence with the same calls at both ends is time the thread held the CPU but was
 * not sampled: interrupts held off, its switch records late (the kernel's reader saw
 * the switch first). Under a CPU hog here such silences reached 4.1 ms, about one run
 * in ten, and closing at 2 ms split a job's slice in two. Only lost records (counted,
 * and said at the end) leave a longer silence unexplained: 100 ms bounds what is
 * bridged then.
 */
static uint64_t silence_ns(const struct cli_opts *o)
{
	return o->sampler.mode == SAMPLER_MODE_WALL ? 100000000ULL : 0;
}

/* Creates the temporary output; -1 to go on, or an exit status. */
int session__open_output(struct session *s, const struct sampler_creds *as_user)
{
	const struct cli_opts *o = s->opts;
	struct trace_opts topts = {
		.path = s->output,
		.format = o->format,
		.period_ns = 1000000000ULL / o->sampler.frequency_hz,
		.gap_ns = silence_ns(o),
		.origin_ns = sampler_now_ns(),
		.frames = s->frames,
		.summary = s->summary,
		.flat = o->flat,
		.max_bytes = o->max_bytes,
	};
	int status = check_output(s, as_user);

	if (status >= 0)
		return status;
	/* Created now, so an unwritable destination fails before anything runs. */
	s->trace = trace__open(&topts);
	if (!s->trace) {
		int err = errno;

		fprintf(stderr, "pytrace-sample: cannot create %s: %s%s\n", s->output,
			strerror(err),
			err == ENOSPC ? " (about 130 KiB must be free to start)" : "");
		return EXIT_CANT_CREATE;
	}
	/* Theirs from the start, by descriptor: the path is never followed as root. */
	if (as_user && (status = trace__chown(s->trace, as_user->uid, as_user->gid)))
		pr_warn("could not give %s to uid %d: %s", s->output, as_user->uid,
			strerror(-status));
	return -1;
}

/* True when the trace is at its destination: a file that was not there before. */
static bool output_written(const struct session *s)
{
	struct stat st;

	if (stat(s->output, &st))
		return false;
	return !s->had_output || st.st_dev != s->old_output.st_dev ||
	       st.st_ino != s->old_output.st_ino;
}

/* Ends the trace and says how it went; returns 0, or the exit status of a failure. */
/*
 * The findings, into the trace beside what they are about: the slices all ended first,
 * so the analysis has seen them. 0 or -errno (the trace is still closed).
 */
static int write_findings(struct session *s)
{
	const struct analysis *a;
	const struct finding *f;
	size_t n, i;
	int err = trace__end_slices(s->trace);

	if (err || !s->summary || !(a = trace_summary__analysis(s->summary)))
		return err;
	n = analysis__findings(a, &f);
	for (i = 0; i < n && !err; i++) {
		const struct trace_finding tf = {
			.rank = (uint32_t)i + 1,
			.kind = finding_kind__name(f[i].kind),
			.share = f[i].share,
			.start_ns = f[i].start_ns,
			.end_ns = f[i].end_ns,
			.title = f[i].title,
			.evidence = f[i].evidence,
			.where = f[i].where,
			.hint = f[i].hint,
		};

		err = trace__finding(s->trace, &tf);
	}
	return err;
}

int session__close_output(struct session *s)
{
	struct trace_stats ts;
	int err, findings_err, status = 0;
	bool written;

	note_losses(s);
	findings_err = write_findings(s);
	err = trace__close(s->trace, &ts);
	if (!err)
		err = findings_err;
	s->trace = NULL;
	written = !err || output_written(s);
	print_summary(s, err, written, &ts);
	if (err)
		status = written ? EXIT_CUT_SHORT : EXIT_CANT_CREATE;
	return status;
}
