/* Process and thread names keyed by (pid, tid); tid 0 stands for the process. */
#include "names.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"

struct names {
	struct hashmap *entries; /* (pid << 32 | tid) -> struct name_entry */
};

static uint64_t key_of(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

struct names *names__new(void)
{
	struct names *names = calloc(1, sizeof(*names));

	if (!names)
		return NULL;
	names->entries = hashmap__new();
	if (!names->entries) {
		free(names);
		errno = ENOMEM;
		return NULL;
	}
	return names;
}

static void free_entry_value(void *value)
{
	struct name_entry *e = value;

	free(e->name);
	free(e->cmdline);
	free(e);
}

void names__free(struct names *names)
{
	if (!names)
		return;
	hashmap__free_all(names->entries, free_entry_value);
	free(names);
}

static struct name_entry *find_or_add(struct names *names, uint32_t pid, uint32_t tid)
{
	struct name_entry *e = hashmap__get(names->entries, key_of(pid, tid));

	if (e)
		return e;
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->pid = pid;
	e->tid = tid;
	e->first_ns = UINT64_MAX;
	if (hashmap__set(names->entries, key_of(pid, tid), e)) {
		free(e);
		return NULL;
	}
	return e;
}

int names__set(struct names *names, uint32_t pid, uint32_t tid, const char *name)
{
	struct name_entry *e = find_or_add(names, pid, tid);
	char *copy;

	if (!e)
		return -ENOMEM;
	copy = strdup(name);
	if (!copy)
		return -ENOMEM;
	free(e->name);
	e->name = copy;
	return 0;
}

int names__set_cmdline(struct names *names, uint32_t pid, const char *cmdline)
{
	struct name_entry *e = find_or_add(names, pid, 0);
	char *copy;

	if (!e || !(copy = strdup(cmdline)))
		return -ENOMEM;
	free(e->cmdline);
	e->cmdline = copy;
	return 0;
}

const char *names__cmdline(const struct names *names, uint32_t pid)
{
	const struct name_entry *e = hashmap__get(names->entries, key_of(pid, 0));

	return e ? e->cmdline : NULL;
}

int names__seen(struct names *names, uint32_t pid, uint32_t tid, uint64_t t_ns)
{
	struct name_entry *process = find_or_add(names, pid, 0);
	struct name_entry *thread = tid ? find_or_add(names, pid, tid) : process;

	if (!process || !thread)
		return -ENOMEM;
	if (t_ns < process->first_ns)
		process->first_ns = t_ns;
	if (t_ns < thread->first_ns)
		thread->first_ns = t_ns;
	return 0;
}

const char *names__get(const struct names *names, uint32_t pid, uint32_t tid)
{
	const struct name_entry *e = hashmap__get(names->entries, key_of(pid, tid));

	return e ? e->name : NULL;
}

static int by_first_seen(const void *a, const void *b)
{
	const struct name_entry *x = *(struct name_entry *const *)a;
	const struct name_entry *y = *(struct name_entry *const *)b;

	if (x->first_ns != y->first_ns)
		return x->first_ns < y->first_ns ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

struct name_entry **names__sorted(const struct names *names, size_t *count)
{
	struct name_entry **sorted = calloc(hashmap__count(names->entries) + 1, sizeof(*sorted));
	size_t cursor = 0, n = 0;
	uint64_t key;
	void *value;

	if (!sorted)
		return NULL;
	while (hashmap__next(names->entries, &cursor, &key, &value)) {
		struct name_entry *e = value;

		if (e->first_ns != UINT64_MAX)
			sorted[n++] = e;
	}
	qsort(sorted, n, sizeof(*sorted), by_first_seen);
	*count = n;
	return sorted;
}
