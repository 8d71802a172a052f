/*
 * Walking a thread's frame chain from outside, with its frames' arguments, and turning
 * frames the kernel read into the same.
 */
#include <errno.h>
#include <string.h>

#include "cpython.h"
#include "internal.h"
#include "pages.h"

static uint64_t first_frame(const struct cpython_layout *l, const struct cpython_mem *mem,
			    uint64_t tstate)
{
	uint64_t frame = 0;

	if (cpython_read_u64(mem, tstate + l->tstate_frame, &frame))
		return 0;
	if (l->frame_via_cframe && frame &&
	    cpython_read_u64(mem, frame + l->cframe_current_frame, &frame))
		return 0;
	return frame;
}

/* The instruction offset in bytes of a frame whose raw bytes are @buf. */
static int32_t frame_lasti(const struct cpython_layout *l, const uint8_t *buf, uint64_t code)
{
	int32_t lasti;
	uint64_t ptr;

	switch (l->instr) {
	case CPYTHON_LASTI_BYTES:
		memcpy(&lasti, buf + l->frame_instr, 4);
		return lasti;
	case CPYTHON_LASTI_UNITS:
		memcpy(&lasti, buf + l->frame_instr, 4);
		/* Past INT32_MAX / 2 units no code reaches: twice that would overflow. */
		return lasti < 0 || lasti > INT32_MAX / 2 ? -1 : lasti * 2;
	default:
		memcpy(&ptr, buf + l->frame_instr, 8);
		if (ptr < code + l->code_adaptive || ptr - (code + l->code_adaptive) > (1u << 30))
			return -1;
		return (int32_t)(ptr - (code + l->code_adaptive));
	}
}

/* The instruction offset in bytes from a frame's raw instr field (see frame_lasti). */
static int32_t raw_lasti(const struct cpython_layout *l, uint64_t instr, uint64_t code)
{
	if (l->instr == CPYTHON_LASTI_BYTES || l->instr == CPYTHON_LASTI_UNITS) {
		int32_t lasti = (int32_t)(uint32_t)instr;

		if (l->instr == CPYTHON_LASTI_BYTES)
			return lasti;
		return lasti < 0 || lasti > INT32_MAX / 2 ? -1 : lasti * 2; /* see frame_lasti */
	}
	if (instr < code + l->code_adaptive || instr - (code + l->code_adaptive) > (1u << 30))
		return -1;
	return (int32_t)(instr - (code + l->code_adaptive));
}

int cpython_frames_from_raw(const struct cpython_layout *l, const struct cpython_raw_frame *raw,
			    uint32_t nraw, struct cpython_frame *frames, uint32_t max)
{
	uint32_t i, n = 0;

	for (i = 0; i < nraw && n < max; i++) {
		if (l->frame_owner && raw[i].owner >= l->owner_first_skipped) {
			if (n)
				frames[n - 1].entry =
					true; /* the frame before a shim began a call */
			continue;
		}
		if (!raw[i].code)
			break;
		frames[n].code = raw[i].code;
		frames[n].fingerprint = cpython_fingerprint(raw[i].filename, raw[i].name);
		frames[n].filename = raw[i].filename;
		frames[n].lasti = raw_lasti(l, raw[i].instr, raw[i].code);
		frames[n].args_len = 0; /* kept already: args is their id */
		frames[n].args_at = 0;
		frames[n].args = raw[i].args;
		/* Before 3.11 every frame has its own C-level call; 3.11's is_entry is not read. */
		frames[n].entry = l->instr <= CPYTHON_LASTI_UNITS;
		n++;
	}
	if (n)
		frames[n - 1].entry = true;
	return (int)n;
}

/* Whether the frame whose raw bytes are @buf is running (see cpython_layout.frame_live). */
static bool frame_is_live(const struct cpython_layout *l, const uint8_t *buf)
{
	int8_t state;

	switch (l->live) {
	case CPYTHON_LIVE_EXECUTING:
		return buf[l->frame_live] == 1;
	case CPYTHON_LIVE_STATE:
		memcpy(&state, buf + l->frame_live, 1);
		return state == 0 || state == 2;
	default:
		return true;
	}
}

/* What a frame's owner field says: its place inside a generator object (3.11+). */
#define OWNED_BY_GENERATOR 1

/*
 * Whether the generator owning the frame at @frame was running when its page was read.
 * Read from outside, a generator that yielded between the read of the thread's current
 * frame and the read of the frame itself has no previous frame any more (CPython clears
 * it at each yield): a stack of that one frame, which cut every slice under it (seen in
 * every computing Pool worker summing a generator expression, 3.11-3.13).
 */
static bool generator_running(const struct cpython_layout *l, const struct cpython_mem *mem,
			      uint64_t frame)
{
	int8_t state;

	if (!l->gen_frame_state_back)
		return true;
	return !mem->read(mem->ctx, frame - l->gen_frame_state_back, &state, 1) &&
	       state == l->gen_executing;
}

