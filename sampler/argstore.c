/*
 * The argument lists read with Python frames, each kept once: a frame carries the id of
 * its arguments' raw records (cpython_raw_arg), not a copy. At tens of thousands of
 * stacks a second, copies in every stack kept a while were what held the drainer back
 * (its memory grew faster than it could be paged in). Each list keeps its values too,
 * decoded when it was first kept (arg_store__values()). The drainer adds; the thread that
 * hands records out reads ids it was given: blocks never move, and a list is complete
 * before its id is handed out (under the sampler's lock), so reading needs no lock;
 * only the count, which goes on growing meanwhile, is read atomically.
 */
#include "argstore.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "sampler.h"

#define BLOCK_IDS 4096
#define MAX_BLOCKS 4096 /* 16 million lists */
/*
 * A program that calls with ever new values (a counter) makes a list per call: past
 * this much, later lists are not kept (their frames show no arguments, and the sampler
 * counts them) rather than let the tool's memory grow without end.
 */
#define MAX_BYTES (256ULL << 20)

struct arg_list {
	const struct sampler_arg *values; /* decoded, or NULL */
	uint32_t nvalues;
	uint32_t len;
	uint8_t bytes[];
};

/* Lists are carved from chunks, never freed one by one: no allocation per list. */
#define CHUNK_BYTES (1u << 20)

struct chunk {
	struct chunk *next;
	uint64_t used; /* and the lists start 8-aligned */
	uint8_t bytes[];
};

struct arg_store {
	struct arg_list **blocks[MAX_BLOCKS];
	uint32_t count;		 /* ids given: 1 .. count */
	uint64_t bytes;		 /* kept, with their headers */
	struct hashmap *by_hash; /* hash of the bytes -> the latest id with it */
	struct chunk *chunks;	 /* the newest first */
};

struct arg_store *arg_store__new(void)
{
	struct arg_store *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->by_hash = hashmap__new();
	if (!st->by_hash) {
		free(st);
		errno = ENOMEM;
		return NULL;
	}
	return st;
}

void arg_store__free(struct arg_store *st)
{
	uint32_t b;

	if (!st)
		return;
	for (b = 0; b < MAX_BLOCKS && st->blocks[b]; b++)
		free(st->blocks[b]);
	while (st->chunks) {
		struct chunk *c = st->chunks;

		st->chunks = c->next;
		free(c);
	}
	hashmap__free(st->by_hash);
	free(st);
}

/* FNV-1a, eight bytes a step: records are multiples of 8. */
static uint64_t hash_bytes(const uint8_t *p, uint32_t len)
{
	uint64_t h = FNV1A_OFFSET, w;
	uint32_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&w, p + i, 8);
		h = fnv1a_step(h, w);
		h ^= h >> 29;
	}
	return fnv1a_bytes(h, p + i, len - i);
}

/* @size bytes from the newest chunk (8-aligned), or a new one; NULL when out of memory. */
static void *carve(struct arg_store *st, uint32_t size)
{
	struct chunk *c = st->chunks;
	void *p;

	size = (size + 7u) & ~7u;
	if (size > CHUNK_BYTES)
		return NULL;
	if (!c || c->used + size > CHUNK_BYTES) {
		c = malloc(sizeof(*c) + CHUNK_BYTES);
		if (!c)
			return NULL;
		c->used = 0;
		c->next = st->chunks;
		st->chunks = c;
	}
	p = c->bytes + c->used;
	c->used += size;
	return p;
}

static struct arg_list *list_of(const struct arg_store *st, uint32_t id)
{
	if (!id || id > __atomic_load_n(&st->count, __ATOMIC_ACQUIRE))
		return NULL;
	return st->blocks[(id - 1) / BLOCK_IDS][(id - 1) % BLOCK_IDS];
}

uint32_t arg_store__add(struct arg_store *st, const uint8_t *bytes, uint32_t len, bool *added)
{
	uint64_t h = hash_bytes(bytes, len);
	uint32_t id = (uint32_t)(uintptr_t)hashmap__get(st->by_hash, h), b;
	struct arg_list *list = list_of(st, id);

	*added = false;
	if (list && list->len == len && !memcmp(list->bytes, bytes, len))
		return id;
	b = st->count / BLOCK_IDS;
	if (b >= MAX_BLOCKS || st->bytes + sizeof(*list) + len > MAX_BYTES)
		return 0;
	if (!st->blocks[b]) {
		st->blocks[b] = calloc(BLOCK_IDS, sizeof(*st->blocks[b]));
		if (!st->blocks[b])
			return 0;
	}
	list = carve(st, sizeof(*list) + len);
	if (!list)
		return 0;
	list->values = NULL;
	list->nvalues = 0;
	list->len = len;
	memcpy(list->bytes, bytes, len);
	st->bytes += sizeof(*list) + len;
	st->blocks[b][st->count % BLOCK_IDS] = list;
	id = st->count + 1;
	__atomic_store_n(&st->count, id, __ATOMIC_RELEASE);
	if (hashmap__set(st->by_hash, h, (void *)(uintptr_t)id))
		return id; /* kept, only not found again */
	*added = true;
	return id;
}

const uint8_t *arg_store__get(const struct arg_store *st, uint32_t id, uint32_t *len)
{
	const struct arg_list *list = st ? list_of(st, id) : NULL;

	*len = list ? list->len : 0;
	return list ? list->bytes : NULL;
}

int arg_store__set_values(struct arg_store *st, uint32_t id, const struct sampler_arg *args,
			  uint32_t n)
{
	struct arg_list *list = list_of(st, id);
	struct sampler_arg *copy;
	uint64_t size = n * sizeof(*copy);
	uint32_t i;
	char *text;

	if (!list || !n)
		return 0;
	for (i = 0; i < n; i++)
		size += args[i].text ? strlen(args[i].text) + 1 : 0;
	if (st->bytes + size > MAX_BYTES || !(copy = carve(st, (uint32_t)size)))
		return -ENOMEM;
	memcpy(copy, args, n * sizeof(*copy));
	text = (char *)(copy + n);
	for (i = 0; i < n; i++) {
		if (!args[i].text)
			continue;
		copy[i].text = text;
		text = stpcpy(text, args[i].text) + 1;
	}
	st->bytes += size;
	list->values = copy;
	list->nvalues = n;
	return 0;
}

const struct sampler_arg *arg_store__values(const struct arg_store *st, uint32_t id, uint32_t *n)
{
	const struct arg_list *list = st ? list_of(st, id) : NULL;

	*n = list ? list->nvalues : 0;
	return list ? list->values : NULL;
}

uint32_t arg_store__count(const struct arg_store *st)
{
	return __atomic_load_n(&st->count, __ATOMIC_ACQUIRE);
}
