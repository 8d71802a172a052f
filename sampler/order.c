/* Time order: a drain's batch sorted, then a min-heap of records behind a watermark. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

/* Collects one drain's records; they are followed in time order once all are in. */
void take_record(struct qrec *rec, void *ctx)
{
	struct sampler *s = ctx;

	if (s->batch_count == s->batch_capacity) {
		size_t capacity = s->batch_capacity ? s->batch_capacity * 2 : 1024;
		struct qrec **grown = realloc(s->batch, capacity * sizeof(*grown));

		if (!grown) {
			qrec_free(rec);
			return;
		}
		s->batch = grown;
		s->batch_capacity = capacity;
	}
	rec->seq = s->batch_seq++;
	s->batch[s->batch_count++] = rec;
}

static int by_time(const void *a, const void *b)
{
	const struct qrec *x = *(struct qrec *const *)a, *y = *(struct qrec *const *)b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorts a drain's records by (time, seq). */
void batch_sort(struct qrec **recs, size_t count)
{
	if (count) /* qsort() wants a non-NULL array even for nothing */
		qsort(recs, count, sizeof(*recs), by_time);
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

enum order_verdict order_verdict(uint64_t time, uint64_t watermark, bool stopped, uint64_t stop_ns)
{
	if (!stopped)
		return time > watermark ? ORDER_WAIT : ORDER_TAKE;
	/* Stopped: everything still queued is in; what came after the stop is not traced. */
	return time > stop_ns && time != 0 ? ORDER_DROP : ORDER_TAKE;
}
