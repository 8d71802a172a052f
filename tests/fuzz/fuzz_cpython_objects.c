/*
 * Fuzzes the decoders of objects read from a target's memory: code objects with their
 * names, parameters and line tables (cpython/code.c), str, int, dict and attribute
 * readers (cpython/objects.c), argument values and their records (cpython/args.c), frames
 * the kernel read (cpython/walk.c) and _Py_DebugOffsets (cpython/layout.c).
 *
 * The input is the target's memory, mapped at FUZZ_BASE; it starts with a struct
 * objects_head saying which layout to read with and where the objects are (addresses
 * in that memory). The same bytes are also taken as the kernel's argument records and
 * raw frames. tests/fuzz/gen_seeds.c writes valid images for 3.8 to 3.13.
 */
#include "fuzz.h"
#include "fuzz_layout.h"

#include "../../cpython/internal.h"
#include "../cpython/frame_args.h"

struct objects_head {
	uint8_t minor;	   /* fuzz_minor() */
	uint8_t task_kind; /* of cpython_read_task_locals(): 1 + b % 2 */
	uint16_t task_slots[CPYTHON_TASK_LOCALS];
	uint8_t pad[2];
	uint64_t code, str, obj, dict, frame, lasti;
	uint64_t types[CPYTHON_TYPE_COUNT];
};

#define OUT_SIZE ((CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS) * CPYTHON_RAW_ARG_MAX)
#define MAX_RAW_FRAMES 64

static bool same_value(const struct cpython_value *a, const struct cpython_value *b)
{
	return a->kind == b->kind && a->i == b->i && !memcmp(&a->f, &b->f, sizeof(a->f)) &&
	       a->type == b->type && a->sized == b->sized && a->cut == b->cut &&
	       !strcmp(a->text, b->text);
}

/*
 * Decodes each record of @buf; a record made canonical must decode to the same value
 * (the sampler keeps one copy of arguments whose canonical bytes are equal).
 */
static void decode_records(const struct cpython_layout *l, const struct cpython_types *t,
			   const uint8_t *buf, uint32_t len)
{
	struct cpython_raw_arg a;
	const uint8_t *text;
	uint32_t at = 0;

	while (cpython_next_arg(buf, len, &at, &a, &text)) {
		struct cpython_value v, w;

		cpython_arg_value(l, t, &a, text, &v);
		cpython_arg_canonical(l, t, &a);
		cpython_arg_value(l, t, &a, text, &w);
		if (!same_value(&v, &w)) {
			fprintf(stderr, "canonical record decodes to another value: kind %d/%d\n",
				v.kind, w.kind);
			abort();
		}
	}
}

static void code_and_lines(const struct cpython_layout *l, const struct cpython_mem *mem,
			   const struct objects_head *h)
{
	struct cpython_code c;
	int32_t i;

	if (cpython_read_code(l, mem, h->code, &c))
		return;
	cpython_line(l->lines, c.linetable, c.linetable_len, c.firstlineno, (int32_t)h->lasti);
	for (i = 0; i < 16; i++)
		cpython_line(l->lines, c.linetable, c.linetable_len, c.firstlineno, 2 * i);
	free(c.linetable);
}

static void strings_and_objects(const struct cpython_layout *l, const struct cpython_mem *mem,
				const struct objects_head *h)
{
	struct cpython_dict_item items[64];
	char buf[256], tiny[5];
	uint64_t v, type;

	cpython_read_string(l, mem, h->str, buf, sizeof(buf));
	cpython_read_string(l, mem, h->str, tiny, sizeof(tiny));
	cpython_read_name(l, mem, h->obj, buf, sizeof(buf));
	cpython_read_ulong(l, mem, h->obj, &v);
	if (!fuzz_image_read(mem->ctx, h->obj + l->object_type, &type, 8)) {
		cpython_read_type_name(l, mem, type, buf, sizeof(buf));
		cpython_read_type_name(l, mem, type, tiny, sizeof(tiny));
	}
	cpython_dict_get(l, mem, h->dict, "_name", &v);
	cpython_dict_items(l, mem, h->dict, items, sizeof(items) / sizeof(items[0]));
	cpython_attr_get(l, mem, h->obj, "_name", &v);
	cpython_attr_get(l, mem, h->obj, "work_id", &v);
}

static void arguments(const struct cpython_layout *l, const struct cpython_mem *mem,
		      const struct objects_head *h, const struct cpython_types *t)
{
	struct cpython_task_code task = { .code = h->code, .kind = 1 + h->task_kind % 2 };
	struct cpython_args_out out;

	out.buf = calloc(1, OUT_SIZE);
	if (!out.buf)
		return;
	out.size = OUT_SIZE;
	out.used = 0;
	memcpy(task.slots, h->task_slots, sizeof(task.slots));
	frame_args(l, mem, t, h->frame, h->code, &out);
	cpython_read_task_locals(l, mem, t, h->frame, &task, &out);
	decode_records(l, t, out.buf, out.used);
	free(out.buf);
}

static void raw_frames(const struct cpython_layout *l, const uint8_t *data, size_t size)
{
	struct cpython_frame frames[MAX_RAW_FRAMES];
	struct cpython_raw_frame *raw;
	size_t n = size / sizeof(*raw);

	raw = malloc(n ? n * sizeof(*raw) : 1);
	if (!raw)
		return;
	memcpy(raw, data, n * sizeof(*raw));
	cpython_frames_from_raw(l, raw, (uint32_t)n, frames, MAX_RAW_FRAMES);
	free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_image im = { data, size, FUZZ_BASE };
	struct cpython_mem mem = { .read = fuzz_image_read, .ctx = &im };
	struct objects_head h = { 0 };
	struct cpython_layout l, decoded;
	struct cpython_types t;

	memcpy(&h, data, size < sizeof(h) ? size : sizeof(h));
	fuzz_layout(fuzz_minor(h.minor), &l);
	memcpy(t.addr, h.types, sizeof(t.addr));
	code_and_lines(&l, &mem, &h);
	strings_and_objects(&l, &mem, &h);
	arguments(&l, &mem, &h, &t);
	/* The same bytes as the kernel's records and frames, and as a _PyRuntime. */
	decode_records(&l, &t, data, (uint32_t)size);
	raw_frames(&l, data, size);
	if (!cpython_decode_debug_offsets(data, size, 0, &decoded)) {
		code_and_lines(&decoded, &mem, &h);
		strings_and_objects(&decoded, &mem, &h);
		arguments(&decoded, &mem, &h, &t);
	}
	return 0;
}
