/* Finding CPython's runtime in an ELF file: .dynsym only, the file is never run. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/elf.h"
#include "../common/target_file.h"
#include "cpython.h"

/* "libpython3.9.so.1.0" or "python3.12" -> 9 or 12; 0 when the name doesn't say. */
static unsigned minor_from_name(const char *path)
{
	const char *base = strrchr(path, '/');
	const char *p = strstr(base ? base : path, "python3.");
	unsigned minor;

	if (p && sscanf(p + 8, "%u", &minor) == 1 && minor >= 1 && minor < 100)
		return minor; /* before 3.8 too: to say which version we can't read */
	return 0;
}

/* Reads the 4-byte Py_Version (0x030B07F0 ...) from the file's section data. */
static unsigned minor_from_py_version(Elf *elf, uint64_t vaddr)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		uint32_t v;

		/* Offsets, not ends: a symbol's value near 2^64 wrapped past them (fuzz_elf). */
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || vaddr < sh.sh_addr ||
		    sh.sh_size < 4 || vaddr - sh.sh_addr > sh.sh_size - 4)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data || !data->d_buf || data->d_size < 4 ||
		    vaddr - sh.sh_addr > data->d_size - 4)
			return 0;
		memcpy(&v, (const char *)data->d_buf + (vaddr - sh.sh_addr), 4);
		return v >> 24 == 3 ? (v >> 16) & 0xff : 0;
	}
	return 0;
}

/* The symbols of enum cpython_type_id, in its order. */
static const char *const type_symbols[CPYTHON_TYPE_COUNT] = {
	"PyLong_Type",	"PyBool_Type",	    "PyFloat_Type",   "PyUnicode_Type",
	"PyBytes_Type", "PyTuple_Type",	    "PyList_Type",    "PyDict_Type",
	"PySet_Type",	"PyFrozenSet_Type", "_Py_NoneStruct",
};

static void note_type(const char *name, uint64_t value, struct cpython_types *types)
{
	int i;

	if (!types || (name[0] != 'P' && name[0] != '_'))
		return;
	for (i = 0; i < CPYTHON_TYPE_COUNT; i++) {
		if (!strcmp(name, type_symbols[i]))
			types->addr[i] = value;
	}
}

/* Whether @elf's dynamic section names a libpython among the libraries it needs. */
static bool needs_libpython(Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNAMIC || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		n = data ? sh.sh_size / sh.sh_entsize : 0;
		for (i = 0; i < n && i < 4096; i++) {
			GElf_Dyn dyn;
			const char *name;

			if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
				break;
			name = dyn.d_tag == DT_NEEDED
				       ? elf_strptr(elf, sh.sh_link, (size_t)dyn.d_un.d_val)
				       : NULL;
			if (name && !strncmp(name, "libpython", 9))
				return true;
		}
	}
	return false;
}

int cpython_find_runtime(int fd, const char *path, uint64_t *runtime_vaddr, unsigned *minor,
			 bool *is_exec, struct cpython_types *types)
{
	uint64_t runtime = 0, py_version = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr ehdr;
	int err = -ENOENT;
	Elf *elf;

	elf_version(EV_CURRENT);
	if (types)
		memset(types, 0, sizeof(*types));
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || !gelf_getehdr(elf, &ehdr))
		goto out;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t i, n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		n = data ? sh.sh_size / sh.sh_entsize : 0;
		for (i = 0; i < n; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(elf, sh.sh_link, sym.st_name);
			if (!name)
				continue;
			if (!strcmp(name, "_PyRuntime"))
				runtime = sym.st_value;
			else if (!strcmp(name, "Py_Version"))
				py_version = sym.st_value;
			else
				note_type(name, sym.st_value, types);
		}
	}
	if (!runtime) {
		/*
		 * "python3.N" that is no launcher of a libpython: a CPython whose symbols
		 * were stripped from .dynsym (a static build linked without -export-dynamic).
		 */
		*minor = minor_from_name(path);
		if (*minor && !strstr(strrchr(path, '/') ?: path, "libpython") &&
		    !needs_libpython(elf))
			err = -ENODATA;
		goto out;
	}
	*runtime_vaddr = runtime;
	*is_exec = ehdr.e_type == ET_EXEC;
	*minor = py_version ? minor_from_py_version(elf, py_version) : 0;
	if (!*minor)
		*minor = minor_from_name(path);
	err = 0;
out:
	if (elf)
		elf_end(elf);
	return err;
}

/* Files worth opening: the interpreter or libpython, by name. */
static bool may_hold_runtime(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, "python", 6) || !strncmp(base, "libpython", 9);
}

int cpython_locate(pid_t pid, const char *path, uint64_t start, uint64_t pgoff, uint64_t *runtime,
		   unsigned *minor, struct cpython_types *types)
{
	struct cpython_types found;
	uint64_t vaddr, bias;
	bool is_exec, exec2;
	int err, i, fd;

	if (path[0] != '/' || !may_hold_runtime(path))
		return -ENOENT;
	fd = target_file_open(pid, path);
	if (fd < 0)
		return fd;
	err = cpython_find_runtime(fd, path, &vaddr, minor, &is_exec, &found);
	if (!err)
		err = elf_load_bias(fd, start, pgoff, &bias, &exec2);
	close(fd);
	if (err)
		return err;
	*runtime = is_exec ? vaddr : bias + vaddr;
	for (i = 0; types && i < CPYTHON_TYPE_COUNT; i++)
		types->addr[i] = !found.addr[i] ? 0
				 : is_exec	? found.addr[i]
						: bias + found.addr[i];
	return 0;
}

struct cpython_process *cpython_process__find(pid_t pid, unsigned *found_minor)
{
	char path[64], line[4096];
	struct cpython_process *p = NULL;
	int why = ENOENT;
	FILE *f;

	if (found_minor)
		*found_minor = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	while (!p && fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		struct cpython_types types;
		uint64_t runtime;
		unsigned minor;
		int name_at = 0, err;
		char perms[8], *name;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off,
			   &name_at) < 4 ||
		    !name_at || perms[2] != 'x')
			continue;
		name = line + name_at;
		name[strcspn(name, "\n")] = '\0';
		minor = 0;
		err = cpython_locate(pid, name, start, off, &runtime, &minor, &types);
		if (!err) {
			p = cpython_process__new(pid, runtime, minor);
			if (p)
				p->types = types;
			err = p ? 0 : -errno;
		}
		/* One that can't be read says why; a CPython found outranks one stripped. */
		if (err && err != -ENOENT && err != -ENOEXEC && (why == ENOENT || why == ENODATA)) {
			why = -err;
			if (found_minor)
				*found_minor = minor;
		}
	}
	fclose(f);
	if (!p)
		errno = why;
	return p;
}

const char *cpython_unreadable_why(int err, unsigned minor, char *buf, size_t size)
{
	char version[24] = "CPython";

	if (minor)
		snprintf(version, sizeof(version), "CPython 3.%u", minor);
	if (err == ENOTSUP)
		snprintf(buf, size,
			 "%s, a free-threaded build: its Python stacks are not read "
			 "(not supported)",
			 version);
	else if (err == EPROTONOSUPPORT)
		snprintf(buf, size, "%s: a version this tool can't read (it reads 3.8 to 3.15)",
			 version);
	else if (err == ENODATA)
		snprintf(buf, size,
			 "%s without its symbols (no _PyRuntime in .dynsym): its "
			 "Python stacks can't be found",
			 version);
	else
		snprintf(buf, size, "%s found, but its runtime could not be read (%s)", version,
			 strerror(err));
	return buf;
}
