/* Buffered, optionally gzip'd writes to a temporary that is renamed into place. */
#include "out.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../common/log.h"
#include "trace.h"

#define OUT_BUFFER_SIZE (64 * 1024)
#define OUT_BUFFER_MAX (64 * 1024 * 1024) /* one record larger than this fails */
/*
 * Disk space kept allocated past what is written: room for the buffered records and
 * the closing metadata when the disk fills up, then for the footer alone.
 */
#define OUT_TAIL_RESERVE (2 * OUT_BUFFER_SIZE)
#define OUT_FOOTER_RESERVE (8 * 1024)
#define OUT_TEMP_TAG ".pytrace-"
#define OUT_TEMP_END ".tmp"

struct out_file {
	int fd;
	char *dest;
	char *temp;
	bool gzip;
	z_stream zs;
	int err;
	bool recovered;	      /* the disk filled up once: only the footer's room is kept */
	bool can_reserve;     /* the filesystem supports fallocate */
	bool rewind;	      /* a write failed part-way: go back to the flushed offset */
	uint64_t bytes;	      /* accepted, before compression */
	uint64_t flushed;     /* file offset after the last complete flush: a valid cut */
	uint64_t reserved;    /* file offset up to which the disk space is allocated */
	size_t len, mark_len; /* buffered bytes; those up to the last record boundary */
	size_t cap;
	unsigned char *buf;
	unsigned char *zbuf; /* one flush, compressed */
	size_t zcap;
	bool restart;	       /* a flush failed: end the gzip member, start another */
	uint64_t member_start; /* file offset of the current gzip member */
	uint32_t member_crc;   /* CRC-32 and size of what was flushed into it */
	uint32_t member_size;
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

/*
 * Makes sure the disk space for @size more bytes, and what must stay free after them,
 * is allocated before writing them, so that a full disk is seen here, while there is
 * still room to close the file. -ENOSPC when it can't be had.
 */
static int reserve(struct out_file *out, uint64_t size, bool last)
{
	uint64_t keep = last ? 0 : out->recovered ? OUT_FOOTER_RESERVE : OUT_TAIL_RESERVE;
	uint64_t need = out->flushed + size + keep;

	if (need <= out->reserved || !out->can_reserve)
		return 0;
	if (!fallocate(out->fd, FALLOC_FL_KEEP_SIZE, (off_t)out->reserved,
		       (off_t)(need - out->reserved))) {
		out->reserved = need;
		return 0;
	}
	if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) {
		out->can_reserve = false; /* plain writes; a full disk may cut the footer */
		return 0;
	}
	return -errno;
}

/* Room for @more bytes of compressed output after @used. */
static int grow_zbuf(struct out_file *out, size_t used, size_t more)
{
	unsigned char *grown;
	size_t cap = out->zcap ? out->zcap : OUT_BUFFER_SIZE;

	while (cap - used < more)
		cap *= 2;
	if (cap == out->zcap)
		return 0;
	grown = realloc(out->zbuf, cap);
	if (!grown)
		return -ENOMEM;
	out->zbuf = grown;
	out->zcap = cap;
	return 0;
}

/*
 * Ends the gzip member that a failed flush left open, at the flushed offset, into the
 * start of zbuf: an empty final block (the stream is byte-aligned after a sync flush)
 * and the trailer, CRC-32 and size of what was flushed. What follows is a new member.
 * Returns the bytes it put there.
 */
static size_t end_member(struct out_file *out)
{
	unsigned char *p = out->zbuf;
	int i;

	deflateReset(&out->zs);
	if (out->flushed == out->member_start)
		return 0; /* nothing of it was written: the new member starts there */
	p[0] = 0x03;	  /* BFINAL, fixed Huffman codes, end of block */
	p[1] = 0x00;
	for (i = 0; i < 4; i++) {
		p[2 + i] = (unsigned char)(out->member_crc >> (8 * i));
		p[6 + i] = (unsigned char)(out->member_size >> (8 * i));
	}
	return 10;
}

/*
 * Compresses @n buffered bytes into zbuf, sync-flushed so the file can be ended right
 * after them (see end_member()), or ending the stream when @last. Stores the size.
 */
