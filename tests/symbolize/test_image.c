/*
 * Tests of ELF images shared across processes: one entry per file however many processes
 * map it, freed with the last one, a changed file never taken for the old one, one Elf
 * handle under every libdwfl session, and names of file addresses from this very binary.
 */
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../symbolize/internal.h"
#include "../common/support.h"

/* This test binary: an ELF file with debug information and known functions. */
static char self[PATH_MAX];
static uint8_t self_build_id[20];
static size_t self_build_id_size;

static int setup_self(void **state)
{
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const void *bits;
	int fd;
	Elf *elf;

	(void)state;
	if (n <= 0)
		return -1;
	self[n] = '\0';
	elf_version(EV_CURRENT);
	fd = open(self, O_RDONLY | O_CLOEXEC);
	elf = fd >= 0 ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
	n = elf ? dwelf_elf_gnu_build_id(elf, &bits) : -1;
	if (n > 0 && n <= (ssize_t)sizeof(self_build_id)) {
		memcpy(self_build_id, bits, (size_t)n);
		self_build_id_size = (size_t)n;
	}
	elf_end(elf);
	if (fd >= 0)
		close(fd);
	return self_build_id_size ? 0 : -1;
}

static struct image_stats stats_of(const struct image_set *set)
{
	struct image_stats st;

	image_set__stats(set, &st);
	return st;
}

static struct sampler_rec mmap_rec(uint32_t pid, const char *path, const uint8_t *build_id,
				   size_t build_id_size)
{
	struct sampler_rec rec = { .kind = SREC_MMAP, .pid = pid, .tid = pid };

	rec.mmap.start = 0x400000 + 0x100000 * (uint64_t)pid;
	rec.mmap.len = 0x1000;
	rec.mmap.path = path;
	rec.mmap.build_id_size = (uint8_t)build_id_size;
	if (build_id_size)
		memcpy(rec.mmap.build_id, build_id, build_id_size);
	return rec;
}

static struct sampler_rec exit_rec(uint32_t pid)
{
	struct sampler_rec rec = { .kind = SREC_EXIT, .pid = pid, .tid = pid };

	rec.exit.last_in_process = true;
	return rec;
}

static void test_image__processes_share_one_entry(void **state)
{
	struct frame_table *frames = frame_table__new();
	struct symbolizer_opts opts = { 0 };
	struct symbolizer *sym = symbolizer__new(&opts, frames);
	struct sampler_rec a = mmap_rec(100, self, self_build_id, self_build_id_size);
	struct sampler_rec b = mmap_rec(200, self, self_build_id, self_build_id_size);
	struct sampler_rec fork = { .kind = SREC_FORK, .pid = 300, .tid = 300 };
	struct sampler_rec c = mmap_rec(300, "/proc/self/exe", NULL, 0);
	struct sampler_rec gone;

	(void)state;
	assert_non_null(sym);
	assert_int_equal(symbolizer__track(sym, &a), 0);
	assert_int_equal(symbolizer__track(sym, &b), 0);
	assert_int_equal(stats_of(sym->images).live, 1);
	/* Nothing is opened before a stack needs it. */
	assert_int_equal(stats_of(sym->images).opened, 0);

	/* A forked child shares its parent's mappings, then maps a file of its own. */
	fork.fork.ppid = 100;
	fork.fork.ptid = 100;
	assert_int_equal(symbolizer__track(sym, &fork), 0);
	assert_int_equal(symbolizer__track(sym, &c), 0);
	assert_int_equal(stats_of(sym->images).live, 2);

	gone = exit_rec(100);
	assert_int_equal(symbolizer__track(sym, &gone), 0);
	gone = exit_rec(200);
	assert_int_equal(symbolizer__track(sym, &gone), 0);
	/* The child still maps the shared file (from its parent) and its own. */
	assert_int_equal(stats_of(sym->images).live, 2);
	gone = exit_rec(300);
	assert_int_equal(symbolizer__track(sym, &gone), 0);
	assert_int_equal(stats_of(sym->images).live, 0);
	symbolizer__free(sym);
	frame_table__free(frames);
}

