/*
 * Native stacks: per address space (shared copy-on-write by forked processes) a list of
 * executable mappings, each holding its ELF image (image.c), and a libdwfl session built
 * from them for unwinding. The session borrows each image's Elf instead of opening the
 * file again, and pcs are named by the image, once per file address for all processes.
 */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/log.h"
#include "internal.h"

struct mapping {
	uint64_t start, end, pgoff;
	char *path;
	struct image *image; /* a reference; NULL for what is not reported to libdw */
};

struct unwind_ctx {
	const struct sampler_ustack *stack;
	pid_t tid;
	uint64_t pcs[SYMBOLIZE_MAX_NATIVE_FRAMES];
	bool activation[SYMBOLIZE_MAX_NATIVE_FRAMES];
	uint32_t n, max;
};

struct addrspace {
	int refs;
	pid_t pid;
	struct mapping *maps;
	size_t nmaps, capacity;
	Dwfl *dwfl;	      /* NULL until needed, and after a mapping was replaced */
	size_t maps_reported; /* maps[0..maps_reported) are in dwfl */
	struct unwind_ctx ctx;
};

/* ---- address spaces ---- */

static struct addrspace *addrspace__new(pid_t pid)
{
	struct addrspace *as = calloc(1, sizeof(*as));

	if (!as)
		return NULL;
	as->refs = 1;
	as->pid = pid;
	return as;
}

static void addrspace__put(struct addrspace *as)
{
	size_t i;

	if (!as || --as->refs > 0)
		return;
	/* The session's modules point at the images: end it first. */
	if (as->dwfl)
		dwfl_end(as->dwfl);
	for (i = 0; i < as->nmaps; i++) {
		free(as->maps[i].path);
		image__put(as->maps[i].image);
	}
	free(as->maps);
	free(as);
}

/* A private copy of a shared address space, for a process about to change it. */
static struct addrspace *addrspace__clone(const struct addrspace *src, pid_t pid)
{
	struct addrspace *as = addrspace__new(pid);
	size_t i;

	if (!as)
		return NULL;
	as->maps = calloc(src->nmaps ? src->nmaps : 1, sizeof(*as->maps));
	if (!as->maps) {
		addrspace__put(as);
		return NULL;
	}
	for (i = 0; i < src->nmaps; i++) {
		as->maps[i] = src->maps[i];
		as->maps[i].path = strdup(src->maps[i].path);
		if (!as->maps[i].path)
			break;
		if (as->maps[i].image)
			image__get(as->maps[i].image);
		as->nmaps++;
	}
	as->capacity = src->nmaps ? src->nmaps : 1;
	return as;
}

/* The image a mapping shows, or NULL when it is not a file libdw can read. */
static struct image *mapping_image(struct symbolizer *sym, const struct sampler_rec *rec)
{
	const char *path = rec->mmap.path;

	if (!strcmp(path, "[vdso]")) {
		path = native_vdso_path(sym);
		return path ? image_set__get(sym->images, 0, path, NULL, 0) : NULL;
	}
	if (path[0] != '/' || strstr(path, " (deleted)"))
		return NULL;
	return image_set__get(sym->images, (pid_t)rec->pid, path, rec->mmap.build_id,
			      rec->mmap.build_id_size);
}

