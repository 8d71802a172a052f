/* Reading Python objects by hand: dicts (combined, split, managed), attributes, ints, names. */
#include <errno.h>
#include <string.h>

#include "cpython.h"
#include "internal.h"

#define TPFLAGS_INLINE_VALUES (1UL << 2) /* 3.13+ */
#define TPFLAGS_MANAGED_DICT (1UL << 4)	 /* 3.11+ */
#define ENTRIES_PER_READ 64
#define MAX_KEY_CHARS 256
#define MAX_STR_HEAD 64 /* sizeof(PyASCIIObject): 48 before 3.12, 40 after */

/* Whether the object at @obj has a type named @name (the type pointer is read, not trusted). */
static bool type_is(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		    const char *name)
{
	uint64_t type, tp_name;
	char got[16];
	size_t len = strlen(name) + 1;

	if (!obj || len > sizeof(got) || cpython_read_u64(mem, obj + l->object_type, &type) ||
	    !type || cpython_read_u64(mem, type + l->type_name, &tp_name) || !tp_name ||
	    mem->read(mem->ctx, tp_name, got, len))
		return false;
	return !memcmp(got, name, len);
}

/*
 * Whether the str at @addr is the ASCII string @s (a compact ASCII object of that length).
 * One read of head and characters: a key of another length may be shorter than that, but
 * then a failed read gives the same answer.
 */
static bool str_equals(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t addr,
		       const char *s, size_t len)
{
	uint8_t buf[MAX_STR_HEAD + MAX_KEY_CHARS];
	uint32_t state;
	int64_t length;

	if (!addr || len > MAX_KEY_CHARS || l->unicode_ascii_size > MAX_STR_HEAD ||
	    l->unicode_state + 4 > l->unicode_ascii_size ||
	    l->unicode_length + 8 > l->unicode_ascii_size ||
	    mem->read(mem->ctx, addr, buf, l->unicode_ascii_size + len))
		return false;
	memcpy(&state, buf + l->unicode_state, 4);
	memcpy(&length, buf + l->unicode_length, 8);
	/* state bits: interned:2 kind:3 compact:1 ascii:1 (3.8 to 3.14). */
	return ((state >> 2) & 7) == 1 && ((state >> 5) & 1) && ((state >> 6) & 1) &&
	       length == (int64_t)len && !memcmp(buf + l->unicode_ascii_size, s, len);
}

/* Where a dict keys object keeps its entries, and their shape. */
struct keys_view {
	uint64_t entries, n;
	unsigned entry_size, key_at, value_at;
};

static int read_keys(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t keys,
		     struct keys_view *v)
{
	uint8_t head[40];

	if (!keys || mem->read(mem->ctx, keys, head, sizeof(head)))
		return -EFAULT;
	if (l->dicts == CPYTHON_DICTS_38) {
		int64_t size, nentries;
		unsigned ix;

		memcpy(&size, head + 8, 8);
		memcpy(&nentries, head + 32, 8);
		if (size < 8 || size > CPYTHON_MAX_DICT_ENTRIES * 2 || (size & (size - 1)) ||
		    nentries < 0 || nentries > size)
			return -EINVAL;
		ix = size <= 0xff ? 1 : size <= 0xffff ? 2 : 4;
		*v = (struct keys_view){ keys + 40 + (uint64_t)size * ix, (uint64_t)nentries, 24, 8,
					 16 };
		return 0;
	}
	{
		uint8_t log2_size = head[8], log2_index_bytes = head[9], kind = head[10];
		int64_t nentries;

		memcpy(&nentries, head + 24, 8);
		if (log2_size < 3 || log2_size > 17 ||
		    (1ULL << log2_size) > CPYTHON_MAX_DICT_ENTRIES * 2 ||
		    log2_index_bytes < log2_size || log2_index_bytes > log2_size + 3 || kind > 2 ||
		    nentries < 0 || nentries > (1LL << log2_size))
			return -EINVAL;
		/* DICT_KEYS_GENERAL (0): hash, key, value; UNICODE and SPLIT: key, value. */
		*v = kind == 0 ? (struct keys_view){ 0, 0, 24, 8, 16 }
			       : (struct keys_view){ 0, 0, 16, 0, 8 };
		v->entries = keys + 32 + (1ULL << log2_index_bytes);
		v->n = (uint64_t)nentries;
		return 0;
	}
}

