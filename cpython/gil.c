/* Where a process keeps its GIL, and which thread holds it right now. */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "cpython.h"

#define HOLDER_TRIES 4

int cpython_gil_addrs(struct cpython_process *p, const struct cpython_mem *mem,
		      struct cpython_gil_addrs *out)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_mem own = cpython_process_mem(p);
	uint64_t state = 0, interp;
	int err;

	memset(out, 0, sizeof(*out));
	if (!mem)
		mem = &own;
	if (l->runtime_gil) {
		state = p->runtime + l->runtime_gil; /* <= 3.11: one GIL, in _PyRuntime */
	} else if (l->interp_gil) {
		/* 3.12+: each interpreter points at its GIL (the main one at its own _gil). */
		err = cpython_main_interp(p, mem, &interp);
		if (err)
			return err;
		if (mem->read(mem->ctx, interp + l->interp_gil, &state, 8))
			return -EFAULT;
		if (!state)
			return -ENOENT;
	} else {
		return -ENOTSUP;
	}
	out->state = state;
	out->locked = state + l->gil_locked;
	out->last_holder = state + l->gil_last_holder;
	out->cond = l->gil_cond ? state + l->gil_cond : 0;
	out->mutex = l->gil_mutex ? state + l->gil_mutex : 0;
	out->switch_cond = l->gil_switch_cond ? state + l->gil_switch_cond : 0;
	return 0;
}

int cpython_gil_holder(struct cpython_process *p, const struct cpython_mem *mem,
		       struct cpython_gil_holder *out)
{
	struct cpython_mem own = cpython_process_mem(p);
	struct cpython_gil_addrs gil;
	uint64_t before, after;
	int32_t locked;
	int err, tries;

	memset(out, 0, sizeof(*out));
	if (!mem)
		mem = &own;
	err = cpython_gil_addrs(p, mem, &gil);
	if (err)
		return err;
	/* last_holder stays set when the GIL is dropped: only `locked` says it is held. */
	for (tries = 0; tries < HOLDER_TRIES; tries++) {
		if (mem->read(mem->ctx, gil.last_holder, &before, 8) ||
		    mem->read(mem->ctx, gil.locked, &locked, 4) ||
		    mem->read(mem->ctx, gil.last_holder, &after, 8))
			return -EFAULT;
		if (before == after)
			break;
	}
	if (tries == HOLDER_TRIES)
		return -EAGAIN;
	if (locked != 0 && locked != 1)
		return -EINVAL;
	out->locked = locked;
	out->tstate = locked ? after : 0;
	if (out->tstate) {
		out->tid = cpython_thread_tid(p, out->tstate);
		if (!out->tid && !cpython_threads_read(p, mem))
			out->tid = cpython_thread_tid(p, out->tstate);
	}
	return 0;
}

enum cpython_gil_part cpython_gil_futex(const struct cpython_gil_addrs *gil, uint64_t uaddr)
{
	/* The target runs on our ABI (x86-64 glibc): its pthread types are the size of ours. */
	if (gil->cond && uaddr >= gil->cond && uaddr < gil->cond + sizeof(pthread_cond_t))
		return CPYTHON_GIL_COND;
	if (gil->mutex && uaddr >= gil->mutex && uaddr < gil->mutex + sizeof(pthread_mutex_t))
		return CPYTHON_GIL_MUTEX;
	/* switch_mutex follows switch_cond in every version (3.8-3.14), guarding it. */
	if (gil->switch_cond && uaddr >= gil->switch_cond &&
	    uaddr < gil->switch_cond + sizeof(pthread_cond_t) + sizeof(pthread_mutex_t))
		return CPYTHON_GIL_SWITCH;
	return CPYTHON_GIL_NONE;
}
