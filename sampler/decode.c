/* Decoding PERF_RECORD_* bytes: pure functions of a record's bytes, no sampler state. */
#include "internal.h"

#include <string.h>

/* Reads the fields our sample_type puts in a PERF_RECORD_SAMPLE. False when malformed. */
bool parse_sample(const struct sampler *s, const uint8_t *rec, uint32_t size, struct sample_view *v)
{
	const uint8_t *p = rec + sizeof(struct perf_event_header), *end = rec + size;
	uint64_t abi, n;

	memset(v, 0, sizeof(*v));
#define TAKE(dst)                                                                                  \
	do {                                                                                       \
		if (p + sizeof(dst) > end)                                                         \
			return false;                                                              \
		memcpy(&(dst), p, sizeof(dst));                                                    \
		p += sizeof(dst);                                                                  \
	} while (0)
	TAKE(v->id);
	TAKE(v->pid);
	TAKE(v->tid);
	TAKE(v->time);
	TAKE(v->cpu);
	p += 4; /* res */
	if (s->opts.kernel_stacks) {
		TAKE(n);
		if (n > (uint64_t)(end - p) / 8)
			return false;
		v->stack.kernel_ips = (const uint64_t *)p;
		v->stack.nkernel = (uint32_t)n;
		p += n * 8;
	}
	TAKE(abi);
	if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
		for (int i = 0; i < SREG_COUNT; i++)
			TAKE(v->stack.regs[i]);
		v->stack.valid = true;
	}
	TAKE(n);
	if (n) {
		uint64_t dyn;

		if (n > (uint64_t)(end - p))
			return false;
		v->stack.data = p;
		p += n;
		TAKE(dyn);
		v->stack.size = dyn < n ? dyn : n;
	}
#undef TAKE
	return true;
}

/* The time of any record: samples carry it near the start, others in the sample_id trailer. */
uint64_t record_time(const struct perf_event_header *hdr, void *ctx)
{
	const uint8_t *rec = (const uint8_t *)hdr;
	uint64_t t = 0;

	(void)ctx;
	if (hdr->type == PERF_RECORD_SAMPLE) {
		if (hdr->size >= 32)
			memcpy(&t, rec + 24, 8);
	} else if (hdr->size >= sizeof(*hdr) + 32) {
		/* trailer: {pid, tid}, time, {cpu, res}, identifier */
		memcpy(&t, rec + hdr->size - 24, 8);
	}
	return t;
}

/* The pid a record belongs to, for dropping what the launched child did before exec. */
uint32_t record_pid(const struct qrec *q)
{
	const struct perf_event_header *hdr = (const void *)q->data;
	uint32_t pid = 0;

	if (hdr->type == PERF_RECORD_SAMPLE && q->size >= 24)
		memcpy(&pid, q->data + 16, 4);
	else if (hdr->type != SYNTH_RECORD && q->size >= sizeof(*hdr) + 32)
		memcpy(&pid, q->data + q->size - 32, 4);
	return pid;
}
