/*
 * Internal to sampler/: where the few kernel fields that the eBPF reader reads are, found
 * in the running kernel's BTF without loading all of it (libbpf's CO-RE would parse its
 * ~5 MB, which was half of the start-up time).
 */
#ifndef PYTRACE_SAMPLER_KERNEL_LAYOUT_H
#define PYTRACE_SAMPLER_KERNEL_LAYOUT_H

#include <linux/types.h>
#include <stddef.h>

#include "../bpf/pytrace_bpf.h"

/*
 * Fills @offsets from the BTF blob @data of @size bytes (native byte order). 0, -EINVAL
 * when it is not BTF or is cut short, -ESRCH when a field is missing or has a size the
 * programs do not read it as, -ENOMEM. @data is only borrowed.
 */
int kernel_layout__from_btf(const void *data, size_t size, struct pytrace_kernel_offsets *offsets);

/*
 * The same from the kernel's BTF file @path (/sys/kernel/btf/vmlinux): mapped where the
 * kernel allows it (6.16 on), else read whole. -errno of opening it as well.
 */
int kernel_layout__read(const char *path, struct pytrace_kernel_offsets *offsets);

#endif
