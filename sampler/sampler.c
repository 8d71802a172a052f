/* The sampler's lifecycle: creating, launching, stopping, statistics, freeing; /proc helpers. */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../common/log.h"
#include "procfs.h"

uint64_t sampler_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int sampler_list_tree(pid_t pid, pid_t **pids, size_t *count)
{
	*pids = NULL;
	*count = 0;
	if (kill(pid, 0) && errno == ESRCH)
		return -ESRCH;
	return procfs_descendants(pid, pids, count);
}

int sampler_list_threads(pid_t pid, pid_t **tids, size_t *count)
{
	return procfs_tasks(pid, tids, count);
}

int sampler_read_cmdline(pid_t pid, char *buf, size_t size)
{
	return procfs_cmdline(pid, buf, size);
}

int sampler_read_cmdline_of(pid_t pid, const char *comm, char *buf, size_t size)
{
	return procfs_cmdline_of(pid, comm, buf, size);
}

int sampler_read_exit_status(pid_t pid)
{
	char path[64], buf[1024], *p;
	int field, code = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (procfs_read(path, buf, sizeof(buf)) < 0)
		return -1;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || (p[2] != 'Z' && p[2] != 'X'))
		return -1;
	/* exit_code is field 52; after ')' comes field 3. */
	for (field = 3, p += 2; p && field < 52; field++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	if (!p || sscanf(p, "%d", &code) != 1)
		return -1;
	return decode_exit_code((uint32_t)code);
}

