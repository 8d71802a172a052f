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

int ring__drain(struct ring *ring,
		uint64_t (*time_of)(const struct perf_event_header *hdr, void *ctx),
		void (*take)(struct qrec *rec, void *ctx), void *ctx)
{
	struct perf_event_mmap_page *meta = ring->base;
	const uint8_t *data = (const uint8_t *)ring->base + sysconf(_SC_PAGESIZE);
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;
	size_t mask = ring->data_size - 1;
	int taken = 0;

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header hdr;
		size_t off = tail & mask, first;
		struct qrec *rec;

		/* A record may wrap around the end of the buffer: copy it in two parts. */
		first = ring->data_size - off;
		if (first >= sizeof(hdr)) {
			memcpy(&hdr, data + off, sizeof(hdr));
		} else {
			memcpy(&hdr, data + off, first);
			memcpy((uint8_t *)&hdr + first, data, sizeof(hdr) - first);
		}
		if (hdr.size < sizeof(hdr) || tail + hdr.size > head)
			break;
		rec = malloc(sizeof(*rec) + hdr.size);
		if (rec) {
			rec->py = NULL;
			if (first >= hdr.size) {
				memcpy(rec->data, data + off, hdr.size);
			} else {
				memcpy(rec->data, data + off, first);
				memcpy(rec->data + first, data, hdr.size - first);
			}
			rec->size = hdr.size;
			rec->cpu = ring->cpu;
			rec->time = time_of((const struct perf_event_header *)rec->data, ctx);
			take(rec, ctx);
			taken++;
		}
		tail += hdr.size;
	}
	__atomic_store_n(&meta->data_tail, tail, __ATOMIC_RELEASE);
	return taken;
}
