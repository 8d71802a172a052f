/* Finding the kernel fields the eBPF reader reads in the running kernel's BTF. */
#include "kernel_layout.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/btf.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_MODIFIERS 16 /* typedef/const/volatile hops followed to a type */
#define MAX_NESTING 8	 /* anonymous structs and unions looked into */
#define MAX_PATH 3	 /* member names from a struct down to a field */

/*
 * A BTF blob with an index from type id to its description, built only as far as a
 * lookup needs: the types sought come early in vmlinux, and every page of the mapped
 * file touched costs a fault. bench/btf_scan: the lookup took 0.22-1.5 ms (median 0.32)
 * where libbpf's btf__parse() of the whole file took 3.7-53 ms (median 4.2), 21 calls
 * each on this machine's kernel 6.18.
 */
struct btf_view {
	const uint8_t *types;
	uint32_t types_len;
	const char *strings;
	uint32_t strings_len;
	uint32_t *offsets; /* type id -> offset in @types; ids 1 .. count - 1 */
	uint32_t count, capacity;
	uint32_t indexed; /* bytes of @types indexed */
	int err;	  /* -EINVAL (malformed) or -ENOMEM once indexing failed */
};

/* Bytes that follow a type's struct btf_type; -1 for a kind not known here. */
static long type_extra(const struct btf_type *t)
{
	uint32_t vlen = BTF_INFO_VLEN(t->info);

	switch (BTF_INFO_KIND(t->info)) {
	case BTF_KIND_INT:
	case BTF_KIND_VAR:
	case BTF_KIND_DECL_TAG:
		return 4;
	case BTF_KIND_PTR:
	case BTF_KIND_FWD:
	case BTF_KIND_TYPEDEF:
	case BTF_KIND_VOLATILE:
	case BTF_KIND_CONST:
	case BTF_KIND_RESTRICT:
	case BTF_KIND_FUNC:
	case BTF_KIND_FLOAT:
	case BTF_KIND_TYPE_TAG:
		return 0;
	case BTF_KIND_ARRAY:
		return sizeof(struct btf_array);
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		return (long)vlen * sizeof(struct btf_member);
	case BTF_KIND_ENUM:
		return (long)vlen * sizeof(struct btf_enum);
	case BTF_KIND_FUNC_PROTO:
		return (long)vlen * sizeof(struct btf_param);
	case BTF_KIND_DATASEC:
		return (long)vlen * sizeof(struct btf_var_secinfo);
	case BTF_KIND_ENUM64:
		return (long)vlen * sizeof(struct btf_enum64);
	default:
		return -1;
	}
}

/* Checks the header; types are indexed later, as they are looked up. */
static int view_init(struct btf_view *v, const void *data, size_t size)
{
	const struct btf_header *h = data;

	memset(v, 0, sizeof(*v));
	if (size < sizeof(*h) || h->magic != BTF_MAGIC || h->hdr_len < sizeof(*h) ||
	    h->hdr_len > size || (uint64_t)h->type_off + h->type_len > size - h->hdr_len ||
	    (uint64_t)h->str_off + h->str_len > size - h->hdr_len || !h->str_len)
		return -EINVAL;
	v->types = (const uint8_t *)data + h->hdr_len + h->type_off;
	/* Types are read in place as 4-byte words: a section off that alignment is not BTF. */
	if ((uintptr_t)v->types % 4)
		return -EINVAL;
	v->types_len = h->type_len;
	v->strings = (const char *)data + h->hdr_len + h->str_off;
	v->strings_len = h->str_len;
	v->count = 1;
	return v->strings[v->strings_len - 1] ? -EINVAL : 0;
}

/* Indexes the next type. 0, or -errno (kept in v->err) when it can't be. */
static int view_index_next(struct btf_view *v)
{
	const struct btf_type *t = (const struct btf_type *)(v->types + v->indexed);
	long extra;

	if (v->types_len - v->indexed < sizeof(*t) || (extra = type_extra(t)) < 0 ||
	    (uint64_t)v->types_len - v->indexed - sizeof(*t) < (uint64_t)extra)
		return v->err = -EINVAL;
	if (v->count >= v->capacity) {
		uint32_t capacity = v->capacity ? v->capacity * 2 : 1024;
		uint32_t *grown = realloc(v->offsets, capacity * sizeof(*grown));

		if (!grown)
			return v->err = -ENOMEM;
		v->offsets = grown;
		v->capacity = capacity;
	}
	v->offsets[v->count++] = v->indexed;
	v->indexed += sizeof(*t) + (uint32_t)extra;
	return 0;
}

