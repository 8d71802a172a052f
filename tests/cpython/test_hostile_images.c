/*
 * The readers' bounds against a hostile or corrupt target (issue 30), each on a crafted
 * process image of every layout (synth_process.h, and regions generated here as they are
 * read): frame chains that loop or never end, code objects whose lengths lie, line tables
 * whose varints never end, thread lists that loop or never end, and more code objects
 * than the code cache keeps.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../cpython/cpython.h"
#include "synth_process.h"

/* The tests build with ASan (Makefile): its count of the heap's live bytes. */
size_t __sanitizer_get_current_allocated_bytes(void);

static const unsigned minors[] = { 8, 9, 10, 11, 12, 13, 14, 15 };
#define NMINORS (sizeof(minors) / sizeof(minors[0]))

/* Bounds private to cpython/, restated: a test fails when they change. */
#define MAX_STRING_CHARS 4096	       /* cpython/code.c: characters of a str read */
#define MAX_LINETABLE (256 * 1024)     /* cpython/code.c: bytes of a line table read */
#define MAX_CODES 65536		       /* cpython/codes.c: code objects a cache keeps */
#define MAX_LINETABLE_BYTES (64 << 20) /* cpython/codes.c: their line tables' bytes */

/* ---- regions beyond the image, made up as they are read ---- */

#define GEN_FRAMES 0x100000000ULL /* frame k at GEN_FRAMES + k * FRAME_STRIDE */
#define FRAME_STRIDE 0x200
#define GEN_CODES 0x200000000ULL /* code k at GEN_CODES + k * CODE_STRIDE */
#define CODE_STRIDE 0x200
#define GEN_TSTATES 0x300000000ULL /* thread state k, of thread GEN_TID0 + k */
#define TSTATE_STRIDE 0x100
#define GEN_PTHREADS 0x400000000ULL /* its struct pthread (<= 3.10: the tid at 0x2d0) */
#define PTHREAD_STRIDE 0x400
#define GEN_TID0 100000u
#define BIG 0x500000000ULL /* 1 MiB of plain memory, for long strings and tables */
#define BIG_SIZE (1u << 20)
#define NO_FRAME UINT32_MAX

#define GEN_FRAME(k) (GEN_FRAMES + (uint64_t)(k)*FRAME_STRIDE)
#define GEN_CODE(k) (GEN_CODES + (uint64_t)(k)*CODE_STRIDE)
#define GEN_TSTATE(k) (GEN_TSTATES + (uint64_t)(k)*TSTATE_STRIDE)
#define GEN_PTHREAD(k) (GEN_PTHREADS + (uint64_t)(k)*PTHREAD_STRIDE)

/*
 * What the generated regions hold, and what was read. Frame k (of @nframes) runs code
 * @code_base + k and was called from frame k + 1, the last from @last_previous (a
 * frame's index: a cycle; NO_FRAME: none). Thread state k (of @ntstates) follows the
 * image's and is followed by k + 1, the last by @last_tstate_next. Every code is named
 * @name in file @file, its line table @linetable.
 */
static struct gen {
	const struct cpython_layout *l;
	uint32_t nframes, last_previous, code_base, ncodes;
	bool shims; /* 3.11+: every generated frame a C-stack shim */
	uint64_t name, file, linetable;
	uint32_t ntstates;
	uint64_t last_tstate_next;
	uint64_t reads, budget; /* reads made, and how many fail the test (0: any) */
	size_t longest;		/* the longest read */
} gen;

static uint8_t big[BIG_SIZE];

static void rec_u64(uint8_t *rec, size_t stride, uint64_t at, uint64_t v)
{
	assert_true(at + 8 <= stride);
	memcpy(rec + at, &v, 8);
}

static void frame_fill(uint64_t k, uint8_t *rec)
{
	const struct cpython_layout *l = gen.l;
	uint64_t code = GEN_CODE(gen.code_base + k), previous = 0;

	if (k + 1 < gen.nframes)
		previous = GEN_FRAME(k + 1);
	else if (gen.last_previous != NO_FRAME)
		previous = GEN_FRAME(gen.last_previous);
	rec_u64(rec, FRAME_STRIDE, l->frame_code, l->code_tagged ? code | 1 : code);
	rec_u64(rec, FRAME_STRIDE, l->frame_previous, previous);
	if (l->instr > CPYTHON_LASTI_UNITS)
		rec_u64(rec, FRAME_STRIDE, l->frame_instr, code + l->code_adaptive);
	if (l->live == CPYTHON_LIVE_EXECUTING)
		rec[l->frame_live] = 1; /* f_executing; 3.10's f_state EXECUTING is 0 */
	if (gen.shims && l->frame_owner)
		rec[l->frame_owner] = (uint8_t)l->owner_first_skipped;
}

static void code_fill(uint64_t k, uint8_t *rec)
{
	const struct cpython_layout *l = gen.l;
	int32_t firstlineno = (int32_t)(k % 1000000) + 1;

	rec_u64(rec, CODE_STRIDE, 0, 1); /* ob_refcnt */
	rec_u64(rec, CODE_STRIDE, l->object_type, SYNTH_TYPE(SYNTH_T_CODE));
	rec_u64(rec, CODE_STRIDE, l->code_filename, gen.file);
	rec_u64(rec, CODE_STRIDE, l->code_name, gen.name);
	if (l->code_qualname)
		rec_u64(rec, CODE_STRIDE, l->code_qualname, gen.name);
	rec_u64(rec, CODE_STRIDE, l->code_linetable, gen.linetable);
	memcpy(rec + l->code_firstlineno, &firstlineno, 4);
}

static void tstate_fill(uint64_t k, uint8_t *rec)
{
	const struct cpython_layout *l = gen.l;

	rec_u64(rec, TSTATE_STRIDE, l->tstate_next,
		k + 1 < gen.ntstates ? GEN_TSTATE(k + 1) : gen.last_tstate_next);
	rec_u64(rec, TSTATE_STRIDE, l->tstate_interp, SYNTH_INTERP);
	rec_u64(rec, TSTATE_STRIDE, l->tstate_thread_id, GEN_PTHREAD(k));
	if (l->tstate_native_thread_id)
		rec_u64(rec, TSTATE_STRIDE, l->tstate_native_thread_id, GEN_TID0 + k);
}

