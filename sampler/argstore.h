/* The argument lists read with Python frames, kept once each (sampler/argstore.c). */
#ifndef PYTRACE_SAMPLER_ARGSTORE_H
#define PYTRACE_SAMPLER_ARGSTORE_H

#include <stdbool.h>
#include <stdint.h>

struct arg_store;

/* NULL with errno set. Free with arg_store__free() (accepts NULL). */
struct arg_store *arg_store__new(void);
void arg_store__free(struct arg_store *st);

/*
 * The id of the @len bytes at @bytes (a frame's raw argument records), adding a copy
 * when they are new (*@added then true). 0 when out of memory or ids.
 */
uint32_t arg_store__add(struct arg_store *st, const uint8_t *bytes, uint32_t len, bool *added);

/*
 * A frame's id when its arguments were not read for want of room (the kernel's, in a
 * deep stack): not known, which is not none (symbolize/ shows it as matching any).
 */
#define ARG_STORE_UNKNOWN UINT32_MAX

/* The bytes of @id (and their length in *@len), or NULL for 0 or an id not given. */
const uint8_t *arg_store__get(const struct arg_store *st, uint32_t id, uint32_t *len);

uint32_t arg_store__count(const struct arg_store *st);

struct sampler_arg; /* sampler.h */

/*
 * Keeps the @n decoded @args of list @id (their texts copied), read while its process
 * could still be asked: what arg_store__values() gives. Once per list, by the adder.
 * 0, or -ENOMEM (the list then has no decoded values).
 */
int arg_store__set_values(struct arg_store *st, uint32_t id, const struct sampler_arg *args,
			  uint32_t n);

/* The decoded arguments of @id, *@n of them; NULL for none. */
const struct sampler_arg *arg_store__values(const struct arg_store *st, uint32_t id, uint32_t *n);

#endif
