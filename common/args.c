/* Interning argument lists: a hash of their canonical bytes maps to a chain of ids. */
#include "args.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

struct args_entry {
	char *key; /* the canonical bytes the list was interned by */
	size_t key_len;
	struct arg_item *items;
	uint32_t n;
	uint32_t next_same_hash; /* id of the next entry with this hash, 0 at the end */
};

struct args_table {
	struct args_entry *entries; /* entries[id - 1] */
	uint32_t count, capacity;
	struct hashmap *by_hash;
};

struct args_table *args_table__new(void)
{
	struct args_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->by_hash = hashmap__new();
	if (!t->by_hash) {
		free(t);
		errno = ENOMEM;
		return NULL;
	}
	return t;
}

void args_table__free(struct args_table *t)
{
	uint32_t i, j;

	if (!t)
		return;
	for (i = 0; i < t->count; i++) {
		for (j = 0; j < t->entries[i].n; j++) {
			free((char *)t->entries[i].items[j].name);
			free((char *)t->entries[i].items[j].text);
		}
		free(t->entries[i].items);
		free(t->entries[i].key);
	}
	free(t->entries);
	hashmap__free(t->by_hash);
	free(t);
}

/* Appends @len bytes to the key being built; on no memory the key is dropped (NULL). */
static void key_put(char **key, size_t *len, size_t *cap, const void *data, size_t n)
{
	if (!*key)
		return;
	if (*len + n + 1 > *cap) {
		size_t grown_cap = (*len + n + 1) * 2;
		char *grown = realloc(*key, grown_cap);

		if (!grown) {
			free(*key);
			*key = NULL;
			return;
		}
		*key = grown;
		*cap = grown_cap;
	}
	memcpy(*key + *len, data, n);
	*len += n;
	(*key)[*len] = '\0';
}

/*
 * The canonical bytes of a list (malloc'd; NULL without memory): per item its name and
 * a NUL, its kind, its value's 8 bytes, its identity's 8, and a text with its NUL. Names
 * and texts hold no NUL, so no two lists share a key.
 */
static char *make_key(const struct arg_item *items, uint32_t n, size_t *len)
{
	size_t cap = 128;
	char *key = malloc(cap);
	uint32_t i;

	*len = 0;
	for (i = 0; key && i < n; i++) {
		const struct arg_item *a = &items[i];
		uint8_t kind = (uint8_t)a->kind;
		uint64_t value = 0;

		if (a->kind == ARG_INT || a->kind == ARG_BOOL)
			value = (uint64_t)a->i;
		else if (a->kind == ARG_FLOAT)
			memcpy(&value, &a->f, sizeof(value));
		key_put(&key, len, &cap, a->name, strlen(a->name) + 1);
		key_put(&key, len, &cap, &kind, 1);
		key_put(&key, len, &cap, &value, 8);
		key_put(&key, len, &cap, &a->identity, 8);
		if (a->kind == ARG_TEXT)
			key_put(&key, len, &cap, a->text, strlen(a->text) + 1);
	}
	return key;
}

static uint64_t hash_key(const char *key, size_t len)
{
	return fnv1a_bytes(FNV1A_OFFSET, key, len);
}

static void free_items(struct arg_item *items, uint32_t n)
{
	uint32_t i;

	for (i = 0; items && i < n; i++) {
		free((char *)items[i].name);
		free((char *)items[i].text);
	}
	free(items);
}

static struct arg_item *copy_items(const struct arg_item *items, uint32_t n)
{
	struct arg_item *copy = calloc(n, sizeof(*copy));
	uint32_t i;

	for (i = 0; copy && i < n; i++) {
		copy[i] = items[i];
		copy[i].name = strdup(items[i].name);
		copy[i].text = items[i].kind == ARG_TEXT ? strdup(items[i].text) : NULL;
		if (!copy[i].name || (items[i].kind == ARG_TEXT && !copy[i].text)) {
			free_items(copy, i + 1);
			return NULL;
		}
	}
	return copy;
}

uint32_t args_table__intern(struct args_table *t, const struct arg_item *items, uint32_t n)
{
	struct args_entry *e;
	uint32_t id, first;
	uint64_t h;
	size_t len;
	char *key;

	if (!n)
		return 0;
	key = make_key(items, n, &len);
	if (!key)
		return 0;
	h = hash_key(key, len);
	first = (uint32_t)(uintptr_t)hashmap__get(t->by_hash, h);
	for (id = first; id; id = t->entries[id - 1].next_same_hash) {
		if (t->entries[id - 1].key_len == len &&
		    !memcmp(t->entries[id - 1].key, key, len)) {
			free(key);
			return id;
		}
	}
	if (t->count == t->capacity) {
		uint32_t capacity = t->capacity ? t->capacity * 2 : 64;
		struct args_entry *grown = realloc(t->entries, capacity * sizeof(*grown));

		if (!grown) {
			free(key);
			return 0;
		}
		t->entries = grown;
		t->capacity = capacity;
	}
	e = &t->entries[t->count];
	e->key = key;
	e->key_len = len;
	e->n = n;
	e->items = copy_items(items, n);
	e->next_same_hash = first;
	if (!e->items || hashmap__set(t->by_hash, h, (void *)(uintptr_t)(t->count + 1))) {
		free_items(e->items, n);
		free(key);
		return 0;
	}
	return ++t->count;
}

const struct arg_item *args_table__get(const struct args_table *t, uint32_t id, uint32_t *n)
{
	if (!t || !id || id > t->count) {
		*n = 0;
		return NULL;
	}
	*n = t->entries[id - 1].n;
	return t->entries[id - 1].items;
}
