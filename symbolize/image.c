/*
 * ELF images shared by every process that maps them. One entry per file, found by its
 * build-id (else by path, device, inode, mtime and size), holds the one Elf handle that
 * every process's libdwfl session borrows (see native.c) and the naming done once per
 * file: a sorted symbol table, and a cache from file address to function and line.
 * Debug files and line tables are found and decoded by the image's own libdwfl session,
 * lazily, once for all processes: a spawn pool starts a fresh interpreter per task, and
 * each would otherwise decode the same debug files again (libc's is compressed);
 * bench/spawn_pool.py measures what a spawn pool costs the tool.
 */
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/hashmap.h"
#include "../common/log.h"
#include "../common/target_file.h"
#include "internal.h"

#define BUILD_ID_MAX 20

/* What makes two mappings the same file. */
struct image_id {
	uint8_t build_id[BUILD_ID_MAX];
	uint8_t build_id_size; /* 0: none, the file's identity below decides */
	dev_t dev;
	ino_t ino;
	int64_t mtime_ns;
	off_t size;
};

struct load_segment {
	uint64_t vaddr, offset, filesz;
};

struct sym_entry {
	uint64_t start, end; /* file addresses */
	char *name;
	uint32_t func; /* interned frame, 0 until first used */
};

struct symtab {
	struct sym_entry *syms;
	size_t count;
};

struct image {
	int refs;
	struct image_set *set;
	uint64_t key;
	bool in_set; /* false: its key's slot holds another image (a hash collision) */
	struct image_id id;
	char *path; /* as first mapped */
	pid_t pid;  /* ... by this process: read through its root (0: ours) */
	int open_err;
	Elf *elf; /* NULL until first needed; each libdwfl session holds a reference */
	bool is_exec;
	uint64_t vaddr;	   /* first PT_LOAD, aligned down as libdwfl does */
	uint64_t load_end; /* end of the last PT_LOAD */
	struct load_segment *loads;
	size_t nloads;
	Dwfl *dwfl; /* this image alone at its file addresses: symbols, debug file, lines */
	Dwfl_Module *mod;
	struct symtab *symtab;
	bool symtab_tried;
	struct hashmap *names; /* file address -> func << 32 | line */
};

struct image_set {
	struct hashmap *images; /* key -> struct image */
	struct image_stats stats;
};

/* ---- identity ---- */

static uint64_t id_key(const struct image_id *id, const char *path)
{
	uint64_t h = FNV1A_OFFSET;

	if (id->build_id_size)
		return fnv1a_bytes(h, id->build_id, id->build_id_size);
	h = fnv1a_bytes(h, path, strlen(path));
	h = fnv1a_bytes(h, &id->dev, sizeof(id->dev));
	h = fnv1a_bytes(h, &id->ino, sizeof(id->ino));
	h = fnv1a_bytes(h, &id->mtime_ns, sizeof(id->mtime_ns));
	return fnv1a_bytes(h, &id->size, sizeof(id->size));
}

static bool same_image(const struct image *img, const struct image_id *id, const char *path)
{
	if (img->id.build_id_size || id->build_id_size)
		return img->id.build_id_size == id->build_id_size &&
		       !memcmp(img->id.build_id, id->build_id, id->build_id_size);
	return img->id.dev == id->dev && img->id.ino == id->ino &&
	       img->id.mtime_ns == id->mtime_ns && img->id.size == id->size &&
	       !strcmp(img->path, path);
}

static void stat_id(const struct stat *st, struct image_id *id)
{
	id->dev = st->st_dev;
	id->ino = st->st_ino;
	id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	id->size = st->st_size;
}

/* ---- the set ---- */

struct image_set *image_set__new(void)
{
	struct image_set *set = calloc(1, sizeof(*set));

	if (!set)
		return NULL;
	elf_version(EV_CURRENT);
	set->images = hashmap__new();
	if (!set->images) {
		free(set);
		return NULL;
	}
	return set;
}

static void image__free(struct image *img);

static void free_image_value(void *img)
{
	image__free(img);
}

void image_set__free(struct image_set *set)
{
	if (!set)
		return;
	hashmap__free_all(set->images, free_image_value);
	free(set);
}

