/*
 * multiprocessing's messages between a Pool and its workers, told from a message's
 * first bytes as the kernel saw them written or read: a task handed out, its result
 * sent back. Pure functions of bytes.
 */
#ifndef PYTRACE_CPYTHON_MESSAGES_H
#define PYTRACE_CPYTHON_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

enum cpython_message_kind {
	CPYTHON_MESSAGE_NONE,
	CPYTHON_MESSAGE_POOL_TASK,   /* (job, i, func, args, kwds), from Pool's task handler */
	CPYTHON_MESSAGE_POOL_RESULT, /* (job, i, (ok, value)), from a worker */
};

struct cpython_message {
	enum cpython_message_kind kind;
	int64_t job;  /* the pool's job number: one per map(), apply_async() ... */
	int64_t task; /* the task's index in its job (a chunk of a map) */
};

/*
 * What the @n bytes at @buf (the start of one write or read) carry: a pickle, or
 * multiprocessing's 4-byte big-endian length and a pickle. Fills @out and returns its
 * kind; CPYTHON_MESSAGE_NONE for anything else, or what is cut before it can be told.
 */
enum cpython_message_kind cpython_message_parse(const uint8_t *buf, size_t n,
						struct cpython_message *out);

#endif
