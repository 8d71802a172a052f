/* perf ring buffers (read side) and a min-heap that restores time order across CPUs. */
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

static bool before(const struct qrec *a, const struct qrec *b)
{
	return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

int queue__push(struct queue *q, struct qrec *rec)
{
	size_t i;

	if (q->count == q->capacity) {
		size_t capacity = q->capacity ? q->capacity * 2 : 1024;
		struct qrec **grown = realloc(q->heap, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		q->heap = grown;
		q->capacity = capacity;
	}
	rec->seq = q->next_seq++;
	i = q->count++;
	while (i && before(rec, q->heap[(i - 1) / 2])) {
		q->heap[i] = q->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	q->heap[i] = rec;
	return 0;
}

struct qrec *queue__peek(const struct queue *q)
{
	return q->count ? q->heap[0] : NULL;
}

struct qrec *queue__pop(struct queue *q)
{
	struct qrec *top, *last;
	size_t i = 0;

	if (!q->count)
		return NULL;
	top = q->heap[0];
	last = q->heap[--q->count];
	for (;;) {
		size_t child = 2 * i + 1;

		if (child >= q->count)
			break;
		if (child + 1 < q->count && before(q->heap[child + 1], q->heap[child]))
			child++;
		if (!before(q->heap[child], last))
			break;
		q->heap[i] = q->heap[child];
		i = child;
	}
	if (q->count)
		q->heap[i] = last;
	return top;
}

void queue__clear(struct queue *q)
{
	while (q->count)
		qrec_free(queue__pop(q));
	free(q->heap);
	q->heap = NULL;
	q->capacity = 0;
}
