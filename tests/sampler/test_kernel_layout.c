/*
 * Finding kernel fields in BTF: blobs written with libbpf's BTF writer, and this kernel's.
 * mmap is wrapped (-Wl,--wrap=mmap) to take the path of kernels that can't map the file.
 */
#include <errno.h>
#include <linux/types.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <unistd.h>

#include <bpf/btf.h>
#include <cmocka.h>
#include <linux/btf.h>

#include "../../sampler/kernel_layout.h"
#include "../common/support.h"

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset);

static bool mmap_fails; /* as it does for /sys/kernel/btf/vmlinux before Linux 6.16 */

void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t offset)
{
	if (mmap_fails) {
		errno = EINVAL;
		return MAP_FAILED;
	}
	return __real_mmap(addr, len, prot, flags, fd, offset);
}

/* How the test kernel is laid out; each case changes one thing. */
struct shape {
	bool randomized;    /* task_struct's fields inside an anonymous struct at 32 */
	bool declaration;   /* a memberless task_struct comes first */
	bool no_fsbase;	    /* thread_struct without fsbase */
	bool long_pid;	    /* pid is 8 bytes */
	bool const_thread;  /* thread is a const struct thread_struct */
	bool bitfield_tgid; /* tgid is a bit field */
};

/* Writes a BTF blob for @shape; caller frees it. */
static void *make_btf(const struct shape *shape, size_t *size)
{
	struct btf *btf = btf__new_empty();
	int s32, s64, u64, pid_t_id, thread, thread_ref, fields;
	const void *raw;
	uint32_t raw_size;
	void *copy;

	assert_non_null(btf);
	s32 = btf__add_int(btf, "int", 4, BTF_INT_SIGNED);
	s64 = btf__add_int(btf, "long", 8, BTF_INT_SIGNED);
	u64 = btf__add_int(btf, "long unsigned int", 8, 0);
	pid_t_id = btf__add_typedef(btf, "pid_t", shape->long_pid ? s64 : s32);
	if (shape->declaration)
		assert_true(btf__add_struct(btf, "task_struct", 0) > 0);
	thread = btf__add_struct(btf, "thread_struct", 64);
	assert_int_equal(btf__add_field(btf, "sp", u64, 0, 0), 0);
	if (!shape->no_fsbase)
		assert_int_equal(btf__add_field(btf, "fsbase", u64, 16 * 8, 0), 0);
	thread_ref = shape->const_thread ? btf__add_const(btf, thread) : thread;
	/* The fields, at 8 (pid), 12 (tgid), 16 (exit_code), 64 (thread) of their struct. */
	fields = btf__add_struct(btf, shape->randomized ? NULL : "task_struct", 256);
	assert_int_equal(btf__add_field(btf, "state", s32, 0, 0), 0);
	assert_int_equal(btf__add_field(btf, "pid", pid_t_id, 8 * 8, 0), 0);
	assert_int_equal(
		btf__add_field(btf, "tgid", pid_t_id, 12 * 8, shape->bitfield_tgid ? 20 : 0), 0);
	assert_int_equal(btf__add_field(btf, "exit_code", s32, 16 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "thread", thread_ref, 64 * 8, 0), 0);
	if (shape->randomized) {
		assert_true(btf__add_struct(btf, "task_struct", 320) > 0);
		assert_int_equal(btf__add_field(btf, "flags", s32, 0, 0), 0);
		assert_int_equal(btf__add_field(btf, NULL, fields, 32 * 8, 0), 0);
	}
	/* Last: the cases that damage the blob damage this type. */
	assert_true(btf__add_struct(btf, "pt_regs", 168) > 0);
	assert_int_equal(btf__add_field(btf, "ax", u64, 80 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "si", u64, 104 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "di", u64, 112 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "orig_ax", u64, 120 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "ip", u64, 128 * 8, 0), 0);
	assert_int_equal(btf__add_field(btf, "sp", u64, 152 * 8, 0), 0);
	raw = btf__raw_data(btf, &raw_size);
	assert_non_null(raw);
	copy = malloc(raw_size);
	assert_non_null(copy);
	memcpy(copy, raw, raw_size);
	*size = raw_size;
	btf__free(btf);
	return copy;
}

static int layout_of(const struct shape *shape, struct pytrace_kernel_offsets *offsets)
{
	size_t size;
	void *data = make_btf(shape, &size);
	int err = kernel_layout__from_btf(data, size, offsets);

	free(data);
	return err;
}

static void test_kernel_layout__finds_fields(void **state)
{
	static const struct {
		struct shape shape;
		uint32_t base; /* where task_struct's fields start */
	} cases[] = {
		{ { 0 }, 0 },
		{ { .randomized = true }, 32 },
		{ { .declaration = true }, 0 },
		{ { .const_thread = true, .randomized = true }, 32 },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pytrace_kernel_offsets o;

		memset(&o, 0xff, sizeof(o));
		assert_int_equal(layout_of(&cases[i].shape, &o), 0);
		assert_int_equal(o.task_pid, cases[i].base + 8);
		assert_int_equal(o.task_tgid, cases[i].base + 12);
		assert_int_equal(o.task_exit_code, cases[i].base + 16);
		assert_int_equal(o.task_fsbase, cases[i].base + 64 + 16);
		assert_int_equal(o.regs_ax, 80);
		assert_int_equal(o.regs_orig_ax, 120);
		assert_int_equal(o.regs_di, 112);
		assert_int_equal(o.regs_si, 104);
		assert_int_equal(o.regs_ip, 128);
		assert_int_equal(o.regs_sp, 152);
	}
}

