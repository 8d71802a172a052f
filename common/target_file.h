/* Opening the files a target maps, as the target sees them, safely as root. */
#ifndef PYTRACE_COMMON_TARGET_FILE_H
#define PYTRACE_COMMON_TARGET_FILE_H

#include <sys/types.h>

/*
 * Opens @path (absolute, as written in /proc/PID/maps or an mmap record) read-only as
 * process @pid sees it: through its root (/proc/PID/root, symlinks resolved inside it),
 * so that a process in a container, in its own mount namespace or chroot, gets its own
 * files and not the host's. A target names these paths, so the open can't block (a
 * FIFO, a device) and gives only a regular file. When @pid is 0, its root can't be
 * opened (it is gone) or holds no @path (/proc/PID/maps names the files of a chroot
 * below ours by our paths), @path is opened as this process sees it, with the same
 * checks: callers that can check the file is the one mapped (a build id, an inode) do.
 * Returns a file descriptor (caller closes) or -errno: -EINVAL for a path that is not
 * absolute, -ENOEXEC for what is not a regular file.
 */
int target_file_open(pid_t pid, const char *path);

/* How many opens found no regular file (a FIFO, a device, a folder), over the run. */
unsigned long long target_files_refused(void);

#endif
