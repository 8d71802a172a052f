/* Buffered, optionally gzip'd writes to a temporary that is renamed into place. */
#include "out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define OUT_BUFFER_SIZE (64 * 1024)

struct out_file {
	int fd;
	char *dest;
	char *temp;
	bool gzip;
	z_stream zs;
	int err;
	uint64_t bytes;
	uint64_t buf_base;    /* file offset where buf[0] belongs (uncompressed files) */
	uint64_t mark_offset; /* file offset of the last record boundary */
	size_t len;
	unsigned char buf[OUT_BUFFER_SIZE];
	unsigned char zbuf[OUT_BUFFER_SIZE];
};

static int write_all(struct out_file *out, const unsigned char *p, size_t len)
{
	while (len) {
		ssize_t n = write(out->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Pushes the buffer through deflate (when gzip) to the file; @finish ends the stream. */
static int flush_buffer(struct out_file *out, bool finish)
{
	int err = 0;

	if (!out->gzip) {
		err = write_all(out, out->buf, out->len);
		if (!err) {
			out->buf_base += out->len;
			out->len = 0;
		}
		return err;
	}
	out->zs.next_in = out->buf;
	out->zs.avail_in = (uInt)out->len;
	do {
		int zerr;

		out->zs.next_out = out->zbuf;
		out->zs.avail_out = sizeof(out->zbuf);
		zerr = deflate(&out->zs, finish ? Z_FINISH : Z_NO_FLUSH);
		if (zerr == Z_STREAM_ERROR)
			return -EIO;
		err = write_all(out, out->zbuf, sizeof(out->zbuf) - out->zs.avail_out);
		if (err)
			return err;
	} while (out->zs.avail_out == 0 || (finish && out->zs.avail_in));
	out->len = 0;
	return 0;
}

static void out_file__destroy(struct out_file *out)
{
	if (out->fd >= 0)
		close(out->fd);
	if (out->gzip)
		deflateEnd(&out->zs);
	free(out->dest);
	free(out->temp);
	free(out);
}

struct out_file *out_file__open(const char *dest, bool gzip)
{
	struct out_file *out = calloc(1, sizeof(*out));
	mode_t mask;
	int err;

	if (!out)
		return NULL;
	out->fd = -1;
	out->dest = strdup(dest);
	if (!out->dest || asprintf(&out->temp, "%s.tmp.XXXXXX", dest) < 0) {
		out->temp = NULL;
		err = -ENOMEM;
		goto out_free;
	}
	out->fd = mkstemp(out->temp);
	if (out->fd < 0) {
		err = -errno;
		goto out_free;
	}
	mask = umask(0);
	umask(mask);
	fchmod(out->fd, 0666 & ~mask);
	if (gzip) {
		/* windowBits 15 + 16: a gzip header and trailer around the deflate stream. */
		if (deflateInit2(&out->zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			err = -ENOMEM;
			goto out_unlink;
		}
		out->gzip = true;
	}
	return out;

out_unlink:
	unlink(out->temp);
out_free:
	out_file__destroy(out);
	errno = -err;
	return NULL;
}

void out_file__write(struct out_file *out, const void *data, size_t len)
{
	const unsigned char *p = data;

	out->bytes += len;
	while (len && !out->err) {
		size_t room = sizeof(out->buf) - out->len;
		size_t n = len < room ? len : room;

		memcpy(out->buf + out->len, p, n);
		out->len += n;
		p += n;
		len -= n;
		if (out->len == sizeof(out->buf))
			out->err = flush_buffer(out, false);
	}
}

void out_file__puts(struct out_file *out, const char *s)
{
	out_file__write(out, s, strlen(s));
}

void out_file__printf(struct out_file *out, const char *fmt, ...)
{
	char small[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n < sizeof(small)) {
		out_file__write(out, small, (size_t)n);
	} else {
		char *big = malloc((size_t)n + 1);

		if (!big) {
			out->err = out->err ? out->err : -ENOMEM;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		out_file__write(out, big, (size_t)n);
		free(big);
	}
}

void out_file__mark(struct out_file *out)
{
	if (!out->gzip && !out->err)
		out->mark_offset = out->buf_base + out->len;
}

int out_file__error(const struct out_file *out)
{
	return out->err;
}

int out_file__recover(struct out_file *out)
{
	if (!out->err)
		return 0;
	if (out->gzip)
		return out->err;
	/*
	 * A failed flush may have written part of the buffer: cut the file back to where the
	 * buffer starts, or to the mark when it lies before, and keep the buffered bytes up
	 * to the mark for the next flush.
	 */
	if (out->mark_offset <= out->buf_base) {
		out->buf_base = out->mark_offset;
		out->len = 0;
	} else {
		out->len = (size_t)(out->mark_offset - out->buf_base);
	}
	if (ftruncate(out->fd, (off_t)out->buf_base) ||
	    lseek(out->fd, (off_t)out->buf_base, SEEK_SET) < 0)
		return out->err;
	out->err = 0;
	return 0;
}

uint64_t out_file__bytes(const struct out_file *out)
{
	return out->bytes;
}

const char *out_file__temp_path(const struct out_file *out)
{
	return out->temp;
}

int out_file__commit(struct out_file *out)
{
	int err = out->err;

	if (!err)
		err = flush_buffer(out, true);
	if (!err && close(out->fd))
		err = -errno;
	out->fd = -1;
	if (!err && rename(out->temp, out->dest))
		err = -errno;
	out_file__destroy(out);
	return err;
}

void out_file__abort(struct out_file *out)
{
	if (!out)
		return;
	unlink(out->temp);
	out_file__destroy(out);
}
