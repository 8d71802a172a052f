/*
 * Tests of the object readers behind names and the GIL (cpython/objects.c, names.c,
 * gil.c): objects laid out as each CPython version lays them out, built in this test's
 * own memory and read back through process_vm_readv on its own pid, the way a target is
 * read; then garbage, unmapped and freed memory, which must give errors, never a crash
 * or a wrong value.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../cpython/cpython.h"
#include "../common/support.h"

/* ---- objects in our own memory ---- */

#define ARENA_SIZE (1 << 20)

static uint8_t *arena;
static size_t arena_used;
static pid_t self_pid;
static struct cpython_mem self_mem = { .read = cpython_read_process, .ctx = &self_pid };

static uint64_t alloc(size_t n)
{
	uint64_t at;

	arena_used = (arena_used + 15) & ~(size_t)15;
	assert_true(arena_used + n <= ARENA_SIZE);
	at = (uint64_t)(uintptr_t)(arena + arena_used);
	arena_used += n;
	return at;
}

static void w64(uint64_t addr, uint64_t v)
{
	memcpy((void *)(uintptr_t)addr, &v, 8);
}

static void w32(uint64_t addr, uint32_t v)
{
	memcpy((void *)(uintptr_t)addr, &v, 4);
}

static void w8(uint64_t addr, uint8_t v)
{
	memcpy((void *)(uintptr_t)addr, &v, 1);
}

static int setup(void **state)
{
	(void)state;
	self_pid = getpid();
	arena = calloc(1, ARENA_SIZE);
	arena_used = 32; /* an object at the arena's start has room for a pre-header */
	return arena ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(arena);
	return 0;
}

/* The layout of 3.@minor: built in for 8-12; 3.13's as layout.c completes it. */
static struct cpython_layout layout_of(unsigned minor)
{
	struct cpython_layout l = *cpython_builtin_layout(minor < 13 ? minor : 12);

	if (minor == 13) {
		l.minor = 13;
		l.managed = CPYTHON_MANAGED_313;
		l.values_items = 8;
		l.interp_modules = 7656;
		l.interp_gil = 16;
		l.heaptype_cached_keys = 880;
	}
	return l;
}

static uint64_t mk_type(const struct cpython_layout *l, const char *name, uint64_t flags)
{
	uint64_t type = alloc(1024), text = alloc(strlen(name) + 1);

	memcpy((void *)(uintptr_t)text, name, strlen(name) + 1);
	w64(type + l->type_name, text);
	w64(type + l->type_flags, flags);
	w64(type + l->type_basicsize, 16);
	return type;
}

static uint64_t mk_object(const struct cpython_layout *l, uint64_t type, size_t size)
{
	uint64_t obj = alloc(size + 32) + 32; /* room for 3.11+ pre-headers */

	w64(obj, 1);
	w64(obj + l->object_type, type);
	return obj;
}

static uint64_t mk_str(const struct cpython_layout *l, const char *s)
{
	uint64_t str = mk_object(l, mk_type(l, "str", 0), 64 + strlen(s));

	w32(str + l->unicode_state, 1u << 2 | 1u << 5 | 1u << 6); /* compact ASCII */
	w64(str + l->unicode_length, strlen(s));
	memcpy((void *)(uintptr_t)(str + l->unicode_ascii_size), s, strlen(s));
	return str;
}

/* A UCS-2 str of @n code units. */
static uint64_t mk_str_ucs2(const struct cpython_layout *l, const uint16_t *s, size_t n)
{
	uint64_t str = mk_object(l, mk_type(l, "str", 0), 96 + 2 * n);

	w32(str + l->unicode_state, 2u << 2 | 1u << 5);
	w64(str + l->unicode_length, n);
	memcpy((void *)(uintptr_t)(str + l->unicode_compact_size), s, 2 * n);
	return str;
}

static uint64_t mk_int(const struct cpython_layout *l, uint64_t v)
{
	uint64_t obj = mk_object(l, mk_type(l, "int", 0), 48);
	uint64_t n = 0;

	for (; v; v >>= 30, n++)
		w32(obj + l->long_digits + 4 * n, (uint32_t)(v & ((1u << 30) - 1)));
	w64(obj + l->long_size, l->long_tagged ? (n ? n << 3 : 1) : n);
	return obj;
}

enum keys_kind { KEYS_GENERAL, KEYS_UNICODE, KEYS_SPLIT };

