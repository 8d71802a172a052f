/*
 * Python frames: names, files and lines from the code objects that cpython/ read when
 * the frames were walked, arguments as the sampler decoded them (the process may be
 * gone by now). A process's code objects keep their interned frame ids here, so a name
 * is interned once per code object.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "../common/hashmap.h"
#include "../sampler/argstore.h"
#include "internal.h"

static uint32_t unreadable(struct symbolizer *sym)
{
	struct frame_info info = { "[unreadable Python frame]", "", 0, FRAME_PYTHON };

	sym->stats.python_unreadable++;
	return frame_table__intern(sym->frames, &info);
}

/* How a value shows: a str as Python writes it ('...'), others described (<list of 3>). */
static void describe(const struct sampler_arg *v, struct arg_item *item, char *text, size_t size)
{
	static const char *const sized[] = {
		[CPYTHON_TYPE_TUPLE] = "tuple",		[CPYTHON_TYPE_LIST] = "list",
		[CPYTHON_TYPE_DICT] = "dict",		[CPYTHON_TYPE_SET] = "set",
		[CPYTHON_TYPE_FROZENSET] = "frozenset",
	};

	item->kind = ARG_TEXT;
	item->text = text;
	switch (v->kind) {
	case CPYTHON_VALUE_INT:
		item->kind = ARG_INT;
		item->i = v->i;
		return;
	case CPYTHON_VALUE_BOOL:
		item->kind = ARG_BOOL;
		item->i = v->i;
		return;
	case CPYTHON_VALUE_FLOAT:
		item->kind = ARG_FLOAT;
		item->f = v->f;
		return;
	case CPYTHON_VALUE_NONE:
		item->kind = ARG_NONE;
		return;
	case CPYTHON_VALUE_BIG_INT:
		snprintf(text, size, "<int of more than 64 bits>");
		return;
	case CPYTHON_VALUE_STR:
		snprintf(text, size, "'%s%s'", v->text ? v->text : "", v->cut ? "..." : "");
		return;
	case CPYTHON_VALUE_BYTES:
		snprintf(text, size, "b'%s%s'", v->text ? v->text : "", v->cut ? "..." : "");
		return;
	case CPYTHON_VALUE_SIZED:
		snprintf(text, size, "<%s of %" PRId64 ">", sized[v->sized], v->i);
		return;
	case CPYTHON_VALUE_OTHER:
		snprintf(text, size, "<%s>", v->text ? v->text : "object");
		return;
	case CPYTHON_VALUE_UNBOUND:
		snprintf(text, size, "<unbound>");
		return;
	default:
		snprintf(text, size, "<unreadable>");
		return;
	}
}

#define MAX_ITEMS (CPYTHON_MAX_ARGS + CPYTHON_TASK_LOCALS)

/*
 * What the sampler's argument list @id (sampler/argstore.h) became for a frame of code
 * entry @entry: described and interned once per list (at tens of thousands of stacks a
 * second, doing that for each frame held the records back). The same values in another
 * function's frame name other parameters, hence the key.
 */
struct args_seen {
	const struct cpython_code_entry *entry;
	uint64_t code, fingerprint;
	uint32_t id; /* in the args table; 0: not yet described */
};

static struct args_seen *seen_of(struct symbolizer *sym, uint32_t id)
{
	if (id >= sym->nargs_seen) {
		uint32_t n = sym->nargs_seen ? sym->nargs_seen : 1024;
		struct args_seen *grown;

		while (n <= id)
			n *= 2;
		grown = realloc(sym->args_seen, n * sizeof(*grown));
		if (!grown)
			return NULL;
		memset(grown + sym->nargs_seen, 0, (n - sym->nargs_seen) * sizeof(*grown));
		sym->args_seen = grown;
		sym->nargs_seen = n;
	}
	return &sym->args_seen[id];
}

static bool seen_for(const struct args_seen *seen, const struct cpython_code_entry *e)
{
	return seen->id && seen->entry == e &&
	       (!e || (seen->code == e->code && seen->fingerprint == e->fingerprint));
}