static void pthread_fill(uint64_t k, uint8_t *rec)
{
	uint32_t tid = (uint32_t)(GEN_TID0 + k);

	memcpy(rec + 0x2d0, &tid, 4);
}

struct region {
	uint64_t base, stride, count;
	void (*fill)(uint64_t k, uint8_t *rec);
};

/* Reads @len bytes at @addr of a region of records, each made up as it is read. */
static int region_read(const struct region *r, uint64_t addr, uint8_t *buf, size_t len)
{
	uint8_t rec[0x400];

	if (addr < r->base || addr - r->base > r->count * r->stride ||
	    len > r->count * r->stride - (addr - r->base))
		return -EFAULT;
	while (len) {
		uint64_t k = (addr - r->base) / r->stride, at = (addr - r->base) % r->stride;
		size_t part = len < r->stride - at ? len : (size_t)(r->stride - at);

		memset(rec, 0, r->stride);
		r->fill(k, rec);
		memcpy(buf, rec + at, part);
		buf += part;
		addr += part;
		len -= part;
	}
	return 0;
}

/* The target's memory: the image, BIG and the generated regions; anything else fails. */
static int hostile_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct region regions[] = {
		{ GEN_FRAMES, FRAME_STRIDE, gen.nframes, frame_fill },
		{ GEN_CODES, CODE_STRIDE, gen.ncodes, code_fill },
		{ GEN_TSTATES, TSTATE_STRIDE, gen.ntstates, tstate_fill },
		{ GEN_PTHREADS, PTHREAD_STRIDE, gen.ntstates, pthread_fill },
	};
	size_t i;

	gen.reads++;
	if (gen.budget && gen.reads > gen.budget)
		fail_msg("3.%u: more than %llu reads: unbounded", gen.l->minor,
			 (unsigned long long)gen.budget);
	if (len > gen.longest)
		gen.longest = len;
	if (addr >= SYNTH_BASE && addr < SYNTH_END)
		return synth_read(ctx, addr, buf, len);
	if (addr >= BIG && addr - BIG <= BIG_SIZE && len <= BIG_SIZE - (addr - BIG)) {
		memcpy(buf, big + (addr - BIG), len);
		return 0;
	}
	for (i = 0; i < sizeof(regions) / sizeof(regions[0]); i++) {
		if (addr >= regions[i].base && addr < regions[i].base + 0x100000000ULL)
			return region_read(&regions[i], addr, buf, len);
	}
	return -EFAULT;
}

static const struct cpython_mem hostile_mem = { .read = hostile_read };

/* ---- a process ---- */

/*
 * A process of 3.@minor whose thread's first frame is generated frame 0, every code
 * named "gen_func" of "/gen/module.py" with no line table; nothing generated yet.
 */
static void build(struct synth *s, unsigned minor)
{
	synth__build(s, minor);
	memset(&gen, 0, sizeof(gen));
	gen.l = &s->p->layout;
	gen.last_previous = NO_FRAME;
	gen.name = synth__str(s, 1, true, "gen_func", 8);
	gen.file = synth__str(s, 1, true, "/gen/module.py", 14);
	/* 3.11+: thread_id is the pthread_t, threading.get_ident() (<= 3.10: set already). */
	synth_put_u64(SYNTH_TSTATE + s->l.tstate_thread_id, SYNTH_PTHREAD);
	synth__first_frame(s, GEN_FRAME(0));
}

/* Starts counting reads, failing the test past @budget of them. */
static void count_reads(uint64_t budget)
{
	gen.reads = 0;
	gen.longest = 0;
	gen.budget = budget;
}

/* An exact-size heap array of @n frames (ASan: a write past them fails). */
static struct cpython_frame *frames_new(uint32_t n)
{
	struct cpython_frame *f = calloc(n, sizeof(*f));

	assert_non_null(f);
	return f;
}

/*
 * A walk of the thread into @max frames, with arguments into @args (NULL: none) and what
 * it cut into @cut; the frames in *@out (caller frees).
 */
static int walk(struct synth *s, uint32_t max, struct cpython_args_out *args,
		struct cpython_cut *cut, struct cpython_frame **out)
{
	static uint64_t now;

	*out = frames_new(max ? max : 1);
	return cpython_walk_args(s->p, &hostile_mem, SYNTH_TID, ++now, *out, max, args, cut);
}

/*
 * A walk's reads at most: CPYTHON_WALK_TRIES tries of two passes (a cut stack is read
 * again) of up to 2 * CPYTHON_WALK_FRAMES steps, each a few reads (the frame, its code, a
 * generator's state). Past that the walk is unbounded: the test fails, never hangs.
 */
#define WALK_READS (CPYTHON_WALK_TRIES * 2 * (2 * CPYTHON_WALK_FRAMES * 4 + 64))

/* ---- 1. frame chains that loop ---- */

/*
 * A chain that comes back to a frame was read while it changed (or is made up): each try
 * of the walk ends at its cycle check, the walk with -EAGAIN after CPYTHON_WALK_TRIES of
 * them, never a stack. Cycles of 1, 2 and 1,000 frames, entered at once or after a tail,
 * with and without arguments, whatever the room; 3.11+ a cycle of C-stack shims (frames
 * never kept) too. Each try reads at most 2 * CPYTHON_WALK_FRAMES frames (the budget).
 */
