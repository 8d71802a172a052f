/* /proc readers used when attaching; everything here is best effort and bounded. */
#include "procfs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/pidns.h"

int procfs_read(const char *path, char *buf, size_t size)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return (int)n;
}

pid_t procfs_ppid(pid_t pid)
{
	char path[64], buf[512], *p;
	int ppid, n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	n = procfs_read(path, buf, sizeof(buf));
	if (n < 0)
		return n;
	/* comm may hold spaces and parentheses: parse after the last ')'. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -EINVAL;
	return ppid;
}

char procfs_task_state(pid_t pid, pid_t tid)
{
	char path[64], buf[512], *p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tid);
	if (procfs_read(path, buf, sizeof(buf)) < 0)
		return 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

int procfs_task_syscall(pid_t pid, pid_t tid, int64_t *nr, uint64_t *arg, uint64_t *sp,
			uint64_t *pc)
{
	char path[64], buf[256];
	long long number;
	unsigned long long a[6], s, p;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (procfs_read(path, buf, sizeof(buf)) < 0)
		return -errno;
	/* "nr a0 a1 a2 a3 a4 a5 sp pc"; "running" or "-1 sp pc" when not in a syscall. */
	if (sscanf(buf, "%lld %llx %llx %llx %llx %llx %llx %llx %llx", &number, &a[0], &a[1],
		   &a[2], &a[3], &a[4], &a[5], &s, &p) != 9)
		return -EAGAIN;
	*nr = number;
	*arg = a[0];
	*sp = s;
	*pc = p;
	return 0;
}

int procfs_cmdline(pid_t pid, char *buf, size_t size)
{
	char path[64], inner_pid[48] = "";
	struct pidns_id ns;
	ssize_t n, i;
	size_t room;
	pid_t inner;
	int fd;

	if (size < 2)
		return -EINVAL;
	/* In a container: its own pid too, to match it with `docker top` or ps inside. */
	if (pidns_probe(pid, &ns, &inner) == 1)
		snprintf(inner_pid, sizeof(inner_pid), " (pid %d in its namespace)", (int)inner);
	room = size - 1 > strlen(inner_pid) ? size - 1 - strlen(inner_pid) : 1;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, room);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -ENOENT;
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (i = 0; i < n; i++) {
		if (buf[i] == '\0')
			buf[i] = ' ';
	}
	buf[n] = '\0';
	if (n)
		snprintf(buf + n, size - (size_t)n, "%s", inner_pid);
	return n ? 0 : -ENOENT;
}

/* Whether /proc/PID/comm reads @comm (as the kernel cuts it: 15 bytes at most). */
static bool comm_is(pid_t pid, const char *comm)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (procfs_read(path, buf, sizeof(buf)) < 0)
		return false;
	buf[strcspn(buf, "\n")] = '\0';
	return !strncmp(buf, comm, 15);
}

int procfs_cmdline_of(pid_t pid, const char *comm, char *buf, size_t size)
{
	int err;

	if (!comm_is(pid, comm))
		return -ESTALE;
	err = procfs_cmdline(pid, buf, size);
	if (!err && !comm_is(pid, comm))
		return -ESTALE;
	return err;
}

static bool is_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s))
			return false;
	}
	return true;
}

/* Numeric entries of a /proc folder. */
static int list_numeric(const char *dir_path, pid_t **out, size_t *count)
{
	DIR *dir = opendir(dir_path);
	struct dirent *de;
	pid_t *ids = NULL;
	size_t n = 0, cap = 0;

	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((de = readdir(dir))) {
		if (!is_number(de->d_name))
			continue;
		if (n == cap) {
			pid_t *grown;

			cap = cap ? cap * 2 : 64;
			grown = realloc(ids, cap * sizeof(*ids));
			if (!grown) {
				free(ids);
				closedir(dir);
				return -ENOMEM;
			}
			ids = grown;
		}
		ids[n++] = (pid_t)atoi(de->d_name);
	}
	closedir(dir);
	*out = ids;
	*count = n;
	return 0;
}

int procfs_tasks(pid_t pid, pid_t **tids, size_t *count)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	return list_numeric(path, tids, count);
}

int procfs_descendants(pid_t root, pid_t **pids, size_t *count)
{
	pid_t *all = NULL, *out = *pids;
	size_t nall = 0, n = *count, first = *count, i, j;
	pid_t *parents = NULL;
	int err;

	err = list_numeric("/proc", &all, &nall);
	if (err)
		return err;
	parents = calloc(nall ? nall : 1, sizeof(*parents));
	out = realloc(out, (n + nall + 1) * sizeof(*out));
	if (!parents || !out) {
		free(all);
		free(parents);
		if (out)
			*pids = out;
		return -ENOMEM;
	}
	for (i = 0; i < nall; i++)
		parents[i] = procfs_ppid(all[i]);
	out[n++] = root;
	/* Breadth first over the snapshot; each pid is added once, so this ends. */
	for (i = first; i < n; i++) {
		for (j = 0; j < nall; j++) {
			if (parents[j] == out[i] && all[j] != root) {
				out[n++] = all[j];
				parents[j] = -1;
			}
		}
	}
	free(all);
	free(parents);
	*pids = out;
	*count = n;
	return 0;
}

int procfs_exec_maps(pid_t pid, struct procfs_map **maps, size_t *count)
{
	char path[64], line[4096];
	struct procfs_map *out = NULL;
	size_t n = 0, cap = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, off;
		char perms[8];
		int name_at = 0;
		char *name;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &off,
			   &name_at) < 4 ||
		    !name_at)
			continue;
		name = line + name_at;
		name[strcspn(name, "\n")] = '\0';
		if (perms[2] != 'x' || (name[0] != '/' && strcmp(name, "[vdso]")))
			continue;
		if (n == cap) {
			struct procfs_map *grown;

			cap = cap ? cap * 2 : 32;
			grown = realloc(out, cap * sizeof(*out));
			if (!grown)
				break;
			out = grown;
		}
		out[n].start = start;
		out[n].end = end;
		out[n].pgoff = off;
		out[n].path = strdup(name);
		if (out[n].path)
			n++;
	}
	fclose(f);
	*maps = out;
	*count = n;
	return 0;
}

void procfs_maps_free(struct procfs_map *maps, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		free(maps[i].path);
	free(maps);
}