/* Type @id, indexing up to it first; NULL past the last type or on malformed data. */
static const struct btf_type *view_type(struct btf_view *v, uint32_t id)
{
	while (id >= v->count && v->indexed < v->types_len) {
		if (view_index_next(v))
			return NULL;
	}
	if (!id || id >= v->count)
		return NULL;
	return (const struct btf_type *)(v->types + v->offsets[id]);
}

static bool name_is(const struct btf_view *v, uint32_t name_off, const char *name)
{
	return name_off < v->strings_len && !strcmp(v->strings + name_off, name);
}

/* Follows typedefs and qualifiers from @id to the type they name; its id in @id. */
static const struct btf_type *resolve(struct btf_view *v, uint32_t *id)
{
	const struct btf_type *t = view_type(v, *id);
	int hops;

	for (hops = 0; t && hops < MAX_MODIFIERS; hops++) {
		switch (BTF_INFO_KIND(t->info)) {
		case BTF_KIND_TYPEDEF:
		case BTF_KIND_VOLATILE:
		case BTF_KIND_CONST:
		case BTF_KIND_RESTRICT:
		case BTF_KIND_TYPE_TAG:
			*id = t->type;
			t = view_type(v, *id);
			break;
		default:
			return t;
		}
	}
	return NULL;
}

/* The first struct called @name that has members: 0 when there is none. */
static uint32_t find_struct(struct btf_view *v, const char *name)
{
	const struct btf_type *t;
	uint32_t id;

	for (id = 1; (t = view_type(v, id)); id++) {
		if (BTF_INFO_KIND(t->info) == BTF_KIND_STRUCT && BTF_INFO_VLEN(t->info) &&
		    name_is(v, t->name_off, name))
			return id;
	}
	return 0;
}

/*
 * Member @name of the struct or union @id, looked for in its anonymous structs and
 * unions too: its byte offset in @offset and its type in @type. -ESRCH when there is no
 * such member or it is a bit field.
 */
static int find_member(struct btf_view *v, uint32_t id, const char *name, int depth,
		       uint32_t *offset, uint32_t *type)
{
	const struct btf_type *t = resolve(v, &id);
	const struct btf_member *m;
	uint32_t i, vlen;

	if (!t || depth > MAX_NESTING ||
	    (BTF_INFO_KIND(t->info) != BTF_KIND_STRUCT && BTF_INFO_KIND(t->info) != BTF_KIND_UNION))
		return -ESRCH;
	m = (const struct btf_member *)(t + 1);
	vlen = BTF_INFO_VLEN(t->info);
	for (i = 0; i < vlen; i++, m++) {
		uint32_t bits =
			BTF_INFO_KFLAG(t->info) ? BTF_MEMBER_BIT_OFFSET(m->offset) : m->offset;
		uint32_t inner;

		if (BTF_INFO_KFLAG(t->info) && BTF_MEMBER_BITFIELD_SIZE(m->offset))
			continue;
		if (m->name_off && name_is(v, m->name_off, name)) {
			if (bits % 8)
				return -ESRCH;
			*offset = bits / 8;
			*type = m->type;
			return 0;
		}
		if (!m->name_off && !find_member(v, m->type, name, depth + 1, &inner, type)) {
			if (bits % 8)
				return -ESRCH;
			*offset = bits / 8 + inner;
			return 0;
		}
	}
	return -ESRCH;
}

/* The size in bytes of a scalar type (integer, enum or pointer), 0 for anything else. */
static uint32_t scalar_size(struct btf_view *v, uint32_t id)
{
	const struct btf_type *t = resolve(v, &id);

	if (!t)
		return 0;
	switch (BTF_INFO_KIND(t->info)) {
	case BTF_KIND_INT:
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		return t->size;
	case BTF_KIND_PTR:
		return sizeof(void *);
	default:
		return 0;
	}
}