/*
 * The live items among entries @start .. @start + ENTRIES_PER_READ of a keys object (with
 * @values for a split table, else 0) into @items. Returns the count or -errno.
 */
static int keys_slice(const struct cpython_layout *l, const struct cpython_mem *mem,
		      const struct keys_view *v, uint64_t values, uint64_t start,
		      struct cpython_dict_item *items)
{
	uint8_t buf[ENTRIES_PER_READ * 24];
	uint64_t count = v->n - start < ENTRIES_PER_READ ? v->n - start : ENTRIES_PER_READ, k;
	int n = 0;

	if (mem->read(mem->ctx, v->entries + start * v->entry_size, buf, count * v->entry_size))
		return -EFAULT;
	for (k = 0; k < count; k++) {
		uint64_t key, value;

		memcpy(&key, buf + k * v->entry_size + v->key_at, 8);
		memcpy(&value, buf + k * v->entry_size + v->value_at, 8);
		if (values && key &&
		    cpython_read_u64(mem, values + l->values_items + 8 * (start + k), &value))
			return -EFAULT;
		if (key && value)
			items[n++] = (struct cpython_dict_item){ key, value };
	}
	return n;
}

/* The items of a keys object into @items, at most @max (see keys_slice). */
static int keys_items(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t keys,
		      uint64_t values, struct cpython_dict_item *items, size_t max)
{
	struct cpython_dict_item slice[ENTRIES_PER_READ];
	struct keys_view v;
	uint64_t start;
	size_t n = 0;
	int err = read_keys(l, mem, keys, &v), got, i;

	if (err)
		return err;
	for (start = 0; start < v.n && n < max; start += ENTRIES_PER_READ) {
		got = keys_slice(l, mem, &v, values, start, slice);
		if (got < 0)
			return got;
		for (i = 0; i < got && n < max; i++)
			items[n++] = slice[i];
	}
	return (int)n;
}

/* Looks the str key @name up in a keys object, comparing keys (no hashes: they are seeded). */
static int keys_get(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t keys,
		    uint64_t values, const char *name, uint64_t *value)
{
	struct cpython_dict_item slice[ENTRIES_PER_READ];
	struct keys_view v;
	uint64_t start;
	size_t len = strlen(name);
	int err = read_keys(l, mem, keys, &v), got, i;

	if (err)
		return err;
	for (start = 0; start < v.n; start += ENTRIES_PER_READ) {
		got = keys_slice(l, mem, &v, values, start, slice);
		if (got < 0)
			return got;
		for (i = 0; i < got; i++) {
			if (str_equals(l, mem, slice[i].key, name, len)) {
				*value = slice[i].value;
				return 0;
			}
		}
	}
	return -ENOENT;
}

static int dict_parts(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t dict,
		      uint64_t *keys, uint64_t *values)
{
	if (!type_is(l, mem, dict, "dict"))
		return -EINVAL;
	if (cpython_read_u64(mem, dict + l->dict_keys, keys) ||
	    cpython_read_u64(mem, dict + l->dict_values, values))
		return -EFAULT;
	return 0;
}

int cpython_dict_get(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t dict,
		     const char *name, uint64_t *value)
{
	uint64_t keys, values;
	int err = dict_parts(l, mem, dict, &keys, &values);

	return err ? err : keys_get(l, mem, keys, values, name, value);
}

int cpython_dict_items(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t dict,
		       struct cpython_dict_item *items, size_t max)
{
	uint64_t keys, values;
	int err = dict_parts(l, mem, dict, &keys, &values);

	return err ? err : keys_items(l, mem, keys, values, items, max);
}

/* An attribute kept in values laid out by the type's shared keys (3.11+). */
static int shared_keys_get(const struct cpython_layout *l, const struct cpython_mem *mem,
			   uint64_t type, uint64_t values, const char *name, uint64_t *value)
{
	uint64_t keys;

	if (cpython_read_u64(mem, type + l->heaptype_cached_keys, &keys))
		return -EFAULT;
	return keys ? keys_get(l, mem, keys, values, name, value) : -ENOENT;
}