/*
 * One walk from @frame. Returns the frames read, -EAGAIN when the chain led into a frame
 * that is no longer running (the thread returned from it while we read: what we hold is
 * then a mix of its stack at two moments), or -EFAULT when a frame or its code could not
 * be read: either way the stack would be cut short, and a cut stack is never returned
 * as whole.
 */
/*
 * What a walk reads of each frame and code object, each in one read: the frame with its
 * first CPYTHON_MAX_ARGS slots when arguments are read (@frame_len, @slots_in_frame),
 * and the code's names with its parameter counts (@code_at, @code_len; 0 when they lie
 * too far apart, then read one by one).
 */
struct walk_reads {
	uint64_t frame_len;
	bool slots_in_frame;
	uint64_t code_at, code_len;
};

#define CODE_SPAN_MAX 256

static struct walk_reads walk_reads(const struct cpython_layout *l, bool args)
{
	struct walk_reads r = { l->frame_size, false, 0, 0 };
	uint64_t lo = l->code_filename < l->code_name ? l->code_filename : l->code_name;
	uint64_t hi = (l->code_filename > l->code_name ? l->code_filename : l->code_name) + 8;
	uint64_t slots_end = l->frame_localsplus + 8 * CPYTHON_MAX_ARGS;

	if (l->code_version) {
		lo = l->code_version < lo ? l->code_version : lo;
		hi = l->code_version + 8 > hi ? l->code_version + 8 : hi;
	}
	args = args && l->frame_localsplus && l->code_argcount;
	if (args && slots_end <= 4096) {
		r.frame_len = slots_end > l->frame_size ? slots_end : l->frame_size;
		r.slots_in_frame = true;
	}
	if (args) {
		lo = l->code_argcount < lo ? l->code_argcount : lo;
		hi = l->code_argcount + 12 > hi ? l->code_argcount + 12 : hi;
	}
	if (hi - lo <= CODE_SPAN_MAX) {
		r.code_at = lo;
		r.code_len = hi - lo;
	}
	return r;
}

/* Reads 8 bytes at @at of the code object at @code, from @span when it holds them. */
static int code_u64(const struct cpython_mem *mem, const struct walk_reads *r, const uint8_t *span,
		    uint64_t code, uint64_t at, uint64_t *v)
{
	if (r->code_len && at >= r->code_at && at + 8 <= r->code_at + r->code_len) {
		memcpy(v, span + (at - r->code_at), 8);
		return 0;
	}
	return cpython_read_u64(mem, code + at, v);
}

#define CO_GENERATOR 0x20
#define CO_COROUTINE 0x80
#define CO_ASYNC_GENERATOR 0x200

/*
 * 3.8-3.10: whether @code, whose fields are in @span, is a generator's or coroutine's, by
 * its co_flags (an int: the low half of the 8 bytes there). A frame object's f_back is
 * cleared at each yield and set again at each resume, before its state says it runs: a
 * read that straddles a resume (a frame across two pages is read page by page) sees it
 * running without a caller (3 of 363 generator slices rooted there in one suite run,
 * 3.10 beside a CPU hog).
 */
static bool generator_code(const struct cpython_layout *l, const struct cpython_mem *mem,
			   const struct walk_reads *r, const uint8_t *span, uint64_t code)
{
	uint64_t flags;

	if (!l->code_flags || !code || code_u64(mem, r, span, code, l->code_flags, &flags))
		return false;
	return (uint32_t)flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR);
}

/*
 * The arguments of the frame read into @buf with its slots (NULL: they were not read
 * with it), whose code's fields are in @span.
 */
static void walk_args(const struct cpython_process *p, const struct cpython_mem *mem,
		      const struct walk_reads *r, const uint8_t *buf, const uint8_t *span,
		      uint64_t frame, uint64_t code, struct cpython_args_out *args)
{
	const struct cpython_layout *l = &p->layout;
	uint64_t slots[CPYTHON_MAX_ARGS];
	int32_t counts[3];
	uint32_t k;
	int n;

	if (!l->frame_localsplus || !l->code_argcount)
		return;
	if (r->code_len && l->code_argcount >= r->code_at &&
	    l->code_argcount + 12 <= r->code_at + r->code_len)
		memcpy(counts, span + (l->code_argcount - r->code_at), sizeof(counts));
	else if (mem->read(mem->ctx, code + l->code_argcount, counts, sizeof(counts)))
		return;
	n = cpython_param_count(counts);
	if (n > 0 && buf)
		memcpy(slots, buf + l->frame_localsplus, (size_t)n * 8);
	else if (n > 0 && mem->read(mem->ctx, frame + l->frame_localsplus, slots, (size_t)n * 8))
		n = -EFAULT;
	/* Arguments that can't be read leave the frame without them. */
	if (n > 0)
		cpython_read_arg_slots(l, mem, &p->types, slots, (uint32_t)n, args);
	for (k = 0; k < p->ntask_codes; k++) {
		if (p->task_codes[k].code == code)
			cpython_read_task_locals(l, mem, &p->types, frame, &p->task_codes[k], args);
	}
}

