/*
 * A code object's fingerprint: its co_filename pointer and its name word (co_name's
 * pointer with co_version's low bits above it) folded together, to tell a code object
 * from one made later at a freed one's address. One formula for the kernel's walk
 * (bpf/) and user space (cpython/): no includes, plain integer arithmetic.
 */
#ifndef PYTRACE_COMMON_FINGERPRINT_H
#define PYTRACE_COMMON_FINGERPRINT_H

#define PYTRACE_FINGERPRINT(filename, name_word) ((filename) ^ ((name_word) << 1))

#endif
