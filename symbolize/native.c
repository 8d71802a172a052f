/*
 * Native stacks: per address space (shared copy-on-write by forked processes) a list of
 * executable mappings, a libdwfl session built from it, and a pc cache. Symbol tables
 * are sorted once per ELF file and shared by build-id across processes, because
 * dwfl_module_addrname scans linearly (~1 ms per deep sample here).
 */
#include "symbolize.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../common/elf.h"
#include "../common/hashmap.h"
#include "../common/log.h"
#include "internal.h"

struct mapping {
	uint64_t start, end, pgoff;
	char *path;
	uint8_t build_id[20];
	uint8_t build_id_size;
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
	Dwfl *dwfl;
	bool dwfl_stale;	  /* mappings changed in a way that needs a rebuild */
	size_t maps_reported;	  /* maps[0..maps_reported) are in dwfl */
	struct hashmap *pc_cache; /* adjusted pc -> (func << 32 | line) */
	struct unwind_ctx ctx;
};

struct sym_entry {
	uint64_t start, end; /* file addresses (before load bias) */
	char *name;
	uint32_t func; /* interned frame, 0 until first used */
};

struct symtab {
	struct sym_entry *syms;
	size_t count;
};

/* ---- address spaces ---- */

static struct addrspace *addrspace__new(pid_t pid)
{
	struct addrspace *as = calloc(1, sizeof(*as));

	if (!as)
		return NULL;
	as->refs = 1;
	as->pid = pid;
	as->pc_cache = hashmap__new();
	if (!as->pc_cache) {
		free(as);
		return NULL;
	}
	return as;
}

static void addrspace__put(struct addrspace *as)
{
	size_t i;

	if (!as || --as->refs > 0)
		return;
	if (as->dwfl)
		dwfl_end(as->dwfl);
	for (i = 0; i < as->nmaps; i++)
		free(as->maps[i].path);
	free(as->maps);
	hashmap__free(as->pc_cache);
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
		as->nmaps++;
	}
	as->capacity = src->nmaps ? src->nmaps : 1;
	as->dwfl_stale = true;
	return as;
}

