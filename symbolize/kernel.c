/* Kernel symbols: /proc/kallsyms text symbols, sorted once for binary search. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct ksym {
	uint64_t addr;
	char *name;
};

struct kernel_syms {
	struct ksym *syms;
	size_t count;
};

static int by_addr(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void kernel_syms__free(struct kernel_syms *ks)
{
	size_t i;

	if (!ks)
		return;
	for (i = 0; i < ks->count; i++)
		free(ks->syms[i].name);
	free(ks->syms);
	free(ks);
}

struct kernel_syms *kernel_syms__load(void)
{
	struct kernel_syms *ks = calloc(1, sizeof(*ks));
	size_t capacity = 0;
	char line[512];
	FILE *f;

	if (!ks)
		return NULL;
	f = fopen("/proc/kallsyms", "re");
	if (!f) {
		free(ks);
		return NULL;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 || !addr ||
		    (type != 't' && type != 'T'))
			continue;
		if (ks->count == capacity) {
			struct ksym *grown;

			capacity = capacity ? capacity * 2 : 65536;
			grown = realloc(ks->syms, capacity * sizeof(*grown));
			if (!grown)
				break;
			ks->syms = grown;
		}
		ks->syms[ks->count].addr = addr;
		ks->syms[ks->count].name = strdup(name);
		if (ks->syms[ks->count].name)
			ks->count++;
	}
	fclose(f);
	if (!ks->count) { /* hidden by kptr_restrict: every address reads as 0 */
		kernel_syms__free(ks);
		return NULL;
	}
	qsort(ks->syms, ks->count, sizeof(*ks->syms), by_addr);
	return ks;
}

const char *kernel_syms__find(const struct kernel_syms *ks, uint64_t addr)
{
	size_t lo = 0, hi = ks->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ks->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? ks->syms[lo - 1].name : NULL;
}
