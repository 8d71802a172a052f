/*
 * Internal to sampler/: the kernel-side switch-out reader (bpf/pytrace.bpf.c). At each
 * context switch of a thread of a process registered here, the kernel walks its Python
 * frames at that instant; the events are collected with bpf_switch__consume().
 */
#ifndef PYTRACE_SAMPLER_BPF_SWITCH_H
#define PYTRACE_SAMPLER_BPF_SWITCH_H

#include <linux/types.h>
#include <stdint.h>

#include "../bpf/pytrace_bpf.h"
#include "../cpython/cpython.h"

struct bpf_switch;

/* Loads and attaches the program. NULL with errno set (EPERM without privilege ...). */
struct bpf_switch *bpf_switch__open(void);
void bpf_switch__free(struct bpf_switch *b);

/* Starts (or, with @layout NULL, stops) reading the Python frames of process @tgid. */
int bpf_switch__set_process(struct bpf_switch *b, uint32_t tgid,
			    const struct cpython_layout *layout);

/* Tells the kernel side where thread @tid's PyThreadState is. */
int bpf_switch__set_thread(struct bpf_switch *b, uint32_t tid, uint64_t tstate);

/* Forgets thread @tid's state (its process exec'd: that address means nothing now). */
void bpf_switch__forget_thread(struct bpf_switch *b, uint32_t tid);

/* Calls @fn for every event the kernel has queued. Returns how many, or -errno. */
int bpf_switch__consume(struct bpf_switch *b,
			void (*fn)(void *ctx, const struct pytrace_switch_event *e), void *ctx);

/* Events dropped because the ring buffer was full. */
uint64_t bpf_switch__dropped(struct bpf_switch *b);

#endif
