/*
 * Fuzzes what is read of a whole Python process from outside: its runtime and, for
 * 3.13+, the _Py_DebugOffsets at its start (cpython/process.c, layout.c), its thread
 * lists, threading's and multiprocessing's names (names.c, objects.c), the GIL (gil.c),
 * frame walks with arguments (walk.c, pages.c, args.c) and the code objects they lead
 * to (codes.c, code.c).
 *
 * The input is the target's memory, mapped at FUZZ_BASE, where _PyRuntime is. An image
 * that starts with "xdebugpy" describes itself; any other is read as 3.(8 + b % 5), b its
 * first byte. The built-in types (for arguments) are the 11 words at FUZZ_BASE + 1024.
 * tests/fuzz/gen_seeds.c writes valid processes for 3.8 to 3.13.
 */
#include "fuzz.h"

#include "../../cpython/internal.h"

#define PID 4242
#define TYPES_AT 1024
#define MAX_NAMES 16
#define MAX_WALKED 4 /* threads walked */
#define MAX_FRAMES 64
#define ARGS_SIZE (MAX_FRAMES * (CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS) * CPYTHON_RAW_ARG_MAX)

static unsigned minor_of(const uint8_t *data, size_t size)
{
	if (size >= 8 && !memcmp(data, "xdebugpy", 8))
		return 0; /* the image says */
	return size ? 8 + data[0] % 5 : 8;
}

/* What a sample's walk does with a thread: its frames, their arguments, code and lines. */
static void walk_thread(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
			uint8_t *args_buf)
{
	struct cpython_args_out args = { args_buf, ARGS_SIZE, 0 };
	struct cpython_frame frames[MAX_FRAMES];
	struct cpython_cut cut;
	int n, i;

	n = cpython_walk_args(p, mem, tid, 1, frames, MAX_FRAMES, &args, &cut);
	if (n <= 0)
		return;
	cpython_read_type_names(p, mem, args.buf, args.used);
	cpython_read_codes(p, mem, frames, (uint32_t)n);
	cpython_all_read(p, frames, (uint32_t)n);
	for (i = 0; i < n; i++) {
		struct cpython_code_entry *e =
			cpython_code_lookup(p, frames[i].code, frames[i].fingerprint);

		if (e && !e->unreadable)
			cpython_line(p->layout.lines, e->info.linetable, e->info.linetable_len,
				     e->info.firstlineno, frames[i].lasti);
	}
	cpython_walk(p, mem, tid, 2, frames, 3); /* a deeper stack than asked for */
}

static void read_process(struct cpython_process *p, const struct cpython_mem *mem)
{
	struct cpython_thread_name names[MAX_NAMES];
	struct cpython_gil_addrs gil;
	struct cpython_gil_holder holder;
	uint32_t tids[MAX_WALKED];
	uint8_t *args_buf;
	char name[CPYTHON_NAME_MAX];
	uint64_t count;
	size_t i, n;

	cpython_thread_names(p, mem, names, MAX_NAMES);
	cpython_process_name(p, mem, name, sizeof(name));
	cpython_modules_count(p, mem, &count);
	cpython_find_task_codes(p, mem);
	if (!cpython_gil_addrs(p, mem, &gil)) {
		cpython_gil_futex(&gil, gil.cond + 4);
		cpython_gil_holder(p, mem, &holder);
	}
	if (cpython_threads_read(p, mem))
		return;
	args_buf = malloc(ARGS_SIZE);
	if (!args_buf)
		return;
	/* The walks re-read the thread list: take the tids first. */
	for (i = n = 0; i < p->nthreads && n < MAX_WALKED; i++)
		tids[n++] = p->threads[i].tid;
	for (i = 0; i < n; i++)
		walk_thread(p, mem, tids[i], args_buf);
	free(args_buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_image im = { data, size, FUZZ_BASE };
	struct cpython_mem mem = {
		.read = fuzz_image_read,
		.ctx = &im,
		.read_blocks = fuzz_image_read_blocks,
	};
	struct cpython_process *p;
	int i;

	p = cpython_process__new_mem(PID, FUZZ_BASE, minor_of(data, size), &mem);
	if (!p)
		return 0;
	for (i = 0; i < CPYTHON_TYPE_COUNT; i++)
		p->types.addr[i] = fuzz_u64(data, size, TYPES_AT + 8 * (size_t)i);
	read_process(p, &mem);
	cpython_process__put(p);
	return 0;
}