static void test_hostile_images__frame_cycles(void **state)
{
	static const struct {
		uint32_t nframes, back_to; /* the last frame's previous: frame back_to */
		bool shims;
	} cases[] = {
		{ 1, 0, false },      /* a self-loop */
		{ 2, 0, false },      /* A -> B -> A */
		{ 1000, 0, false },   /* a long cycle */
		{ 1000, 999, false }, /* a tail of 999, then a self-loop */
		{ 1500, 500, false }, /* a tail of 500, then a cycle of 1,000 */
		{ 1000, 0, true },    /* shims only */
		{ 1, 0, true },
	};
	static const uint32_t rooms[] = { 1, 16, CPYTHON_MAX_FRAMES };
	static uint8_t buf[16 * 1024];
	struct synth s;
	size_t m, i, r;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		build(&s, minors[m]);
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			if (cases[i].shims && !s.l.frame_owner)
				continue; /* before 3.11 every frame is Python code */
			gen.nframes = gen.ncodes = cases[i].nframes;
			gen.last_previous = cases[i].back_to;
			gen.shims = cases[i].shims;
			for (r = 0; r < sizeof(rooms) / sizeof(rooms[0]) * 2; r++) {
				struct cpython_args_out args = { buf, sizeof(buf), 0 };
				struct cpython_cut cut;
				struct cpython_frame *f;
				int n;

				count_reads(WALK_READS);
				n = walk(&s, rooms[r / 2], r % 2 ? &args : NULL, &cut, &f);
				if (n != -EAGAIN)
					fail_msg("3.%u, %u frames back to %u%s, room %u: %d, not "
						 "-EAGAIN",
						 s.minor, cases[i].nframes, cases[i].back_to,
						 cases[i].shims ? " (shims)" : "", rooms[r / 2], n);
				assert_true(args.used <= args.size);
				free(f);
			}
		}
		synth__free(&s);
	}
}

/*
 * Brent's check sees a cycle once one of its marks (steps 2^k - 2) lies in the cycle with
 * a window as long as it: a tail of 4,100 frames into a cycle of 100 is seen at step
 * 8,290, past the CPYTHON_WALK_FRAMES a walk keeps, though frames repeat from step 4,200.
 * The walk follows the chain on up to step 2 * CPYTHON_WALK_FRAMES, by which any cycle
 * that repeats frames within the first CPYTHON_WALK_FRAMES is seen: never a stack whose
 * frames come round again, shown as a deep one, cut. (A tail of 8,190 into a self-loop
 * is seen by step 8,191: the edge.)
 */
static void test_hostile_images__late_cycles(void **state)
{
	static const struct {
		uint32_t tail, cycle;
	} cases[] = {
		{ 4100, 100 }, { 8000, 191 }, { 8190, 1 }, { 4094, 4097 }, { 1, 8190 }, { 0, 8191 },
	};
	struct synth s;
	size_t m, i;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		build(&s, minors[m]);
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct cpython_cut cut;
			struct cpython_frame *f;
			int n;

			gen.nframes = gen.ncodes = cases[i].tail + cases[i].cycle;
			gen.last_previous = cases[i].tail;
			count_reads(WALK_READS);
			n = walk(&s, CPYTHON_MAX_FRAMES, NULL, &cut, &f);
			if (n != -EAGAIN)
				fail_msg(
					"3.%u, a tail of %u into a cycle of %u: %d frames (%u cut)",
					s.minor, cases[i].tail, cases[i].cycle, n, cut.frames);
			free(f);
		}
		synth__free(&s);
	}
}

/* ---- 2. a chain that never ends ---- */

/*
 * 100,000 distinct frames: a walk reads CPYTHON_WALK_FRAMES of them and returns the
 * root-most @max (at most CPYTHON_MAX_FRAMES) of those, the rest counted as cut and the
 * stack said rootless; a chain of exactly CPYTHON_WALK_FRAMES is whole below its cut.
 */
static void check_deep(struct synth *s, uint32_t nframes, uint32_t room, bool with_args)
{
	static uint8_t buf[64 * 1024];
	struct cpython_args_out args = { buf, sizeof(buf), 0 };
	uint32_t want = room < CPYTHON_MAX_FRAMES ? room : CPYTHON_MAX_FRAMES;
	uint32_t depth = nframes < CPYTHON_WALK_FRAMES ? nframes : CPYTHON_WALK_FRAMES, k;
	struct cpython_cut cut;
	struct cpython_frame *f;
	int n;

	gen.nframes = gen.ncodes = nframes;
	count_reads(WALK_READS);
	n = walk(s, room, with_args ? &args : NULL, &cut, &f);
	if (n != (int)want || cut.frames != depth - want ||
	    cut.rootless != (nframes > CPYTHON_WALK_FRAMES))
		fail_msg("3.%u, %u frames, room %u: %d frames, %u cut%s; expected %u, %u cut%s",
			 s->minor, nframes, room, n, cut.frames, cut.rootless ? ", rootless" : "",
			 want, depth - want, nframes > CPYTHON_WALK_FRAMES ? ", rootless" : "");
	/* Innermost first: the frames up to CPYTHON_WALK_FRAMES, the last @want of them. */
	for (k = 0; k < want; k++)
		assert_int_equal(f[k].code, GEN_CODE(depth - want + k));
	assert_true(f[want - 1].entry);
	assert_true(args.used <= args.size);
	free(f);
}

/*
 * The chain's bounds: 100,000 frames with room for all a walk returns, for some, for more
 * than it gives; chains of CPYTHON_WALK_FRAMES and one more (the edge of rootless), and of
 * twice that; 3.11+ a chain of shims only, which gives no stack after 2 *
 * CPYTHON_WALK_FRAMES steps.
 */
static void test_hostile_images__endless_chain(void **state)
{
	struct synth s;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		build(&s, minors[m]);
		check_deep(&s, 100000, CPYTHON_MAX_FRAMES, false);
		check_deep(&s, 100000, CPYTHON_MAX_FRAMES, true);
		check_deep(&s, 100000, 16, false);
		check_deep(&s, 100000, 2 * CPYTHON_MAX_FRAMES, false); /* more than a walk gives */
		check_deep(&s, CPYTHON_WALK_FRAMES, CPYTHON_MAX_FRAMES, false);
		check_deep(&s, CPYTHON_WALK_FRAMES + 1, CPYTHON_MAX_FRAMES, false);
		check_deep(&s, 2 * CPYTHON_WALK_FRAMES + 1, 16, false);
		/* The walk without a cut to fill: the same frames. */
		{
			struct cpython_frame *f = frames_new(CPYTHON_MAX_FRAMES);

			count_reads(WALK_READS);
			assert_int_equal(cpython_walk(s.p, &hostile_mem, SYNTH_TID, 1, f,
						      CPYTHON_MAX_FRAMES),
					 CPYTHON_MAX_FRAMES);
			assert_int_equal(f[0].code,
					 GEN_CODE(CPYTHON_WALK_FRAMES - CPYTHON_MAX_FRAMES));
			free(f);
		}
		/* 3.11+: 100,000 shims, no Python frame among them: no stack, bounded. */
		if (s.l.frame_owner) {
			struct cpython_frame *f;

			gen.shims = true;
			count_reads(WALK_READS);
			assert_int_equal(walk(&s, CPYTHON_MAX_FRAMES, NULL, NULL, &f), 0);
			free(f);
		}
		synth__free(&s);
	}
}

