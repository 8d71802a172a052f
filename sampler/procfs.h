/* Internal to sampler/: what /proc says about processes (attach-time snapshots only). */
#ifndef PYTRACE_SAMPLER_PROCFS_H
#define PYTRACE_SAMPLER_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Appends to *@pids (realloc'd, caller frees) every descendant of @root, root first. */
int procfs_descendants(pid_t root, pid_t **pids, size_t *count);

/* The thread ids of @pid. Caller frees. -ESRCH when the process is gone. */
int procfs_tasks(pid_t pid, pid_t **tids, size_t *count);

/* Parent pid from /proc/PID/stat, or -errno. */
pid_t procfs_ppid(pid_t pid);

/* State letter of a thread ('R', 'S', 'D' ...), or 0 when unreadable. */
char procfs_task_state(pid_t pid, pid_t tid);

/*
 * A thread's syscall from /proc/PID/task/TID/syscall: number, first argument, sp, pc.
 * -errno when not in one.
 */
int procfs_task_syscall(pid_t pid, pid_t tid, int64_t *nr, uint64_t *arg, uint64_t *sp,
			uint64_t *pc);

/* Reads a file of /proc into @buf (NUL-terminated), trailing newline removed. */
int procfs_read(const char *path, char *buf, size_t size);

/*
 * The command line of @pid with NULs as spaces, followed by " (pid N in its namespace)"
 * for a process in another pid namespace; -errno when unreadable or empty.
 */
int procfs_cmdline(pid_t pid, char *buf, size_t size);

/*
 * The command line of @pid if it still runs the program whose comm is @comm (read
 * before and after, so an exec in between is caught); -ESTALE when it has moved on.
 */
int procfs_cmdline_of(pid_t pid, const char *comm, char *buf, size_t size);

struct procfs_map {
	uint64_t start, end, pgoff;
	char *path;
};

/* The file-backed executable mappings of @pid. Caller frees with procfs_maps_free(). */
int procfs_exec_maps(pid_t pid, struct procfs_map **maps, size_t *count);
void procfs_maps_free(struct procfs_map *maps, size_t count);

#endif
