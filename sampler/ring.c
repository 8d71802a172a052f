/* perf ring buffers, read side: copies complete records out and gives the space back. */
#include "ring.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int ring__map(struct ring *ring, int fd, uint32_t cpu, size_t data_size)
{
	long page = sysconf(_SC_PAGESIZE);
	void *base;

	ring->map_size = data_size + (size_t)page;
	base = mmap(NULL, ring->map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	ring->fd = fd;
	ring->cpu = cpu;
	ring->base = base;
	ring->data_size = data_size;
	return 0;
}

void ring__unmap(struct ring *ring)
{
	if (ring->base)
		munmap(ring->base, ring->map_size);
	ring->base = NULL;
}

void ring_rec__read(const struct ring_rec *r, uint32_t off, void *buf, size_t len)
{
	const uint8_t *data = (const uint8_t *)r->ring->base + sysconf(_SC_PAGESIZE);
	size_t start = (size_t)((r->at + off) & (r->ring->data_size - 1));
	size_t first = r->ring->data_size - start;

	if (first >= len) {
		memcpy(buf, data + start, len);
	} else {
		memcpy(buf, data + start, first);
		memcpy((uint8_t *)buf + first, data, len - first);
	}
}

struct qrec *ring_rec__copy(const struct ring_rec *r)
{
	struct qrec *rec = malloc(sizeof(*rec) + r->hdr.size);

	if (!rec)
		return NULL;
	ring_rec__read(r, 0, rec->data, r->hdr.size);
	rec->py = NULL;
	rec->size = r->hdr.size;
	rec->cpu = r->ring->cpu;
	rec->time = 0;
	return rec;
}

int ring__drain(struct ring *ring, struct qrec *(*copy)(const struct ring_rec *r, void *ctx),
		void (*take)(struct qrec *rec, void *ctx), void *ctx)
{
	struct perf_event_mmap_page *meta = ring->base;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	struct ring_rec r = { ring, meta->data_tail, { 0, 0, 0 } };
	int taken = 0;

	while (r.at + sizeof(r.hdr) <= head) {
		struct qrec *rec;

		ring_rec__read(&r, 0, &r.hdr, sizeof(r.hdr));
		if (r.hdr.size < sizeof(r.hdr) || r.at + r.hdr.size > head)
			break;
		rec = copy(&r, ctx);
		if (rec) {
			take(rec, ctx);
			taken++;
		}
		r.at += r.hdr.size;
	}
	__atomic_store_n(&meta->data_tail, r.at, __ATOMIC_RELEASE);
	return taken;
}