/*
 * A keys object of @n entries (a 0 key: a deleted entry). For KEYS_SPLIT the values go
 * into a values array made here and stored in *@values.
 */
static uint64_t mk_keys(const struct cpython_layout *l, enum keys_kind kind, size_t n,
			const uint64_t *keys, const uint64_t *vals, uint64_t *values)
{
	unsigned log2 = 3, entry = (l->dicts == CPYTHON_DICTS_38 || kind == KEYS_GENERAL) ? 24 : 16;
	uint64_t obj, entries;
	size_t i;

	while ((1u << log2) * 2 / 3 < n)
		log2++;
	obj = alloc(64 + (1u << log2) + n * entry);
	if (l->dicts == CPYTHON_DICTS_38) {
		w64(obj + 8, 1u << log2);
		w64(obj + 32, n);
		entries = obj + 40 + (1u << log2);
	} else {
		w8(obj + 8, (uint8_t)log2);
		w8(obj + 9, (uint8_t)log2);
		w8(obj + 10, (uint8_t)kind);
		w64(obj + 24, n);
		entries = obj + 32 + (1u << log2);
	}
	if (kind == KEYS_SPLIT) {
		*values = alloc(8 + 8 * n);
		if (l->values_items)
			w8(*values + 3, 1); /* valid */
	}
	for (i = 0; i < n; i++) {
		uint64_t e = entries + i * entry, key_at = entry == 24 ? 8 : 0;

		w64(e + key_at, keys[i]);
		if (kind == KEYS_SPLIT)
			w64(*values + l->values_items + 8 * i, vals[i]);
		else
			w64(e + key_at + 8, vals[i]);
	}
	return obj;
}

static uint64_t mk_dict(const struct cpython_layout *l, uint64_t keys, uint64_t values)
{
	uint64_t dict = mk_object(l, mk_type(l, "dict", 0), 64);

	w64(dict + l->dict_keys, keys);
	w64(dict + l->dict_values, values);
	return dict;
}

/* A dict of str keys, combined (unicode keys from 3.11) or split. */
static uint64_t mk_str_dict(const struct cpython_layout *l, bool split, size_t n,
			    const char *const *names, const uint64_t *vals)
{
	uint64_t keys[16], values = 0, k;
	size_t i;

	assert_true(n <= 16);
	for (i = 0; i < n; i++)
		keys[i] = names[i] ? mk_str(l, names[i]) : 0;
	k = mk_keys(l, split ? KEYS_SPLIT : KEYS_UNICODE, n, keys, vals, &values);
	return mk_dict(l, k, split ? values : 0);
}

static const unsigned minors[] = { 8, 9, 10, 11, 12, 13 };

/* ---- dicts, strs and ints ---- */

static void test_names__dict_every_version(void **state)
{
	static const char *const names[] = { "alpha", NULL, "_name", "beta" };
	size_t m;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		struct cpython_layout l = layout_of(minors[m]);
		uint64_t vals[4] = { 0x1111, 0x2222, 0x3333, 0 }, v = 0;
		struct cpython_dict_item items[8];
		int split;

		for (split = 0; split < 2; split++) {
			uint64_t dict = mk_str_dict(&l, split, 4, names, vals);

			assert_int_equal(cpython_dict_get(&l, &self_mem, dict, "_name", &v), 0);
			assert_int_equal(v, 0x3333);
			assert_int_equal(cpython_dict_get(&l, &self_mem, dict, "alpha", &v), 0);
			assert_int_equal(v, 0x1111);
			/* A deleted entry and a key without value (split) are not there. */
			assert_int_equal(cpython_dict_get(&l, &self_mem, dict, "beta", &v),
					 -ENOENT);
			assert_int_equal(cpython_dict_get(&l, &self_mem, dict, "_nam", &v),
					 -ENOENT);
			assert_int_equal(cpython_dict_items(&l, &self_mem, dict, items, 8), 2);
			assert_int_equal(items[1].value, 0x3333);
			assert_int_equal(cpython_dict_items(&l, &self_mem, dict, items, 1), 1);
			/* Not a dict: refused. */
			assert_int_equal(cpython_dict_get(&l, &self_mem, mk_str(&l, "x"), "x", &v),
					 -EINVAL);
		}
	}
}

