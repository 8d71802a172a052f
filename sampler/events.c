/* perf events: their attributes, opening them per task and CPU, routing them to rings. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/log.h"

static int perf_event_open(struct perf_event_attr *attr, pid_t pid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

uint32_t online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_CONF);

	if (n < 1)
		return 1;
	return n > MAX_CPUS ? MAX_CPUS : (uint32_t)n;
}

uint64_t sample_type(const struct sampler_opts *opts)
{
	uint64_t type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			PERF_SAMPLE_CPU | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

	if (opts->kernel_stacks)
		type |= PERF_SAMPLE_CALLCHAIN;
	return type;
}

/* The events' attributes; after the eBPF reader was loaded, or was not (s->bpf). */
void build_attrs(struct sampler *s, bool privileged)
{
	struct perf_event_attr *a = &s->clock_attr;

	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = 1000000000ULL / s->opts.frequency_hz; /* cpu-clock counts ns */
	a->sample_type = sample_type(&s->opts);
	a->sample_regs_user = REGS_MASK;
	a->sample_stack_user = s->opts.stack_bytes;
	a->inherit = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->build_id = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->context_switch = s->opts.mode == SAMPLER_MODE_WALL;
	a->sample_id_all = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->exclude_kernel = !privileged;
	a->exclude_hv = 1;
	a->exclude_callchain_user = 1;
	if (s->bpf) {
		/*
		 * Wake the drainer by bytes, not per record: with wakeup_watermark 0 the
		 * kernel wakes pollers when the ring is half full (ring_buffer_init()),
		 * whatever size the ring ends up (it may be shrunk to fit perf_event_mlock_kb).
		 */
		a->watermark = 1;
		a->wakeup_watermark = 0;
	} else {
		/*
		 * Python stacks are read from outside when the drainer gets to their samples:
		 * wake it at every sample, at most 10,000 times a second of a thread's CPU.
		 * Woken when the ring was half full or by its 1 ms poll, it read them up to a
		 * ms late; a sample over two periods late keeps only what the reads around it
		 * share, which at 10 kHz left out most short calls (bench/py_split.py: split
		 * 8-20 pp off, unprivileged). Woken at every sample it reads a stack a median
		 * 42-102 us after it on an idle machine (0.1-0.3 pp). The target pays: ~30 us
		 * of its CPU a wake-up on this VM, +33-36 % over the sampling's own cost at
		 * 10 kHz. Waking every second sample halved that but brought the error back
		 * to 0.7-1.4 pp; polling every 50 us from the drainer cost the target +7 % and
		 * left 30 % of the stacks late. At 100 kHz a wake-up at every sample left the
		 * target no time of its own (24 M samples in 1,000 s of its CPU, 0.45 s of
		 * work not done after 16 minutes): hence the cap.
		 */
		a->watermark = 0;
		a->wakeup_events = (s->opts.frequency_hz + 9999) / 10000;
	}

	/* Sampled on every switch; must see kernel mode, where switches happen. */
	s->switch_attr = *a;
	a = &s->switch_attr;
	a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
	a->sample_period = 1;
	a->mmap = a->mmap2 = a->build_id = a->comm = a->comm_exec = a->task = 0;
	a->context_switch = 0;
	a->exclude_kernel = 0;
	a->watermark = 0;
	a->wakeup_events = 0;
}

static int remember_fd(struct sampler *s, int fd)
{
	if (s->nfds == s->fds_capacity) {
		size_t capacity = s->fds_capacity ? s->fds_capacity * 2 : 64;
		int *grown = realloc(s->fds, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		s->fds = grown;
		s->fds_capacity = capacity;
	}
	s->fds[s->nfds++] = fd;
	s->stats.events_open = (uint32_t)s->nfds;
	return 0;
}

/* Sends @fd's records into the CPU's ring, mapping the ring on first use. */
static int route_to_ring(struct sampler *s, int fd, uint32_t cpu, enum event_role role)
{
	struct ring *ring = &s->rings[cpu];
	uint64_t id;
	int err;

	if (!ring->base) {
		size_t size = (size_t)s->opts.buffer_kb * 1024;

		/* Unprivileged users are held to perf_event_mlock_kb: shrink until it fits. */
		while ((err = ring__map(ring, fd, cpu, size)) == -EPERM && size > 64 * 1024)
			size /= 2;
		if (err)
			return err;
		if (size < (size_t)s->opts.buffer_kb * 1024)
			pr_warn("ring buffer limited to %zu KiB per CPU (perf_event_mlock_kb); "
				"samples may be lost",
				size / 1024);
	} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, ring->fd)) {
		return -errno;
	}
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id))
		return -errno;
	return hashmap__set(s->roles, id, (void *)(uintptr_t)role);
}

/* Opens this task's events on every CPU. -ESRCH when the task is already gone. */
int open_task_events(struct sampler *s, pid_t tid)
{
	uint32_t cpu;
	int err;

	for (cpu = 0; cpu < s->ncpus; cpu++) {
		int fd = perf_event_open(&s->clock_attr, tid, (int)cpu);

		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* an offline CPU */
			return -errno;
		}
		err = remember_fd(s, fd);
		if (!err)
			err = route_to_ring(s, fd, cpu, ROLE_CLOCK);
		if (err)
			return err;
		if (!s->clock_id && ioctl(fd, PERF_EVENT_IOC_ID, &s->clock_id))
			return -errno;
		if (s->bpf && (s->kernel_samples || !s->nfds_sampled)) {
			err = bpf_reader__attach_sampling(s->bpf, fd, false);
			if (err) {
				/* Samples then keep perf's record: read from outside, later. */
				pr_info("eBPF sample reader not attached (%s): on-CPU Python stacks "
					"are read from outside, after their samples",
					strerror(-err));
				s->kernel_samples = false;
			} else {
				s->kernel_samples = true;
			}
			s->nfds_sampled++;
		}
		if (!s->use_switch_event)
			continue;
		fd = perf_event_open(&s->switch_attr, tid, (int)cpu);
		if (fd < 0) {
			if (errno != EACCES && errno != EPERM)
				return -errno;
			/* Not allowed to see kernel-mode switches: spans keep the last stack. */
			pr_info("context-switch samples not permitted; off-CPU stacks approximate");
			s->use_switch_event = false;
			continue;
		}
		err = remember_fd(s, fd);
		if (!err)
			err = route_to_ring(s, fd, cpu, ROLE_SWITCH);
		if (!err && s->kernel_samples && bpf_reader__attach_sampling(s->bpf, fd, true))
			pr_debug("switch samples keep their stack copies: program not attached");
		if (err)
			return err;
	}
	return 0;
}
