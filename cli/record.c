/* One recording: sampler -> symbolizer -> trace, with progress, errors and a summary. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/frames.h"
#include "../common/hashmap.h"
#include "../common/log.h"
#include "../symbolize/symbolize.h"
#include "session.h"

/* Processing records between looks at the clock, the duration and progress. */
#define DRAIN_SLICE_NS 100000000ULL
/* After a stop request, time left to work through records already taken. */
#define STOP_BUDGET_NS 500000000ULL
/* ... and to count those dropped when the budget ran out. */
#define COUNT_BUDGET_NS 200000000ULL

static volatile sig_atomic_t stop_requests;

static void on_stop_signal(int sig)
{
	(void)sig;
	stop_requests++;
}

static void install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_stop_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

const char *session__name(struct session *s, uint32_t pid, uint32_t tid)
{
	return trace__name(s->trace, pid, tid);
}

void session__set_name(struct session *s, uint32_t pid, uint32_t tid, const char *name)
{
	if (tid)
		trace__name_thread(s->trace, pid, tid, name);
	else
		trace__name_process(s->trace, pid, name);
}

void session__name_command(struct session *s, uint32_t pid, const char *cmdline)
{
	char name[256];

	uintptr_t parent = (uintptr_t)hashmap__get(s->parents, pid);
	const char *parent_name = parent ? session__name(s, (uint32_t)(parent - 1), 0) : NULL;

	trace__process_cmdline(s->trace, pid, cmdline);
	if (!procname_short(cmdline, name, sizeof(name)))
		session__set_name(s, pid, 0, name);
	else
		session__set_name(s, pid, 0, parent_name ? parent_name : cmdline);
}

/* A process's display name: from its command line if it could be read, else @fallback. */
static void name_process(struct session *s, const struct sampler_rec *r, const char *fallback)
{
	char cmdline[1024];

	if (r->cmdline)
		session__name_command(s, r->pid, r->cmdline);
	else if (!sampler_read_cmdline((pid_t)r->pid, cmdline, sizeof(cmdline)))
		session__name_command(s, r->pid, cmdline);
	else if (fallback)
		session__set_name(s, r->pid, 0, fallback);
}

/*
 * An exec whose command line was not there yet when its record was drained: the kernel
 * names the new program before it lays out its arguments, and a drainer that wakes at
 * once can read between the two (seen 1 run in 3 for an exec through chroot). Read at
 * its next records, while it still runs that program.
 */
#define LATE_NAME_TRIES 16
struct late_name {
	char comm[16];
	unsigned tries;
};

static void wait_for_cmdline(struct session *s, const struct sampler_rec *r)
{
	struct late_name *late;

	free(hashmap__remove(s->unnamed, r->pid));
	if (r->cmdline || !(late = calloc(1, sizeof(*late))))
		return;
	snprintf(late->comm, sizeof(late->comm), "%s", r->comm.comm);
	if (hashmap__set(s->unnamed, r->pid, late))
		free(late);
}

static void name_late(struct session *s, uint32_t pid)
{
	struct late_name *late = hashmap__get(s->unnamed, pid);
	char cmdline[1024];
	int err;

	if (!late)
		return;
	err = sampler_read_cmdline_of((pid_t)pid, late->comm, cmdline, sizeof(cmdline));
	if (!err)
		session__name_command(s, pid, cmdline);
	if (!err || err == -ESTALE || ++late->tries == LATE_NAME_TRIES)
		free(hashmap__remove(s->unnamed, pid));
}

struct last_stack {
	uint64_t time_ns;
	uint32_t n;
	struct trace_frame frames[];
};

/* Remembers a thread's latest on-CPU stack. */
static void keep_stack(struct session *s, uint32_t tid, uint64_t time_ns,
		       const struct trace_frame *frames, uint32_t n)
{
	struct last_stack *ls = hashmap__get(s->last_stacks, tid);

	if (!ls || ls->n < n) {
		struct last_stack *grown = realloc(ls, sizeof(*ls) + (n + 8) * sizeof(*frames));

		if (!grown)
			return;
		if (grown != ls && hashmap__set(s->last_stacks, tid, grown)) {
			free(grown);
			hashmap__remove(s->last_stacks, tid);
			return;
		}
		ls = grown;
	}
	memcpy(ls->frames, frames, n * sizeof(*frames));
	ls->n = n;
	ls->time_ns = time_ns;
}