/* A dict bigger than one read of entries, with int keys (general entries). */
static void test_names__dict_large_int_keys(void **state)
{
	struct cpython_layout l = layout_of(12);
	uint64_t keys[200], vals[200], k, dict, v;
	struct cpython_dict_item *items = calloc(200, sizeof(*items));
	int i, n;

	(void)state;
	for (i = 0; i < 200; i++) {
		keys[i] = mk_int(&l, 0x7f0000000000ULL + (uint64_t)i);
		vals[i] = 0x100 + (uint64_t)i;
	}
	k = mk_keys(&l, KEYS_GENERAL, 200, keys, vals, NULL);
	dict = mk_dict(&l, k, 0);
	n = cpython_dict_items(&l, &self_mem, dict, items, 200);
	assert_int_equal(n, 200);
	assert_int_equal(cpython_read_ulong(&l, &self_mem, items[150].key, &v), 0);
	assert_int_equal(v, 0x7f0000000000ULL + 150);
	assert_int_equal(items[150].value, 0x100 + 150);
	free(items);
}

static void test_names__ulong(void **state)
{
	static const uint64_t values[] = {
		0, 1, (1u << 30) - 1, 1u << 30, 0x7fa0b1c2d3e4ULL, UINT64_MAX
	};
	size_t m, i;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		struct cpython_layout l = layout_of(minors[m]);
		uint64_t v, obj;

		for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
			assert_int_equal(
				cpython_read_ulong(&l, &self_mem, mk_int(&l, values[i]), &v), 0);
			assert_true(v == values[i]);
		}
		/* Negative, four digits, a digit over 30 bits: refused. */
		obj = mk_int(&l, 5);
		w64(obj + l.long_size, l.long_tagged ? (1 << 3 | 2) : (uint64_t)-1);
		assert_int_equal(cpython_read_ulong(&l, &self_mem, obj, &v), -EINVAL);
		w64(obj + l.long_size, l.long_tagged ? 4 << 3 : 4);
		assert_int_equal(cpython_read_ulong(&l, &self_mem, obj, &v), -ERANGE);
		w64(obj + l.long_size, l.long_tagged ? 1 << 3 : 1);
		w32(obj + l.long_digits, 1u << 30);
		assert_int_equal(cpython_read_ulong(&l, &self_mem, obj, &v), -ERANGE);
		assert_int_equal(cpython_read_ulong(&l, &self_mem, mk_str(&l, "7"), &v), -EINVAL);
	}
}

