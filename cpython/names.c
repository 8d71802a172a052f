/* The names Python gives its threads (threading) and processes (multiprocessing), read from outside. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpython.h"
#include "internal.h"

/* threading._active holds one Thread per thread started or seen by threading. */
#define MAX_ACTIVE 4096

/* The address of sys.modules (the interpreter's dict of them). */
static int modules_dict(struct cpython_process *p, const struct cpython_mem *mem, uint64_t *modules)
{
	const struct cpython_layout *l = &p->layout;
	uint64_t interp;
	int err;

	if (!l->names_supported)
		return -ENOTSUP;
	err = cpython_main_interp(p, mem, &interp);
	if (err)
		return err;
	if (mem->read(mem->ctx, interp + l->interp_modules, modules, 8))
		return -EFAULT;
	return *modules ? 0 : -ENOENT; /* not yet made, or already torn down */
}

int cpython_modules_count(struct cpython_process *p, const struct cpython_mem *mem, uint64_t *count)
{
	struct cpython_mem own = cpython_process_mem(p);
	const struct cpython_mem *m = mem ? mem : &own;
	uint64_t modules;
	int err = modules_dict(p, m, &modules);

	if (!err && cpython_read_u64(m, modules + p->layout.dict_used, count))
		err = -EFAULT;
	return err;
}

int cpython_module_global(struct cpython_process *p, const struct cpython_mem *mem,
			  const char *module, const char *name, uint64_t *value)
{
	const struct cpython_layout *l = &p->layout;
	struct cpython_mem own = cpython_process_mem(p);
	uint64_t modules, mod, dict;
	int err;

	if (!mem)
		mem = &own;
	err = modules_dict(p, mem, &modules);
	if (err)
		return err;
	err = cpython_dict_get(l, mem, modules, module, &mod);
	if (err)
		return err;
	if (mem->read(mem->ctx, mod + l->module_dict, &dict, 8))
		return -EFAULT;
	return cpython_dict_get(l, mem, dict, name, value);
}

/* The name of a Thread or BaseProcess object: its `_name` attribute, a str. */
static int object_name(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t obj,
		       char *buf, size_t size)
{
	uint64_t name;
	int err = cpython_attr_get(l, mem, obj, "_name", &name);

	buf[0] = '\0';
	if (err)
		return err == -ENOENT ? -EINVAL : err; /* a Thread always has one */
	return cpython_read_name(l, mem, name, buf, size);
}

int cpython_thread_names(struct cpython_process *p, const struct cpython_mem *mem,
			 struct cpython_thread_name *out, size_t max)
{
	struct cpython_mem own = cpython_process_mem(p);
	struct cpython_dict_item *active = NULL;
	uint64_t active_dict, *idents = NULL, *thread_idents = NULL;
	size_t n = 0, i, t;
	int nactive, err;

	if (!mem)
		mem = &own;
	err = cpython_threads_read(p, mem);
	if (err)
		return err;
	err = cpython_module_global(p, mem, "threading", "_active", &active_dict);
	if (err)
		return err;
	active = calloc(MAX_ACTIVE, sizeof(*active));
	idents = calloc(MAX_ACTIVE, sizeof(*idents));
	if (!active || !idents) {
		err = -ENOMEM;
		goto out_free;
	}
	nactive = cpython_dict_items(&p->layout, mem, active_dict, active, MAX_ACTIVE);
	if (nactive < 0) {
		err = nactive;
		goto out_free;
	}
	/* Keys are threading.get_ident(): the thread state's thread_id (a pthread_t). */
	for (i = 0; i < (size_t)nactive; i++) {
		if (cpython_read_ulong(&p->layout, mem, active[i].key, &idents[i]))
			idents[i] = 0;
	}
	thread_idents = calloc(p->nthreads ? p->nthreads : 1, sizeof(*thread_idents));
	if (!thread_idents) {
		err = -ENOMEM;
		goto out_free;
	}
	for (t = 0; t < p->nthreads; t++) {
		if (mem->read(mem->ctx, p->threads[t].tstate + p->layout.tstate_thread_id,
			      &thread_idents[t], 8))
			thread_idents[t] = UINT64_MAX;
	}
	for (t = 0; t < p->nthreads && n < max; t++) {
		struct cpython_thread_name *o = &out[n];
		uint64_t ident = thread_idents[t];
		size_t u;

		memset(o, 0, sizeof(*o));
		o->tid = p->threads[t].tid;
		o->err = -ENOENT;
		if (ident == UINT64_MAX) {
			o->err = -EFAULT;
			n++;
			continue;
		}
		/*
		 * A thread state made for a thread that has not started yet can hold its
		 * creator's ident (3.8-3.10 set it so until the new thread runs) or a freed
		 * state's: an ident two states share names neither.
		 */
		for (u = 0; u < p->nthreads; u++) {
			if (u != t && thread_idents[u] == ident)
				ident = 0;
		}
		for (i = 0; i < (size_t)nactive && ident; i++) {
			if (idents[i] == ident) {
				o->err = object_name(&p->layout, mem, active[i].value, o->name,
						     sizeof(o->name));
				break;
			}
		}
		n++;
	}
	err = (int)n;
out_free:
	free(active);
	free(idents);
	free(thread_idents);
	return err;
}

int cpython_process_name(struct cpython_process *p, const struct cpython_mem *mem, char *buf,
			 size_t size)
{
	struct cpython_mem own = cpython_process_mem(p);
	uint64_t current;
	int err;

	buf[0] = '\0';
	if (!mem)
		mem = &own;
	err = cpython_module_global(p, mem, "multiprocessing.process", "_current_process",
				    &current);
	return err ? err : object_name(&p->layout, mem, current, buf, size);
}