/*
 * A wait whose stack could not be captured (unprivileged and too short to be read from
 * outside, or the copy failed) and whose Python frames are the sampler's guess from the
 * read before it (sampler/waitpolicy.c decided that it stands, and for how long): when
 * that read was the thread's last sample's, the sample as shown, with its native frames,
 * which the wait has none of. A guess from another read (one made while the thread
 * waited before) is not that sample's: a worker's preemption after it took its next
 * task showed the previous task's stack, the last one sampled.
 */
static int guess_wait_stack(struct session *s, const struct sampler_rec *r,
			    struct trace_frame *frames, uint32_t max, int n)
{
	const struct last_stack *ls = hashmap__get(s->last_stacks, r->tid);
	uint32_t k;

	if (!ls || ls->time_ns != r->sample.py_at_ns)
		return n;
	k = ls->n < max ? ls->n : max;
	memcpy(frames, ls->frames, k * sizeof(*frames));
	return (int)k;
}

static void observe(struct session *s, const struct sampler_rec *r)
{
	struct trace_obs obs = {
		.pid = r->pid,
		.tid = r->tid,
		.kind = r->kind == SREC_OFF_CPU ? TRACE_OFF_CPU : TRACE_ON_CPU,
		.t_start_ns = r->time_ns,
		.t_end_ns = r->sample.end_ns,
		.frames = s->stack,
	};
	int n = symbolizer__stack(s->sym, r, s->stack, MAX_FRAMES - 1);

	if (n < 0) {
		s->record_errors++;
		return;
	}
	if (r->kind == SREC_SAMPLE)
		keep_stack(s, r->tid, r->time_ns, s->stack, (uint32_t)n);
	else if (!r->sample.stack.valid && !r->sample.stack.nkernel &&
		 r->sample.py_source == SAMPLER_PY_BEFORE)
		n = guess_wait_stack(s, r, s->stack, MAX_FRAMES - 1, n);
	/* A leaf marker: why it waited, or that it ran without the GIL. */
	if (r->kind == SREC_OFF_CPU || r->sample.gil == SAMPLER_GIL_RELEASED) {
		s->stack[n].func =
			r->kind == SREC_OFF_CPU
				? symbolizer__wait_marker(s->sym, r, s->stack, (uint32_t)n)
				: symbolizer__gil_marker(s->sym, r);
		s->stack[n].line = 0;
		s->stack[n].callsite = 0;
		s->stack[n].args = 0;
		if (r->kind == SREC_OFF_CPU && r->sample.start_estimated) {
			/* Said on the wait: its start is the kernel's reading, an estimate. */
			const struct arg_item estimated = { .name = "start_estimated",
							    .kind = ARG_BOOL,
							    .i = 1 };

			s->stack[n].args =
				args_table__intern(frame_table__args(s->frames), &estimated, 1);
		}
		if (s->stack[n].func)
			n++;
	}
	obs.nframes = (uint32_t)n;
	if (trace__observe(s->trace, &obs))
		s->record_errors++;
}

/*
 * A process pool message written or read: a marker slice one microsecond long at the system
 * call's end, under the stack the kernel read then, which the trace joins into flows.
 */
static void observe_message(struct session *s, const struct sampler_rec *r)
{
	struct trace_obs obs = {
		.pid = r->pid,
		.tid = r->tid,
		.kind = TRACE_MESSAGE,
		.t_start_ns = r->time_ns,
		.t_end_ns = r->time_ns + 1000,
		.frames = s->stack,
		.message = { .executor = r->message.kind == CPYTHON_MESSAGE_EXECUTOR_TASK ||
					 r->message.kind == CPYTHON_MESSAGE_EXECUTOR_RESULT,
			     .result = r->message.kind == CPYTHON_MESSAGE_POOL_RESULT ||
				       r->message.kind == CPYTHON_MESSAGE_EXECUTOR_RESULT,
			     .sent = r->message.sent,
			     .job = r->message.job,
			     .task = r->message.task },
	};
	int n = symbolizer__stack(s->sym, r, s->stack, MAX_FRAMES - 1);
	uint32_t args = 0;

	if (n < 0) {
		s->record_errors++;
		return;
	}
	s->stack[n] = (struct trace_frame){ .func = symbolizer__message_marker(s->sym, r, &args),
					    .args = args };
	if (!s->stack[n].func)
		return;
	obs.nframes = (uint32_t)n + 1;
	if (trace__observe(s->trace, &obs))
		s->record_errors++;
}