static void test_names__read_name(void **state)
{
	static const uint16_t ucs2[] = { 'w', 0xf6, 'r', 'k', 'e', 'r', '-', 0x4e2d };
	struct cpython_layout l = layout_of(11);
	char buf[CPYTHON_NAME_MAX], small[8];

	(void)state;
	assert_int_equal(cpython_read_name(&l, &self_mem, mk_str(&l, "crunch-1"), buf, sizeof(buf)),
			 0);
	assert_string_equal(buf, "crunch-1");
	assert_int_equal(
		cpython_read_name(&l, &self_mem, mk_str_ucs2(&l, ucs2, 8), buf, sizeof(buf)), 0);
	assert_string_equal(buf, "w\xc3\xb6rker-\xe4\xb8\xad");
	/* Truncated at a character boundary. */
	assert_int_equal(
		cpython_read_name(&l, &self_mem, mk_str_ucs2(&l, ucs2, 8), small, sizeof(small)),
		0);
	assert_string_equal(small, "w\xc3\xb6rker");
	/* An int is no name; NULL and unmapped memory are unreadable. */
	assert_int_equal(cpython_read_name(&l, &self_mem, mk_int(&l, 3), buf, sizeof(buf)),
			 -EINVAL);
	assert_int_equal(buf[0], '\0');
	assert_int_equal(cpython_read_name(&l, &self_mem, 0, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(cpython_read_name(&l, &self_mem, 0x1000, buf, sizeof(buf)), -EINVAL);
}

/* ---- instance attributes, as each version keeps them ---- */

#define TPFLAGS_INLINE_VALUES (1u << 2)
#define TPFLAGS_MANAGED_DICT (1u << 4)

/* A Thread-like object whose `_name` is @name, kept the way 3.@minor keeps it. */
static uint64_t mk_thread(const struct cpython_layout *l, const char *name, bool materialized)
{
	static const char *const attrs[] = { "_target", "_name", "_ident" };
	uint64_t vals[3] = { 0x10, mk_str(l, name), 0x30 }, type, obj, keys, values = 0;

	switch (l->managed) {
	case CPYTHON_MANAGED_NONE:
		type = mk_type(l, "Thread", 0);
		w64(type + l->type_dictoffset, 16);
		obj = mk_object(l, type, 32);
		w64(obj + 16, mk_str_dict(l, false, 3, attrs, vals));
		return obj;
	case CPYTHON_MANAGED_311:
	case CPYTHON_MANAGED_312:
	case CPYTHON_MANAGED_313:
		type = mk_type(
			l, "Thread",
			TPFLAGS_MANAGED_DICT |
				(l->managed == CPYTHON_MANAGED_313 ? TPFLAGS_INLINE_VALUES : 0));
		obj = mk_object(l, type, 64);
		if (materialized) {
			w64(obj - 24, mk_str_dict(l, false, 3, attrs, vals));
			return obj;
		}
		{
			uint64_t keys_addr[3];
			int i;

			for (i = 0; i < 3; i++)
				keys_addr[i] = mk_str(l, attrs[i]);
			keys = mk_keys(l, KEYS_SPLIT, 3, keys_addr, vals, &values);
		}
		w64(type + l->heaptype_cached_keys, keys);
		if (l->managed == CPYTHON_MANAGED_311) {
			w64(obj - 32, values);
		} else if (l->managed == CPYTHON_MANAGED_312) {
			w64(obj - 24, values - 1);
		} else {
			/* Inline: the values right after the object (basicsize 16). */
			memcpy((void *)(uintptr_t)(obj + 16), (void *)(uintptr_t)values, 8 + 3 * 8);
		}
		return obj;
	}
	return 0;
}

static void test_names__attr_every_version(void **state)
{
	size_t m;

	(void)state;
	for (m = 0; m < sizeof(minors) / sizeof(minors[0]); m++) {
		struct cpython_layout l = layout_of(minors[m]);
		char buf[CPYTHON_NAME_MAX];
		uint64_t obj, v;
		int materialized;

		for (materialized = 0; materialized < 2; materialized++) {
			obj = mk_thread(&l, "Thread-3 (_handle_results)", materialized);
			assert_int_equal(cpython_attr_get(&l, &self_mem, obj, "_name", &v), 0);
			assert_int_equal(cpython_read_name(&l, &self_mem, v, buf, sizeof(buf)), 0);
			assert_string_equal(buf, "Thread-3 (_handle_results)");
			assert_int_equal(cpython_attr_get(&l, &self_mem, obj, "_ident", &v), 0);
			assert_int_equal(v, 0x30);
			assert_int_equal(cpython_attr_get(&l, &self_mem, obj, "name", &v), -ENOENT);
		}
		if (l.managed == CPYTHON_MANAGED_313) {
			/* Inline values no longer valid (a dict took over, then went): none. */
			obj = mk_thread(&l, "x", false);
			w8(obj + 16 + 3, 0);
			assert_int_equal(cpython_attr_get(&l, &self_mem, obj, "_name", &v),
					 -ENOENT);
		}
	}
	/* A version without known offsets says so. */
	{
		struct cpython_layout l = layout_of(12);
		uint64_t v;

		l.names_supported = false;
		assert_int_equal(
			cpython_attr_get(&l, &self_mem, mk_thread(&l, "x", 0), "_name", &v),
			-ENOTSUP);
	}
}

/* ---- a whole process: sys.modules, threading._active, the GIL ---- */

#define MAIN_TID 5001
#define WORKER_TID 5002

struct fake_process {
	uint64_t runtime, interp, tstates[2], gil, active, current_process;
};

static uint64_t mk_module(const struct cpython_layout *l, const char *const *names,
			  const uint64_t *vals, size_t n)
{
	uint64_t mod = mk_object(l, mk_type(l, "module", 0), 32);

	w64(mod + l->module_dict, mk_str_dict(l, false, n, names, vals));
	return mod;
}

/*
 * A 3.12 process: two threads ("MainThread", "crunch-1"), threading and
 * multiprocessing.process imported, the GIL held by the worker.
 */
static void mk_process(const struct cpython_layout *l, struct fake_process *f)
{
	static const char *const module_names[] = { "sys", "threading", "multiprocessing.process" };
	static const char *const threading_names[] = { "_active", "_main_thread" };
	static const char *const process_names[] = { "_current_process" };
	uint64_t mods[3], keys[2], vals[2], k, tmp[2];
	int i;

	f->runtime = alloc(4096);
	f->interp = alloc(8192);
	w64(f->runtime + l->runtime_interpreters_head, f->interp);
	for (i = 0; i < 2; i++) {
		f->tstates[i] = alloc(1024);
		w64(f->tstates[i] + l->tstate_interp, f->interp);
		w64(f->tstates[i] + l->tstate_native_thread_id, i ? WORKER_TID : MAIN_TID);
		w64(f->tstates[i] + l->tstate_thread_id, 0x7f0000001000ULL * (uint64_t)(i + 1));
	}
	w64(f->interp + l->interp_threads_head, f->tstates[1]);
	w64(f->tstates[1] + l->tstate_next, f->tstates[0]);
	for (i = 0; i < 2; i++) {
		keys[i] = mk_int(l, 0x7f0000001000ULL * (uint64_t)(i + 1));
		vals[i] = mk_thread(l, i ? "crunch-1" : "MainThread", false);
	}
	k = mk_keys(l, KEYS_GENERAL, 2, keys, vals, NULL);
	f->active = mk_dict(l, k, 0);
	tmp[0] = f->active;
	tmp[1] = vals[0];
	mods[0] = mk_module(l, threading_names, tmp, 0);
	mods[1] = mk_module(l, threading_names, tmp, 2);
	f->current_process = mk_thread(l, "ForkPoolWorker-2", false);
	mods[2] = mk_module(l, process_names, &f->current_process, 1);
	w64(f->interp + l->interp_modules, mk_str_dict(l, false, 3, module_names, mods));
	f->gil = alloc(256);
	w64(f->interp + l->interp_gil, f->gil);
	w32(f->gil + l->gil_locked, 1);
	w64(f->gil + l->gil_last_holder, f->tstates[1]);
}

static void test_names__process(void **state)
{
	struct cpython_layout l = layout_of(12);
	struct cpython_thread_name names[4];
	struct cpython_gil_addrs addrs;
	struct cpython_gil_holder holder;
	struct fake_process f;
	struct cpython_process *p;
	char buf[CPYTHON_NAME_MAX];

	(void)state;
	mk_process(&l, &f);
	p = cpython_process__new_mem(self_pid, f.runtime, 12, &self_mem);
	assert_non_null(p);
	assert_int_equal(cpython_thread_names(p, &self_mem, names, 4), 2);
	assert_int_equal(names[0].tid, WORKER_TID);
	assert_int_equal(names[0].err, 0);
	assert_string_equal(names[0].name, "crunch-1");
	assert_int_equal(names[1].tid, MAIN_TID);
	assert_string_equal(names[1].name, "MainThread");
	assert_int_equal(cpython_process_name(p, &self_mem, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "ForkPoolWorker-2");

	assert_int_equal(cpython_gil_addrs(p, &self_mem, &addrs), 0);
	assert_int_equal(addrs.state, f.gil);
	assert_int_equal(addrs.locked, f.gil + 16);
	assert_int_equal(addrs.last_holder, f.gil + 8);
	assert_int_equal(addrs.cond, f.gil + 32);
	assert_int_equal(addrs.mutex, f.gil + 80);
	assert_int_equal(addrs.switch_cond, f.gil + 120);
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 32 + 44), CPYTHON_GIL_COND);
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 80), CPYTHON_GIL_MUTEX);
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 120 + 44), CPYTHON_GIL_SWITCH);
	/* switch_mutex, right after switch_cond, guards it: part of the handoff. */
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 120 + 48), CPYTHON_GIL_SWITCH);
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 120 + 48 + 40), CPYTHON_GIL_NONE);
	assert_int_equal(cpython_gil_futex(&addrs, f.gil + 16), CPYTHON_GIL_NONE);
	assert_int_equal(cpython_gil_futex(&addrs, 0), CPYTHON_GIL_NONE);
	assert_int_equal(cpython_gil_holder(p, &self_mem, &holder), 0);
	assert_true(holder.locked);
	assert_int_equal(holder.tid, WORKER_TID);
	/* Dropped: last_holder stays, but nobody holds it. */
	w32(f.gil + l.gil_locked, 0);
	assert_int_equal(cpython_gil_holder(p, &self_mem, &holder), 0);
	assert_false(holder.locked);
	assert_int_equal(holder.tid, 0);
	w32(f.gil + l.gil_locked, 77);
	assert_int_equal(cpython_gil_holder(p, &self_mem, &holder), -EINVAL);

	/* Renamed after start: read afresh. */
	{
		struct cpython_dict_item items[2];
		uint64_t name_str;

		assert_int_equal(cpython_dict_items(&l, &self_mem, f.active, items, 2), 2);
		assert_int_equal(
			cpython_attr_get(&l, &self_mem, items[1].value, "_name", &name_str), 0);
		memcpy((void *)(uintptr_t)(name_str + l.unicode_ascii_size), "renamed!", 8);
		assert_int_equal(cpython_thread_names(p, &self_mem, names, 4), 2);
		assert_string_equal(names[0].name, "renamed!");
	}
	/* _active unreadable: the whole call fails. */
	w64(f.active + l.dict_keys, 0);
	assert_true(cpython_thread_names(p, &self_mem, names, 4) < 0);
	cpython_process__put(p);

	mk_process(&l, &f);
	p = cpython_process__new_mem(self_pid, f.runtime, 12, &self_mem);
	w64(f.tstates[1] + l.tstate_thread_id, 99);
	assert_int_equal(cpython_thread_names(p, &self_mem, names, 4), 2);
	assert_int_equal(names[0].err, -ENOENT);
	assert_int_equal(names[1].err, 0);
	/* multiprocessing not imported. */
	w64(f.interp + l.interp_modules, 0);
	assert_int_equal(cpython_process_name(p, &self_mem, buf, sizeof(buf)), -ENOENT);
	cpython_process__put(p);
}

