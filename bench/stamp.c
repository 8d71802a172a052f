/*
 * The command for the start-up benchmark: prints CLOCK_MONOTONIC in ns when its main()
 * starts and again when it is about to exit (after sleeping the optional argument's
 * milliseconds), so the launcher can tell how late it started and how long the
 * profiler took after it ended; and its parent's CPU time so far (a profiler that
 * launched it: what it spent before the command started).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The CPU time of @pid's main thread in ns (the first of /proc/PID/schedstat), or -1. */
static long long cpu_ns(pid_t pid)
{
	char path[64];
	long long ns = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	if (fscanf(f, "%lld", &ns) != 1)
		ns = -1;
	fclose(f);
	return ns;
}

int main(int argc, char **argv)
{
	long long start = now_ns(), parent_cpu = cpu_ns(getppid());
	long ms = argc > 1 ? atol(argv[1]) : 0;
	struct timespec pause = { ms / 1000, ms % 1000 * 1000000L };

	if (ms > 0)
		nanosleep(&pause, NULL);
	printf("start_ns %lld end_ns %lld parent_cpu_ns %lld\n", start, now_ns(), parent_cpu);
	return 0;
}