static void on_fork(struct session *s, const struct sampler_rec *r)
{
	bool process = r->pid != r->fork.ppid;
	const char *parent_name;

	symbolizer__track(s->sym, r);
	if (!process) {
		/* A new thread inherits its creator's comm, not its Python name. */
		parent_name = session__name(s, r->pid, r->fork.ptid);
		if (parent_name && !pynames__named(s, r->pid, r->fork.ptid))
			session__set_name(s, r->pid, r->tid, parent_name);
		return;
	}
	hashmap__set(s->parents, r->pid, (void *)((uintptr_t)r->fork.ppid + 1));
	name_process(s, r, session__name(s, r->fork.ppid, 0));
	parent_name = session__name(s, r->fork.ppid, r->fork.ptid);
	if (parent_name && !session__name(s, r->pid, r->tid))
		session__set_name(s, r->pid, r->tid, parent_name);
	if (!r->synthetic) {
		struct trace_event ev = { TRACE_EVENT_FORK, r->fork.ppid, r->fork.ptid,
					  r->time_ns,	    r->pid,	  NULL };

		trace__event(s->trace, &ev);
	}
}

static int decode_status(int status)
{
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/*
 * A process's exit status: for the launched command, our own child, exactly from
 * waitpid (reaping it); for others from /proc while they are zombies (best effort).
 */
static int exit_status_of(struct session *s, pid_t pid)
{
	struct timespec pause = { 0, 100000 };
	int status, i;

	if (pid != sampler__child(s->sampler) || s->child_reaped)
		return sampler_read_exit_status(pid);
	/*
	 * Its exit record is written before the kernel makes it a zombie: it may still be
	 * on its way out. It certainly exits, so waiting a moment (bounded) is safe.
	 */
	for (i = 0; i < 10000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			s->child_reaped = true;
			s->child_status = decode_status(status);
			return s->child_status;
		}
		nanosleep(&pause, NULL);
	}
	return -1;
}

static void dispatch(struct session *s, const struct sampler_rec *r)
{
	struct trace_event ev = { .pid = r->pid, .tid = r->tid, .t_ns = r->time_ns };

	switch (r->kind) {
	case SREC_SAMPLE:
	case SREC_OFF_CPU:
		name_late(s, r->pid);
		pynames__observe(s, r);
		observe(s, r);
		break;
	case SREC_MESSAGE:
		observe_message(s, r);
		break;
	case SREC_FORK:
		on_fork(s, r);
		break;
	case SREC_EXEC:
		pynames__gone(s, r->pid); /* another program: other addresses, if Python */
		symbolizer__track(s->sym, r);
		/*
		 * The command line as read when the exec was drained, else the program's comm:
		 * reading /proc now could find a later exec's program.
		 */
		if (r->cmdline)
			session__name_command(s, r->pid, r->cmdline);
		else
			session__set_name(s, r->pid, 0, r->comm.comm);
		session__set_name(s, r->pid, r->tid, r->comm.comm);
		wait_for_cmdline(s, r);
		ev.kind = TRACE_EVENT_EXEC;
		ev.text = r->cmdline ? r->cmdline : session__name(s, r->pid, 0);
		trace__event(s->trace, &ev);
		break;
	case SREC_COMM:
		/* A Python thread keeps its threading name: a comm is that name cut to 15 bytes. */
		if (!pynames__named(s, r->pid, r->tid))
			session__set_name(s, r->pid, r->tid, r->comm.comm);
		break;
	case SREC_PYNAME:
		pynames__name_thread(s, r->pid, r->tid, r->note);
		break;
	case SREC_NOTE:
		/* Not silent: these native frames are not the process's Python profile. */
		pr_warn("process %u (%s): %s", r->pid, session__name(s, r->pid, 0) ?: "?", r->note);
		ev.kind = TRACE_EVENT_NOTE;
		ev.text = r->note;
		trace__event(s->trace, &ev);
		break;
	case SREC_EXIT:
		free(hashmap__remove(s->last_stacks, r->tid));
		trace__end_thread(s->trace, r->pid, r->tid, r->time_ns);
		if (r->exit.last_in_process) {
			pynames__gone(s, r->pid);
			free(hashmap__remove(s->unnamed, r->pid));
			ev.kind = TRACE_EVENT_EXIT;
			/* Known when the kernel sent it: a reaped process's is gone from /proc. */
			ev.value =
				r->exit.status >= 0 && (pid_t)r->pid != sampler__child(s->sampler)
					? r->exit.status
					: exit_status_of(s, (pid_t)r->pid);
			trace__event(s->trace, &ev);
		}
		symbolizer__track(s->sym, r);
		break;
	case SREC_MMAP:
		symbolizer__track(s->sym, r);
		break;
	}
}

