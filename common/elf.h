/* Small ELF facts shared by the symbolizer and the CPython reader. */
#ifndef PYTRACE_COMMON_ELF_H
#define PYTRACE_COMMON_ELF_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Where the ELF file open at @fd (not closed; its offset unused), mapped at @start from
 * file offset @pgoff, has its vaddr 0 (the load bias), and whether it is ET_EXEC (then
 * addresses are absolute: bias 0). 0 or -errno.
 */
int elf_load_bias(int fd, uint64_t start, uint64_t pgoff, uint64_t *bias, bool *is_exec);

#endif
