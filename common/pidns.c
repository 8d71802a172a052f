/* Processes in another pid namespace: read from /proc, which numbers them as we do. */
#include "pidns.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/*
 * The last id of the NSpid line of a /proc status file: the innermost namespace's (the
 * first is ours). 0 when there is none.
 */
static uint32_t innermost_id(const char *status_path)
{
	char line[256];
	uint32_t id = 0;
	FILE *f = fopen(status_path, "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *p = line + 6, *end;

		if (strncmp(line, "NSpid:", 6))
			continue;
		for (;;) {
			unsigned long v = strtoul(p, &end, 10);

			if (end == p)
				break;
			if (v > 0 && v <= UINT32_MAX)
				id = (uint32_t)v;
			p = end;
		}
		break;
	}
	fclose(f);
	return id;
}

int pidns_probe(pid_t pid, struct pidns_id *ns, pid_t *inner)
{
	struct stat ours, theirs;
	char path[64];
	uint32_t id;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat(path, &theirs))
		return -errno;
	if (stat("/proc/self/ns/pid", &ours))
		return -errno;
	if (ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	id = innermost_id(path);
	if (!id)
		return -ESRCH;
	ns->dev = (uint64_t)theirs.st_dev;
	ns->ino = (uint64_t)theirs.st_ino;
	*inner = (pid_t)id;
	return 1;
}

int pidns_map__refresh(struct pidns_map *m)
{
	struct pidns_pair *pairs;
	struct dirent *de;
	char path[64];
	uint32_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)m->pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	pairs = calloc(PIDNS_MAX_THREADS, sizeof(*pairs));
	if (!pairs) {
		closedir(dir);
		return -ENOMEM;
	}
	while (n < PIDNS_MAX_THREADS && (de = readdir(dir))) {
		char *end;
		unsigned long host = strtoul(de->d_name, &end, 10);
		uint32_t inner;

		if (*end || !host || host > UINT32_MAX)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%lu/status", (int)m->pid, host);
		inner = innermost_id(path);
		if (inner)
			pairs[n++] = (struct pidns_pair){ inner, (uint32_t)host };
	}
	closedir(dir);
	free(m->pairs);
	m->pairs = pairs;
	m->n = n;
	return 0;
}

uint32_t pidns_map__host(const struct pidns_map *m, uint32_t inner)
{
	uint32_t i;

	for (i = 0; i < m->n; i++) {
		if (m->pairs[i].inner == inner)
			return m->pairs[i].host;
	}
	return 0;
}

void pidns_map__clear(struct pidns_map *m)
{
	free(m->pairs);
	m->pairs = NULL;
	m->n = 0;
}
