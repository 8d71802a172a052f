/* Internal to sampler/: perf ring buffers, and the records copied out of them. */
#ifndef PYTRACE_SAMPLER_RING_H
#define PYTRACE_SAMPLER_RING_H

#include <linux/perf_event.h>
#include <stddef.h>
#include <stdint.h>

struct py_stack;

/* A record copied out of a ring buffer, ordered by (time, seq). */
struct qrec {
	uint64_t time;
	uint64_t seq;
	struct py_stack *py; /* Python frames read when it was drained, or NULL (owned: see
			     qrec_free() in internal.h) */
	uint32_t cpu;
	uint32_t size;
	uint8_t data[]; /* the raw record, header first */
};

struct ring {
	int fd;
	uint32_t cpu;
	void *base;
	size_t map_size, data_size;
};

/* Maps @data_size bytes (a power of two number of pages) of @fd's buffer. 0 or -errno. */
int ring__map(struct ring *ring, int fd, uint32_t cpu, size_t data_size);
void ring__unmap(struct ring *ring);

/*
 * Copies every complete record out of the buffer, calling @take for each (it owns the
 * copy, or frees it), then releases the space to the kernel. Returns records taken.
 */
int ring__drain(struct ring *ring,
		uint64_t (*time_of)(const struct perf_event_header *hdr, void *ctx),
		void (*take)(struct qrec *rec, void *ctx), void *ctx);

#endif
