/* Python stacks read for records: copies, code look-ups, and per-thread fifos of the kernel's. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

void py_stack_free(struct py_stack *ps)
{
	if (!ps)
		return;
	py_stack_free(ps->late);
	cpython_process__put(ps->proc);
	free(ps->codes);
	free(ps);
}

/*
 * Looks up each frame's code object in the process's cache, while the lock keeps the
 * drainer from changing it, so the symbolizer can use them without the lock.
 */
void resolve_codes(struct py_stack *ps)
{
	uint32_t i;

	if (ps->codes)
		return;
	ps->codes = calloc(ps->n ? ps->n : 1, sizeof(*ps->codes));
	for (i = 0; ps->codes && i < ps->n; i++)
		ps->codes[i] = cpython_code_lookup(ps->proc, ps->frames[i].code,
						   ps->frames[i].fingerprint);
}

void qrec_free(struct qrec *q)
{
	if (!q)
		return;
	py_stack_free(q->py);
	free(q);
}

struct py_stack *py_stack_new(struct cpython_process *proc, uint32_t n,
			      const struct cpython_frame *frames)
{
	struct py_stack *ps = malloc(sizeof(*ps) + n * sizeof(*frames));

	if (!ps)
		return NULL;
	memset(ps, 0, sizeof(*ps));
	ps->proc = cpython_process__get(proc);
	ps->n = n;
	memcpy(ps->frames, frames, n * sizeof(*frames));
	return ps;
}

/*
 * Decodes the new list @id (@len bytes at @list) with @proc's layout, types and type
 * names, while the process can still be asked for a type's name, and keeps the values.
 * The same bytes met again in another process (the same type and object addresses: a
 * forked child, as a rule) are the same list, with these values.
 */
static void decode_list(struct sampler *s, struct cpython_process *proc, uint32_t id,
			const uint8_t *list, uint32_t len)
{
	struct sampler_arg args[CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS];
	/* Decoded in place: the store copies the texts once, from here. */
	struct cpython_value v[CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS];
	struct cpython_raw_arg a;
	const uint8_t *text;
	uint32_t at = 0, n = 0;

	cpython_read_type_names(proc, NULL, list, len);
	while (n < CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS &&
	       cpython_next_arg(list, len, &at, &a, &text)) {
		cpython_arg_value(&proc->layout, &proc->types, &a, text, &v[n]);
		args[n] = (struct sampler_arg){ .index = a.index,
						.object = a.object,
						.kind = v[n].kind,
						.i = v[n].i,
						.f = v[n].f,
						.sized = v[n].sized,
						.cut = v[n].cut };
		if (v[n].kind == CPYTHON_VALUE_STR || v[n].kind == CPYTHON_VALUE_BYTES)
			args[n].text = v[n].text;
		else if (v[n].kind == CPYTHON_VALUE_OTHER)
			args[n].text = cpython_type_name(proc, v[n].type);
		n++;
	}
	if (arg_store__set_values(s->args, id, args, n))
		s->stats.args_not_kept++;
}

uint32_t store_list(struct sampler *s, struct cpython_process *proc, const uint8_t *bytes,
		    uint32_t len)
{
	uint8_t list[(CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS) * CPYTHON_RAW_ARG_MAX];
	struct cpython_raw_arg a;
	const uint8_t *text;
	uint32_t at, was, id;
	bool added;

	if (!len || len > sizeof(list))
		return 0;
	/* Equal values read at two moments: one list (the same call, seen twice). */
	memcpy(list, bytes, len);
	for (at = 0, was = 0; cpython_next_arg(list, len, &at, &a, &text); was = at) {
		cpython_arg_canonical(&proc->layout, &proc->types, &a);
		memcpy(list + was, &a, sizeof(a));
	}
	id = arg_store__add(s->args, list, len, &added);
	if (!id)
		s->stats.args_not_kept++;
	else if (added)
		decode_list(s, proc, id, list, len);
	return id;
}

void store_args(struct sampler *s, struct cpython_process *proc, struct cpython_frame *frames,
		uint32_t n, const uint8_t *bytes, uint32_t len)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct cpython_frame *f = &frames[i];

		f->args = 0;
		if (f->args_len && f->args_at <= len && f->args_len <= len - f->args_at)
			f->args = store_list(s, proc, bytes + f->args_at, f->args_len);
	}
}

void count_cut(struct sampler *s, uint32_t frames, bool rootless)
{
	s->stats.cut_stacks++;
	s->stats.cut_frames += frames;
	s->stats.rootless_stacks += rootless;
}

/* Frames carry their arguments as store ids: a copy shares them. */
struct py_stack *py_stack_copy(const struct py_stack *src)
{
	struct py_stack *ps = py_stack_new(src->proc, src->n, src->frames);

	if (!ps)
		return NULL;
	memcpy(ps, src, sizeof(*ps)); /* the same process: the reference taken stands */
	ps->codes = NULL;
	ps->late = NULL;
	ps->kernel = false; /* a copy stands for another moment: a guess */
	ps->gil = SAMPLER_GIL_UNKNOWN;
	return ps;
}

void py_fifo_push(struct py_fifo *f, struct py_stack *ps)
{
	if (f->count == PY_FIFO_MAX) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	if (f->head + f->count == f->capacity) {
		if (f->head) {
			memmove(f->items, f->items + f->head, f->count * sizeof(*f->items));
			f->head = 0;
		} else {
			uint32_t capacity = f->capacity ? f->capacity * 2 : 8;
			struct py_stack **grown = realloc(f->items, capacity * sizeof(*grown));

			if (!grown) {
				py_stack_free(ps);
				return;
			}
			f->items = grown;
			f->capacity = capacity;
		}
	}
	f->items[f->head + f->count++] = ps;
}

/*
 * Takes the latest stack read at or before @time, dropping older ones; NULL unless it
 * was read less than @within ns before (else it belongs to an earlier record).
 */
struct py_stack *py_fifo_take(struct py_fifo *f, uint64_t time, uint64_t within)
{
	struct py_stack *found = NULL;

	while (f->count && f->items[f->head]->at_ns <= time) {
		py_stack_free(found);
		found = f->items[f->head++];
		f->count--;
	}
	if (!f->count)
		f->head = 0;
	if (found && time - found->at_ns >= within) {
		py_stack_free(found);
		found = NULL;
	}
	return found;
}

/*
 * The kernel's reading of a sample perf kept (with its stack copy) for @time, @ip, @sp:
 * they carry the same user registers, and perf stamps its record a little before the
 * kernel's reader runs (0.25-0.5 ms here). Readings of earlier samples are dropped.
 */
struct py_stack *py_fifo_match(struct py_fifo *f, uint64_t time, uint64_t ip, uint64_t sp)
{
	uint32_t i;

	while (f->count && f->items[f->head]->at_ns + 100000 < time) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	for (i = 0; i < f->count && i < 16; i++) {
		struct py_stack *ps = f->items[f->head + i];

		if (ps->at_ns > time + 5000000)
			break;
		if (ps->user_ip == ip && ps->user_sp == sp) {
			while (i--) {
				py_stack_free(f->items[f->head++]);
				f->count--;
			}
			f->head++;
			f->count--;
			return ps;
		}
	}
	return NULL;
}

void py_fifo_clear(struct py_fifo *f)
{
	while (f->count) {
		py_stack_free(f->items[f->head++]);
		f->count--;
	}
	free(f->items);
	memset(f, 0, sizeof(*f));
}
