/*
 * Fuzzes the ELF readers fed the files a target maps: elf_load_bias() (common/elf.c) and
 * cpython_find_runtime() (cpython/detect.c: .dynsym, Py_Version, DT_NEEDED), on a memfd
 * holding the input, under a name picked by its last byte (names tell the minor version
 * and whether a stripped file is an interpreter). libelf maps the file: a read past its
 * data inside the mapping is not seen by ASan, only one that faults.
 */
#include "fuzz.h"

#include "../../common/elf.h"
#include "../../cpython/cpython.h"

static const char *const names[] = {
	"/usr/bin/python3.12",	     "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
	"/opt/python/bin/python3.8", "/usr/bin/python3",
	"/usr/local/bin/python3.99", "python3.13",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *name = names[size ? data[size - 1] % (sizeof(names) / sizeof(names[0])) : 0];
	uint64_t runtime = 0, bias = 0, pgoff = size > 1 ? (data[size - 2] & 3) * 4096ULL : 0;
	struct cpython_types types;
	unsigned minor = 0;
	bool is_exec = false;
	char path[64];
	int fd = fuzz_file(data, size, path, sizeof(path));

	if (fd < 0)
		return 0;
	cpython_find_runtime(fd, name, &runtime, &minor, &is_exec, &types);
	cpython_find_runtime(fd, name, &runtime, &minor, &is_exec, NULL);
	elf_load_bias(fd, 0x7f0000000000ULL + pgoff, pgoff, &bias, &is_exec);
	return 0;
}
