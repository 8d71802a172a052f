/*
 * An output file that only appears under its name when complete: bytes go to a
 * temporary next to the destination, which out_file__commit() renames into place.
 */
#ifndef PYTRACE_TRACE_OUT_H
#define PYTRACE_TRACE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct out_file;

/*
 * Creates the temporary for @dest (mode 0666 less umask), gzip-compressing when @gzip.
 * Returns NULL with errno set when the directory is not writable. Caller ends it with
 * out_file__commit() or out_file__abort().
 */
struct out_file *out_file__open(const char *dest, bool gzip);

/* Appends @len bytes. After a failure every later write is dropped; see out_file__error(). */
void out_file__write(struct out_file *out, const void *data, size_t len);
void out_file__puts(struct out_file *out, const char *s);
void out_file__printf(struct out_file *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Marks a record boundary. When a write fails (a full disk), an uncompressed file is cut
 * back to the last mark so that what follows can still close it properly.
 */
void out_file__mark(struct out_file *out);

/* The first write error as a negative errno, or 0. */
int out_file__error(const struct out_file *out);

/*
 * Clears a write error after cutting the file back to the last mark, so a short footer
 * can be attempted. Returns 0, or the error when the file can't be recovered (gzip).
 */
int out_file__recover(struct out_file *out);

/* Bytes accepted so far (before compression). */
uint64_t out_file__bytes(const struct out_file *out);

/* Flushes, finishes compression, renames into place and frees. 0 or -errno (file kept). */
int out_file__commit(struct out_file *out);

/* Removes the temporary and frees. Accepts NULL. */
void out_file__abort(struct out_file *out);

/* The temporary's path, borrowed until commit or abort. */
const char *out_file__temp_path(const struct out_file *out);

#endif
