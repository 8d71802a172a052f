/*
 * The messages between a process pool and its workers (multiprocessing's Pool,
 * concurrent.futures' ProcessPoolExecutor), told from a message's first bytes as the
 * kernel saw them written or read: a task handed out, its result sent back. Pure
 * functions of bytes.
 */
#ifndef PYTRACE_CPYTHON_MESSAGES_H
#define PYTRACE_CPYTHON_MESSAGES_H

#include <stddef.h>
#include <stdint.h>

enum cpython_message_kind {
	CPYTHON_MESSAGE_NONE,
	CPYTHON_MESSAGE_POOL_TASK,	 /* (job, i, func, args, kwds), from Pool's task handler */
	CPYTHON_MESSAGE_POOL_RESULT,	 /* (job, i, (ok, value)), from a worker */
	CPYTHON_MESSAGE_EXECUTOR_TASK,	 /* a ProcessPoolExecutor's _CallItem */
	CPYTHON_MESSAGE_EXECUTOR_RESULT, /* ... and the worker's _ResultItem for it */
};

struct cpython_message {
	enum cpython_message_kind kind;
	int64_t job;  /* a Pool's job number: one per map(), apply_async() ...; 0 else */
	int64_t task; /* the task's index in its job (a chunk of a map), or the work id */
};

/* The bytes needed to tell any of them (an executor's, with a work id of 8 bytes). */
#define CPYTHON_MESSAGE_BYTES 96

/*
 * What the @n bytes at @buf (the start of one write or read) carry: a pickle, or
 * multiprocessing's 4-byte big-endian length and a pickle. Fills @out and returns its
 * kind; CPYTHON_MESSAGE_NONE for anything else, or what is cut before it can be told.
 */
enum cpython_message_kind cpython_message_parse(const uint8_t *buf, size_t n,
						struct cpython_message *out);

#endif