/* ---- 3. code objects whose lengths lie ---- */

static void put_code(const struct synth *s, uint64_t code, uint64_t name, uint64_t file,
		     uint64_t table, int32_t firstlineno)
{
	const struct cpython_layout *l = &s->l;

	synth_put_u64(code, 1); /* ob_refcnt */
	synth_put_u64(code + l->object_type, SYNTH_TYPE(SYNTH_T_CODE));
	synth_put_u64(code + l->code_filename, file);
	synth_put_u64(code + l->code_name, name);
	if (l->code_qualname)
		synth_put_u64(code + l->code_qualname, name);
	synth_put_u64(code + l->code_linetable, table);
	synth_put(code + l->code_firstlineno, &firstlineno, 4);
}

/* A running frame in the image at @frame of @code (anywhere), called from @previous. */
static void put_frame(const struct synth *s, uint64_t frame, uint64_t code, uint64_t previous)
{
	const struct cpython_layout *l = &s->l;

	memset(synth_image + (frame - SYNTH_BASE), 0, 0x400);
	synth_put_u64(frame + l->frame_code, l->code_tagged ? code | 1 : code);
	synth_put_u64(frame + l->frame_previous, previous);
	if (l->instr > CPYTHON_LASTI_UNITS)
		synth_put_u64(frame + l->frame_instr, code + l->code_adaptive);
	if (l->live == CPYTHON_LIVE_EXECUTING)
		synth_put(frame + l->frame_live, &(uint8_t){ 1 }, 1);
}

/* A str head at @at of BIG (state, length), its characters BIG's bytes after it. */
static uint64_t big_str(const struct cpython_layout *l, uint64_t at, unsigned kind, bool ascii,
			int64_t length)
{
	uint32_t st = kind << 2 | 1u << 5 | (ascii ? 1u << 6 : 0);
	uint64_t type = SYNTH_TYPE(CPYTHON_TYPE_STR);

	memcpy(big + at, &(uint64_t){ 1 }, 8);
	memcpy(big + at + l->object_type, &type, 8);
	memcpy(big + at + l->unicode_state, &st, 4);
	memcpy(big + at + l->unicode_length, &length, 8);
	return BIG + at;
}

/* A bytes head at @at of BIG whose ob_size says @size; its bytes BIG's after it. */
static uint64_t big_bytes(const struct cpython_layout *l, uint64_t at, int64_t size)
{
	uint64_t type = SYNTH_TYPE(CPYTHON_TYPE_BYTES);

	memcpy(big + at + l->object_type, &type, 8);
	memcpy(big + at + l->bytes_size, &size, 8);
	return BIG + at;
}

/* A code object that lies, and what the readers make of it. */
struct lying_code {
	uint64_t name, file, table;
	enum {
		NAMED,	    /* read, named "gen_func" */
		NAMED_LONG, /* read, its name the first characters of a long one */
		UNREADABLE, /* cpython_read_code() fails: the cache's entry says unreadable */
	} want;
	int err;	    /* of cpython_read_code() */
	uint32_t table_len; /* the line table's bytes kept */
};

#define NLYING 8 /* the image holds eight frames and eight code objects */

/* The eight of them, in @s: the names of "gen_func" and its file are gen.name, gen.file. */
static void lying_codes(struct synth *s, struct lying_code *c)
{
	const struct cpython_layout *l = &s->l;
	uint64_t name = gen.name, file = gen.file, table = synth__bytes(s, 2, "\0", 2), bad;

	memset(big, 'a', sizeof(big));
	/* 0: a co_linetable (co_lnotab) whose ob_size is 2^40; 1: -1. Named, no table. */
	c[0] = (struct lying_code){ name, file, synth__bytes(s, 1LL << 40, NULL, 0), NAMED, 0, 0 };
	c[1] = (struct lying_code){ name, file, synth__bytes(s, -1, NULL, 0), NAMED, 0, 0 };
	/* 2: a name of 2^40 ASCII characters, memory after it: its first ones. */
	c[2] = (struct lying_code){
		big_str(l, 0, 1, true, 1LL << 40), file, table, NAMED_LONG, 0, 2
	};
	/* 3: a name of -5 characters. */
	bad = synth__str(s, 1, true, "xy", 2);
	synth_put_u64(bad + l->unicode_length, (uint64_t)-5);
	c[3] = (struct lying_code){ bad, file, table, UNREADABLE, -EINVAL, 0 };
	/* 4: a file name in memory that is not mapped. */
	c[4] = (struct lying_code){ name, SYNTH_UNMAPPED, table, UNREADABLE, -EFAULT, 0 };
	/* 5: a UCS-4 file name of 2^40 characters at the image's end: unreadable. */
	bad = SYNTH_END - l->unicode_compact_size - 8;
	synth_put_u32(bad + l->unicode_state, 4u << 2 | 1u << 5);
	synth_put_u64(bad + l->unicode_length, 1ULL << 40);
	c[5] = (struct lying_code){ name, bad, table, UNREADABLE, -EFAULT, 0 };
	/* 6: a line table of MAX_LINETABLE bytes is read; 7: of one more, not. */
	c[6] = (struct lying_code){ name,  file, big_bytes(l, 0x10000, MAX_LINETABLE),
				    NAMED, 0,	 MAX_LINETABLE };
	c[7] = (struct lying_code){ name,  file, big_bytes(l, 0x60000, MAX_LINETABLE + 1),
				    NAMED, 0,	 0 };
}

/*
 * Code objects, one per frame, lying about a length or pointing where nothing is mapped.
 * None makes a read longer than the bound it is read with (MAX_STRING_CHARS characters
 * of a str, MAX_LINETABLE bytes of a line table; ASan: no buffer overrun), every frame is
 * walked, and every code is named or kept as unreadable (counted), its lines its first
 * line when its table was not read.
 */