/*
 * Processes the records that are ready. Returns true when none is left; false when it
 * stopped early: at @until_ns, when it first sees a stop request, or once the stop
 * request's budget (counted from then) is spent. A backlog can take far longer to
 * work through than it took to record: a stop request must not wait for it.
 */
static bool drain(struct session *s, uint64_t until_ns)
{
	const struct sampler_rec *r;

	for (;;) {
		uint64_t now = sampler_now_ns();

		if (stop_requests && !s->stop_seen_ns) {
			s->stop_seen_ns = now;
			sampler__stopping(s->sampler);
			return false;
		}
		if (now >= until_ns || (s->stop_seen_ns && now - s->stop_seen_ns >= STOP_BUDGET_NS))
			return false;
		r = sampler__next(s->sampler);
		if (!r)
			return true;
		wrappers__before(s, r);
		dispatch(s, r);
		wrappers__after(s, r);
		s->processed_ns = r->time_ns;
	}
}

/* Counts the records left unprocessed (they are dropped), for a while. */
static void count_dropped(struct session *s)
{
	uint64_t until = sampler_now_ns() + COUNT_BUDGET_NS;

	while (sampler__next(s->sampler)) {
		s->records_dropped++;
		if (!(s->records_dropped % 256) && sampler_now_ns() >= until) {
			s->count_incomplete = true;
			return;
		}
	}
}

/* Runs until the tree has exited, the duration has passed or a signal came. */
static void record_loop(struct session *s)
{
	uint64_t deadline = s->opts->duration_s > 0
				    ? s->started_ns + (uint64_t)(s->opts->duration_s * 1e9)
				    : UINT64_MAX;
	bool caught_up = true;

	while (!stop_requests) {
		/* Behind (a backlog): no pause before going on with it. */
		if (caught_up && sampler__poll(s->sampler, 10) < 0)
			break;
		caught_up = drain(s, sampler_now_ns() + DRAIN_SLICE_NS);
		pynames__tick(s, sampler_now_ns());
		session__show_progress(s, false);
		if (sampler__done(s->sampler) || sampler_now_ns() >= deadline)
			break;
	}
	/* A stop request's budget counts from when it was seen, stopping included. */
	if (stop_requests && !s->stop_seen_ns) {
		s->stop_seen_ns = sampler_now_ns();
		sampler__stopping(s->sampler);
	}
	sampler__stop(s->sampler);
	/* Everything taken is processed, unless a stop request says otherwise. */
	while (!drain(s, UINT64_MAX)) {
		if (s->stop_seen_ns && sampler_now_ns() - s->stop_seen_ns >= STOP_BUDGET_NS) {
			count_dropped(s);
			break;
		}
	}
}

