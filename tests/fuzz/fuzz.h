/*
 * What the libFuzzer harnesses of tests/fuzz/ share: a fuzz input seen as a target's
 * memory (reads outside it fail, as reads of unmapped memory do), and an input handed to
 * a reader that wants a file (a memfd, named by /proc/self/fd/N).
 */
#ifndef PYTRACE_TESTS_FUZZ_FUZZ_H
#define PYTRACE_TESTS_FUZZ_FUZZ_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Where an input is mapped as memory: low, so that seeds and mutations find pointers. */
#define FUZZ_BASE 0x10000ULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct fuzz_image {
	const uint8_t *data; /* borrowed: the input */
	size_t size;
	uint64_t base;
};

/* A struct cpython_mem reader over a struct fuzz_image: 0 when all @len bytes are in it. */
static inline int fuzz_image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct fuzz_image *im = ctx;

	if (addr < im->base || addr - im->base > im->size || len > im->size - (addr - im->base))
		return -EFAULT;
	memcpy(buf, im->data + (addr - im->base), len);
	return 0;
}

/* Its read_blocks: the first blocks that can be read whole, as process_vm_readv gives. */
static inline uint32_t fuzz_image_read_blocks(void *ctx, const uint64_t *addrs, uint32_t n,
					      void *buf, size_t size)
{
	uint32_t k;

	for (k = 0; k < n; k++) {
		if (fuzz_image_read(ctx, addrs[k], (uint8_t *)buf + k * size, size))
			break;
	}
	return k;
}

/*
 * A file holding @data: one memfd per process, rewritten for each input. Returns its
 * descriptor (its offset at 0) and its name in @path, or -1 (then the input is skipped).
 */
static inline int fuzz_file(const uint8_t *data, size_t size, char *path, size_t path_size)
{
	static int fd = -1;

	if (fd < 0)
		fd = memfd_create("pytrace-fuzz", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, 0) || (size && pwrite(fd, data, size, 0) != (ssize_t)size) ||
	    lseek(fd, 0, SEEK_SET))
		return -1;
	snprintf(path, path_size, "/proc/self/fd/%d", fd);
	return fd;
}

/* Little-endian words of an input, 0 past its end. */
static inline uint64_t fuzz_u64(const uint8_t *data, size_t size, size_t at)
{
	uint64_t v = 0;

	if (at < size)
		memcpy(&v, data + at, size - at < 8 ? size - at : 8);
	return v;
}

#endif