static void test_hostile_images__code_lengths(void **state)
{
	struct synth s;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		const struct cpython_layout *l;
		struct lying_code c[NLYING];
		struct cpython_frame *f;
		uint64_t unreadable;
		char text[64];
		unsigned k;

		build(&s, minors[m]);
		l = &s.l;
		lying_codes(&s, c);
		for (k = 0; k < NLYING; k++) {
			put_code(&s, synth_code_at(k), c[k].name, c[k].file, c[k].table,
				 (int32_t)(10 * k + 1));
			put_frame(&s, synth_frame_at(k), synth_code_at(k),
				  k + 1 < NLYING ? synth_frame_at(k + 1) : 0);
		}
		synth__first_frame(&s, synth_frame_at(0));
		/* The readers on their own: the strs' reads within MAX_STRING_CHARS of UCS-4. */
		count_reads(0);
		assert_int_equal(
			cpython_read_string(l, &hostile_mem, c[2].name, text, sizeof(text)), 0);
		assert_int_equal(strlen(text), sizeof(text) - 1);
		assert_int_equal(cpython_read_name(l, &hostile_mem, c[2].name, text, sizeof(text)),
				 0);
		assert_int_equal(strlen(text), sizeof(text) - 1);
		assert_int_equal(cpython_read_name(l, &hostile_mem, c[3].name, text, sizeof(text)),
				 -EINVAL);
		assert_int_equal(
			cpython_read_string(l, &hostile_mem, c[5].file, text, sizeof(text)),
			-EFAULT);
		if (gen.longest > 4 * MAX_STRING_CHARS)
			fail_msg("3.%u: a str read of %zu bytes", s.minor, gen.longest);
		for (k = 0; k < NLYING; k++) {
			struct cpython_code code;
			int err = cpython_read_code(l, &hostile_mem, synth_code_at(k), &code);

			if (err != c[k].err)
				fail_msg("3.%u code %u: %d, not %d", s.minor, k, err, c[k].err);
			if (!c[k].err)
				assert_int_equal(code.linetable_len, c[k].table_len);
			free(code.linetable);
		}
		/* No read longer than the bounds, however long the object says it is. */
		if (gen.longest > MAX_LINETABLE)
			fail_msg("3.%u: a read of %zu bytes", s.minor, gen.longest);
		/* Through a walk and the cache, as the sampler does. */
		unreadable = s.p->codes_unreadable;
		count_reads(WALK_READS);
		assert_int_equal(walk(&s, 16, NULL, NULL, &f), NLYING);
		cpython_read_codes(s.p, &hostile_mem, f, NLYING);
		for (k = 0; k < NLYING; k++) {
			const struct cpython_code_entry *e =
				cpython_code_lookup(s.p, f[k].code, f[k].fingerprint);

			assert_int_equal(f[k].code, synth_code_at(k));
			assert_non_null(e);
			assert_int_equal(e->unreadable, c[k].want == UNREADABLE);
			if (c[k].want == NAMED)
				assert_string_equal(e->info.name, "gen_func");
			if (c[k].want == NAMED_LONG) {
				assert_int_equal(strlen(e->info.name), sizeof(e->info.name) - 1);
				assert_true(e->info.name[0] == 'a');
			}
			if (c[k].want == UNREADABLE)
				continue;
			assert_int_equal(e->info.linetable_len, c[k].table_len);
			assert_true(!e->info.linetable == !c[k].table_len);
			/* No table: the first line. */
			if (!c[k].table_len)
				assert_int_equal(cpython_line(l->lines, e->info.linetable,
							      e->info.linetable_len,
							      e->info.firstlineno, f[k].lasti),
						 10 * k + 1);
		}
		assert_int_equal(s.p->codes_unreadable - unreadable, 3);
		if (gen.longest > MAX_LINETABLE)
			fail_msg("3.%u: a read of %zu bytes", s.minor, gen.longest);
		free(f);
		synth__free(&s);
	}
}

/* ---- 4. line tables whose varints never end ---- */

/* cpython_line() over an exact-size heap copy of @t (ASan: no read past it). */
static uint32_t line_of(enum cpython_lines kind, const uint8_t *t, size_t len, uint32_t first,
			int32_t lasti)
{
	uint8_t *copy = malloc(len ? len : 1);
	uint32_t line;

	assert_non_null(copy);
	memcpy(copy, t, len);
	line = cpython_line(kind, copy, len, first, lasti);
	free(copy);
	return line;
}

/*
 * 3.11+ location tables whose varints go on (every byte says "more"): a varint is read
 * for 11 bytes at most (66 bits: a shift past that is UB, which UBSan aborts on), the
 * rest of the entry skipped up to the next entry's start, or the table's end. A varint
 * cut at 11 bytes still gives its value: the lines after it are right.
 */