/* Adds a mapping; one that overlaps older ones replaces them (and forces a rebuild). */
static int addrspace__map(struct symbolizer *sym, struct addrspace *as,
			  const struct sampler_rec *rec)
{
	struct mapping m = {
		.start = rec->mmap.start,
		.end = rec->mmap.start + rec->mmap.len,
		.pgoff = rec->mmap.pgoff,
	};
	size_t i, kept = 0;

	for (i = 0; i < as->nmaps; i++) {
		struct mapping *old = &as->maps[i];

		if (old->start < m.end && m.start < old->end) {
			/* The session may point at this image: end it before letting go. */
			if (as->dwfl) {
				dwfl_end(as->dwfl);
				as->dwfl = NULL;
			}
			free(old->path);
			image__put(old->image);
			continue;
		}
		as->maps[kept++] = *old;
	}
	as->nmaps = kept;
	if (as->nmaps == as->capacity) {
		size_t capacity = as->capacity ? as->capacity * 2 : 32;
		struct mapping *grown = realloc(as->maps, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		as->maps = grown;
		as->capacity = capacity;
	}
	m.path = strdup(rec->mmap.path);
	if (!m.path)
		return -ENOMEM;
	m.image = mapping_image(sym, rec);
	as->maps[as->nmaps++] = m;
	return 0;
}

/* ---- libdwfl session ---- */

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unwind_ctx *ctx = arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = arg;
	return ctx->tid;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

/* Stack reads come from the copy taken with the sample; nothing else is readable. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	const struct unwind_ctx *ctx = arg;
	const struct sampler_ustack *st = ctx->stack;
	uint64_t sp = st->regs[SREG_SP];

	(void)dwfl;
	if (addr < sp || addr - sp + sizeof(*result) > st->size)
		return false;
	memcpy(result, st->data + (addr - sp), sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct unwind_ctx *ctx = arg;
	const uint64_t *r = ctx->stack->regs;
	/* DWARF x86-64 numbering: rax rdx rcx rbx rsi rdi rbp rsp r8-r15 rip. */
	Dwarf_Word dw[17] = {
		r[SREG_AX],  r[SREG_DX],  r[SREG_CX],  r[SREG_BX],  r[SREG_SI],	 r[SREG_DI],
		r[SREG_BP],  r[SREG_SP],  r[SREG_R8],  r[SREG_R9],  r[SREG_R10], r[SREG_R11],
		r[SREG_R12], r[SREG_R13], r[SREG_R14], r[SREG_R15], r[SREG_IP],
	};

	return dwfl_thread_state_registers(thread, 0, 17, dw);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/*
 * No debug files in a process's session: it only unwinds, with the CFI of the mapped
 * files (.eh_frame, and .debug_frame when the file itself has it). Looking for them
 * here would open and decompress them again per process; names and lines come from
 * the image's own session, which does find them.
 */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod;
	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	(void)debuginfo_file_name;
	errno = ENOENT;
	return -1;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = image_find_elf,
	.find_debuginfo = no_debuginfo,
	.section_address = dwfl_offline_section_address,
};

static bool reported_already(const struct addrspace *as, size_t upto, const char *path)
{
	size_t i;

	for (i = 0; i < upto; i++) {
		if (!strcmp(as->maps[i].path, path))
			return true;
	}
	return false;
}

/* Copies our own vDSO into a memfd once: every process on this kernel maps the same one. */
const char *native_vdso_path(struct symbolizer *sym)
{
	struct procfs_view {
		uint64_t start, end;
	} v = { 0, 0 };
	char line[512];
	FILE *f;
	int fd;

	if (sym->vdso_path[0])
		return sym->vdso_path[0] == '-' ? NULL : sym->vdso_path;
	strcpy(sym->vdso_path, "-");
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;

		if (strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &a, &b) == 2) {
			v.start = a;
			v.end = b;
		}
	}
	fclose(f);
	if (!v.end)
		return NULL;
	fd = memfd_create("vdso", MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (write(fd, (const void *)(uintptr_t)v.start, v.end - v.start) !=
	    (ssize_t)(v.end - v.start)) {
		close(fd);
		return NULL;
	}
	/* Kept open for the process's life; its /proc/self/fd path names the image. */
	snprintf(sym->vdso_path, sizeof(sym->vdso_path), "/proc/self/fd/%d", fd);
	return sym->vdso_path;
}

/* Reports the first mapping of each file, placed where that mapping puts it. */
static void report_mapping(struct symbolizer *sym, struct addrspace *as, size_t i)
{
	const struct mapping *m = &as->maps[i];
	const char *name = m->path;
	uint64_t low, high;
	Dwfl_Module *mod;
	void **userdata;

	if (!m->image || reported_already(as, i, m->path))
		return;
	if (strcmp(name, "[vdso]"))
		name = strrchr(name, '/') + 1;
	if (image__place(m->image, m->start, m->pgoff, &low, &high))
		return;
	mod = dwfl_report_module(as->dwfl, name, low, high);
	if (!mod) {
		pr_debug("libdwfl refused %s: %s", m->path, dwfl_errmsg(-1));
		return;
	}
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	*userdata = m->image;
	sym->stats.modules_loaded++;
}

