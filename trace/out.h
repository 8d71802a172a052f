/*
 * An output file that only appears under its name when complete: bytes go to a
 * temporary next to the destination, DEST.pytrace-PID-XXXXXX.tmp (PID: the writer's),
 * which out_file__commit() renames into place.
 *
 * A full disk: disk space for the buffered records and the closing metadata is kept
 * allocated ahead of what is written (fallocate), so the disk is found full while the
 * file can still be ended at its last complete record. gzip'd files are written as one
 * gzip member per flush, so they can be ended after any flush too. On a filesystem
 * without fallocate, a full disk may still leave no room for the end.
 */
#ifndef PYTRACE_TRACE_OUT_H
#define PYTRACE_TRACE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct out_file;

/*
 * Creates the temporary for @dest (mode 0666 less umask), gzip-compressing when @gzip,
 * and reserves the space needed to close it. Returns NULL with errno set when the
 * directory is not writable (ENOSPC: not even that space is free; ENOENT: @dest is
 * empty). Caller ends it with out_file__commit() or out_file__abort().
 */
struct out_file *out_file__open(const char *dest, bool gzip);

/*
 * Gives the temporary (and so the file it becomes) to @uid:@gid, by its descriptor: no
 * path is followed, nothing can be swapped in. 0 or -errno.
 */
int out_file__chown(struct out_file *out, uid_t uid, gid_t gid);

/* Appends @len bytes. After a failure every later write is dropped; see out_file__error(). */
void out_file__write(struct out_file *out, const void *data, size_t len);
void out_file__puts(struct out_file *out, const char *s);
void out_file__printf(struct out_file *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Marks a record boundary. When a write fails (a full disk), the file is cut back to the
 * last mark so that what follows can still close it properly. Only whole records are
 * written: one that does not fit the buffer grows it.
 */
void out_file__mark(struct out_file *out);

/* The first write error as a negative errno, or 0. */
int out_file__error(const struct out_file *out);

/*
 * Clears a write error after cutting the file back to the last mark, so the closing
 * records can be written into the space kept for them; from then on only a footer's
 * room is kept. Returns 0.
 */
int out_file__recover(struct out_file *out);

/* Bytes accepted so far (before compression). */
uint64_t out_file__bytes(const struct out_file *out);
/* The file's size so far: compressed where it is, plus what is buffered (uncompressed). */
uint64_t out_file__size(const struct out_file *out);

/*
 * Flushes, finishes compression, renames into place and frees. 0 or -errno; on failure
 * the temporary is removed.
 */
int out_file__commit(struct out_file *out);

/* Removes the temporary and frees. Accepts NULL. */
void out_file__abort(struct out_file *out);

/* The temporary's path, borrowed until commit or abort. */
const char *out_file__temp_path(const struct out_file *out);

#endif