/*
 * The first @max frames (shims aside) of the chain from @frame into @frames; the chain's
 * depth in frames, up to CPYTHON_WALK_FRAMES, in @depth. Frames past @max are only
 * stepped over (one read each, from pages read already as a rule), their addresses
 * kept in @ring (frame k at ring[k % max]; NULL: not kept). @generator_root: the chain
 * ended at a generator's frame (see cpython_walk_args).
 */
static int walk_chain(const struct cpython_process *p, const struct cpython_mem *mem,
		      uint64_t frame, struct cpython_frame *frames, uint32_t max,
		      struct cpython_args_out *args, uint64_t *ring, uint32_t *depth,
		      bool *generator_root)
{
	uint8_t root_owner = 0; /* of the latest frame that was not a shim */
	const struct cpython_layout *l = &p->layout;
	const struct walk_reads r = walk_reads(l, args != NULL);
	uint64_t mark = 0;
	uint32_t n = 0, seen = 0, steps, power = 1, since_mark = 0;
	bool kept = false;   /* the frame before was returned */
	bool deeper = false; /* the chain goes on past CPYTHON_WALK_FRAMES */
	uint8_t buf[4096], span[CODE_SPAN_MAX];
	bool slots_read; /* buf holds the frame's argument slots too */

	*depth = 0;
	for (steps = 0; frame && steps < CPYTHON_WALK_FRAMES * 2; steps++) {
		uint64_t code, previous, names[3];
		uint8_t owner = 0;

		/*
		 * Brent's cycle check: any cycle, however long, comes back to the mark. A
		 * chain has none: one read with a cycle was read while it changed.
		 */
		if (frame == mark)
			return -EAGAIN;
		if (++since_mark == power) {
			mark = frame;
			power *= 2;
			since_mark = 0;
		}
		/*
		 * Slots past the frame can lie past its memory: then read without them (and
		 * the arguments read on their own: buf's slots are the last frame's).
		 */
		slots_read = r.slots_in_frame;
		if (mem->read(mem->ctx, frame, buf, r.frame_len)) {
			slots_read = false;
			if (r.frame_len == l->frame_size ||
			    mem->read(mem->ctx, frame, buf, l->frame_size))
				return -EFAULT;
		}
		if (!frame_is_live(l, buf))
			return -EAGAIN;
		memcpy(&code, buf + l->frame_code, 8);
		memcpy(&previous, buf + l->frame_previous, 8);
		code = cpython_untag(l, code);
		if (l->frame_owner)
			owner = buf[l->frame_owner];
		if (owner >= l->owner_first_skipped) {
			/* A shim: the frame before it began a C-level eval call. */
			if (kept)
				frames[n - 1].entry = true;
			frame = previous;
			continue;
		}
		/*
		 * 3.12+ enter a running generator through a shim or from its caller's frame,
		 * never with no previous frame: one with none was read as it yielded or
		 * resumed (3.15 marks it running before it links it, and unmarks it after
		 * it unlinks: one read in ten of a summed generator expression saw that).
		 */
		if (owner == OWNED_BY_GENERATOR &&
		    (!generator_running(l, mem, frame) || (!previous && l->minor >= 12)))
			return -EAGAIN;
		/*
		 * Past the frames a walk reads, the chain is only followed, for the cycle
		 * check: Brent's marks see a cycle entered late (a tail of 4,100 frames into
		 * one of 100) by step 2 * CPYTHON_WALK_FRAMES whenever its frames repeat
		 * within the first CPYTHON_WALK_FRAMES; stopped there, the walk returned them
		 * as a deep stack, cut (tests/cpython/test_hostile_images.c).
		 */
		if (seen == CPYTHON_WALK_FRAMES) {
			deeper = true;
			frame = previous;
			continue;
		}
		root_owner = owner;
		if (ring)
			ring[seen % max] = frame;
		kept = seen++ < max;
		if (!kept) {
			if (!ring)
				break;
			frame = previous;
			continue;
		}
		if (!code ||
		    (r.code_len && mem->read(mem->ctx, code + r.code_at, span, r.code_len)) ||
		    code_u64(mem, &r, span, code, l->code_filename, &names[0]) ||
		    code_u64(mem, &r, span, code, l->code_name, &names[1]) ||
		    (l->code_version && code_u64(mem, &r, span, code, l->code_version, &names[2])))
			return -EFAULT;
		frames[n].code = code;
		frames[n].fingerprint = cpython_fingerprint(
			names[0], cpython_name_word(names[1], l->code_version ? names[2] : 0));
		frames[n].filename = names[0];
		frames[n].lasti = frame_lasti(l, buf, code);
		frames[n].entry = l->frame_is_entry ? buf[l->frame_is_entry] != 0
						    : l->instr <= CPYTHON_LASTI_UNITS;
		frames[n].args_len = 0;
		frames[n].args = 0;
		frames[n].args_at = args ? args->used : 0;
		if (args) {
			walk_args(p, mem, &r, slots_read ? buf : NULL, span, frame, code, args);
			frames[n].args_len = (uint16_t)(args->used - frames[n].args_at);
		}
		n++;
		frame = previous;
	}
	if (n)
		frames[n - 1].entry = true;
	/* A chain that goes on past the limit is deeper than could be read. */
	*depth = frame || deeper ? CPYTHON_WALK_FRAMES + 1 : seen;
	*generator_root =
		!frame && !deeper &&
		(root_owner == OWNED_BY_GENERATOR ||
		 (n && n == seen && generator_code(l, mem, &r, span, frames[n - 1].code)));
	return (int)n;
}

