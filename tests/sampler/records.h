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

#endif
