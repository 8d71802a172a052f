/* Frame interning: a content hash maps to a chain of ids with that hash. */
#include "frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"

struct frame_entry {
	struct frame_info info;
	uint32_t next_same_hash; /* id of the next entry with this hash, 0 at the end */
};

struct frame_table {
	struct frame_entry *entries; /* entries[id - 1] */
	uint32_t count, capacity;
	uint64_t bytes;		 /* the entries' and their strings' */
	uint32_t full_id;	 /* the frame standing for those past the bound; 0: none yet */
	uint64_t losses;	 /* interned as it */
	struct hashmap *by_hash; /* hash -> first id, stored as a pointer-sized integer */
	struct args_table *args;
};

static uint64_t hash_info(const struct frame_info *info)
{
	uint64_t h = FNV1A_OFFSET;
	uint32_t kind = info->kind;

	h = fnv1a_bytes(h, info->name, strlen(info->name) + 1);
	h = fnv1a_bytes(h, info->file, strlen(info->file) + 1);
	h = fnv1a_bytes(h, &info->line, sizeof(info->line));
	return fnv1a_bytes(h, &kind, sizeof(kind));
}

static int same_info(const struct frame_info *a, const struct frame_info *b)
{
	return a->line == b->line && a->kind == b->kind && !strcmp(a->name, b->name) &&
	       !strcmp(a->file, b->file);
}

struct frame_table *frame_table__new(void)
{
	struct frame_table *table = calloc(1, sizeof(*table));

	if (!table)
		return NULL;
	table->by_hash = hashmap__new();
	table->args = args_table__new();
	if (!table->by_hash || !table->args) {
		hashmap__free(table->by_hash);
		args_table__free(table->args);
		free(table);
		errno = ENOMEM;
		return NULL;
	}
	return table;
}

void frame_table__free(struct frame_table *table)
{
	uint32_t i;

	if (!table)
		return;
	for (i = 0; i < table->count; i++) {
		free((char *)table->entries[i].info.name);
		free((char *)table->entries[i].info.file);
	}
	free(table->entries);
	hashmap__free(table->by_hash);
	args_table__free(table->args);
	free(table);
}

static uint32_t add_entry(struct frame_table *table, const struct frame_info *info,
			  uint32_t next_same_hash)
{
	struct frame_entry *entry;

	if (table->count == table->capacity) {
		uint32_t capacity = table->capacity ? table->capacity * 2 : 256;
		struct frame_entry *grown;

		grown = realloc(table->entries, capacity * sizeof(*grown));
		if (!grown)
			return 0;
		table->entries = grown;
		table->capacity = capacity;
	}
	entry = &table->entries[table->count];
	entry->info = *info;
	entry->info.name = strdup(info->name);
	entry->info.file = strdup(info->file);
	entry->next_same_hash = next_same_hash;
	if (!entry->info.name || !entry->info.file) {
		free((char *)entry->info.name);
		free((char *)entry->info.file);
		errno = ENOMEM;
		return 0;
	}
	table->bytes += sizeof(*entry) + strlen(info->name) + strlen(info->file) + 2;
	return ++table->count;
}

uint32_t frame_table__intern(struct frame_table *table, const struct frame_info *info)
{
	struct frame_info key = *info;
	uint64_t hash;
	uint32_t first, id;

	if (!key.name || key.kind >= FRAME_KIND_COUNT) {
		errno = EINVAL;
		return 0;
	}
	if (!key.file)
		key.file = "";
	hash = hash_info(&key);
	first = (uint32_t)(uintptr_t)hashmap__get(table->by_hash, hash);
	for (id = first; id; id = table->entries[id - 1].next_same_hash) {
		if (same_info(&table->entries[id - 1].info, &key))
			return id;
	}
	if (table->count >= FRAME_TABLE_MAX || table->bytes >= FRAME_TABLE_MAX_BYTES) {
		table->losses++;
		if (!table->full_id) {
			const struct frame_info full = { "[frames past the table's bound]", "", 0,
							 FRAME_NATIVE };

			table->full_id = add_entry(table, &full, 0);
		}
		return table->full_id;
	}
	id = add_entry(table, &key, first);
	if (!id)
		return 0;
	if (hashmap__set(table->by_hash, hash, (void *)(uintptr_t)id)) {
		/* The entry stays unreachable but owned; report the failure. */
		errno = ENOMEM;
		return 0;
	}
	return id;
}

const struct frame_info *frame_table__get(const struct frame_table *table, uint32_t id)
{
	if (!id || id > table->count)
		return NULL;
	return &table->entries[id - 1].info;
}

uint64_t frame_table__losses(const struct frame_table *table)
{
	return table->losses;
}

const char *frame_kind__name(enum frame_kind kind)
{
	static const char *const names[FRAME_KIND_COUNT] = {
		[FRAME_PYTHON] = "python",   [FRAME_NATIVE] = "native", [FRAME_KERNEL] = "kernel",
		[FRAME_OFF_CPU] = "off-cpu", [FRAME_NO_GIL] = "no-gil", [FRAME_MESSAGE] = "message",
	};

	return kind < FRAME_KIND_COUNT ? names[kind] : "unknown";
}

struct args_table *frame_table__args(const struct frame_table *table)
{
	return table->args;
}