static int sampler_error(const struct cli_opts *o, int err, pid_t bad_pid)
{
	char paranoid[16] = "?";
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");

	if (f) {
		if (!fgets(paranoid, sizeof(paranoid), f))
			strcpy(paranoid, "?");
		paranoid[strcspn(paranoid, "\n")] = '\0';
		fclose(f);
	}
	if (o->sampler.backend == SAMPLER_BACKEND_BPF && sampler_bpf_error() == ENOENT) {
		fprintf(stderr,
			"pytrace-sample: cannot load the eBPF programs: this kernel has no "
			"BTF (/sys/kernel/btf/vmlinux; CONFIG_DEBUG_INFO_BTF): use --backend "
			"perf\n");
		return EXIT_UNAVAILABLE;
	}
	if (o->sampler.backend == SAMPLER_BACKEND_BPF && sampler_bpf_error() &&
	    (err == EPERM || err == EACCES)) {
		fprintf(stderr,
			"pytrace-sample: cannot load the eBPF programs: %s (run with sudo, or "
			"use --backend perf)\n",
			strerror(err));
		return EXIT_NO_PERMISSION;
	}
	if (o->argv && err == EINTR) {
		fprintf(stderr,
			"pytrace-sample: interrupted before %s was started; it was not run\n",
			o->argv[0]);
		return EXIT_INTERRUPTED;
	}
	if (o->argv && err == ENOENT) {
		fprintf(stderr, "pytrace-sample: %s: command not found\n", o->argv[0]);
		return EXIT_NOT_FOUND;
	}
	if (o->argv && err == ENOEXEC) {
		fprintf(stderr,
			"pytrace-sample: %s: cannot execute (not an executable file, no permission, "
			"or it could not be started as the invoking user)\n",
			o->argv[0]);
		return EXIT_NOT_EXECUTABLE;
	}
	if (err == ESRCH) {
		fprintf(stderr, "pytrace-sample: no such process: %d\n", bad_pid);
		return EXIT_NO_PROCESS;
	}
	if ((err == EACCES || err == EPERM) && geteuid() != 0 && atoi(paranoid) > 2) {
		fprintf(stderr,
			"pytrace-sample: perf events are disabled for unprivileged users "
			"(kernel.perf_event_paranoid = %s): run with sudo, or allow them with "
			"'sudo sysctl kernel.perf_event_paranoid=2'\n",
			paranoid);
		return EXIT_UNAVAILABLE;
	}
	if (err == EACCES || err == EPERM) {
		if (o->npids)
			fprintf(stderr,
				"pytrace-sample: cannot attach to %d: permission denied (run with sudo "
				"or grant CAP_PERFMON,CAP_SYS_PTRACE)\n",
				bad_pid);
		else
			fprintf(stderr,
				"pytrace-sample: perf events not permitted: %s (run with sudo)\n",
				strerror(err));
		return EXIT_NO_PERMISSION;
	}
	if (err == ENOSYS || err == ENOENT || err == EOPNOTSUPP || err == ENODEV) {
		fprintf(stderr, "pytrace-sample: this kernel offers no usable perf events (%s)\n",
			strerror(err));
		return EXIT_UNAVAILABLE;
	}
	fprintf(stderr, "pytrace-sample: cannot start sampling: %s\n", strerror(err));
	return EXIT_INTERNAL;
}

/* Under sudo: the invoking user, for the command and the output file. */
static bool sudo_user(struct sampler_creds *creds)
{
	const char *uid = getenv("SUDO_UID"), *gid = getenv("SUDO_GID");

	if (geteuid() != 0 || !uid || !gid || !atoi(uid))
		return false;
	creds->uid = (uid_t)atoi(uid);
	creds->gid = (gid_t)atoi(gid);
	creds->user = getenv("SUDO_USER");
	return true;
}

/*
 * Launches or attaches as the options say. 0, or -errno with the failing pid (attaching)
 * in *@bad_pid.
 */
static int start_sampler(struct session *s, const struct sampler_creds *creds, pid_t *bad_pid)
{
	const struct cli_opts *o = s->opts;
	char joined[1024] = "";
	sigset_t stops, old;
	int i, err;

	/*
	 * A stop request while starting stays pending: the launch sees it and gives up
	 * before the command runs (-EINTR), an attach ends at once afterwards.
	 */
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigprocmask(SIG_BLOCK, &stops, &old);
	if (o->argv)
		s->sampler = sampler__launch(&o->sampler, o->argv, creds);
	else
		s->sampler = sampler__attach(&o->sampler, o->pids, o->npids, bad_pid);
	err = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (!s->sampler)
		return -err;
	if (o->argv) {
		for (i = 0; o->argv[i]; i++) {
			size_t len = strlen(joined);

			snprintf(joined + len, sizeof(joined) - len, "%s%s", i ? " " : "",
				 o->argv[i]);
		}
		session__set_name(s, (uint32_t)sampler__child(s->sampler), 0, joined);
	}
	return 0;
}