static void test_hostile_images__endless_varints(void **state)
{
	static uint8_t t[MAX_LINETABLE];
	const int32_t lastis[] = { 0, 1, 2, 3, 4, 5, 1000, INT32_MAX, -1, INT32_MIN };
	size_t n, k, i;

	(void)state;
	/* An entry (long form, 1 code unit) whose varint never ends, to the table's end. */
	for (n = 1; n <= sizeof(t); n = n < 64 ? n + 1 : n * 4) {
		t[0] = 0x80 | 14 << 3;
		memset(t + 1, 0x7f, n - 1);
		/* Of one byte, a delta of 0 (none read): its line 10, for its one unit. */
		for (i = 0; i < sizeof(lastis) / sizeof(lastis[0]); i++)
			assert_int_equal(line_of(CPYTHON_LOCATIONS, t, n, 10, lastis[i]),
					 lastis[i] < 0 || (n == 1 && lastis[i] < 2) ? 10 : 0);
	}
	/*
	 * +1 as a varint of 14 bytes (2, then 13 bytes of zero bits that say "more"): read
	 * as 11, the rest skipped. Line 11 at unit 0, then a short form (same line) at unit
	 * 1, then "one line, +2" (code 12): 13 at unit 2.
	 */
	k = 0;
	t[k++] = 0x80 | 13 << 3;
	t[k++] = 0x40 | 2;
	for (i = 0; i < 12; i++)
		t[k++] = 0x40;
	t[k++] = 0;
	t[k++] = 0x80 | 0 << 3;
	t[k++] = 0;
	t[k++] = 0x80 | 12 << 3;
	t[k++] = 0;
	t[k++] = 0;
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, k, 10, 0), 11);
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, k, 10, 2), 11);
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, k, 10, 4), 13);
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, k, 10, 6), 0);
	/* A table of entry starts only, each of 8 units and line +2: no overflow at the end. */
	memset(t, 0x80 | 12 << 3 | 7, sizeof(t));
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, sizeof(t), UINT32_MAX - 1, 0), 0);
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, sizeof(t), 1, INT32_MAX), 0);
	assert_int_equal(line_of(CPYTHON_LOCATIONS, t, sizeof(t), 1, 16 * 1000), 1 + 2 * 1001);
	/* 3.8-3.9 lnotab and 3.10 line tables of the largest deltas, the longest read. */
	for (k = 0; k < sizeof(t); k += 2) {
		t[k] = 0;
		t[k + 1] = 127;
	}
	assert_int_equal(line_of(CPYTHON_LNOTAB, t, sizeof(t), 1, INT32_MAX),
			 1 + 127 * (sizeof(t) / 2));
	assert_int_equal(line_of(CPYTHON_LINETABLE, t, sizeof(t), 1, 0), 0);
	for (k = 0; k < sizeof(t); k += 2) {
		t[k] = 255;
		t[k + 1] = 0x80; /* -128: 3.10's "no line", 3.8's -128 */
	}
	assert_int_equal(line_of(CPYTHON_LNOTAB, t, sizeof(t), UINT32_MAX, INT32_MAX),
			 UINT32_MAX - 128u * (sizeof(t) / 2));
	assert_int_equal(line_of(CPYTHON_LNOTAB, t, sizeof(t), 1, INT32_MAX), 0);
	assert_int_equal(line_of(CPYTHON_LINETABLE, t, sizeof(t), 1, 255 * 1000), 0);
	assert_int_equal(line_of(CPYTHON_LINETABLE, t, sizeof(t), 1, -1), 1);
}

/*
 * A line table read through a code object (MAX_LINETABLE bytes, every one a varint's
 * "more"): kept whole, and decoded within it, on every layout (3.8-3.10 read it as
 * their own kind of table).
 */
static void test_hostile_images__endless_varints_read(void **state)
{
	struct synth s;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		const struct cpython_code_entry *e;
		struct cpython_frame *f;
		uint64_t table;

		build(&s, minors[m]);
		memset(big, 0x7f, sizeof(big));
		table = big_bytes(&s.l, 0, MAX_LINETABLE);
		big[s.l.bytes_sval] = 0x80 | 14 << 3;
		gen.nframes = gen.ncodes = 1;
		gen.linetable = table;
		count_reads(WALK_READS);
		assert_int_equal(walk(&s, 16, NULL, NULL, &f), 1);
		cpython_read_codes(s.p, &hostile_mem, f, 1);
		e = cpython_code_lookup(s.p, f[0].code, f[0].fingerprint);
		assert_non_null(e);
		assert_false(e->unreadable);
		assert_int_equal(e->info.linetable_len, MAX_LINETABLE);
		assert_int_equal(f[0].lasti, 0);
		/* 3.11+: the varint's line out of range; 3.10 (240, +127); 3.8 +127 each pair. */
		assert_int_equal(cpython_line(s.l.lines, e->info.linetable, e->info.linetable_len,
					      e->info.firstlineno, 0),
				 s.l.lines == CPYTHON_LOCATIONS	  ? 0
				 : s.l.lines == CPYTHON_LINETABLE ? 128
								  : 1);
		assert_int_equal(cpython_line(s.l.lines, e->info.linetable, e->info.linetable_len,
					      e->info.firstlineno, INT32_MAX),
				 s.l.lines == CPYTHON_LNOTAB ? 1 + 127 * (MAX_LINETABLE / 2) : 0);
		free(f);
		synth__free(&s);
	}
}

/*
 * Instruction offsets no frame has: 3.8-3.10's f_lasti at its extremes (3.10 counts code
 * units: twice INT32_MAX is past an int), 3.11+'s instruction pointer outside its code.
 * The walk gives an offset in bytes within 0 .. 2^31 - 1, or -1 (no instruction yet):
 * never a signed overflow (UBSan), and cpython_frames_from_raw() the same.
 */
static void test_hostile_images__instruction_offsets(void **state)
{
	static const int32_t lastis[] = { INT32_MAX, INT32_MAX / 2 + 1, INT32_MIN, -2, -1, 0, 7 };
	struct synth s;
	size_t m, i;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		uint64_t code = GEN_CODE(0), base;
		uint64_t ptrs[] = { 0, 1, UINT64_MAX, 0, 0, 0, 0 };

		build(&s, minors[m]);
		base = code + s.l.code_adaptive;
		ptrs[3] = base - 2;
		ptrs[4] = base + (1ULL << 31);
		ptrs[5] = base + (1ULL << 30) + 2;
		ptrs[6] = base + 6;
		gen.nframes = gen.ncodes = 1;
		for (i = 0; i < sizeof(lastis) / sizeof(lastis[0]); i++) {
			struct cpython_raw_frame raw = { code, gen.file, gen.name, 0, 0, 0 };
			struct cpython_frame one, *f;
			uint64_t frame = synth_frame_at(0);
			int32_t want;

			/* The frame in the image, so that its instruction field can be set. */
			put_frame(&s, frame, code, 0);
			synth__first_frame(&s, frame);
			if (s.l.instr <= CPYTHON_LASTI_UNITS) {
				synth_put(frame + s.l.frame_instr, &lastis[i], 4);
				raw.instr = (uint32_t)lastis[i];
				want = s.l.instr == CPYTHON_LASTI_BYTES		    ? lastis[i]
				       : lastis[i] < 0 || lastis[i] > INT32_MAX / 2 ? -1
										    : 2 * lastis[i];
			} else {
				synth_put_u64(frame + s.l.frame_instr, ptrs[i]);
				raw.instr = ptrs[i];
				want = ptrs[i] >= base && ptrs[i] - base <= (1u << 30)
					       ? (int32_t)(ptrs[i] - base)
					       : -1;
			}
			count_reads(WALK_READS);
			assert_int_equal(walk(&s, 4, NULL, NULL, &f), 1);
			assert_int_equal(f[0].lasti, want);
			assert_int_equal(cpython_frames_from_raw(&s.p->layout, &raw, 1, &one, 1),
					 1);
			assert_int_equal(one.lasti, want);
			free(f);
		}
		synth__free(&s);
	}
}

