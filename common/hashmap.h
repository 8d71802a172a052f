/* A map from 64-bit keys to pointers, open addressing with linear probing. */
#ifndef PYTRACE_COMMON_HASHMAP_H
#define PYTRACE_COMMON_HASHMAP_H

#include <stddef.h>
#include <stdint.h>

struct hashmap;

/* Returns an empty map, or NULL with errno set. Free with hashmap__free(). */
struct hashmap *hashmap__new(void);

/* Frees the map, not the values it points to. Accepts NULL. */
void hashmap__free(struct hashmap *map);

/* Frees the map and, with @free_value, every value in it. Accepts NULL. */
void hashmap__free_all(struct hashmap *map, void (*free_value)(void *value));

/* Returns the value stored under @key, or NULL when there is none. */
void *hashmap__get(const struct hashmap *map, uint64_t key);

/* Stores @value (not NULL) under @key, replacing any value there. 0 or -ENOMEM. */
int hashmap__set(struct hashmap *map, uint64_t key, void *value);

/* Removes @key and returns its value, or NULL when it was absent. */
void *hashmap__remove(struct hashmap *map, uint64_t key);

size_t hashmap__count(const struct hashmap *map);

/*
 * Iteration: start with *@cursor = 0; each call stores the next entry and returns 1,
 * or returns 0 at the end. The map must not be changed while iterating.
 */
int hashmap__next(const struct hashmap *map, size_t *cursor, uint64_t *key, void **value);

/*
 * FNV-1a, the one hash of the project's keys: start from FNV1A_OFFSET, fold in each
 * value with fnv1a_step() (a byte, or a whole word where the caller hashes words), or
 * a buffer's bytes with fnv1a_bytes().
 */
#define FNV1A_OFFSET 0xcbf29ce484222325ULL

static inline uint64_t fnv1a_step(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL;
}

uint64_t fnv1a_bytes(uint64_t h, const void *data, size_t len);

/* FNV-1a of a NUL-terminated string: a key for maps of strings (compare on a hit). */
uint64_t hash_string(const char *s);

#endif