/*
 * The launched command's exit status. A Ctrl-C beyond the ones that ended the recording
 * (@signals_used) stops waiting for it; it may already have come.
 */
static int wait_child(pid_t child, sig_atomic_t signals_used)
{
	siginfo_t info = { .si_pid = 0 };
	pid_t got;
	int status;

	/* A command that already exited by itself is never reported as interrupted. */
	if (!waitid(P_PID, (id_t)child, &info, WEXITED | WNOHANG | WNOWAIT) && !info.si_pid)
		fprintf(stderr,
			"pytrace-sample: waiting for the command (pid %d) to exit; Ctrl-C again to stop waiting\n",
			child);
	for (;;) {
		got = waitpid(child, &status, stop_requests > signals_used ? WNOHANG : 0);
		if (got == child)
			break;
		if (!got)
			return EXIT_INTERRUPTED;
		if (errno != EINTR)
			return EXIT_INTERNAL;
	}
	return decode_status(status);
}

int cli_record(const struct cli_opts *o)
{
	struct session *s = calloc(1, sizeof(*s));
	struct symbolizer_opts sym_opts = { .kernel = o->sampler.kernel_stacks,
					    .native = o->native };
	struct sampler_creds creds;
	bool as_user = sudo_user(&creds);
	int status = EXIT_INTERNAL, close_status;
	sig_atomic_t signals_used;
	pid_t child, bad_pid = 0;
	int err;

	if (!s)
		return EXIT_INTERNAL;
	s->opts = o;
	install_signals();
	if (o->sampler.kernel_stacks && geteuid() != 0) {
		fprintf(stderr,
			"pytrace-sample: --kernel needs root: kernel frames are only sampled "
			"with privilege (run with sudo, or leave out --kernel)\n");
		status = EXIT_NO_PERMISSION;
		goto out_free;
	}
	if (o->output)
		snprintf(s->output, sizeof(s->output), "%s", o->output);
	else
		session__default_output(o, s->output, sizeof(s->output));
	s->last_stacks = hashmap__new();
	s->pynames = hashmap__new();
	s->unnamed = hashmap__new();
	s->parents = hashmap__new();
	s->period_ns = 1000000000ULL / o->sampler.frequency_hz;
	/* Only a launched command's wrappers: a process named with -p is shown as asked. */
	if (o->argv && !o->all_processes && !(s->wrappers = hashmap__new()))
		goto out_free;
	s->frames = frame_table__new();
	s->sym = s->frames ? symbolizer__new(&sym_opts, s->frames) : NULL;
	if (!s->last_stacks || !s->unnamed || !s->parents || !s->sym)
		goto out_free;
	/* Even with -q: the findings go into the trace. */
	if (!(s->summary = trace_summary__new()))
		goto out_free;
	status = session__open_output(s, as_user ? &creds : NULL);
	if (status >= 0)
		goto out_free;
	if (stop_requests) {
		fprintf(stderr, "pytrace-sample: interrupted before starting\n");
		status = EXIT_INTERRUPTED;
		goto out_free;
	}
	err = start_sampler(s, as_user ? &creds : NULL, &bad_pid);
	if (err) {
		status = sampler_error(o, -err, bad_pid);
		goto out_free;
	}
	s->started_ns = sampler_now_ns();
	record_loop(s);
	/* The first stop request ended the recording; one more stops waiting for CMD. */
	signals_used = stop_requests ? 1 : 0;
	wrappers__end(s);
	close_status = session__close_output(s);
	status = close_status;
	child = sampler__child(s->sampler);
	if (child) {
		int child_status =
			s->child_reaped ? s->child_status : wait_child(child, signals_used);

		status = close_status ? close_status : child_status;
	}
out_free:
	trace__abort(s->trace);
	sampler__free(s->sampler);
	symbolizer__free(s->sym);
	frame_table__free(s->frames);
	trace_summary__free(s->summary);
	hashmap__free_all(s->last_stacks, free);
	hashmap__free_all(s->unnamed, free);
	pynames__free_all(s);
	hashmap__free_all(s->wrappers, free);
	hashmap__free(s->parents);
	free(s);
	return status;
}