static void test_image__refcount_frees_it(void **state)
{
	struct image_set *set = image_set__new();
	struct image *a, *b;
	uint64_t low, high;

	(void)state;
	a = image_set__get(set, 0, self, self_build_id, self_build_id_size);
	b = image_set__get(set, 0, self, self_build_id, self_build_id_size);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_int_equal(image__place(a, 0x7f0000000000, 0, &low, &high), 0);
	assert_int_equal(stats_of(set).opened, 1);
	image__put(a);
	assert_int_equal(stats_of(set).live, 1);
	assert_int_equal(image__place(b, 0x7f0000000000, 0, &low, &high), 0);
	assert_int_equal(stats_of(set).opened, 1);
	image__put(b);
	assert_int_equal(stats_of(set).live, 0);
	/* Mapped again later: a new entry, opened again. */
	a = image_set__get(set, 0, self, self_build_id, self_build_id_size);
	assert_int_equal(image__place(a, 0x7f0000000000, 0, &low, &high), 0);
	assert_int_equal(stats_of(set).opened, 2);
	image__put(a);
	image__put(NULL);
	image_set__free(set);
}

/* Copies this binary to @path through a new inode, as an install would. */
static void install_copy(const char *path)
{
	char cmd[2 * PATH_MAX + 64];
	int status;

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s.new' && mv '%s.new' '%s'", self, path, path, path);
	free(support_run(cmd, &status));
	assert_int_equal(status, 0);
}

static void test_image__changed_file_is_another_image(void **state)
{
	char *dir = support_tempdir();
	char path[PATH_MAX];
	struct image_set *set = image_set__new();
	struct image *a, *b, *c;
	uint8_t other_id[20];
	uint64_t low, high;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/libx.so", dir);
	install_copy(path);
	a = image_set__get(set, 0, path, NULL, 0);
	assert_non_null(a);
	assert_int_equal(image__place(a, 0x7f0000000000, 0, &low, &high), 0);
	install_copy(path); /* same bytes, a new file */
	b = image_set__get(set, 0, path, NULL, 0);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	assert_int_equal(stats_of(set).live, 2);
	image__put(b);

	/* Replaced between the mapping and the first use: refused, not misread. */
	b = image_set__get(set, 0, path, NULL, 0);
	install_copy(path);
	assert_int_equal(image__place(b, 0x7f0000000000, 0, &low, &high), -ESTALE);
	assert_null(image__elf(b));

	/* A mapping whose build-id the file at its path does not have. */
	memcpy(other_id, self_build_id, sizeof(other_id));
	other_id[0] ^= 0xff;
	c = image_set__get(set, 0, path, other_id, self_build_id_size);
	assert_non_null(c);
	assert_int_equal(image__place(c, 0x7f0000000000, 0, &low, &high), -ESTALE);
	image__put(a);
	image__put(b);
	image__put(c);
	assert_int_equal(stats_of(set).live, 0);
	image_set__free(set);
	support_rmdir(dir);
}

static void test_image__missing_file(void **state)
{
	struct image_set *set = image_set__new();
	struct image *img;
	uint64_t low, high;

	(void)state;
	errno = 0;
	assert_null(image_set__get(set, 0, "/nonexistent/libgone.so", NULL, 0));
	assert_int_equal(errno, ENOENT);
	/* With a build-id it is known without the file, and fails when first used. */
	img = image_set__get(set, 0, "/nonexistent/libgone.so", self_build_id, self_build_id_size);
	assert_non_null(img);
	assert_int_equal(image__place(img, 0x1000, 0, &low, &high), -ENOENT);
	image__put(img);
	image_set__free(set);
}