static int compress_chunk(struct out_file *out, size_t n, bool last, size_t *size)
{
	size_t used = 0;
	int zerr, err;

	err = grow_zbuf(out, 0, 64);
	if (err)
		return err;
	if (out->restart)
		used = end_member(out);
	out->zs.next_in = out->buf;
	out->zs.avail_in = (uInt)n;
	do {
		err = grow_zbuf(out, used, n / 2 + 1024);
		if (err)
			return err;
		out->zs.next_out = out->zbuf + used;
		out->zs.avail_out = (uInt)(out->zcap - used);
		zerr = deflate(&out->zs, last ? Z_FINISH : Z_SYNC_FLUSH);
		if (zerr == Z_STREAM_ERROR)
			return -EIO;
		used = out->zcap - out->zs.avail_out;
	} while (out->zs.avail_out == 0 || (last && zerr != Z_STREAM_END));
	*size = used;
	return 0;
}

/* After a gzip chunk of @n buffered bytes was written: what its member holds. */
static void count_chunk(struct out_file *out, size_t n)
{
	if (out->restart) {
		/* The chunk began with the old member's end, if it had one, then the new. */
		out->member_start = out->flushed + (out->flushed == out->member_start ? 0 : 10);
		out->member_crc = (uint32_t)crc32(0L, Z_NULL, 0);
		out->member_size = 0;
		out->restart = false;
	}
	out->member_crc = (uint32_t)crc32(out->member_crc, out->buf, (uInt)n);
	out->member_size += (uint32_t)n;
}

/*
 * Writes the buffered records up to the last mark (everything when @last) at the
 * flushed offset; a gzip stream is sync-flushed there, so that the file can be ended
 * after any flush. Nothing counts as flushed until written.
 */
static int flush_buffer(struct out_file *out, bool last)
{
	size_t n = last ? out->len : out->mark_len, size = n;
	const unsigned char *data = out->buf;
	int err;

	if (!n && !(last && out->gzip))
		return 0;
	if (out->gzip) {
		err = compress_chunk(out, n, last, &size);
		if (err)
			return err;
		data = out->zbuf;
	}
	err = reserve(out, size, last);
	if (err)
		return err;
	if (out->rewind && lseek(out->fd, (off_t)out->flushed, SEEK_SET) < 0)
		return -errno;
	out->rewind = false;
	err = write_all(out, data, size);
	if (err) {
		out->rewind = true;
		return err;
	}
	if (out->gzip)
		count_chunk(out, n);
	out->flushed += size;
	memmove(out->buf, out->buf + n, out->len - n);
	out->len -= n;
	out->mark_len = 0;
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
	free(out->buf);
	free(out->zbuf);
	free(out);
}

struct out_file *out_file__open(const char *dest, bool gzip)
{
	struct out_file *out;
	mode_t mask;
	int err;