/* ---- 5. thread lists that loop, or never end ---- */

/*
 * threading's view of the main thread: sys.modules["threading"]._active maps its ident
 * (the thread state's thread_id, SYNTH_PTHREAD) to a Thread named "MainThread".
 */
static void build_threading(struct synth *s)
{
	uint64_t ident = synth__int(s, (int64_t)SYNTH_PTHREAD, SYNTH_TYPE(CPYTHON_TYPE_INT));
	uint64_t main_name = synth__str(s, 1, true, "MainThread", 10);
	uint64_t thread = synth__with_attr(s, SYNTH_TYPE(SYNTH_T_WIDGET), "_name", main_name);
	uint64_t active = synth__dict(s, &ident, &thread, 1, false);
	uint64_t key = synth__str(s, 1, true, "_active", 7);
	uint64_t module = synth__object(s, SYNTH_TYPE(SYNTH_T_WIDGET));
	uint64_t threading = synth__str(s, 1, true, "threading", 9);

	synth_put_u64(module + s->l.module_dict, synth__dict(s, &key, &active, 1, true));
	synth_put_u64(SYNTH_INTERP + s->l.interp_modules,
		      synth__dict(s, &threading, &module, 1, true));
}

/* The thread list read anew: its count. */
static size_t read_threads(struct synth *s)
{
	count_reads(16 * CPYTHON_MAX_THREADS + 1024);
	assert_int_equal(cpython_threads_read(s->p, &hostile_mem), 0);
	assert_true(s->p->nthreads <= CPYTHON_MAX_THREADS);
	return s->p->nthreads;
}

/* Each thread once, the main one first; the rest generated threads, in list order. */
static void check_threads(const struct synth *s, size_t want)
{
	size_t k;

	assert_int_equal(s->p->nthreads, want);
	assert_int_equal(s->p->threads[0].tid, SYNTH_TID);
	assert_int_equal(s->p->threads[0].tstate, SYNTH_TSTATE);
	for (k = 1; k < want; k++) {
		assert_int_equal(s->p->threads[k].tid, GEN_TID0 + k - 1);
		assert_int_equal(s->p->threads[k].tstate, GEN_TSTATE(k - 1));
	}
}

/* Thread names: @want entries (at most 16), the main thread's its own. */
static void check_names(struct synth *s, int want)
{
	struct cpython_thread_name names[16];
	int n, k;

	count_reads(64 * CPYTHON_MAX_THREADS);
	n = cpython_thread_names(s->p, &hostile_mem, names, 16);
	if (n != want)
		fail_msg("3.%u: %d thread names, %d expected", s->minor, n, want);
	assert_int_equal(names[0].tid, SYNTH_TID);
	if (names[0].err)
		fail_msg("3.%u: the main thread unnamed (%d)", s->minor, names[0].err);
	assert_string_equal(names[0].name, "MainThread");
	for (k = 1; k < n; k++)
		assert_int_equal(names[k].err, -ENOENT); /* not threading's threads */
}

/*
 * A thread list that comes back to a thread state read already (to the first, or one
 * after it; one that is its own next) ends there: each thread once, none lost, no hang.
 * One of 100,000 thread states is read up to CPYTHON_MAX_THREADS of them; a thread past
 * them is not found (its walk gives no stack). An interpreter list that loops is read up
 * to its bound (64 interpreters), the main interpreter never found in it (-ELOOP).
 */
static void test_hostile_images__thread_lists(void **state)
{
	struct synth s;
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++) {
		struct cpython_frame *f;

		build(&s, minors[m]);
		build_threading(&s);
		gen.nframes = gen.ncodes = 1;
		/* The image's one thread: sane. */
		assert_int_equal(read_threads(&s), 1);
		check_names(&s, 1);
		/* Its own next. */
		synth_put_u64(SYNTH_TSTATE + s.l.tstate_next, SYNTH_TSTATE);
		read_threads(&s);
		check_threads(&s, 1);
		check_names(&s, 1);
		count_reads(WALK_READS);
		assert_int_equal(walk(&s, 4, NULL, NULL, &f), 1);
		free(f);
		/* 999 more, the last back to the first. */
		synth_put_u64(SYNTH_TSTATE + s.l.tstate_next, GEN_TSTATE(0));
		gen.ntstates = 999;
		gen.last_tstate_next = SYNTH_TSTATE;
		read_threads(&s);
		check_threads(&s, 1000);
		check_names(&s, 16);
		/* ... back to the 500th. */
		gen.last_tstate_next = GEN_TSTATE(499);
		read_threads(&s);
		check_threads(&s, 1000);
		/* 100,000 thread states: the first CPYTHON_MAX_THREADS. */
		gen.ntstates = 100000 - 1;
		gen.last_tstate_next = 0;
		read_threads(&s);
		check_threads(&s, CPYTHON_MAX_THREADS);
		assert_int_equal(cpython_thread_tid(s.p, GEN_TSTATE(CPYTHON_MAX_THREADS - 2)),
				 GEN_TID0 + CPYTHON_MAX_THREADS - 2);
		assert_int_equal(cpython_thread_tid(s.p, GEN_TSTATE(CPYTHON_MAX_THREADS - 1)), 0);
		check_names(&s, 16);
		count_reads(WALK_READS + 16 * CPYTHON_MAX_THREADS);
		f = frames_new(4);
		assert_int_equal(cpython_walk(s.p, &hostile_mem, GEN_TID0 + 5000, 1ULL << 40, f, 4),
				 0);
		assert_int_equal(cpython_walk(s.p, &hostile_mem, SYNTH_TID, 1ULL << 41, f, 4), 1);
		free(f);
		/* An interpreter that is its own next: its threads once, no main interpreter. */
		synth_put_u64(SYNTH_TSTATE + s.l.tstate_next, 0);
		synth_put_u64(SYNTH_INTERP + s.l.interp_next, SYNTH_INTERP);
		read_threads(&s);
		check_threads(&s, 1);
		{
			struct cpython_thread_name names[4];
			uint64_t interp;

			assert_int_equal(cpython_main_interp(s.p, &hostile_mem, &interp), -ELOOP);
			assert_int_equal(cpython_thread_names(s.p, &hostile_mem, names, 4), -ELOOP);
		}
		synth__free(&s);
	}
}