/* ---- garbage ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
	return support_rand(&rng, n);
}

/*
 * Random bytes with pointers into themselves and to an unmapped page, read as every kind
 * of object by every version, and as whole processes: errors or well-formed values only.
 */
static void test_names__garbage(void **state)
{
	size_t size = 64 * 1024;
	uint8_t *junk = malloc(size);
	uint64_t base = (uint64_t)(uintptr_t)junk;
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int round, i;

	(void)state;
	assert_non_null(junk);
	assert_true(hole != MAP_FAILED);
	for (round = 0; round < 24; round++) {
		struct cpython_layout l = layout_of(minors[round % 6]);
		struct cpython_thread_name names[8];
		struct cpython_gil_holder holder;
		struct cpython_process *p;
		char buf[CPYTHON_NAME_MAX];

		for (i = 0; i < (int)size; i++)
			junk[i] = (uint8_t)rnd(256);
		for (i = 0; i < 3000; i++) {
			uint64_t ptr = rnd(8) ? base + 8 * rnd((uint32_t)size / 8 - 64)
					      : (uint64_t)(uintptr_t)hole + 8 * rnd(512);

			memcpy(junk + 8 * rnd((uint32_t)size / 8), &ptr, 8);
		}
		/* Small values where counts and kinds are read, now and then. */
		for (i = 0; i < 500; i++)
			junk[rnd((uint32_t)size)] = (uint8_t)rnd(12);
		for (i = 0; i < 400; i++) {
			uint64_t addr = base + 8 * rnd((uint32_t)size / 8 - 512) + 64, v;
			struct cpython_dict_item items[16];
			int n;

			if (!cpython_dict_get(&l, &self_mem, addr, "_name", &v) ||
			    !cpython_attr_get(&l, &self_mem, addr, "_name", &v))
				(void)cpython_read_name(&l, &self_mem, v, buf, sizeof(buf));
			n = cpython_dict_items(&l, &self_mem, addr, items, 16);
			assert_true(n <= 16);
			(void)cpython_read_ulong(&l, &self_mem, addr, &v);
			if (!cpython_read_name(&l, &self_mem, addr, buf, sizeof(buf))) {
				assert_true(strlen(buf) < sizeof(buf));
				assert_true(support_valid_utf8(buf));
			}
		}
		p = cpython_process__new_mem(self_pid, base + 8 * rnd((uint32_t)size / 8 - 512),
					     minors[round % 5], &self_mem);
		assert_non_null(p);
		if (cpython_thread_names(p, &self_mem, names, 8) > 0)
			assert_true(support_valid_utf8(names[0].name));
		(void)cpython_process_name(p, &self_mem, buf, sizeof(buf));
		assert_true(support_valid_utf8(buf));
		(void)cpython_gil_holder(p, &self_mem, &holder);
		cpython_process__put(p);
	}
	munmap(hole, 4096);
	free(junk);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names__dict_every_version),
		cmocka_unit_test(test_names__dict_large_int_keys),
		cmocka_unit_test(test_names__ulong),
		cmocka_unit_test(test_names__read_name),
		cmocka_unit_test(test_names__attr_every_version),
		cmocka_unit_test(test_names__process),
		cmocka_unit_test(test_names__garbage),
	};

	return cmocka_run_group_tests_name("names", tests, setup, teardown);
}
