/*
 * Argument lists: the values a call was made with, as shown on its slice, interned once
 * so that later stages compare small integer ids (two calls with equal arguments share
 * one) and writers print each list from the table.
 */
#ifndef PYTRACE_COMMON_ARGS_H
#define PYTRACE_COMMON_ARGS_H

#include <stdint.h>

enum arg_kind {
	ARG_INT,
	ARG_FLOAT,
	ARG_BOOL,
	ARG_NONE,
	ARG_TEXT, /* a str as Python shows it ('...'), or a description (<list of 3>) */
};

struct arg_item {
	const char *name; /* the parameter's name */
	enum arg_kind kind;
	int64_t i;	   /* ARG_INT, ARG_BOOL */
	double f;	   /* ARG_FLOAT */
	const char *text;  /* ARG_TEXT */
	uint64_t identity; /* not shown: tells apart values shown alike (an object's address) */
};

struct args_table;

/* Returns an empty table, or NULL with errno set. Free with args_table__free(). */
struct args_table *args_table__new(void);
void args_table__free(struct args_table *t);

/*
 * Returns the id of the list equal to @items (names, kinds and values, in order), adding
 * a copy when new. Ids start at 1; 0 means no memory. An empty list has no id (0).
 */
uint32_t args_table__intern(struct args_table *t, const struct arg_item *items, uint32_t n);

/* The list with @id (borrowed until the table is freed) and its length; NULL for a bad id. */
const struct arg_item *args_table__get(const struct args_table *t, uint32_t id, uint32_t *n);

#endif
