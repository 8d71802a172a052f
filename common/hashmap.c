/* Open-addressing hash map; deletion by backward shift, so no tombstones pile up. */
#include "hashmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct hashmap_slot {
	uint64_t key;
	void *value; /* NULL: empty slot */
};

struct hashmap {
	struct hashmap_slot *slots;
	size_t capacity; /* a power of two */
	size_t count;
};

static size_t slot_of(uint64_t key, size_t capacity)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (size_t)key & (capacity - 1);
}

struct hashmap *hashmap__new(void)
{
	struct hashmap *map = calloc(1, sizeof(*map));

	if (!map)
		return NULL;
	map->capacity = 16;
	map->slots = calloc(map->capacity, sizeof(*map->slots));
	if (!map->slots) {
		free(map);
		errno = ENOMEM;
		return NULL;
	}
	return map;
}

void hashmap__free(struct hashmap *map)
{
	if (!map)
		return;
	free(map->slots);
	free(map);
}

void hashmap__free_all(struct hashmap *map, void (*free_value)(void *value))
{
	size_t i;

	if (!map)
		return;
	for (i = 0; i < map->capacity; i++) {
		if (map->slots[i].value)
			free_value(map->slots[i].value);
	}
	hashmap__free(map);
}

static struct hashmap_slot *find_slot(const struct hashmap *map, uint64_t key)
{
	size_t i = slot_of(key, map->capacity);

	while (map->slots[i].value && map->slots[i].key != key)
		i = (i + 1) & (map->capacity - 1);
	return &map->slots[i];
}

void *hashmap__get(const struct hashmap *map, uint64_t key)
{
	return find_slot(map, key)->value;
}

static int grow(struct hashmap *map)
{
	struct hashmap old = *map;
	size_t i;

	map->capacity = old.capacity * 2;
	map->slots = calloc(map->capacity, sizeof(*map->slots));
	if (!map->slots) {
		*map = old;
		return -ENOMEM;
	}
	for (i = 0; i < old.capacity; i++) {
		if (old.slots[i].value)
			*find_slot(map, old.slots[i].key) = old.slots[i];
	}
	free(old.slots);
	return 0;
}

int hashmap__set(struct hashmap *map, uint64_t key, void *value)
{
	struct hashmap_slot *slot;

	if (!value)
		return -EINVAL;
	slot = find_slot(map, key);
	if (slot->value) {
		slot->value = value;
		return 0;
	}
	if ((map->count + 1) * 4 > map->capacity * 3) {
		if (grow(map))
			return -ENOMEM;
		slot = find_slot(map, key);
	}
	slot->key = key;
	slot->value = value;
	map->count++;
	return 0;
}

void *hashmap__remove(struct hashmap *map, uint64_t key)
{
	size_t mask = map->capacity - 1;
	struct hashmap_slot *slot = find_slot(map, key);
	size_t hole = (size_t)(slot - map->slots), i = hole;
	void *value = slot->value;

	if (!value)
		return NULL;
	slot->value = NULL;
	map->count--;
	/* Shift later members of the probe run back so lookups never stop early. */
	for (;;) {
		size_t home;

		i = (i + 1) & mask;
		if (!map->slots[i].value)
			break;
		home = slot_of(map->slots[i].key, map->capacity);
		if (((i - home) & mask) >= ((i - hole) & mask)) {
			map->slots[hole] = map->slots[i];
			map->slots[i].value = NULL;
			hole = i;
		}
	}
	return value;
}

size_t hashmap__count(const struct hashmap *map)
{
	return map->count;
}

int hashmap__next(const struct hashmap *map, size_t *cursor, uint64_t *key, void **value)
{
	while (*cursor < map->capacity) {
		const struct hashmap_slot *slot = &map->slots[(*cursor)++];

		if (slot->value) {
			*key = slot->key;
			*value = slot->value;
			return 1;
		}
	}
	return 0;
}

uint64_t fnv1a_bytes(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--)
		h = fnv1a_step(h, *p++);
	return h;
}

uint64_t hash_string(const char *s)
{
	return fnv1a_bytes(FNV1A_OFFSET, s, strlen(s));
}
