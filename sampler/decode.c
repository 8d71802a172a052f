/* Decoding PERF_RECORD_* bytes: pure functions of a record's bytes, no sampler state. */
#include "internal.h"

#include <string.h>

/*
 * A bounded cursor over a record's bytes: every read checks what is left, and once one
 * fails the reader stays failed (reads then yield zeros), so callers check once at the end.
 */
struct rec_reader {
	const uint8_t *p, *end;
	bool ok;
};

static void reader_take(struct rec_reader *r, void *dst, size_t n)
{
	if (!r->ok || n > (size_t)(r->end - r->p)) {
		r->ok = false;
		memset(dst, 0, n);
		return;
	}
	memcpy(dst, r->p, n);
	r->p += n;
}

/* Skips @n bytes; returns where they start, or NULL (and fails) when fewer are left. */
static const uint8_t *reader_span(struct rec_reader *r, uint64_t n)
{
	const uint8_t *start = r->p;

	if (!r->ok || n > (uint64_t)(r->end - r->p)) {
		r->ok = false;
		return NULL;
	}
	r->p += n;
	return start;
}

/*
 * Reads the fields our sample_type puts in a PERF_RECORD_SAMPLE (@callchain: the events
 * ask for kernel callchains). False when malformed; @v then holds nothing to trust.
 */
bool decode_sample(const uint8_t *rec, uint32_t size, bool callchain, struct sample_view *v)
{
	struct rec_reader r = { rec + sizeof(struct perf_event_header), rec + size, true };
	uint64_t abi, n;

	memset(v, 0, sizeof(*v));
	if (size < sizeof(struct perf_event_header))
		return false;
	reader_take(&r, &v->id, sizeof(v->id));
	reader_take(&r, &v->pid, sizeof(v->pid));
	reader_take(&r, &v->tid, sizeof(v->tid));
	reader_take(&r, &v->time, sizeof(v->time));
	reader_take(&r, &v->cpu, sizeof(v->cpu));
	reader_span(&r, 4); /* res */
	if (callchain) {
		reader_take(&r, &n, sizeof(n));
		v->stack.kernel_ips =
			(const uint64_t *)reader_span(&r, n < UINT32_MAX ? n * 8 : ~0ULL);
		v->stack.nkernel = (uint32_t)n;
	}
	reader_take(&r, &abi, sizeof(abi));
	if (r.ok && abi != PERF_SAMPLE_REGS_ABI_NONE) {
		reader_take(&r, v->stack.regs, sizeof(v->stack.regs));
		v->stack.valid = true;
	}
	reader_take(&r, &n, sizeof(n));
	if (r.ok && n) {
		uint64_t dyn;

		v->stack.data = reader_span(&r, n);
		reader_take(&r, &dyn, sizeof(dyn));
		v->stack.size = dyn < n ? dyn : n;
	}
	return r.ok;
}

bool sample_stack_cut(void (*read)(const void *src, uint32_t off, void *buf, size_t len),
		      const void *src, uint32_t size, bool callchain, struct stack_cut *cut)
{
	/* header, identifier, pid and tid, time, cpu and res: as decode_sample() reads */
	uint64_t off = sizeof(struct perf_event_header) + 32, n, abi;

	if (callchain) {
		if (off + 8 > size)
			return false;
		read(src, (uint32_t)off, &n, sizeof(n));
		if (n > size / 8)
			return false;
		off += 8 + n * 8;
	}
	if (off + 8 > size)
		return false;
	read(src, (uint32_t)off, &abi, sizeof(abi));
	off += 8;
	if (abi != PERF_SAMPLE_REGS_ABI_NONE)
		off += 8 * SREG_COUNT;
	if (off + 8 > size)
		return false;
	read(src, (uint32_t)off, &n, sizeof(n));
	/* The stack must be the record's last field: its size, its bytes, the dynamic size. */
	if (!n || n % 8 || off + 16 + n != size)
		return false;
	read(src, (uint32_t)(off + 8 + n), &cut->dyn, sizeof(cut->dyn));
	cut->size_at = (uint32_t)off;
	cut->keep = (uint32_t)(((cut->dyn < n ? cut->dyn : n) + 7) / 8 * 8);
	cut->size = cut->size_at + 16 + cut->keep;
	return true;
}

void stack_cut_apply(const struct stack_cut *cut, uint8_t *rec)
{
	uint64_t keep = cut->keep;

	memcpy(rec + cut->size_at, &keep, sizeof(keep));
	memcpy(rec + cut->size - 8, &cut->dyn, sizeof(cut->dyn));
	((struct perf_event_header *)rec)->size = (uint16_t)cut->size;
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

int decode_exit_code(uint32_t code)
{
	if (code & 0x7f)
		return 128 + (int)(code & 0x7f);
	return (int)((code >> 8) & 0xff);
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
