/* A Python process: its threads, their states (its code objects: codes.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../common/hashmap.h"
#include "cpython.h"
#include "internal.h"

#define MAX_INTERPRETERS 64
/* A thread not in the cached list may be new, or a forked child not yet renamed. */
#define THREAD_REFRESH_NS (1000000ULL)

int cpython_read_process(void *pid_ptr, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };

	if (!addr)
		return -EFAULT;
	return process_vm_readv(*(pid_t *)pid_ptr, &local, 1, &remote, 1, 0) == (ssize_t)len
		       ? 0
		       : -EFAULT;
}

static uint32_t read_process_blocks(void *pid_ptr, const uint64_t *addrs, uint32_t n, void *buf,
				    size_t size)
{
	struct iovec local[CPYTHON_HOT_PAGES], remote[CPYTHON_HOT_PAGES];
	ssize_t got;
	uint32_t k;

	n = n < CPYTHON_HOT_PAGES ? n : CPYTHON_HOT_PAGES;
	for (k = 0; k < n; k++) {
		local[k] = (struct iovec){ (uint8_t *)buf + k * size, size };
		remote[k] = (struct iovec){ (void *)(uintptr_t)addrs[k], size };
	}
	/* A remote block that can't be read ends the read there (process_vm_readv(2)). */
	got = n ? process_vm_readv(*(pid_t *)pid_ptr, local, n, remote, n, 0) : 0;
	return got > 0 ? (uint32_t)((size_t)got / size) : 0;
}

struct cpython_mem cpython_process_mem(struct cpython_process *p)
{
	return (struct cpython_mem){ cpython_read_process, &p->pid, read_process_blocks };
}

int cpython_read_u64(const struct cpython_mem *mem, uint64_t addr, uint64_t *v)
{
	return mem->read(mem->ctx, addr, v, sizeof(*v));
}

/* A process read as it runs: is it in a pid namespace of its own? */
static void note_pidns(struct cpython_process *p)
{
	p->other_pidns = pidns_probe(p->pid, &p->pidns, &p->ns_pid) == 1;
	p->ns_tids.pid = p->pid;
}

struct cpython_process *cpython_process__new(pid_t pid, uint64_t runtime, unsigned minor)
{
	return cpython_process__new_mem(pid, runtime, minor, NULL);
}

struct cpython_process *cpython_process__new_mem(pid_t pid, uint64_t runtime, unsigned minor,
						 const struct cpython_mem *mem)
{
	struct cpython_process *p = calloc(1, sizeof(*p));
	const struct cpython_layout *builtin = cpython_builtin_layout(minor);
	bool live = !mem; /* read as it runs, not from a test's memory */

	if (!p)
		return NULL;
	p->refs = 1;
	p->pid = pid;
	p->runtime = runtime;
	p->codes = cpython_codes__new();
	if (!p->codes) {
		free(p);
		errno = ENOMEM;
		return NULL;
	}
	if (builtin) {
		p->layout = *builtin;
	} else {
		/* 3.13+: the runtime describes itself. */
		uint8_t image[CPYTHON_DEBUG_OFFSETS_BYTES];
		struct cpython_mem own = cpython_process_mem(p);
		int err;

		if (!mem)
			mem = &own;
		if (minor && minor < 13)
			err = -EPROTONOSUPPORT; /* no built-in layout, and no debug offsets yet */
		else if (mem->read(mem->ctx, runtime, image, sizeof(image)))
			err = -EFAULT;
		else
			err = cpython_decode_debug_offsets(image, sizeof(image), minor, &p->layout);
		if (err) {
			cpython_codes__put(p->codes);
			free(p);
			errno = -err;
			return NULL;
		}
	}
	if (live)
		note_pidns(p);
	return p;
}