void sampler__stop(struct sampler *s)
{
	size_t i;

	if (s->stopped)
		return;
	stop_drainer(s);
	pthread_mutex_lock(&s->lock);
	s->stop_ns = sampler_now_ns();
	for (i = 0; i < s->nfds; i++)
		ioctl(s->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	drain_rings(s, true);
	s->stopped = true;
	pthread_mutex_unlock(&s->lock);
}

bool sampler__done(struct sampler *s)
{
	bool done;

	pthread_mutex_lock(&s->lock);
	done = hashmap__count(s->procs) == 0;
	pthread_mutex_unlock(&s->lock);
	return done;
}

void sampler__stats(struct sampler *s, struct sampler_stats *stats)
{
	pthread_mutex_lock(&s->lock);
	*stats = s->stats;
	stats->processes = (uint32_t)hashmap__count(s->procs) - s->ngone;
	if (s->bpf) {
		stats->kernel_events_lost = bpf_reader__stat(s->bpf, PYTRACE_STAT_RINGBUF_FULL);
		stats->kernel_read_errors = bpf_reader__stat(s->bpf, PYTRACE_STAT_READ_ERRORS);
		stats->kernel_empty_walks = bpf_reader__stat(s->bpf, PYTRACE_STAT_NO_FRAMES);
		stats->kernel_messages = bpf_reader__stat(s->bpf, PYTRACE_STAT_MESSAGES);
		stats->kernel_threads_found = bpf_reader__stat(s->bpf, PYTRACE_STAT_THREADS_FOUND);
		stats->kernel_forks_followed =
			bpf_reader__stat(s->bpf, PYTRACE_STAT_FORKS_FOLLOWED);
	}
	pthread_mutex_unlock(&s->lock);
}

pid_t sampler__child(const struct sampler *s)
{
	return s->child.pid;
}

/* Why the eBPF reader --backend bpf required could not load (an errno), or 0. */
static int bpf_error;

static void free_task_value(void *t)
{
	task_free(t);
}

static void free_captures_value(void *c)
{
	capture_list_free(c);
}

static void put_python_value(void *p)
{
	cpython_process__put(p);
}

void sampler__free(struct sampler *s)
{
	size_t i;

	if (!s)
		return;
	stop_drainer(s);
	for (i = 0; i < s->ncpus; i++)
		ring__unmap(&s->rings[i]);
	for (i = 0; i < s->nfds; i++)
		close(s->fds[i]);
	free(s->fds);
	queue__clear(&s->queue);
	for (i = 0; i < s->batch_count; i++)
		qrec_free(s->batch[i]);
	free(s->batch);
	release_held(s);
	hashmap__free_all(s->tasks, free_task_value);
	hashmap__free_all(s->procs, free);
	hashmap__free_all(s->cmdlines, free);
	hashmap__free_all(s->pending_outs, free);
	hashmap__free_all(s->captures, free_captures_value);
	hashmap__free_all(s->pythons, put_python_value);
	hashmap__free_all(s->unread_runtimes, free);
	hashmap__free(s->exit_codes);
	hashmap__free_all(s->messages, free);
	hashmap__free_all(s->message_ends, free);
	bpf_reader__free(s->bpf);
	hashmap__free(s->bpf_synced);
	free(s->py_scratch);
	free(s->args_scratch);
	arg_store__free(s->args);
	for (i = 0; i < s->nfresh; i++)
		py_stack_free(s->fresh[i]);
	free(s->fresh);
	hashmap__free(s->roles);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

struct sampler *sampler__new(const struct sampler_opts *opts)
{
	struct sampler *s;
	bool privileged = geteuid() == 0;

	if (!opts->frequency_hz || opts->frequency_hz > 100000 || opts->stack_bytes % 8 ||
	    opts->stack_bytes > 65528) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->opts = *opts;
	if (!s->opts.buffer_kb) {
		/* Room for ~0.5 s of samples at the full rate on one CPU, within [1, 64] MiB. */
		uint64_t kb = (uint64_t)opts->frequency_hz * (opts->stack_bytes + 256) / 2048;
		uint32_t pow2 = 1024;

		while (pow2 < kb && pow2 < 65536)
			pow2 *= 2;
		s->opts.buffer_kb = pow2;
	}
	s->ncpus = online_cpus();
	s->child.release_fd = s->child.status_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->roles = hashmap__new();
	s->tasks = hashmap__new();
	s->procs = hashmap__new();
	s->cmdlines = hashmap__new();
	s->pending_outs = hashmap__new();
	s->captures = hashmap__new();
	s->pythons = hashmap__new();
	s->unread_runtimes = hashmap__new();
	s->exit_codes = hashmap__new();
	s->messages = hashmap__new();
	s->message_ends = hashmap__new();
	s->py_scratch = calloc(CPYTHON_MAX_FRAMES, sizeof(*s->py_scratch));
	s->args_scratch = malloc(ARGS_SCRATCH);
	s->args = arg_store__new();
	if (!s->roles || !s->tasks || !s->procs || !s->cmdlines || !s->pending_outs ||
	    !s->captures || !s->pythons || !s->unread_runtimes || !s->exit_codes || !s->messages ||
	    !s->message_ends || !s->py_scratch || !s->args_scratch || !s->args) {
		sampler__free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->use_switch_event = opts->mode == SAMPLER_MODE_WALL;
	s->bpf_synced = hashmap__new();
	if (!s->bpf_synced) {
		sampler__free(s);
		errno = ENOMEM;
		return NULL;
	}
	if (opts->backend != SAMPLER_BACKEND_PERF) {
		s->bpf = bpf_reader__open(opts->native || opts->kernel_stacks,
					  opts->mode == SAMPLER_MODE_WALL, opts->read_messages);
		if (!s->bpf && opts->backend == SAMPLER_BACKEND_BPF) {
			int err = errno;

			bpf_error = err;
			sampler__free(s);
			errno = err;
			return NULL;
		}
		if (!s->bpf)
			pr_info("eBPF reader unavailable (%s): Python stacks are read from outside, "
				"after their samples; waits shorter than ~2 ms get approximate ones",
				strerror(errno));
	}
	build_attrs(s, privileged);
	raise_fd_limit();
	s->start_ns = sampler_now_ns();
	return s;
}

int sampler_bpf_error(void)
{
	return bpf_error;
}

struct sampler *sampler__launch(const struct sampler_opts *opts, char *const argv[],
				const struct sampler_creds *creds)
{
	struct sampler *s = sampler__new(opts);
	int err;

	if (!s)
		return NULL;
	err = launch_hold(argv, creds, &s->child);
	if (err)
		goto out_free;
	err = open_task_events(s, s->child.pid);
	if (err) {
		launch_abort(&s->child);
		goto out_free;
	}
	if (!task_get(s, (uint32_t)s->child.pid, (uint32_t)s->child.pid, true)) {
		launch_abort(&s->child);
		err = -ENOMEM;
		goto out_free;
	}
	proc_add_task(s, (uint32_t)s->child.pid, true);
	if (s->bpf)
		bpf_reader__trace_process(s->bpf, (uint32_t)s->child.pid);
	s->start_ns = sampler_now_ns();
	err = launch_release(&s->child);
	if (err)
		goto out_free;
	err = start_drainer(s);
	if (err)
		goto out_free;
	return s;

out_free:
	s->child.pid = 0;
	sampler__free(s);
	errno = -err;
	return NULL;
}