int cpython_walk(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
		 uint64_t now_ns, struct cpython_frame *frames, uint32_t max)
{
	return cpython_walk_args(p, mem, tid, now_ns, frames, max, NULL, NULL);
}

/*
 * One try of a walk: of a stack deeper than @max, the root-most @max (the innermost are
 * the ones left out: a trace's slices grow from the root), read again from the first of
 * them, whose address the first pass kept. The second pass must find the chain from
 * there as long as the first did, else the stack moved: read again.
 */
static int walk_once(struct cpython_process *p, const struct cpython_mem *mem, uint64_t first,
		     struct cpython_frame *frames, uint32_t max, struct cpython_args_out *args,
		     uint64_t ring[CPYTHON_MAX_FRAMES], struct cpython_cut *cut,
		     bool *generator_root)
{
	uint32_t depth, again, skip;
	int n;

	cut->frames = 0;
	cut->rootless = false;
	n = walk_chain(p, mem, first, frames, max, args, ring, &depth, generator_root);
	if (n < (int)max || depth <= max)
		return n;
	cut->rootless = depth > CPYTHON_WALK_FRAMES;
	skip = (cut->rootless ? CPYTHON_WALK_FRAMES : depth) - max;
	if (args)
		args->used = 0;
	n = walk_chain(p, mem, ring[skip % max], frames, max, args, NULL, &again, generator_root);
	if (n >= 0 && ((uint32_t)n != max || (!cut->rootless && again != max)))
		return -EAGAIN;
	cut->frames = skip;
	return n;
}

int cpython_walk_args(struct cpython_process *p, const struct cpython_mem *mem, uint32_t tid,
		      uint64_t now_ns, struct cpython_frame *frames, uint32_t max,
		      struct cpython_args_out *args, struct cpython_cut *cut)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_mem own = cpython_process_mem(p);
	struct cpython_pages pages;
	struct cpython_mem paged = { .read = cpython_pages_read, .ctx = &pages };
	struct cpython_cut none;
	uint64_t tstate, ring[CPYTHON_MAX_FRAMES];
	int n = -EAGAIN, tries, err;

	if (!mem)
		mem = &own;
	if (!cut)
		cut = &none;
	if (max > CPYTHON_MAX_FRAMES)
		max = CPYTHON_MAX_FRAMES; /* the ring of addresses has no room for more */
	if (!max)
		return 0;
	tstate = cpython_tstate_for(p, mem, tid, now_ns, &err);
	if (err)
		return -EFAULT;
	if (!tstate)
		return 0;
	/*
	 * A running thread can return from frames while we read them: read again. A chain
	 * that ends at a generator's frame was, as a rule, read as the generator yielded:
	 * its caller (3.11) or the C-stack shim that resumed it (3.12+) was read after the
	 * generator had left it. Python code at a thread's root is never a generator's
	 * unless C code with no Python caller runs one: such a chain is kept at the last try.
	 */
	for (tries = 0; tries < CPYTHON_WALK_TRIES && n < 0; tries++) {
		bool generator_root = false;

		if (args)
			args->used = 0;
		/* Each try reads afresh: the pages of a chain that moved are of no use. */
		cpython_pages_init(&pages, mem);
		cpython_pages_prefetch(&pages, p->hot_pages, p->nhot);
		n = walk_once(p, &paged, first_frame(l, &paged, tstate), frames, max, args, ring,
			      cut, &generator_root);
		if (n > 0 && generator_root && tries + 1 < CPYTHON_WALK_TRIES)
			n = -EAGAIN;
	}
	if (n >= 0)
		p->nhot = cpython_pages_used(&pages, p->hot_pages, CPYTHON_HOT_PAGES);
	return n;
}