/* The id of frame @f's argument list (0: none read), named by its code object @e. */
static uint32_t frame_args(struct symbolizer *sym, const struct sampler_rec *rec,
			   const struct cpython_frame *f, const struct cpython_code_entry *e)
{
	struct arg_item items[MAX_ITEMS];
	char names[MAX_ITEMS][16];
	char shown[MAX_ITEMS][4 * CPYTHON_ARG_TEXT + 32];
	enum cpython_task_kind task = e && !e->unreadable ? e->info.task_kind : CPYTHON_TASK_NONE;
	const struct sampler_arg *values;
	struct args_seen *seen;
	uint32_t n, i, k = 0, id;
	bool task_read = false;

	if (f->args == ARG_STORE_UNKNOWN)
		return TRACE_ARGS_UNKNOWN; /* not read (no room left): continues any call */
	values = f->args ? arg_store__values(rec->sample.py_args, f->args, &n) : NULL;
	if (!values)
		return 0;
	seen = seen_of(sym, f->args);
	if (seen && seen_for(seen, e))
		return seen->id;
	for (i = 0; i < n && k < MAX_ITEMS; i++) {
		const struct sampler_arg *v = &values[i];
		const char *local = NULL;

		if (v->index >= CPYTHON_ARG_TASK) {
			task_read = true;
			local = cpython_task_local_name(task, v->index - CPYTHON_ARG_TASK);
			/* A worker between tasks (its job None, or not set yet): no task. */
			if (!local ||
			    (v->index == CPYTHON_ARG_TASK &&
			     (v->kind == CPYTHON_VALUE_NONE || v->kind == CPYTHON_VALUE_UNBOUND)))
				break;
		}
		memset(&items[k], 0, sizeof(items[k]));
		if (local) {
			items[k].name = local;
		} else if (e && !e->unreadable && v->index < e->info.nparams) {
			items[k].name = e->info.params[v->index];
		} else {
			snprintf(names[k], sizeof(names[k]), "arg%u", v->index);
			items[k].name = names[k];
		}
		describe(v, &items[k], shown[k], sizeof(shown[k]));
		/*
		 * Objects shown by type or length alone: two calls with other objects (other
		 * work items, other lists of one length) are two calls all the same.
		 */
		if (v->kind == CPYTHON_VALUE_OTHER || v->kind == CPYTHON_VALUE_SIZED)
			items[k].identity = v->object;
		k++;
	}
	/*
	 * A pool worker's frame read before its loop was known (a spawned worker starts its
	 * first task right after importing the pool): which task is not known, which must
	 * not split the task's slice from the reads that know it.
	 */
	if (task != CPYTHON_TASK_NONE && !task_read)
		id = TRACE_ARGS_UNKNOWN;
	else
		id = args_table__intern(frame_table__args(sym->frames), items, k);
	if (!id && k)
		sym->stats.python_args_lost++;
	if (id && seen)
		*seen = (struct args_seen){ e, e ? e->code : 0, e ? e->fingerprint : 0, id };
	return id;
}

/*
 * A code object's frame id, remembered per process by its address and fingerprint: the
 * sampler's cache of code objects is its own, and outlives no process. (A forked child
 * interns its parent's code objects again, once each: the frame table keeps one id.)
 */
struct python_name {
	uint64_t code, fingerprint;
	uint32_t id;
};

static uint64_t name_key(uint64_t code, uint64_t fingerprint)
{
	return code ^ (fingerprint * 0x9e3779b97f4a7c15ULL);
}

static void free_names(void *names)
{
	hashmap__free_all(names, free);
}

void python_forget(struct symbolizer *sym, pid_t pid)
{
	free_names(hashmap__remove(sym->python_names, (uint64_t)pid));
}

void python_names_free(struct symbolizer *sym)
{
	hashmap__free_all(sym->python_names, free_names);
}

/* Process @pid's map of names, made on its first Python frame; NULL without memory. */
static struct hashmap *names_of(struct symbolizer *sym, pid_t pid)
{
	struct hashmap *names = hashmap__get(sym->python_names, (uint64_t)pid);

	if (!names) {
		names = hashmap__new();
		if (names && hashmap__set(sym->python_names, (uint64_t)pid, names)) {
			hashmap__free(names);
			names = NULL;
		}
	}
	return names;
}

/* @e's frame id, kept in @names (NULL: interned by name each time). */
static uint32_t code_frame(struct symbolizer *sym, struct hashmap *names,
			   const struct cpython_code_entry *e)
{
	struct frame_info info = { e->info.name, e->info.filename, e->info.firstlineno,
				   FRAME_PYTHON };
	uint64_t key = name_key(e->code, e->fingerprint);
	struct python_name *n = names ? hashmap__get(names, key) : NULL;
	uint32_t id;

	if (n && n->code == e->code && n->fingerprint == e->fingerprint)
		return n->id;
	/* Not kept (no memory, or a key two code objects share) costs a lookup by name. */
	id = frame_table__intern(sym->frames, &info);
	if (!id || !names)
		return id;
	if (!n) {
		n = malloc(sizeof(*n));
		if (!n || hashmap__set(names, key, n)) {
			free(n);
			return id;
		}
	}
	*n = (struct python_name){ e->code, e->fingerprint, id };
	return id;
}

int python_frames(struct symbolizer *sym, const struct sampler_rec *rec, struct trace_frame *frames,
		  uint32_t max)
{
	uint32_t i, n = rec->sample.npy < max ? rec->sample.npy : max;
	struct hashmap *names = n ? names_of(sym, (pid_t)rec->pid) : NULL;

	/* Innermost first from the target; root first in the trace. */
	for (i = 0; i < n; i++) {
		uint32_t k = rec->sample.npy - 1 - i;
		const struct cpython_frame *f = &rec->sample.py_frames[k];
		const struct cpython_code_entry *e =
			rec->sample.py_codes ? rec->sample.py_codes[k] : NULL;

		frames[i].args = frame_args(sym, rec, f, e);
		if (!e || e->unreadable) {
			frames[i].func = unreadable(sym);
			frames[i].line = 0;
		} else {
			frames[i].func = code_frame(sym, names, e);
			frames[i].line =
				cpython_line(rec->sample.py_lines, e->info.linetable,
					     e->info.linetable_len, e->info.firstlineno, f->lasti);
		}
		if (!frames[i].func)
			return -ENOMEM;
		/* Where the caller called from: its instruction offset. */
		frames[i].callsite =
			i ? (uint64_t)(rec->sample.py_frames[rec->sample.npy - i].lasti + 1) : 0;
	}
	sym->stats.python_frames += n;
	return (int)n;
}