/*
 * The offset of the @size-byte scalar at @path (member names, the last one the scalar;
 * NULL after it) inside struct @id, in @offset.
 */
static int field(struct btf_view *v, uint32_t id, const char *const path[MAX_PATH], uint32_t size,
		 uint32_t *offset)
{
	uint32_t total = 0, at, type = id;
	int err, i;

	if (!id)
		return -ESRCH;
	for (i = 0; i < MAX_PATH && path[i]; i++) {
		err = find_member(v, type, path[i], 0, &at, &type);
		if (err)
			return err;
		total += at;
	}
	if (scalar_size(v, type) != size)
		return -ESRCH;
	*offset = total;
	return 0;
}

/* The fields the programs read: where each is, how big, and where its offset goes. */
static const struct kernel_field {
	const char *type;
	const char *path[MAX_PATH];
	uint32_t size;
	size_t slot; /* in struct pytrace_kernel_offsets */
} kernel_fields[] = {
	{ "task_struct", { "pid" }, 4, offsetof(struct pytrace_kernel_offsets, task_pid) },
	{ "task_struct", { "tgid" }, 4, offsetof(struct pytrace_kernel_offsets, task_tgid) },
	{ "task_struct",
	  { "exit_code" },
	  4,
	  offsetof(struct pytrace_kernel_offsets, task_exit_code) },
	{ "task_struct",
	  { "thread", "fsbase" },
	  8,
	  offsetof(struct pytrace_kernel_offsets, task_fsbase) },
	{ "pt_regs", { "ip" }, 8, offsetof(struct pytrace_kernel_offsets, regs_ip) },
	{ "pt_regs", { "sp" }, 8, offsetof(struct pytrace_kernel_offsets, regs_sp) },
	{ "pt_regs", { "ax" }, 8, offsetof(struct pytrace_kernel_offsets, regs_ax) },
	{ "pt_regs", { "orig_ax" }, 8, offsetof(struct pytrace_kernel_offsets, regs_orig_ax) },
	{ "pt_regs", { "di" }, 8, offsetof(struct pytrace_kernel_offsets, regs_di) },
	{ "pt_regs", { "si" }, 8, offsetof(struct pytrace_kernel_offsets, regs_si) },
};

int kernel_layout__from_btf(const void *data, size_t size, struct pytrace_kernel_offsets *offsets)
{
	struct pytrace_kernel_offsets found = { 0 };
	struct btf_view v;
	size_t i;
	int err;

	err = view_init(&v, data, size);
	for (i = 0; !err && i < sizeof(kernel_fields) / sizeof(kernel_fields[0]); i++) {
		const struct kernel_field *f = &kernel_fields[i];

		err = field(&v, find_struct(&v, f->type), f->path, f->size,
			    (uint32_t *)((char *)&found + f->slot));
	}
	free(v.offsets);
	if (err && v.err)
		return v.err; /* not missing: the data was malformed, or memory short */
	if (!err)
		*offsets = found;
	return err;
}

/* The whole file, for kernels that cannot map it: read() gives a page at a time. */
static void *read_whole(int fd, size_t size)
{
	char *buf = malloc(size ? size : 1);
	size_t done = 0;

	if (!buf)
		return NULL;
	while (done < size) {
		ssize_t n = read(fd, buf + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(buf);
			errno = n ? errno : EINVAL; /* shorter than it said */
			return NULL;
		}
		done += (size_t)n;
	}
	return buf;
}

int kernel_layout__read(const char *path, struct pytrace_kernel_offsets *offsets)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err;
	void *data, *copy = NULL;
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		err = -errno;
		goto out_close;
	}
	data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (data == MAP_FAILED) {
		data = copy = read_whole(fd, (size_t)st.st_size);
		if (!data) {
			err = -errno;
			goto out_close;
		}
	}
	err = kernel_layout__from_btf(data, (size_t)st.st_size, offsets);
	if (copy)
		free(copy);
	else
		munmap(data, (size_t)st.st_size);
out_close:
	close(fd);
	return err;
}
