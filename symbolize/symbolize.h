/*
 * The symbolizer: follows each process's executable mappings (from the sampler's mmap,
 * fork and exec records), unwinds user stack copies with libdw's DWARF CFI, and turns
 * program counters into interned frames (function, file, line).
 */
#ifndef PYTRACE_SYMBOLIZE_SYMBOLIZE_H
#define PYTRACE_SYMBOLIZE_SYMBOLIZE_H

#include <stdint.h>

#include "../common/frames.h"
#include "../sampler/sampler.h"

#define SYMBOLIZE_MAX_NATIVE_FRAMES 256

struct symbolizer_opts {
	uint32_t max_native_frames; /* 0: SYMBOLIZE_MAX_NATIVE_FRAMES */
	bool kernel;		    /* name kernel frames from /proc/kallsyms */
	bool native;		    /* Python processes: native frames too, interleaved */
};

struct symbolizer_stats {
	uint64_t stacks;	   /* stacks unwound */
	uint64_t frames;	   /* native frames produced */
	uint64_t unknown_frames;   /* pcs outside every known symbol */
	uint64_t truncated_stacks; /* unwinding stopped before reaching a root frame */
	uint64_t no_user_state;	   /* samples without user registers */
	uint64_t modules_loaded;   /* modules reported to libdw (per process) */
	uint64_t images_opened;	   /* ELF files opened, once each however many map them */
	uint64_t symtabs_built;	   /* symbol tables built (one per image) */
	uint64_t pc_cache_hits;	   /* file addresses named from an image's cache */
	uint64_t pc_cache_misses;
	uint64_t python_frames;		/* Python frames produced */
	uint64_t python_unreadable;	/* code objects that could not be read */
	uint64_t python_args_lost;	/* argument lists not shown: no memory */
	uint64_t interleave_mismatches; /* --native: eval frames and Python frames disagreed */
};

struct symbolizer;

/* NULL with errno set. @frames is borrowed for the symbolizer's life. */
struct symbolizer *symbolizer__new(const struct symbolizer_opts *opts, struct frame_table *frames);
void symbolizer__free(struct symbolizer *sym);

/* Follows fork (a forked child shares its parent's mappings), exec, mmap and exit. */
int symbolizer__track(struct symbolizer *sym, const struct sampler_rec *rec);

/*
 * Unwinds the stack of a sample or off-CPU record and writes its frames root first
 * into @frames (at most @max). Returns the number written, or a negative errno.
 */
int symbolizer__stack(struct symbolizer *sym, const struct sampler_rec *rec,
		      struct trace_frame *frames, uint32_t max);

/*
 * The marker frame for an off-CPU record: why it waited ("preempted", "sleep", "lock
 * (futex)" ...), from the syscall when known, else the libc function it blocked in
 * among @frames; "holding the GIL: sleep" when it blocked with its GIL held (eBPF).
 * 0 on failure.
 */
uint32_t symbolizer__wait_marker(struct symbolizer *sym, const struct sampler_rec *rec,
				 const struct trace_frame *frames, uint32_t nframes);

/*
 * The marker frame for a sample of a Python thread running without its GIL (C code
 * that let it go, or the thread taking it back); 0 for any other record or on failure.
 */
uint32_t symbolizer__gil_marker(struct symbolizer *sym, const struct sampler_rec *rec);

/*
 * The marker frame of a process pool's message (SREC_MESSAGE: "pool task sent" ...)
 * and in @args the arguments it shows (pool_job and pool_task, or work_id, as a worker
 * loop shows them); 0 on failure.
 */
uint32_t symbolizer__message_marker(struct symbolizer *sym, const struct sampler_rec *rec,
				    uint32_t *args);

void symbolizer__stats(const struct symbolizer *sym, struct symbolizer_stats *stats);

#endif