/* A field missing, of another size, or a bit field: refused, and nothing is filled in. */
static void test_kernel_layout__refuses_what_it_cannot_read(void **state)
{
	static const struct shape cases[] = {
		{ .no_fsbase = true },
		{ .long_pid = true },
		{ .bitfield_tgid = true },
		{ .randomized = true, .no_fsbase = true },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pytrace_kernel_offsets o, untouched;

		memset(&o, 0xab, sizeof(o));
		untouched = o;
		assert_int_equal(layout_of(&cases[i], &o), -ESRCH);
		assert_memory_equal(&o, &untouched, sizeof(o));
	}
}

/*
 * Not BTF, cut anywhere, a type section ending inside a type, a kind not known: -EINVAL,
 * never a read past the end (ASan watches the copies, each allocated at its length).
 */
static void test_kernel_layout__rejects_malformed_data(void **state)
{
	struct shape shape = { .randomized = true };
	struct pytrace_kernel_offsets o;
	size_t size, cut;
	uint8_t *data = make_btf(&shape, &size);
	struct btf_header *h = (struct btf_header *)data;
	struct btf_type *last;

	(void)state;
	for (cut = 0; cut < size; cut++) {
		uint8_t *part = malloc(cut ? cut : 1);

		assert_non_null(part);
		memcpy(part, data, cut);
		assert_int_equal(kernel_layout__from_btf(part, cut, &o), -EINVAL);
		free(part);
	}
	h->type_len -= 4; /* pt_regs' last member cut */
	assert_int_equal(kernel_layout__from_btf(data, size, &o), -EINVAL);
	h->type_len += 4;
	last = (struct btf_type *)(data + h->hdr_len + h->type_off + h->type_len -
				   6 * sizeof(struct btf_member) - sizeof(struct btf_type));
	last->info = (31u << 24) | 6; /* pt_regs, of no known kind */
	assert_int_equal(kernel_layout__from_btf(data, size, &o), -EINVAL);
	last->info = (BTF_KIND_STRUCT << 24) | 6;
	assert_int_equal(kernel_layout__from_btf(data, size, &o), 0);
	data[0] ^= 0xff; /* the magic */
	assert_int_equal(kernel_layout__from_btf(data, size, &o), -EINVAL);
	free(data);
}

/* A BTF file, mapped or, where mapping fails, read: the same fields either way. */
static void test_kernel_layout__reads_files_mapped_or_not(void **state)
{
	struct shape shape = { .randomized = true };
	struct pytrace_kernel_offsets mapped, read;
	char *dir = support_tempdir(), path[4096];
	size_t size;
	void *data = make_btf(&shape, &size);
	FILE *f;

	(void)state;
	assert_non_null(dir);
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	f = fopen(path, "we");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, size, f), size);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(kernel_layout__read(path, &mapped), 0);
	mmap_fails = true;
	assert_int_equal(kernel_layout__read(path, &read), 0);
	mmap_fails = false;
	assert_memory_equal(&mapped, &read, sizeof(read));
	assert_int_equal(read.task_fsbase, 32 + 64 + 16);
	free(data);
	support_rmdir(dir);
}

/* This kernel's own BTF, when it has one: pt_regs as ptrace lays out the user registers. */
static void test_kernel_layout__reads_running_kernel(void **state)
{
	struct pytrace_kernel_offsets o;

	(void)state;
	mmap_fails = false; /* even after a failed case above */
	assert_int_equal(kernel_layout__read("/nonexistent/vmlinux", &o), -ENOENT);
	if (access("/sys/kernel/btf/vmlinux", R_OK))
		skip();
	assert_int_equal(kernel_layout__read("/sys/kernel/btf/vmlinux", &o), 0);
	assert_int_equal(o.regs_ax, offsetof(struct user_regs_struct, rax));
	assert_int_equal(o.regs_orig_ax, offsetof(struct user_regs_struct, orig_rax));
	assert_int_equal(o.regs_di, offsetof(struct user_regs_struct, rdi));
	assert_int_equal(o.regs_si, offsetof(struct user_regs_struct, rsi));
	assert_int_equal(o.regs_ip, offsetof(struct user_regs_struct, rip));
	assert_int_equal(o.regs_sp, offsetof(struct user_regs_struct, rsp));
	assert_int_equal(o.task_tgid, o.task_pid + 4);
	assert_true(o.task_fsbase > o.task_tgid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_layout__finds_fields),
		cmocka_unit_test(test_kernel_layout__refuses_what_it_cannot_read),
		cmocka_unit_test(test_kernel_layout__rejects_malformed_data),
		cmocka_unit_test(test_kernel_layout__reads_files_mapped_or_not),
		cmocka_unit_test(test_kernel_layout__reads_running_kernel),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
