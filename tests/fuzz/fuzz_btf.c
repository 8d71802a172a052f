/*
 * Fuzzes the BTF scanner of sampler/kernel_layout.c: kernel_layout__from_btf(), what
 * kernel_layout__read() runs over the mapped /sys/kernel/btf/vmlinux, on the input's
 * bytes (libFuzzer's copy of them is as aligned as a mapping, and ends where they end).
 */
#include "fuzz.h"

#include "../../sampler/kernel_layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pytrace_kernel_offsets offsets;

	kernel_layout__from_btf(data, size, &offsets);
	return 0;
}