struct cpython_process *cpython_process__fork(const struct cpython_process *parent, pid_t pid)
{
	struct cpython_process *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->refs = 1;
	p->pid = pid;
	p->runtime = parent->runtime;
	p->layout = parent->layout;
	p->types = parent->types;
	memcpy(p->task_codes, parent->task_codes, sizeof(p->task_codes));
	p->ntask_codes = parent->ntask_codes;
	p->pool_child = parent->pool_child;
	p->pthread_tid_offset = parent->pthread_tid_offset;
	note_pidns(p);
	/* A forked child starts with its parent's code objects, at the same addresses. */
	p->codes = parent->codes;
	if (p->codes)
		cpython_codes__get(p->codes);
	return p;
}

struct cpython_process *cpython_process__get(struct cpython_process *p)
{
	if (p)
		p->refs++;
	return p;
}

void cpython_process__put(struct cpython_process *p)
{
	if (!p || --p->refs > 0)
		return;
	cpython_codes__put(p->codes);
	free(p->threads);
	pidns_map__clear(&p->ns_tids);
	free(p);
}

/*
 * Before 3.11 a thread state knows its pthread_t, not its kernel tid. glibc's struct
 * pthread (which pthread_t points to) holds the tid; where is learnt from the main
 * thread's descriptor, the only one holding the pid: at 0x2d0 in glibc 2.x, else the
 * first plausible place.
 */
static void learn_tid_offset(struct cpython_process *p, const struct cpython_mem *mem,
			     const uint64_t *pthreads, size_t n)
{
	uint32_t words[512], own_id = (uint32_t)(p->other_pidns ? p->ns_pid : p->pid);
	size_t i, w;

	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		uint32_t tid;

		if (!mem->read(mem->ctx, pthreads[i] + 0x2d0, &tid, 4) && tid == own_id)
			p->pthread_tid_offset = 0x2d0;
	}
	for (i = 0; i < n && !p->pthread_tid_offset; i++) {
		if (mem->read(mem->ctx, pthreads[i], words, sizeof(words)))
			continue;
		for (w = 16; w < 512; w++) {
			if (words[w] == own_id) {
				p->pthread_tid_offset = w * 4;
				break;
			}
		}
	}
}

static uint32_t tid_of_pthread(const struct cpython_process *p, const struct cpython_mem *mem,
			       uint64_t pthread)
{
	uint32_t tid;

	if (!p->pthread_tid_offset ||
	    mem->read(mem->ctx, pthread + p->pthread_tid_offset, &tid, sizeof(tid)))
		return 0;
	return tid;
}

/*
 * In another pid namespace: the @n threads' ids as ours (those that can't be matched,
 * gone or not yet in /proc, are dropped; the tid map is re-read once when one misses).
 * How many are kept.
 */
static size_t host_tids(struct cpython_process *p, struct cpython_thread *list, size_t n)
{
	bool refreshed = false;
	size_t i, kept = 0;

	for (i = 0; i < n; i++) {
		uint32_t host = pidns_map__host(&p->ns_tids, list[i].tid);

		if (!host && !refreshed) {
			refreshed = true;
			if (!pidns_map__refresh(&p->ns_tids))
				host = pidns_map__host(&p->ns_tids, list[i].tid);
		}
		if (host)
			list[kept++] = (struct cpython_thread){ host, list[i].tstate };
	}
	return kept;
}