/* 3.11+ objects whose type has Py_TPFLAGS_MANAGED_DICT: before the object, or inline. */
static int managed_attr(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
			uint64_t type, uint64_t flags, const char *name, uint64_t *value)
{
	uint64_t dict = 0, values = 0, basicsize;
	uint8_t valid;

	switch (l->managed) {
	case CPYTHON_MANAGED_311:
		if (cpython_read_u64(mem, obj - 32, &values) ||
		    cpython_read_u64(mem, obj - 24, &dict))
			return -EFAULT;
		break;
	case CPYTHON_MANAGED_312:
		if (cpython_read_u64(mem, obj - 24, &dict))
			return -EFAULT;
		if (dict & 1) {
			values = dict + 1; /* _PyDictOrValues_GetValues */
			dict = 0;
		}
		break;
	case CPYTHON_MANAGED_313:
		if (cpython_read_u64(mem, obj - 24, &dict))
			return -EFAULT;
		if (dict || !(flags & TPFLAGS_INLINE_VALUES))
			break;
		/* Inline values right after the object; "valid" is their fourth byte. */
		if (cpython_read_u64(mem, type + l->type_basicsize, &basicsize) || basicsize < 16 ||
		    basicsize > 4096 || mem->read(mem->ctx, obj + basicsize + 3, &valid, 1))
			return -EFAULT;
		if (valid)
			values = obj + basicsize;
		break;
	default:
		return -ENOTSUP;
	}
	if (values)
		return shared_keys_get(l, mem, type, values, name, value);
	return dict ? cpython_dict_get(l, mem, dict, name, value) : -ENOENT;
}

int cpython_attr_get(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		     const char *name, uint64_t *value)
{
	uint64_t type, flags, dict;
	int64_t dictoffset;

	if (!l->names_supported)
		return -ENOTSUP;
	if (!obj || cpython_read_u64(mem, obj + l->object_type, &type) || !type ||
	    cpython_read_u64(mem, type + l->type_flags, &flags))
		return -EFAULT;
	if (l->managed != CPYTHON_MANAGED_NONE && (flags & TPFLAGS_MANAGED_DICT))
		return managed_attr(l, mem, obj, type, flags, name, value);
	if (mem->read(mem->ctx, type + l->type_dictoffset, &dictoffset, 8))
		return -EFAULT;
	/* Negative offsets (from the end of a variable-sized object) are not followed. */
	if (dictoffset <= 0 || dictoffset > 4096)
		return -ENOENT;
	if (cpython_read_u64(mem, obj + (uint64_t)dictoffset, &dict))
		return -EFAULT;
	return dict ? cpython_dict_get(l, mem, dict, name, value) : -ENOENT;
}

int cpython_read_ulong(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		       uint64_t *v)
{
	uint32_t digits[3];
	uint64_t head, ndigits;
	int i;

	if (!type_is(l, mem, obj, "int") && !type_is(l, mem, obj, "bool"))
		return -EINVAL;
	if (cpython_read_u64(mem, obj + l->long_size, &head))
		return -EFAULT;
	if (l->long_tagged) {
		/* lv_tag: digit count << 3 | sign (0 positive, 1 zero, 2 negative). */
		if ((head & 3) == 2 || (head & 3) == 3)
			return -EINVAL;
		ndigits = (head & 3) == 1 ? 0 : head >> 3;
	} else {
		if ((int64_t)head < 0)
			return -EINVAL;
		ndigits = head;
	}
	if (ndigits > 3)
		return -ERANGE;
	if (ndigits && mem->read(mem->ctx, obj + l->long_digits, digits, 4 * ndigits))
		return -EFAULT;
	*v = 0;
	for (i = (int)ndigits - 1; i >= 0; i--) {
		if (digits[i] >> 30 || (i == 2 && digits[i] >> 4))
			return -ERANGE; /* not a 30-bit digit, or past 64 bits */
		*v = (*v << 30) | digits[i];
	}
	return 0;
}

int cpython_read_name(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		      char *buf, size_t size)
{
	buf[0] = '\0';
	if (!type_is(l, mem, obj, "str"))
		return -EINVAL;
	return cpython_read_string(l, mem, obj, buf, size);
}
