/* Processes in another pid namespace (a container): their own ids and ours. */
#ifndef PYTRACE_COMMON_PIDNS_H
#define PYTRACE_COMMON_PIDNS_H

#include <stdint.h>
#include <sys/types.h>

/* A pid namespace as the kernel names it: stat() of /proc/PID/ns/pid. */
struct pidns_id {
	uint64_t dev, ino;
};

/*
 * Whether process @pid lives in a pid namespace other than ours: 1 (then @ns names it
 * and *@inner is @pid's id in it, as its own getpid() says), 0 (ours; @ns and @inner
 * untouched), or -errno (it is gone, or /proc says nothing).
 */
int pidns_probe(pid_t pid, struct pidns_id *ns, pid_t *inner);

/* Thread ids of one process as its namespace numbers them, and as we do. */
struct pidns_map {
	pid_t pid;
	uint32_t n;
	struct pidns_pair {
		uint32_t inner, host;
	} * pairs;
};

/*
 * Re-reads @m's pairs from /proc/PID/task/ * /status (at most PIDNS_MAX_THREADS of them).
 * 0 or -errno (the old pairs are kept then).
 */
#define PIDNS_MAX_THREADS 4096
int pidns_map__refresh(struct pidns_map *m);
/* Our id of the thread its namespace calls @inner; 0 when not known. */
uint32_t pidns_map__host(const struct pidns_map *m, uint32_t inner);
void pidns_map__clear(struct pidns_map *m);

#endif
