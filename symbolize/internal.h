/* Internal to symbolize/: the symbolizer's state, shared by its source files. */
#ifndef PYTRACE_SYMBOLIZE_INTERNAL_H
#define PYTRACE_SYMBOLIZE_INTERNAL_H

#include <sys/types.h>

#include "symbolize.h"

struct addrspace;
struct hashmap;
struct kernel_syms;

struct symbolizer {
	struct frame_table *frames;
	uint32_t max_native;
	struct hashmap *processes; /* pid -> struct addrspace (a reference) */
	struct hashmap *symtabs;   /* module key -> struct symtab */
	struct kernel_syms *kernel;
	char vdso_path[64];	     /* a memfd holding the vDSO image, "" until made */
	bool native;		     /* interleave native frames with Python's */
	uint32_t wait_hint;	     /* innermost native function of the last off-CPU stack */
	struct trace_frame *scratch; /* SYMBOLIZE_MAX_NATIVE_FRAMES native frames */
	struct symbolizer_stats stats;
};

struct addrspace *native_addrspace_new(pid_t pid);
struct addrspace *native_addrspace_share(struct addrspace *as);
void native_addrspace_put(struct addrspace *as);
int native_map(struct addrspace **asp, pid_t pid, const struct sampler_rec *rec);
int native_unwind(struct symbolizer *sym, struct addrspace *as, pid_t tid,
		  const struct sampler_ustack *stack, struct trace_frame *frames, uint32_t max);

/* A path to a copy of the vDSO (the same image in every process), or NULL. */
const char *native_vdso_path(struct symbolizer *sym);

struct symtab;
void symtab__free(struct symtab *tab);

/* Python frames of @rec, root first, into @frames. Count or -errno. */
int python_frames(struct symbolizer *sym, const struct sampler_rec *rec, struct trace_frame *frames,
		  uint32_t max);

/* Kernel symbols from /proc/kallsyms; NULL when unreadable or hidden (kptr_restrict). */
struct kernel_syms *kernel_syms__load(void);
void kernel_syms__free(struct kernel_syms *ks);
/* The symbol containing @addr, or NULL. Borrowed until freed. */
const char *kernel_syms__find(const struct kernel_syms *ks, uint64_t addr);

#endif