	if (!*dest) {
		errno = ENOENT;
		return NULL;
	}
	out = calloc(1, sizeof(*out));
	if (!out)
		return NULL;
	out->fd = -1;
	out->can_reserve = true;
	out->cap = OUT_BUFFER_SIZE;
	out->buf = malloc(out->cap);
	out->dest = strdup(dest);
	if (!out->buf || !out->dest ||
	    asprintf(&out->temp, "%s" OUT_TEMP_TAG "%d-XXXXXX" OUT_TEMP_END, dest, (int)getpid()) <
		    0) {
		out->temp = NULL;
		err = -ENOMEM;
		goto out_free;
	}
	out->fd = mkostemps(out->temp, (int)strlen(OUT_TEMP_END), O_CLOEXEC);
	if (out->fd < 0) {
		err = -errno;
		goto out_free;
	}
	/* Held while writing: a later run removes the temporary only once it is free. */
	flock(out->fd, LOCK_EX | LOCK_NB);
	mask = umask(0);
	umask(mask);
	fchmod(out->fd, 0666 & ~mask);
	err = reserve(out, 0, false);
	if (err)
		goto out_unlink;
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

/* Makes room for @len more bytes: flushes complete records, or grows for a long one. */
static int make_room(struct out_file *out, size_t len)
{
	unsigned char *grown;
	size_t cap = out->cap;

	if (out->mark_len)
		return flush_buffer(out, false);
	while (cap - out->len < len && cap < OUT_BUFFER_MAX)
		cap *= 2;
	if (cap == out->cap)
		return -EFBIG;
	grown = realloc(out->buf, cap);
	if (!grown)
		return -ENOMEM;
	out->buf = grown;
	out->cap = cap;
	return 0;
}

void out_file__write(struct out_file *out, const void *data, size_t len)
{
	const unsigned char *p = data;

	out->bytes += len;
	while (len && !out->err) {
		size_t room = out->cap - out->len;
		size_t n = len < room ? len : room;

		if (!n) {
			out->err = make_room(out, len);
			continue;
		}
		memcpy(out->buf + out->len, p, n);
		out->len += n;
		p += n;
		len -= n;
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
	if (!out->err)
		out->mark_len = out->len;
}

int out_file__error(const struct out_file *out)
{
	return out->err;
}

int out_file__recover(struct out_file *out)
{
	if (!out->err)
		return 0;
	out->restart = out->gzip;
	/*
	 * The file is whole up to the flushed offset (a failed write there is overwritten
	 * and cut at commit); of the buffer, keep the complete records.
	 */
	out->len = out->mark_len;
	out->recovered = true;
	out->err = 0;
	return 0;
}

uint64_t out_file__bytes(const struct out_file *out)
{
	return out->bytes;
}

uint64_t out_file__size(const struct out_file *out)
{
	return out->flushed + out->len;
}

int out_file__chown(struct out_file *out, uid_t uid, gid_t gid)
{
	return fchown(out->fd, uid, gid) ? -errno : 0;
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
	/* Cuts what a failed write left and frees the space still reserved. */
	if (!err && ftruncate(out->fd, (off_t)out->flushed))
		err = -errno;
	if (!err && close(out->fd))
		err = -errno;
	out->fd = -1;
	if (!err && rename(out->temp, out->dest))
		err = -errno;
	if (err)
		unlink(out->temp);
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

/* The writer's pid when @name is one of our temporaries (NAME.pytrace-PID-XXXXXX.tmp). */
static pid_t temp_writer(const char *name)
{
	const char *tag = NULL, *p, *end = name + strlen(name);
	char *digits_end;
	long pid;

	for (p = strstr(name, OUT_TEMP_TAG); p; p = strstr(p + 1, OUT_TEMP_TAG))
		tag = p;
	if (!tag || end - name < (long)strlen(OUT_TEMP_END) ||
	    strcmp(end - strlen(OUT_TEMP_END), OUT_TEMP_END))
		return 0;
	p = tag + strlen(OUT_TEMP_TAG);
	pid = strtol(p, &digits_end, 10);
	if (digits_end == p || pid <= 0 || *digits_end != '-' ||
	    end - (digits_end + 1) != 6 + (long)strlen(OUT_TEMP_END))
		return 0;
	return (pid_t)pid;
}

/* True when the temporary @name in @dirfd was left by a writer that is gone. */
static bool temp_is_stale(int dirfd, const char *name, pid_t writer)
{
	struct stat st;
	bool stale;
	int fd;

	if (writer == getpid() || !kill(writer, 0) || errno != ESRCH)
		return false;
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return false;
	stale = !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
		!flock(fd, LOCK_EX | LOCK_NB);
	close(fd);
	return stale;
}

int trace_remove_stale_temps(const char *dest)
{
	char *dir = strdup(dest), *slash;
	struct dirent *de;
	int removed = 0, err = 0;
	DIR *d;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash)
		slash[1] = '\0';
	d = opendir(slash ? dir : ".");
	if (!d) {
		err = -errno;
		goto out_free;
	}
	while ((de = readdir(d))) {
		pid_t writer = temp_writer(de->d_name);

		if (!writer || !temp_is_stale(dirfd(d), de->d_name, writer))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0)) {
			pr_info("could not remove %s: %s", de->d_name, strerror(errno));
			continue;
		}
		pr_info("removed %s, left by pytrace-sample pid %d", de->d_name, writer);
		removed++;
	}
	closedir(d);
out_free:
	free(dir);
	return err ? err : removed;
}
