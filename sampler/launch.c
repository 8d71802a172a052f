/* Launching: fork, drop to the invoking user, wait for the go, exec. */
#include "launch.h"

#include "../common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
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

/* What the held child reports on the status pipe: how far it got, and errno. */
enum launch_stage {
	LAUNCH_READY, /* switched to the user; waiting for the go */
	LAUNCH_INITGROUPS,
	LAUNCH_SETGROUPS,
	LAUNCH_SETGID,
	LAUNCH_SETUID,
	LAUNCH_EXEC,
};

struct launch_report {
	int stage;
	int err;
};

static const char *const stage_names[] = {
	[LAUNCH_READY] = "ready",	  [LAUNCH_INITGROUPS] = "initgroups",
	[LAUNCH_SETGROUPS] = "setgroups", [LAUNCH_SETGID] = "setgid",
	[LAUNCH_SETUID] = "setuid",	  [LAUNCH_EXEC] = "exec",
};

/* In the child: tells the parent, then exits when @stage is a failure. */
static void report(int status_fd, enum launch_stage stage, int err)
{
	struct launch_report r = { stage, err };
	ssize_t n = write(status_fd, &r, sizeof(r));

	(void)n; /* unsent, the parent reads EOF: a failure too */
	if (stage != LAUNCH_READY)
		_exit(stage == LAUNCH_EXEC ? 127 : 126);
}

static void drop_privileges(const struct sampler_creds *creds, int status_fd)
{
	if (creds->user && initgroups(creds->user, creds->gid))
		report(status_fd, LAUNCH_INITGROUPS, errno);
	if (!creds->user && setgroups(0, NULL))
		report(status_fd, LAUNCH_SETGROUPS, errno);
	if (setgid(creds->gid))
		report(status_fd, LAUNCH_SETGID, errno);
	if (setuid(creds->uid))
		report(status_fd, LAUNCH_SETUID, errno);
}

/* In the child, just before exec: the signal state the command should start with. */
static void restore_signals(void)
{
	sigset_t stops;

	/* Ignored signals stay ignored across exec: we ignore SIGPIPE, the command must not. */
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&stops);
	sigaddset(&stops, SIGINT);
	sigaddset(&stops, SIGTERM);
	sigaddset(&stops, SIGHUP);
	sigprocmask(SIG_UNBLOCK, &stops, NULL);
}

/* Reads one report from the child; 0 at EOF (exec'd, or gone without a word). */
static ssize_t read_report(int fd, struct launch_report *r)
{
	ssize_t n;

	do {
		n = read(fd, r, sizeof(*r));
	} while (n < 0 && errno == EINTR);
	if (n > 0 && (n != sizeof(*r) || r->stage < LAUNCH_READY || r->stage > LAUNCH_EXEC))
		return -1;
	return n;
}

int sampler_as_user(const struct sampler_creds *creds, int (*check)(void *arg), void *arg,
		    const char **failed)
{
	struct launch_report r;
	int fds[2], status, err;
	ssize_t n;
	pid_t pid;

	*failed = NULL;
	if (pipe2(fds, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		drop_privileges(creds, fds[1]); /* exits, reporting, when it can't */
		_exit(check(arg) ? 1 : 0);
	}
	err = pid < 0 ? -errno : 0;
	close(fds[1]);
	n = pid < 0 ? 0 : read_report(fds[0], &r);
	close(fds[0]);
	if (err)
		return err;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -ECHILD;
	if (n == sizeof(r)) {
		*failed = stage_names[r.stage];
		return -r.err;
	}
	return WEXITSTATUS(status) ? 1 : 0;
}

/* The child failed to become the invoking user: say why with its own errno. */
static int creds_failed(const struct held_child *child, const struct sampler_creds *creds,
			ssize_t n, const struct launch_report *r)
{
	if (n == sizeof(*r))
		pr_err("cannot start the command as uid %d, gid %d: %s failed: %s", (int)creds->uid,
		       (int)creds->gid, stage_names[r->stage], strerror(r->err));
	else
		pr_err("cannot start the command as uid %d, gid %d: the child exited",
		       (int)creds->uid, (int)creds->gid);
	waitpid(child->pid, NULL, 0);
	return -ENOEXEC;
}

int launch_hold(char *const argv[], const struct sampler_creds *creds, struct held_child *child)
{
	int release[2] = { -1, -1 }, status[2] = { -1, -1 };
	struct launch_report r;
	ssize_t n;
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
		report(status[1], LAUNCH_READY, 0);
		/* Blocks until every event is armed; EOF without a byte means "give up". */
		if (read(release[0], &go, 1) != 1)
			_exit(127);
		restore_signals();
		execvp(argv[0], argv);
		report(status[1], LAUNCH_EXEC, errno);
	}
	close(release[0]);
	close(status[1]);
	release[0] = status[1] = -1;
	child->pid = pid;
	/* Its first report: switched to the user, or why not (before any event is opened). */
	n = read_report(status[0], &r);
	if (n != sizeof(r) || r.stage != LAUNCH_READY) {
		err = creds ? creds_failed(child, creds, n, &r) : -ECHILD;
		if (!creds)
			waitpid(pid, NULL, 0);
		goto out_close;
	}
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

/* True when a stop signal (blocked by the caller while launching) is pending. */
static bool stop_pending(void)
{
	sigset_t pending;

	if (sigpending(&pending))
		return false;
	return sigismember(&pending, SIGINT) || sigismember(&pending, SIGTERM) ||
	       sigismember(&pending, SIGHUP);
}

int launch_release(struct held_child *child)
{
	struct launch_report r = { LAUNCH_READY, 0 };
	ssize_t n;

	if (stop_pending()) {
		launch_abort(child);
		return -EINTR;
	}
	if (write(child->release_fd, "g", 1) != 1) {
		launch_abort(child);
		return -EIO;
	}
	close(child->release_fd);
	child->release_fd = -1;
	n = read_report(child->status_fd, &r);
	close(child->status_fd);
	child->status_fd = -1;
	if (n == 0)
		return 0;
	waitpid(child->pid, NULL, 0);
	if (n == sizeof(r) && r.err)
		pr_err("exec failed: %s", strerror(r.err));
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