/* Makes as->dwfl match the mappings: incremental when only additions happened. */
static int addrspace__sync(struct symbolizer *sym, struct addrspace *as)
{
	size_t i;

	if (as->dwfl && as->maps_reported == as->nmaps)
		return 0;
	if (!as->dwfl) {
		as->dwfl = dwfl_begin(&dwfl_callbacks);
		if (!as->dwfl)
			return -ENOMEM;
		as->maps_reported = 0;
		dwfl_report_begin(as->dwfl);
	} else {
		dwfl_report_begin_add(as->dwfl);
	}
	for (i = as->maps_reported; i < as->nmaps; i++)
		report_mapping(sym, as, i);
	dwfl_report_end(as->dwfl, NULL, NULL);
	if (!as->maps_reported && dwfl_pid(as->dwfl) < 0)
		dwfl_attach_state(as->dwfl, NULL, as->pid, &thread_callbacks, &as->ctx);
	as->maps_reported = as->nmaps;
	return 0;
}

/* ---- naming a pc ---- */

/* Interns the function containing @pc; *@line gets the line executing there. */
static uint32_t name_pc(struct symbolizer *sym, struct addrspace *as, uint64_t pc, uint32_t *line)
{
	Dwfl_Module *mod = as->dwfl ? dwfl_addrmodule(as->dwfl, pc) : NULL;
	struct frame_info info = { .kind = FRAME_NATIVE, .file = "" };
	Dwarf_Addr low = 0;
	void **userdata;
	uint32_t func;
	bool unknown;

	*line = 0;
	if (!mod) {
		sym->stats.unknown_frames++;
		info.name = "[unknown]";
		return frame_table__intern(sym->frames, &info);
	}
	dwfl_module_info(mod, &userdata, &low, NULL, NULL, NULL, NULL, NULL);
	func = image__name(*userdata, sym->frames, pc - image__bias(*userdata, low), line,
			   &unknown);
	sym->stats.unknown_frames += unknown;
	return func;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct unwind_ctx *ctx = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	ctx->pcs[ctx->n] = pc;
	ctx->activation[ctx->n] = activation;
	ctx->n++;
	return ctx->n < ctx->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/* ---- process bookkeeping (used by symbolize.c) ---- */

struct addrspace *native_addrspace_new(pid_t pid)
{
	return addrspace__new(pid);
}

void native_addrspace_put(struct addrspace *as)
{
	addrspace__put(as);
}

struct addrspace *native_addrspace_share(struct addrspace *as)
{
	as->refs++;
	return as;
}

int native_map(struct symbolizer *sym, struct addrspace **asp, pid_t pid,
	       const struct sampler_rec *rec)
{
	struct addrspace *as = *asp;

	if (as->refs > 1) {
		struct addrspace *own = addrspace__clone(as, pid);

		if (!own)
			return -ENOMEM;
		addrspace__put(as);
		*asp = as = own;
	}
	as->pid = pid;
	return addrspace__map(sym, as, rec);
}

/*
 * Unwinds @stack and writes native frames root first from frames[0]. Returns how many,
 * or a negative errno.
 */
int native_unwind(struct symbolizer *sym, struct addrspace *as, pid_t tid,
		  const struct sampler_ustack *stack, struct trace_frame *frames, uint32_t max)
{
	struct unwind_ctx *ctx = &as->ctx;
	uint32_t i, out = 0;
	int r;

	if (!stack->valid) {
		sym->stats.no_user_state++;
		return 0;
	}
	if (addrspace__sync(sym, as))
		return -ENOMEM;
	ctx->stack = stack;
	ctx->tid = tid;
	ctx->n = 0;
	ctx->max = max < sym->max_native ? max : sym->max_native;
	if (dwfl_pid(as->dwfl) < 0) {
		/* No module could be loaded: only the pc itself is known. */
		ctx->pcs[0] = stack->regs[SREG_IP];
		ctx->activation[0] = true;
		ctx->n = 1;
	} else {
		r = dwfl_getthread_frames(as->dwfl, tid, frame_cb, ctx);
		if (r && ctx->n < ctx->max && ctx->n <= 1)
			sym->stats.truncated_stacks++;
	}
	sym->stats.stacks++;
	for (i = ctx->n; i-- > 0 && out < max;) {
		uint64_t pc = ctx->activation[i] ? ctx->pcs[i] : ctx->pcs[i] - 1;
		uint32_t line;

		frames[out].func = name_pc(sym, as, pc, &line);
		frames[out].line = line;
		frames[out].callsite = i + 1 < ctx->n ? ctx->pcs[i + 1] : 0;
		frames[out].args = 0;
		if (!frames[out].func)
			return -ENOMEM;
		out++;
	}
	sym->stats.frames += out;
	return (int)out;
}
