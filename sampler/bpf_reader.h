/*
 * Internal to sampler/: the kernel-side Python reader (bpf/pytrace.bpf.c). For every
 * thread of a process registered here, the kernel walks its Python frames at the very
 * instant a cpu-clock sample interrupts it and at the instant it switches out; the
 * events are collected with bpf_reader__consume().
 */
#ifndef PYTRACE_SAMPLER_BPF_READER_H
#define PYTRACE_SAMPLER_BPF_READER_H

#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>

#include "../bpf/pytrace_bpf.h"
#include "../cpython/cpython.h"

struct bpf_reader;

/*
 * Loads and attaches the programs. With @pass_samples, a sample the kernel read still
 * goes on to perf with its stack copy (for native or kernel frames); without, perf's
 * record is dropped. @read_switches: read stacks at switch-outs too. @read_messages:
 * send process pools' messages (PYTRACE_EV_MESSAGE) and the stacks they went with.
 * NULL with errno set (EPERM without privilege ...).
 */
struct bpf_reader *bpf_reader__open(bool pass_samples, bool read_switches, bool read_messages);
void bpf_reader__free(struct bpf_reader *b);

/*
 * Reads Python frames at each sample of the cpu-clock event @fd (and of the tasks it is
 * inherited by); with @switches, @fd is a context-switch event instead, whose samples
 * are dropped when the switch-out was read whole.
 */
int bpf_reader__attach_sampling(struct bpf_reader *b, int fd, bool switches);

/*
 * Starts (or, with @proc NULL, stops) reading the Python frames of process @tgid as
 * @proc describes them; with @read_args, each frame's arguments too, and the task locals
 * of its pool worker loops known so far. Called again when those change. -EINVAL when
 * the layout's fields are too far apart for the kernel's reads.
 */
int bpf_reader__set_process(struct bpf_reader *b, uint32_t tgid, const struct cpython_process *proc,
			    bool read_args);

/* Tells the kernel side where thread @tid's PyThreadState is. */
int bpf_reader__set_thread(struct bpf_reader *b, uint32_t tid, uint64_t tstate);

/*
 * Follows process @tgid and, from then on, every process it forks: their ends are sent
 * as PYTRACE_EV_EXIT events with the exit code.
 */
int bpf_reader__trace_process(struct bpf_reader *b, uint32_t tgid);

/* Forgets thread @tid's state (its process exec'd: that address means nothing now). */
void bpf_reader__forget_thread(struct bpf_reader *b, uint32_t tid);

/* Calls @fn for every event the kernel has queued. Returns how many, or -errno. */
int bpf_reader__consume(struct bpf_reader *b, void (*fn)(void *ctx, const struct pytrace_event *e),
			void *ctx);

/* One of the kernel side's counters, summed over CPUs. */
uint64_t bpf_reader__stat(struct bpf_reader *b, enum pytrace_bpf_stat which);

#endif
