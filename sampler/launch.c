/* Launching: fork, drop to the invoking user, wait for the go, exec. */
#include "launch.h"

#include "../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Resolves @cmd like execvp would: 0 if some candidate is executable, else -errno. */
static int check_command(const char *cmd)
{
	const char *path = getenv("PATH");
	char candidate[PATH_MAX];
	int err = -ENOENT;

	if (strchr(cmd, '/')) {
		if (!access(cmd, X_OK))
			return 0;
		return errno == ENOENT || errno == ENOTDIR ? -ENOENT : -ENOEXEC;
	}
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t len = strcspn(path, ":");
		struct stat st;

		snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len, len ? path : ".", cmd);
		if (!stat(candidate, &st) && S_ISREG(st.st_mode)) {
			if (!access(candidate, X_OK))
				return 0;
			err = -ENOEXEC;
		}
		path += len;
		if (*path == ':')
			path++;
	}
	return err;
}

static void drop_privileges(const struct sampler_creds *creds, int status_fd)
{
	int err = 0;

	if (creds->user && initgroups(creds->user, creds->gid))
		err = errno;
	else if (!creds->user && setgroups(0, NULL))
		err = errno;
	else if (setgid(creds->gid) || setuid(creds->uid))
		err = errno;
	if (err) {
		if (write(status_fd, &err, sizeof(err)) < 0)
			_exit(126);
		_exit(126);
	}
}

int launch_hold(char *const argv[], const struct sampler_creds *creds, struct held_child *child)
{
	int release[2] = { -1, -1 }, status[2] = { -1, -1 };
	int err;
	pid_t pid;

	err = check_command(argv[0]);
	if (err)
		return err;
	if (pipe2(release, O_CLOEXEC) || pipe2(status, O_CLOEXEC)) {
		err = -errno;
		goto out_close;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		goto out_close;
	}
	if (pid == 0) {
		char go;

		close(release[1]);
		close(status[0]);
		if (creds)
			drop_privileges(creds, status[1]);
		/* Blocks until every event is armed; EOF without a byte means "give up". */
		if (read(release[0], &go, 1) != 1)
			_exit(127);
		execvp(argv[0], argv);
		err = errno;
		if (write(status[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(release[0]);
	close(status[1]);
	child->pid = pid;
	child->release_fd = release[1];
	child->status_fd = status[0];
	return 0;

out_close:
	for (int i = 0; i < 2; i++) {
		if (release[i] >= 0)
			close(release[i]);
		if (status[i] >= 0)
			close(status[i]);
	}
	return err;
}

int launch_release(struct held_child *child)
{
	int child_errno = 0;
	ssize_t n;

	if (write(child->release_fd, "g", 1) != 1) {
		launch_abort(child);
		return -EIO;
	}
	close(child->release_fd);
	child->release_fd = -1;
	do {
		n = read(child->status_fd, &child_errno, sizeof(child_errno));
	} while (n < 0 && errno == EINTR);
	close(child->status_fd);
	child->status_fd = -1;
	if (n == 0)
		return 0;
	waitpid(child->pid, NULL, 0);
	if (n == sizeof(child_errno) && child_errno)
		pr_err("exec failed: %s", strerror(child_errno));
	return -ENOEXEC;
}

void launch_abort(struct held_child *child)
{
	if (child->release_fd >= 0)
		close(child->release_fd); /* the child reads EOF and exits */
	if (child->status_fd >= 0)
		close(child->status_fd);
	child->release_fd = child->status_fd = -1;
	waitpid(child->pid, NULL, 0);
}