/* Adds a mapping; one that overlaps older ones replaces them (and forces a rebuild). */
static int addrspace__map(struct addrspace *as, const struct sampler_rec *rec)
{
	struct mapping m = {
		.start = rec->mmap.start,
		.end = rec->mmap.start + rec->mmap.len,
		.pgoff = rec->mmap.pgoff,
		.build_id_size = rec->mmap.build_id_size,
	};
	size_t i, kept = 0;

	for (i = 0; i < as->nmaps; i++) {
		struct mapping *old = &as->maps[i];

		if (old->start < m.end && m.start < old->end) {
			free(old->path);
			as->dwfl_stale = true;
			hashmap__free(as->pc_cache);
			as->pc_cache = hashmap__new();
			if (!as->pc_cache)
				return -ENOMEM;
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
	memcpy(m.build_id, rec->mmap.build_id, m.build_id_size);
	m.path = strdup(rec->mmap.path);
	if (!m.path)
		return -ENOMEM;
	as->maps[as->nmaps++] = m;
	if (as->maps_reported > as->nmaps)
		as->dwfl_stale = true;
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

static char *debuginfo_path;

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
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

static void report_mapping(struct symbolizer *sym, struct addrspace *as, size_t i)
{
	struct mapping m = as->maps[i];
	uint64_t bias = 0;
	bool is_exec = false;
	const char *base;

	if (!strcmp(m.path, "[vdso]") && !reported_already(as, i, m.path)) {
		m.path = (char *)native_vdso_path(sym);
		if (!m.path)
			return;
		base = "[vdso]";
	} else if (m.path[0] != '/' || strstr(m.path, " (deleted)") ||
		   reported_already(as, i, m.path)) {
		return;
	} else {
		base = strrchr(m.path, '/') + 1;
	}
	if (elf_load_bias(m.path, m.start, m.pgoff, &bias, &is_exec))
		return;
	if (dwfl_report_elf(as->dwfl, base, m.path, -1, is_exec ? 0 : bias, false))
		sym->stats.modules_loaded++;
	else
		pr_debug("libdwfl refused %s: %s", m.path, dwfl_errmsg(-1));
}

/* Makes as->dwfl match the mappings: incremental when only additions happened. */
static int addrspace__sync(struct symbolizer *sym, struct addrspace *as)
{
	size_t i;

	if (as->dwfl && !as->dwfl_stale && as->maps_reported == as->nmaps)
		return 0;
	if (as->dwfl && as->dwfl_stale) {
		dwfl_end(as->dwfl);
		as->dwfl = NULL;
	}
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
	as->dwfl_stale = false;
	return 0;
}

/* ---- symbol tables ---- */

static int by_start(const void *a, const void *b)
{
	const struct sym_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

static uint64_t module_key(Dwfl_Module *mod)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	const char *file = NULL;
	uint64_t h = 0xcbf29ce484222325ULL;
	int n = dwfl_module_build_id(mod, &bits, &vaddr);

	if (n <= 0) {
		dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &file, NULL);
		bits = (const unsigned char *)(file ? file : "?");
		n = (int)strlen((const char *)bits);
	}
	while (n--) {
		h ^= *bits++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

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

void symtab__free(struct symtab *tab)
{
	size_t i;

	if (!tab)
		return;
	for (i = 0; i < tab->count; i++)
		free(tab->syms[i].name);
	free(tab->syms);
	free(tab);
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

static struct symtab *symtab_for(struct symbolizer *sym, Dwfl_Module *mod)
{
	uint64_t key = module_key(mod);
	struct symtab *tab = hashmap__get(sym->symtabs, key);

	if (tab)
		return tab;
	tab = symtab__build(mod);
	if (!tab)
		return NULL;
	if (hashmap__set(sym->symtabs, key, tab)) {
		symtab__free(tab);
		return NULL;
	}
	sym->stats.symtabs_built++;
	return tab;
}

/* ---- naming a pc ---- */

static const char *source_of(Dwfl_Module *mod, Dwarf_Addr pc, int *line)
{
	Dwfl_Line *l = dwfl_module_getsrc(mod, pc);

	*line = 0;
	return l ? dwfl_lineinfo(l, NULL, line, NULL, NULL, NULL) : NULL;
}

/* Interns the function containing @pc; *@line gets the line executing there. */
static uint32_t name_pc(struct symbolizer *sym, struct addrspace *as, uint64_t pc, uint32_t *line)
{
	Dwfl_Module *mod = as->dwfl ? dwfl_addrmodule(as->dwfl, pc) : NULL;
	struct frame_info info = { .kind = FRAME_NATIVE, .file = "" };
	const char *modname = NULL, *file;
	Dwarf_Addr bias = 0;
	struct symtab *tab;
	struct sym_entry *e;
	char unknown[512];
	int l;

	*line = 0;
	if (!mod) {
		sym->stats.unknown_frames++;
		info.name = "[unknown]";
		return frame_table__intern(sym->frames, &info);
	}
	dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &modname, NULL);
	if (modname && !strncmp(modname, "/proc/self/fd/", 14))
		modname = "[vdso]";
	dwfl_module_getelf(mod, &bias);
	tab = symtab_for(sym, mod);
	e = tab ? symtab__find(tab, pc - bias) : NULL;
	file = source_of(mod, pc, &l);
	*line = l > 0 ? (uint32_t)l : 0;
	if (!e) {
		sym->stats.unknown_frames++;
		snprintf(unknown, sizeof(unknown), "[unknown] %s+0x%" PRIx64,
			 modname ? strrchr(modname, '/') ? strrchr(modname, '/') + 1 : modname
				 : "?",
			 pc - bias);
		info.name = unknown;
		info.file = modname ? modname : "";
		return frame_table__intern(sym->frames, &info);
	}
	if (!e->func) {
		/* The function's own file and first line: the source of its entry address. */
		file = source_of(mod, e->start + bias, &l);
		info.name = e->name;
		info.file = file ? file : (modname ? modname : "");
		info.line = file && l > 0 ? (uint32_t)l : 0;
		e->func = frame_table__intern(sym->frames, &info);
	}
	return e->func;
}

static uint32_t cached_name(struct symbolizer *sym, struct addrspace *as, uint64_t pc,
			    uint32_t *line)
{
	uintptr_t packed = (uintptr_t)hashmap__get(as->pc_cache, pc);
	uint32_t func;

	if (packed) {
		sym->stats.pc_cache_hits++;
		*line = (uint32_t)packed;
		return (uint32_t)(packed >> 32);
	}
	sym->stats.pc_cache_misses++;
	func = name_pc(sym, as, pc, line);
	if (func)
		hashmap__set(as->pc_cache, pc, (void *)((uintptr_t)func << 32 | *line));
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

int native_map(struct addrspace **asp, pid_t pid, const struct sampler_rec *rec)
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
	return addrspace__map(as, rec);
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

		frames[out].func = cached_name(sym, as, pc, &line);
		frames[out].line = line;
		frames[out].callsite = i + 1 < ctx->n ? ctx->pcs[i + 1] : 0;
		if (!frames[out].func)
			return -ENOMEM;
		out++;
	}
	sym->stats.frames += out;
	return (int)out;
}
