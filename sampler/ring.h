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

/* A complete record still in a ring's buffer. */
struct ring_rec {
	const struct ring *ring;
	uint64_t at; /* where it starts, counted as data_tail counts */
	struct perf_event_header hdr;
};

/* Copies @len bytes from @off into the record @r out (a record may wrap around). */
void ring_rec__read(const struct ring_rec *r, uint32_t off, void *buf, size_t len);

/* A new qrec holding a whole copy of @r (time 0, seq unset); NULL without memory. */
struct qrec *ring_rec__copy(const struct ring_rec *r);

/*
 * Copies every complete record out of the buffer with @copy (ring_rec__copy() or one
 * that leaves parts out), calling @take for each copy (it owns it, or frees it), then
 * releases the space to the kernel. Returns records taken.
 */
int ring__drain(struct ring *ring, struct qrec *(*copy)(const struct ring_rec *r, void *ctx),
		void (*take)(struct qrec *rec, void *ctx), void *ctx);

#endif
