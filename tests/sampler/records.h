/* Records as perf writes them, built by the sampler's tests (sample_id_all trailers). */
#ifndef PYTRACE_TESTS_SAMPLER_RECORDS_H
#define PYTRACE_TESTS_SAMPLER_RECORDS_H

#include <stdlib.h>
#include <string.h>

#include "../../sampler/internal.h"

/* PERF_RECORD_FORK and PERF_RECORD_EXIT with their trailer. */
struct test_task_record {
	struct perf_event_header header;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
	uint32_t id_pid, id_tid;
	uint64_t id_time;
	uint32_t id_cpu, id_res;
	uint64_t id;
};

/* A queued copy of the @size bytes at @rec, stamped @time; NULL when out of memory. */
static inline struct qrec *test_qrec(const void *rec, size_t size, uint64_t time)
{
	struct qrec *q = calloc(1, sizeof(*q) + size);

	if (!q)
		return NULL;
	q->time = time;
	q->size = (uint32_t)size;
	memcpy(q->data, rec, size);
	return q;
}

/* A fork or exit record of @pid's thread @tid (@ppid its parent), queued at @time. */
static inline struct qrec *test_task_qrec(uint32_t type, uint32_t pid, uint32_t ppid, uint32_t tid,
					  uint64_t time)
{
	struct test_task_record r = {
		{ type, 0, sizeof(r) }, pid, ppid, tid, ppid, time, pid, tid, time, 0, 0, 0
	};

	return test_qrec(&r, sizeof(r), time);
}

/* A sampler at 1 kHz (perf backend, 8 KiB stack copies) with nothing opened; NULL: no memory. */
static inline struct sampler *test_sampler(void)
{
	struct sampler_opts opts = { .backend = SAMPLER_BACKEND_PERF,
				     .frequency_hz = 1000,
				     .stack_bytes = 8192 };

	return sampler__new(&opts);
}

/*
 * A process running CPython at @pid, with nothing to read in it (its GIL taken as
 * known), as @s knows it: freed with @s. NULL when out of memory.
 */
static inline struct cpython_process *test_python_process(struct sampler *s, uint32_t pid)
{
	struct cpython_process *proc = calloc(1, sizeof(*proc));

	if (!proc)
		return NULL;
	proc->refs = 1;
	proc->gil_known = true;
	if (hashmap__set(s->pythons, pid, proc)) {
		free(proc);
		return NULL;
	}
	return proc;
}

/*
 * A stack of @proc's of @n (at most 8) frames, codes 0x1000 + i with @leaf innermost,
 * read at @read_ns for the moment @at_ns. NULL when out of memory.
 */
static inline struct py_stack *test_py_stack(struct cpython_process *proc, uint32_t n,
					     uint64_t leaf, uint64_t at_ns, uint64_t read_ns)
{
	struct cpython_frame frames[8] = { { 0 } };
	struct py_stack *ps;
	uint32_t i;

	for (i = 0; i < n && i < 8; i++)
		frames[i].code = i ? 0x1000 + i : leaf;
	ps = py_stack_new(proc, i, frames);
	if (ps) {
		ps->at_ns = at_ns;
		ps->read_ns = read_ns;
	}
	return ps;
}

/* Keeps, as remember_py() does, a stack of 3 of @proc's frames read for @at_ns at @read_ns. */
static inline void test_remember(struct task_state *t, struct cpython_process *proc, uint64_t leaf,
				 uint64_t at_ns, uint64_t read_ns)
{
	struct py_stack *ps = test_py_stack(proc, 3, leaf, at_ns, read_ns);

	if (!ps)
		abort();
	remember_py(t, ps);
	py_stack_free(ps);
}

/* A record being built, @len bytes so far. */
struct builder {
	uint8_t buf[4096];
	size_t len;
};

/* Appends @n bytes of @src to @b. */
static inline void put(struct builder *b, const void *src, size_t n)
{
	if (b->len + n > sizeof(b->buf))
		abort(); /* a test building more than it has room for */
	memcpy(b->buf + b->len, src, n);
	b->len += n;
}

static inline void put_u32(struct builder *b, uint32_t v)
{
	put(b, &v, sizeof(v));
}

static inline void put_u64(struct builder *b, uint64_t v)
{
	put(b, &v, sizeof(v));
}

/*
 * A sample as our events write it: id, pid/tid, time, cpu/res, [callchain], user regs,
 * user stack (size, bytes, dynamic size).
 */
static inline void build_sample(struct builder *b, bool callchain, uint64_t abi,
				uint64_t stack_size, uint64_t dyn_size)
{
	struct perf_event_header hdr = { PERF_RECORD_SAMPLE, PERF_RECORD_MISC_USER, 0 };
	uint64_t i;

	memset(b, 0, sizeof(*b));
	put(b, &hdr, sizeof(hdr));
	put_u64(b, 77);	  /* id */
	put_u32(b, 100);  /* pid */
	put_u32(b, 101);  /* tid */
	put_u64(b, 5000); /* time */
	put_u32(b, 3);	  /* cpu */
	put_u32(b, 0);	  /* res */
	if (callchain) {
		put_u64(b, 2);
		put_u64(b, 0xffffffff81000010ULL);
		put_u64(b, 0xffffffff81000020ULL);
	}
	put_u64(b, abi);
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		for (i = 0; i < SREG_COUNT; i++)
			put_u64(b, 0x1000 + i);
	}
	put_u64(b, stack_size);
	if (stack_size) {
		for (i = 0; i < stack_size; i++)
			put(b, &(uint8_t){ (uint8_t)i }, 1);
		put_u64(b, dyn_size);
	}
	((struct perf_event_header *)b->buf)->size = (uint16_t)b->len;
}

#endif
