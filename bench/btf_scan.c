/*
 * The eBPF reader's few kernel fields, found in the running kernel's BTF: our scanner
 * (sampler/kernel_layout.c, which indexes types only as far as a lookup needs) against
 * libbpf's btf__parse() of the whole file, the way any libbpf-based tool would start.
 * Prints CPU and wall time per call, min/median/max of N calls each, interleaved.
 *
 *     build/bench/btf_scan [N]     (default 21; BTF: /sys/kernel/btf/vmlinux)
 */
#include <bpf/btf.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../sampler/kernel_layout.h"

#define BTF_PATH "/sys/kernel/btf/vmlinux"

static double now(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void print(const char *what, double *v, int n)
{
	qsort(v, n, sizeof(*v), by_value);
	printf("%-34s min %8.3f ms  median %8.3f ms  max %8.3f ms\n", what, v[0] * 1e3,
	       v[n / 2] * 1e3, v[n - 1] * 1e3);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 21, i;
	double *ours_cpu = calloc(n, sizeof(double)), *ours_wall = calloc(n, sizeof(double));
	double *lib_cpu = calloc(n, sizeof(double)), *lib_wall = calloc(n, sizeof(double));

	if (n < 1 || !ours_cpu || !ours_wall || !lib_cpu || !lib_wall)
		return 2;
	for (i = 0; i < n; i++) {
		struct pytrace_kernel_offsets offsets;
		double c = now(CLOCK_PROCESS_CPUTIME_ID), w = now(CLOCK_MONOTONIC);
		struct btf *btf;

		if (kernel_layout__read(BTF_PATH, &offsets)) {
			fprintf(stderr, "btf_scan: %s: not read by our scanner\n", BTF_PATH);
			return 1;
		}
		ours_cpu[i] = now(CLOCK_PROCESS_CPUTIME_ID) - c;
		ours_wall[i] = now(CLOCK_MONOTONIC) - w;
		c = now(CLOCK_PROCESS_CPUTIME_ID);
		w = now(CLOCK_MONOTONIC);
		btf = btf__parse(BTF_PATH, NULL);
		if (!btf) {
			fprintf(stderr, "btf_scan: %s: not parsed by libbpf\n", BTF_PATH);
			return 1;
		}
		lib_cpu[i] = now(CLOCK_PROCESS_CPUTIME_ID) - c;
		lib_wall[i] = now(CLOCK_MONOTONIC) - w;
		btf__free(btf);
	}
	printf("%d calls each, interleaved, %s\n", n, BTF_PATH);
	print("kernel_layout__read, CPU", ours_cpu, n);
	print("kernel_layout__read, wall", ours_wall, n);
	print("libbpf btf__parse, CPU", lib_cpu, n);
	print("libbpf btf__parse, wall", lib_wall, n);
	return 0;
}