void image_set__stats(const struct image_set *set, struct image_stats *stats)
{
	*stats = set->stats;
	stats->live = hashmap__count(set->images);
}

/* Stats @path as @pid sees it, through the same checks as reading it. */
static int target_stat(pid_t pid, const char *path, struct stat *st)
{
	int fd = target_file_open(pid, path), err = 0;

	if (fd < 0) {
		errno = -fd;
		return -1;
	}
	if (fstat(fd, st))
		err = -1;
	close(fd);
	return err;
}

struct image *image_set__get(struct image_set *set, pid_t pid, const char *path,
			     const uint8_t *build_id, size_t build_id_size)
{
	struct image_id id = { .build_id_size = 0 };
	struct image *img;
	struct stat st;

	if (build_id_size) {
		id.build_id_size = build_id_size < BUILD_ID_MAX ? build_id_size : BUILD_ID_MAX;
		memcpy(id.build_id, build_id, id.build_id_size);
	} else if (target_stat(pid, path, &st)) {
		return NULL;
	} else {
		stat_id(&st, &id);
	}
	img = hashmap__get(set->images, id_key(&id, path));
	if (img && same_image(img, &id, path))
		return image__get(img);
	img = calloc(1, sizeof(*img));
	if (!img)
		return NULL;
	img->refs = 1;
	img->set = set;
	img->id = id;
	img->key = id_key(&id, path);
	img->pid = pid;
	img->path = strdup(path);
	img->names = hashmap__new();
	if (!img->path || !img->names) {
		image__free(img);
		errno = ENOMEM;
		return NULL;
	}
	/* A colliding key keeps its first image; this one stays private. */
	if (!hashmap__get(set->images, img->key)) {
		if (hashmap__set(set->images, img->key, img)) {
			image__free(img);
			errno = ENOMEM;
			return NULL;
		}
		img->in_set = true;
	}
	return img;
}

struct image *image__get(struct image *img)
{
	img->refs++;
	return img;
}

static void image__free(struct image *img)
{
	size_t i;

	if (img->dwfl)
		dwfl_end(img->dwfl);
	if (img->elf)
		elf_end(img->elf);
	if (img->symtab) {
		for (i = 0; i < img->symtab->count; i++)
			free(img->symtab->syms[i].name);
		free(img->symtab->syms);
		free(img->symtab);
	}
	hashmap__free(img->names);
	free(img->loads);
	free(img->path);
	free(img);
}

void image__put(struct image *img)
{
	if (!img || --img->refs > 0)
		return;
	if (img->in_set)
		hashmap__remove(img->set->images, img->key);
	image__free(img);
}

/* ---- the ELF file ---- */

/* The file must be the one that was mapped: same build-id, or same inode and mtime. */
static int check_identity(const struct image *img, int fd, Elf *elf)
{
	const void *bits;
	struct stat st;
	struct image_id id = img->id;
	ssize_t n;

	if (img->id.build_id_size) {
		n = dwelf_elf_gnu_build_id(elf, &bits);
		if (n < img->id.build_id_size ||
		    (n != img->id.build_id_size && img->id.build_id_size != BUILD_ID_MAX) ||
		    memcmp(bits, img->id.build_id, img->id.build_id_size))
			return -ESTALE;
		return 0;
	}
	if (fstat(fd, &st))
		return -errno;
	stat_id(&st, &id);
	return same_image(img, &id, img->path) ? 0 : -ESTALE;
}

