/*
 * A CPU-bound workload for the overhead benchmark: a fixed amount of work split between
 * three functions (1:2:3), single-threaded, -O2 without frame pointers. Prints its own
 * wall and CPU time in ns, so the profiler's cost can be told apart from the work's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))

static volatile unsigned long sink;

NOINLINE static unsigned long mix(unsigned long x, long n)
{
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

NOINLINE void work_a(long n)
{
	sink = mix(sink, n);
}

NOINLINE void work_b(long n)
{
	sink = mix(sink, 2 * n);
}

NOINLINE void work_c(long n)
{
	sink = mix(sink, 3 * n);
}

static unsigned long long ns(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 2000;
	unsigned long long wall = ns(CLOCK_MONOTONIC), cpu = ns(CLOCK_PROCESS_CPUTIME_ID);

	for (long r = 0; r < rounds; r++) {
		work_a(100000);
		work_b(100000);
		work_c(100000);
	}
	printf("wall_ns %llu cpu_ns %llu\n", ns(CLOCK_MONOTONIC) - wall,
	       ns(CLOCK_PROCESS_CPUTIME_ID) - cpu);
	return 0;
}
