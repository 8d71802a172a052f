/* Opening the files a target maps, as the target sees them, safely as root. */
#include "target_file.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * Never blocks on a FIFO or a device (O_NONBLOCK), never becomes our controlling
 * terminal, never follows a magic link (/proc/self/fd/...) a target planted.
 */
#define OPEN_FLAGS (O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)

static int open_in_root(int root, const char *path)
{
	struct open_how how = {
		.flags = OPEN_FLAGS,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, root, path, &how, sizeof(how));

	return fd < 0 ? -errno : (int)fd;
}

static _Atomic unsigned long long refused;

unsigned long long target_files_refused(void)
{
	return refused;
}

/* Keeps @fd when it is a regular file; else closes it, and counts it. */
static int regular_only(int fd)
{
	struct stat st;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		refused++;
		return -ENOEXEC;
	}
	return fd;
}

int target_file_open(pid_t pid, const char *path)
{
	char root_path[32];
	int root, fd;

	if (!path || path[0] != '/')
		return -EINVAL;
	if (pid > 0) {
		snprintf(root_path, sizeof(root_path), "/proc/%d/root", (int)pid);
		root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (root >= 0) {
			fd = open_in_root(root, path + 1);
			close(root);
			/*
			 * /proc/PID/maps writes paths as we see them when we can (a chroot
			 * under our root), as the target does otherwise (its own mount
			 * namespace): a path its root lacks is tried as ours.
			 */
			if (fd != -ENOSYS && fd != -ENOENT)
				return regular_only(fd);
		}
	}
	fd = open(path, OPEN_FLAGS);
	return regular_only(fd < 0 ? -errno : fd);
}