/* Re-reads every interpreter's thread list into p->threads. */
static int read_threads(struct cpython_process *p, const struct cpython_mem *mem)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_thread *list = calloc(CPYTHON_MAX_THREADS, sizeof(*list));
	uint64_t *pthreads = calloc(CPYTHON_MAX_THREADS, sizeof(*pthreads));
	struct hashmap *states_read = hashmap__new(); /* tstate -> itself: each state once */
	uint64_t interp, tstate, check;
	size_t n = 0, ninterp = 0, guard;

	if (!list || !pthreads || !states_read) {
		free(list);
		free(pthreads);
		hashmap__free(states_read);
		return -ENOMEM;
	}
	if (cpython_read_u64(mem, p->runtime + l->runtime_interpreters_head, &interp))
		goto out_fail;
	/* Bounded walks: a corrupt or cyclic list ends at the bound, never hangs. */
	for (; interp && ninterp < MAX_INTERPRETERS; ninterp++) {
		if (cpython_read_u64(mem, interp + l->interp_threads_head, &tstate))
			break;
		for (guard = 0; tstate && n < CPYTHON_MAX_THREADS && guard < CPYTHON_MAX_THREADS;
		     guard++) {
			uint64_t id = 0;
			uint32_t tid = 0;

			/*
			 * A list that comes back to a state read already loops (read while it
			 * changed, or corrupt): it ends there. Followed to the bound, its
			 * threads came each up to CPYTHON_MAX_THREADS times, and an ident
			 * that two states hold names neither (cpython_thread_names()).
			 */
			if (hashmap__get(states_read, tstate) ||
			    hashmap__set(states_read, tstate, (void *)(uintptr_t)tstate))
				break;
			if (cpython_read_u64(mem, tstate + l->tstate_interp, &check) ||
			    check != interp)
				break; /* not a thread state of this interpreter */
			if (l->tstate_native_thread_id) {
				if (!cpython_read_u64(mem, tstate + l->tstate_native_thread_id,
						      &id))
					tid = (uint32_t)id;
			} else if (!cpython_read_u64(mem, tstate + l->tstate_thread_id, &id)) {
				tid = (uint32_t)-1; /* mapped below, once all are known */
				pthreads[n] = id;
			}
			if (tid)
				list[n++] = (struct cpython_thread){ tid, tstate };
			if (cpython_read_u64(mem, tstate + l->tstate_next, &tstate))
				break;
		}
		if (cpython_read_u64(mem, interp + l->interp_next, &interp))
			break;
	}
	if (!l->tstate_native_thread_id) {
		size_t i, kept = 0;

		learn_tid_offset(p, mem, pthreads, n);
		for (i = 0; i < n; i++) {
			list[i].tid = tid_of_pthread(p, mem, pthreads[i]);
			if (list[i].tid)
				list[kept++] = list[i];
		}
		n = kept;
	}
	if (p->other_pidns)
		n = host_tids(p, list, n);
	free(pthreads);
	hashmap__free(states_read);
	free(p->threads);
	p->threads = list;
	p->nthreads = n;
	p->threads_generation++;
	return 0;
out_fail:
	free(pthreads);
	free(list);
	hashmap__free(states_read);
	return -EFAULT;
}

static uint64_t find_tstate(const struct cpython_process *p, uint32_t tid)
{
	size_t i;

	for (i = 0; i < p->nthreads; i++) {
		if (p->threads[i].tid == tid)
			return p->threads[i].tstate;
	}
	return 0;
}

int cpython_threads_read(struct cpython_process *p, const struct cpython_mem *mem)
{
	struct cpython_mem own = cpython_process_mem(p);

	return read_threads(p, mem ? mem : &own);
}

uint32_t cpython_thread_tid(const struct cpython_process *p, uint64_t tstate)
{
	size_t i;

	for (i = 0; tstate && i < p->nthreads; i++) {
		if (p->threads[i].tstate == tstate)
			return p->threads[i].tid;
	}
	return 0;
}

int cpython_main_interp(const struct cpython_process *p, const struct cpython_mem *mem,
			uint64_t *interp)
{
	uint64_t next, at;
	int n;

	/* The list is newest first: the main interpreter, made first, is its tail. */
	if (cpython_read_u64(mem, p->runtime + p->layout.runtime_interpreters_head, &at) || !at)
		return -EFAULT;
	for (n = 0; n < MAX_INTERPRETERS; n++) {
		if (cpython_read_u64(mem, at + p->layout.interp_next, &next))
			return -EFAULT;
		if (!next) {
			*interp = at;
			return 0;
		}
		at = next;
	}
	return -ELOOP;
}

uint64_t cpython_tstate_for(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
			    uint64_t now_ns, int *err)
{
	uint64_t tstate = find_tstate(p, tid);

	*err = 0;
	if (!tstate && (!p->threads_read_ns || now_ns - p->threads_read_ns > THREAD_REFRESH_NS)) {
		p->threads_read_ns = now_ns;
		*err = read_threads(p, mem);
		if (*err)
			return 0;
		tstate = find_tstate(p, tid);
	}
	return tstate;
}
