/* Load bias of a mapped ELF file, from its program headers. */
#include "elf.h"

#include <errno.h>
#include <gelf.h>
#include <stddef.h>

int elf_load_bias(int fd, uint64_t start, uint64_t pgoff, uint64_t *bias, bool *is_exec)
{
	size_t nphdr, i;
	GElf_Ehdr ehdr;
	Elf *elf;
	int err = -ENOEXEC;

	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || !gelf_getehdr(elf, &ehdr) || elf_getphdrnum(elf, &nphdr))
		goto out;
	*is_exec = ehdr.e_type == ET_EXEC;
	for (i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		/* The segment holding file offset @pgoff tells which vaddr @start maps. */
		if (pgoff >= (ph.p_offset & ~(uint64_t)4095) && pgoff < ph.p_offset + ph.p_filesz) {
			*bias = *is_exec ? 0 : start - (ph.p_vaddr - (ph.p_offset - pgoff));
			err = 0;
			break;
		}
	}
out:
	if (elf)
		elf_end(elf);
	return err;
}