static void test_image__one_elf_under_every_session(void **state)
{
	static const Dwfl_Callbacks callbacks = { .find_elf = image_find_elf };
	struct image_set *set = image_set__new();
	struct image *img = image_set__get(set, 0, self, self_build_id, self_build_id_size);
	Elf *elfs[2];
	Dwfl *dwfl[2];

	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		uint64_t start = 0x7f0000000000 + 0x10000000 * (uint64_t)i, low, high;
		Dwfl_Module *mod;
		Dwarf_Addr bias;
		void **userdata;

		assert_int_equal(image__place(img, start, 0, &low, &high), 0);
		dwfl[i] = dwfl_begin(&callbacks);
		dwfl_report_begin(dwfl[i]);
		mod = dwfl_report_module(dwfl[i], "self", low, high);
		assert_non_null(mod);
		dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
		*userdata = img;
		dwfl_report_end(dwfl[i], NULL, NULL);
		elfs[i] = dwfl_module_getelf(mod, &bias);
		assert_non_null(elfs[i]);
		assert_int_equal(bias, image__bias(img, low));
	}
	assert_ptr_equal(elfs[0], elfs[1]);
	/* Each session ends its own reference; the image's outlives both. */
	dwfl_end(dwfl[0]);
	dwfl_end(dwfl[1]);
	elfs[1] = image__elf(img);
	assert_ptr_equal(elfs[1], elfs[0]);
	elf_end(elfs[1]); /* the reference image__elf just gave */
	image__put(img);
	image_set__free(set);
}

static __attribute__((noinline)) int marker_function(int x)
{
	return x * 3 + 1;
}

/* Where this binary's text is mapped: its start and file offset, from /proc/self/maps. */
static void self_text_mapping(uint64_t addr, uint64_t *start, uint64_t *pgoff)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[PATH_MAX + 128];
	unsigned long long a, b, off;

	assert_non_null(f);
	*start = 0;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx-%llx %*s %llx", &a, &b, &off) == 3 && addr >= a &&
		    addr < b) {
			*start = a;
			*pgoff = off;
		}
	}
	fclose(f);
	assert_int_not_equal(*start, 0);
}

static void test_image__names_file_addresses(void **state)
{
	struct frame_table *frames = frame_table__new();
	struct image_set *set = image_set__new();
	struct image *img = image_set__get(set, 0, self, self_build_id, self_build_id_size);
	uint64_t addr = (uint64_t)(uintptr_t)&marker_function, start, pgoff, low, high;
	const struct frame_info *f;
	uint32_t func, line, again;
	bool unknown;

	(void)state;
	assert_int_equal(marker_function(1), 4);
	self_text_mapping(addr, &start, &pgoff);
	assert_int_equal(image__place(img, start, pgoff, &low, &high), 0);
	addr -= image__bias(img, low);
	func = image__name(img, frames, addr + 1, &line, &unknown);
	f = frame_table__get(frames, func);
	assert_non_null(f);
	assert_false(unknown);
	assert_string_equal(f->name, "marker_function");
	assert_non_null(strstr(f->file, "test_image.c"));
	assert_true(f->line > 0);
	assert_true(line >= f->line);
	/* The second time from the cache, the same answer. */
	again = image__name(img, frames, addr + 1, &line, &unknown);
	assert_int_equal(again, func);
	assert_int_equal(stats_of(set).name_hits, 1);
	assert_int_equal(stats_of(set).symtabs, 1);

	/* Below every symbol: "[unknown] file+0xaddr", with the file as its file. */
	func = image__name(img, frames, 1, &line, &unknown);
	f = frame_table__get(frames, func);
	assert_true(unknown);
	assert_non_null(strstr(f->name, "[unknown] test_image+0x1"));
	assert_string_equal(f->file, self);
	image__put(img);
	image_set__free(set);
	frame_table__free(frames);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image__processes_share_one_entry),
		cmocka_unit_test(test_image__refcount_frees_it),
		cmocka_unit_test(test_image__changed_file_is_another_image),
		cmocka_unit_test(test_image__missing_file),
		cmocka_unit_test(test_image__one_elf_under_every_session),
		cmocka_unit_test(test_image__names_file_addresses),
	};

	return cmocka_run_group_tests(tests, setup_self, NULL);
}