/* ---- 6. more code objects than the cache keeps ---- */

#define MANY_CODES 100000
#define EPOCH_FRAMES 1000
#define MANY_TABLE 2048 /* bytes: MAX_LINETABLE_BYTES holds 32,768 such tables */

/*
 * 100,000 distinct code objects walked in turn (1,000-frame stacks, each of new code),
 * their codes read after each walk as the sampler does: the cache keeps MAX_CODES of
 * them and counts the rest lost (cpython_cache_losses()), each once; it keeps their line
 * tables up to MAX_LINETABLE_BYTES, the codes past those kept without one (counted), and
 * the heap grows by no more than that. Names the kernel sends for code objects it can't
 * keep are not kept either. Once full, a stack of new code needs nothing read.
 */
static void check_many_codes(unsigned minor)
{
	const size_t entry_bytes = sizeof(struct cpython_code_entry) + 64; /* and malloc's */
	uint64_t codes0, tables0, codes1, tables1, table_bytes = 0;
	size_t heap0, heap1, kept = 0, with_table = 0;
	char name[200], file[300];
	struct synth s;
	uint32_t epoch, k;

	build(&s, minor);
	memset(big, 0, sizeof(big));
	gen.nframes = EPOCH_FRAMES;
	gen.ncodes = MANY_CODES + EPOCH_FRAMES;
	gen.linetable = big_bytes(&s.l, 0, MANY_TABLE);
	heap0 = __sanitizer_get_current_allocated_bytes();
	cpython_cache_losses(&codes0, &tables0);
	for (epoch = 0; epoch < MANY_CODES / EPOCH_FRAMES; epoch++) {
		struct cpython_frame *f;

		gen.code_base = epoch * EPOCH_FRAMES;
		count_reads(WALK_READS + 64 * EPOCH_FRAMES);
		assert_int_equal(walk(&s, EPOCH_FRAMES, NULL, NULL, &f), EPOCH_FRAMES);
		assert_int_equal(f[0].code, GEN_CODE(gen.code_base));
		if (cpython_all_read(s.p, f, EPOCH_FRAMES) != (epoch * EPOCH_FRAMES >= MAX_CODES))
			fail_msg("3.%u, epoch %u: all read %d", minor, epoch,
				 cpython_all_read(s.p, f, EPOCH_FRAMES));
		cpython_read_codes(s.p, &hostile_mem, f, EPOCH_FRAMES);
		free(f);
	}
	heap1 = __sanitizer_get_current_allocated_bytes();
	cpython_cache_losses(&codes1, &tables1);
	for (k = 0; k < MANY_CODES; k++) {
		uint64_t fingerprint =
			cpython_fingerprint(gen.file, cpython_name_word(gen.name, 0));
		const struct cpython_code_entry *e =
			cpython_code_lookup(s.p, GEN_CODE(k), fingerprint);

		if (!e)
			continue;
		kept++;
		assert_false(e->unreadable);
		assert_int_equal(e->info.firstlineno, k + 1);
		with_table += e->info.linetable != NULL;
		table_bytes += e->info.linetable_len;
	}
	if (kept != MAX_CODES || codes1 - codes0 != MANY_CODES - MAX_CODES)
		fail_msg("3.%u: %zu of %u codes kept, %llu counted lost", minor, kept, MANY_CODES,
			 (unsigned long long)(codes1 - codes0));
	if (with_table != MAX_LINETABLE_BYTES / MANY_TABLE ||
	    tables1 - tables0 != MAX_CODES - MAX_LINETABLE_BYTES / MANY_TABLE)
		fail_msg("3.%u: %zu tables kept, %llu counted lost", minor, with_table,
			 (unsigned long long)(tables1 - tables0));
	assert_true(table_bytes <= MAX_LINETABLE_BYTES);
	if (heap1 - heap0 > MAX_CODES * entry_bytes + MAX_LINETABLE_BYTES + (8 << 20))
		fail_msg("3.%u: the heap grew by %zu bytes", minor, heap1 - heap0);
	/* The kernel names code objects the full cache won't keep: not kept either. */
	memset(name, 'n', sizeof(name) - 1);
	name[sizeof(name) - 1] = '\0';
	memset(file, 'f', sizeof(file) - 1);
	file[sizeof(file) - 1] = '\0';
	for (k = 0; k < MANY_CODES; k++)
		cpython_code_name_seen(s.p, GEN_CODE(MANY_CODES + k), k, name, file);
	heap0 = __sanitizer_get_current_allocated_bytes();
	if (heap0 > heap1 + (1 << 20))
		fail_msg("3.%u: %u names noted took %zu bytes", minor, MANY_CODES, heap0 - heap1);
	synth__free(&s);
}

static void test_hostile_images__many_codes(void **state)
{
	size_t m;

	(void)state;
	for (m = 0; m < NMINORS; m++)
		check_many_codes(minors[m]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_images__frame_cycles),
		cmocka_unit_test(test_hostile_images__late_cycles),
		cmocka_unit_test(test_hostile_images__endless_chain),
		cmocka_unit_test(test_hostile_images__code_lengths),
		cmocka_unit_test(test_hostile_images__endless_varints),
		cmocka_unit_test(test_hostile_images__endless_varints_read),
		cmocka_unit_test(test_hostile_images__instruction_offsets),
		cmocka_unit_test(test_hostile_images__thread_lists),
		cmocka_unit_test(test_hostile_images__many_codes),
	};

	return cmocka_run_group_tests_name("hostile_images", tests, NULL, NULL);
}
