/* Internal to sampler/: starting a command held before exec until events are armed. */
#ifndef PYTRACE_SAMPLER_LAUNCH_H
#define PYTRACE_SAMPLER_LAUNCH_H

#include <sys/types.h>

#include "sampler.h"

struct held_child {
	pid_t pid;
	int release_fd; /* closing or writing lets the child exec */
	int status_fd;	/* gets the exec errno, or EOF when exec succeeded */
};

/*
 * Forks a child that switches to @creds (when not NULL) and blocks before exec'ing
 * @argv. -ENOENT when argv[0] can't be found, -ENOEXEC when it can't be run (checked
 * before forking), or when the child could not switch to @creds (its errno is logged).
 */
int launch_hold(char *const argv[], const struct sampler_creds *creds, struct held_child *child);

/*
 * Lets the child exec. 0 once it runs the command, or -ENOEXEC when exec failed (reaped).
 * -EINTR, with the child gone and the command never run, when SIGINT, SIGTERM or SIGHUP
 * is pending: a caller that blocks them while launching gives up on a stop request.
 * The command starts with them unblocked and SIGPIPE at its default.
 */
int launch_release(struct held_child *child);

/* Kills and reaps a held child that will never be released. */
void launch_abort(struct held_child *child);

#endif
