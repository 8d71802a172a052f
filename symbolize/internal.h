/* Internal to symbolize/: the symbolizer's state, shared by its source files. */
#ifndef PYTRACE_SYMBOLIZE_INTERNAL_H
#define PYTRACE_SYMBOLIZE_INTERNAL_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <sys/types.h>

#include "symbolize.h"

struct addrspace;
struct hashmap;
struct kernel_syms;

struct symbolizer {
	struct frame_table *frames;
	uint32_t max_native;
	struct hashmap *processes; /* pid -> struct addrspace (a reference) */
	/* pid -> its Python code objects' frame ids, by (code, fingerprint) (python.c) */
	struct hashmap *python_names;
	struct image_set *images; /* ELF files, shared by the processes that map them */
	struct kernel_syms *kernel;
	char vdso_path[64];	     /* a memfd holding the vDSO image, "" until made */
	bool native;		     /* interleave native frames with Python's */
	uint32_t wait_hint;	     /* innermost native function of the last off-CPU stack */
	uint32_t no_gil_marker;	     /* its frame id, interned once (0: not yet) */
	struct trace_frame *scratch; /* SYMBOLIZE_MAX_NATIVE_FRAMES native frames */
	struct args_seen *args_seen; /* by the sampler's argument list id (python.c) */
	uint32_t nargs_seen;
	struct symbolizer_stats stats;
};

struct addrspace *native_addrspace_new(pid_t pid);
struct addrspace *native_addrspace_share(struct addrspace *as);
void native_addrspace_put(struct addrspace *as);
int native_map(struct symbolizer *sym, struct addrspace **asp, pid_t pid,
	       const struct sampler_rec *rec);
int native_unwind(struct symbolizer *sym, struct addrspace *as, pid_t tid,
		  const struct sampler_ustack *stack, struct trace_frame *frames, uint32_t max);

/* A path to a copy of the vDSO (the same image in every process), or NULL. */
const char *native_vdso_path(struct symbolizer *sym);

/*
 * ELF images (image.c): one per file however many processes map it, found by build-id
 * (else path, device, inode, mtime and size). An image holds the one Elf handle that the
 * processes' libdwfl sessions borrow, and names file addresses once for all of them.
 * Not thread-safe: the symbolizer's thread only.
 */
struct image;
struct image_set;

struct image_stats {
	uint64_t opened;		 /* ELF files opened (once per image) */
	uint64_t symtabs;		 /* symbol tables built */
	uint64_t name_hits, name_misses; /* file addresses named from the cache, or not */
	uint64_t live;			 /* images referenced now */
};

/* NULL with errno set. Free with image_set__free() once no image is referenced. */
struct image_set *image_set__new(void);
void image_set__free(struct image_set *set);
void image_set__stats(const struct image_set *set, struct image_stats *stats);

/*
 * The image of the file at @path as process @pid sees it (common/target_file.h; 0: as we
 * do), mapped with @build_id (@build_id_size 0: none known, then the file is opened and
 * stat'ed now), as a new reference that the caller drops with image__put(). Its file is
 * read later through @pid's root while @pid lives. NULL with errno set.
 */
struct image *image_set__get(struct image_set *set, pid_t pid, const char *path,
			     const uint8_t *build_id, size_t build_id_size);
struct image *image__get(struct image *img);
/* Drops a reference; the last one frees the image. Accepts NULL. */
void image__put(struct image *img);

/*
 * Where a mapping of @img at @start from file offset @pgoff puts the module, as
 * dwfl_report_elf would: [*@low, *@high). Opens the file on first use: -ESTALE when
 * it is no longer the file that was mapped. 0 or -errno.
 */
int image__place(struct image *img, uint64_t start, uint64_t pgoff, uint64_t *low, uint64_t *high);
/* What to subtract from an address of a module placed at @low to get a file address. */
uint64_t image__bias(const struct image *img, uint64_t low);
/* A new reference to the image's Elf (for a libdwfl find_elf callback), or NULL. */
Elf *image__elf(struct image *img);
/*
 * libdwfl's find_elf for a module whose userdata is its image: hands over a reference
 * to the image's Elf (elf_begin with it as ref), so that libdwfl's elf_end when the
 * session ends only drops that reference. Returns no fd.
 */
int image_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		   char **file_name, Elf **elfp);

/*
 * The interned function containing file address @addr, the line executing there in
 * *@line (0 unknown), and whether no symbol holds it (*@unknown: then the frame is
 * "[unknown] file+0xaddr"). Cached per image. 0 on failure, with errno set.
 */
uint32_t image__name(struct image *img, struct frame_table *frames, uint64_t addr, uint32_t *line,
		     bool *unknown);

/* Python frames of @rec, root first, into @frames. Count or -errno. */
int python_frames(struct symbolizer *sym, const struct sampler_rec *rec, struct trace_frame *frames,
		  uint32_t max);
/* Forgets the names of process @pid's code objects: it exited, or runs another program. */
void python_forget(struct symbolizer *sym, pid_t pid);
void python_names_free(struct symbolizer *sym);

/* Kernel symbols from /proc/kallsyms; NULL when unreadable or hidden (kptr_restrict). */
struct kernel_syms *kernel_syms__load(void);
void kernel_syms__free(struct kernel_syms *ks);
/* The symbol containing @addr, or NULL. Borrowed until freed. */
const char *kernel_syms__find(const struct kernel_syms *ks, uint64_t addr);

#endif