static int read_segments(struct image *img)
{
	size_t nphdr, i, j = 0;
	GElf_Ehdr ehdr;

	if (!gelf_getehdr(img->elf, &ehdr) || elf_getphdrnum(img->elf, &nphdr))
		return -ENOEXEC;
	img->is_exec = ehdr.e_type == ET_EXEC || ehdr.e_type == ET_CORE;
	img->loads = calloc(nphdr ? nphdr : 1, sizeof(*img->loads));
	if (!img->loads)
		return -ENOMEM;
	for (i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(img->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* libdwfl's module range: from the first segment to the end of the last. */
		if (!j)
			img->vaddr = ph.p_vaddr & -ph.p_align;
		if (ph.p_vaddr + ph.p_memsz > 0)
			img->load_end = ph.p_vaddr + ph.p_memsz;
		img->loads[j++] = (struct load_segment){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
	img->nloads = j;
	return j && img->load_end ? 0 : -ENOEXEC;
}

/* Opens and checks the file once; the fd is not kept (all of it is mapped or read). */
static int image__open(struct image *img)
{
	int fd, err;

	if (img->elf || img->open_err)
		return img->open_err;
	fd = target_file_open(img->pid, img->path);
	if (fd < 0) {
		err = fd;
		goto out;
	}
	img->elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!img->elf || elf_kind(img->elf) != ELF_K_ELF) {
		err = -ENOEXEC;
		goto out_close;
	}
	err = check_identity(img, fd, img->elf);
	if (!err)
		err = read_segments(img);
	if (!err && elf_cntl(img->elf, ELF_C_FDREAD))
		err = -EIO;
out_close:
	close(fd);
	if (err && img->elf) {
		elf_end(img->elf);
		img->elf = NULL;
	}
out:
	if (err)
		pr_debug("cannot use %s: %s", img->path, strerror(-err));
	else
		img->set->stats.opened++;
	img->open_err = err;
	return err;
}

Elf *image__elf(struct image *img)
{
	if (image__open(img))
		return NULL;
	return elf_begin(-1, ELF_C_READ_MMAP, img->elf);
}

int image__place(struct image *img, uint64_t start, uint64_t pgoff, uint64_t *low, uint64_t *high)
{
	uint64_t base = 0;
	size_t i;
	int err = image__open(img);

	if (err)
		return err;
	for (i = 0; i < img->nloads; i++) {
		const struct load_segment *s = &img->loads[i];

		/* The segment holding file offset @pgoff tells which vaddr @start maps. */
		if (pgoff >= (s->offset & ~(uint64_t)4095) && pgoff < s->offset + s->filesz)
			break;
	}
	if (i == img->nloads)
		return -ENOEXEC;
	if (!img->is_exec)
		base = start - (img->loads[i].vaddr - (img->loads[i].offset - pgoff));
	/* As dwfl_report_elf places a file at @base (add_p_vaddr false). */
	*low = img->is_exec ? img->vaddr : base;
	*high = *low - img->vaddr + img->load_end;
	return 0;
}

uint64_t image__bias(const struct image *img, uint64_t low)
{
	return low - img->vaddr;
}

/* ---- names and lines ---- */

int image_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		   char **file_name, Elf **elfp)
{
	struct image *img = *userdata;

	(void)mod;
	(void)modname;
	(void)base;
	*elfp = image__elf(img);
	*file_name = *elfp ? strdup(img->path) : NULL;
	return -1;
}

static char *debuginfo_path;

static const Dwfl_Callbacks image_callbacks = {
	.find_elf = image_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/* The image's own session, its file at its own addresses (bias 0). */
static Dwfl_Module *image__module(struct image *img)
{
	void **userdata;

	if (img->mod || img->dwfl || image__open(img))
		return img->mod;
	img->dwfl = dwfl_begin(&image_callbacks);
	if (!img->dwfl)
		return NULL;
	dwfl_report_begin(img->dwfl);
	img->mod = dwfl_report_module(img->dwfl, img->path, img->vaddr, img->load_end);
	if (img->mod) {
		dwfl_module_info(img->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
		*userdata = img;
	}
	dwfl_report_end(img->dwfl, NULL, NULL);
	return img->mod;
}

static int by_start(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* dwfl_module_addrname scans linearly: sort the function symbols once. */
static struct symtab *symtab__build(Dwfl_Module *mod)
{
	struct symtab *tab = calloc(1, sizeof(*tab));
	Dwarf_Addr bias = 0;
	int n, i;

	if (!tab)
		return NULL;
	dwfl_module_getelf(mod, &bias);
	n = dwfl_module_getsymtab(mod);
	tab->syms = calloc(n > 0 ? (size_t)n : 1, sizeof(*tab->syms));
	if (!tab->syms) {
		free(tab);
		return NULL;
	}
	for (i = 1; i < n; i++) {
		GElf_Sym s;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(mod, i, &s, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(s.st_info);
		struct sym_entry *e;

		if (!name || !*name || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
		    shndx == SHN_UNDEF)
			continue;
		e = &tab->syms[tab->count];
		e->start = addr - bias;
		e->end = e->start + s.st_size;
		e->name = strdup(name);
		if (e->name)
			tab->count++;
	}
	qsort(tab->syms, tab->count, sizeof(*tab->syms), by_start);
	/* Zero-sized symbols (assembly) run to the next symbol. */
	for (i = 0; (size_t)i + 1 < tab->count; i++) {
		if (tab->syms[i].end == tab->syms[i].start)
			tab->syms[i].end = tab->syms[i + 1].start;
	}
	return tab;
}

static struct sym_entry *symtab__find(const struct symtab *tab, uint64_t addr)
{
	size_t lo = 0, hi = tab->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (tab->syms[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	/* Prefer the enclosing symbol among several starting before @addr. */
	for (hi = lo; hi-- > 0 && lo - hi <= 4;) {
		if (addr < tab->syms[hi].end)
			return &tab->syms[hi];
	}
	return NULL;
}

static struct symtab *image__symtab(struct image *img, Dwfl_Module *mod)
{
	if (!img->symtab_tried) {
		img->symtab_tried = true;
		img->symtab = symtab__build(mod);
		if (img->symtab)
			img->set->stats.symtabs++;
	}
	return img->symtab;
}

/* Lines come from the debug information, loaded (and decompressed) on first use. */
static const char *source_of(Dwfl_Module *mod, Dwarf_Addr addr, int *line)
{
	Dwfl_Line *l = dwfl_module_getsrc(mod, addr);

	*line = 0;
	return l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;
}

/* Names the function containing @addr and the line executing there, uncached. */
static uint32_t image__name_uncached(struct image *img, struct frame_table *frames, uint64_t addr,
				     uint32_t *line, bool *unknown)
{
	struct frame_info info = { .kind = FRAME_NATIVE, .file = "" };
	Dwfl_Module *mod = image__module(img);
	const char *modname = img->path, *file = NULL;
	struct symtab *tab = mod ? image__symtab(img, mod) : NULL;
	struct sym_entry *e = tab ? symtab__find(tab, addr) : NULL;
	char name[512];
	int l = 0;

	if (!strncmp(modname, "/proc/self/fd/", 14))
		modname = "[vdso]";
	if (mod)
		file = source_of(mod, addr, &l);
	*line = l > 0 ? (uint32_t)l : 0;
	*unknown = !e;
	if (!e) {
		snprintf(name, sizeof(name), "[unknown] %s+0x%" PRIx64,
			 strrchr(modname, '/') ? strrchr(modname, '/') + 1 : modname, addr);
		info.name = name;
		info.file = modname;
		return frame_table__intern(frames, &info);
	}
	if (!e->func) {
		/* The function's own file and first line: the source of its entry address. */
		file = source_of(mod, e->start, &l);
		info.name = e->name;
		info.file = file ? file : modname;
		info.line = file && l > 0 ? (uint32_t)l : 0;
		e->func = frame_table__intern(frames, &info);
	}
	return e->func;
}

uint32_t image__name(struct image *img, struct frame_table *frames, uint64_t addr, uint32_t *line,
		     bool *unknown)
{
	uintptr_t packed = (uintptr_t)hashmap__get(img->names, addr);
	uint32_t func;

	if (packed) {
		img->set->stats.name_hits++;
		*line = (uint32_t)packed;
		*unknown = packed & (1ULL << 63);
		return (uint32_t)(packed >> 32) & 0x7fffffff;
	}
	img->set->stats.name_misses++;
	func = image__name_uncached(img, frames, addr, line, unknown);
	/* Frame ids are dense and far below 2^31: the top bit marks an unknown one. */
	if (func && func < 0x80000000u)
		hashmap__set(img->names, addr,
			     (void *)((uintptr_t)func << 32 | (uintptr_t)*unknown << 63 | *line));
	return func;
}
