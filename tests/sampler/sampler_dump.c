/* Prints the sampler's record stream, one line per record: a debugging aid for tests. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../sampler/sampler.h"

static const char *const kinds[] = { "sample", "offcpu", "fork", "exec", "comm", "exit", "mmap" };

int main(int argc, char **argv)
{
	struct sampler_opts opts = { .frequency_hz = 1000, .stack_bytes = 8192 };
	struct sampler *s;
	struct sampler_stats st;
	const struct sampler_rec *r;
	pid_t pid = 0;
	bool done = false;

	if (argc < 3) {
		fprintf(stderr, "usage: sampler_dump -p PID | -- CMD...\n");
		return 2;
	}
	if (!strcmp(argv[1], "-p")) {
		pid = atoi(argv[2]);
		s = sampler__attach(&opts, &pid, 1, &pid);
	} else {
		s = sampler__launch(&opts, argv + 2, NULL);
	}
	if (!s) {
		perror("sampler");
		return 1;
	}
	for (int i = 0; !done && i < 100; i++) {
		sampler__poll(s, 100);
		while ((r = sampler__next(s))) {
			printf("%llu %s pid=%u tid=%u cpu=%u%s", (unsigned long long)r->time_ns,
			       kinds[r->kind], r->pid, r->tid, r->cpu,
			       r->synthetic ? " synth" : "");
			if (r->kind == SREC_SAMPLE || r->kind == SREC_OFF_CPU)
				printf(" end=%llu wait=%d sw=%d sys=%lld valid=%d ip=%llx sp=%llx stack=%llu",
				       (unsigned long long)r->sample.end_ns, r->sample.wait,
				       r->sample.stack_at_switch, (long long)r->sample.syscall,
				       r->sample.stack.valid,
				       (unsigned long long)r->sample.stack.regs[SREG_IP],
				       (unsigned long long)r->sample.stack.regs[SREG_SP],
				       (unsigned long long)r->sample.stack.size);
			else if (r->kind == SREC_FORK)
				printf(" ppid=%u ptid=%u", r->fork.ppid, r->fork.ptid);
			else if (r->kind == SREC_COMM || r->kind == SREC_EXEC)
				printf(" comm=%s", r->comm.comm);
			else if (r->kind == SREC_MMAP)
				printf(" %llx+%llx %s bid=%u", (unsigned long long)r->mmap.start,
				       (unsigned long long)r->mmap.len, r->mmap.path,
				       r->mmap.build_id_size);
			else if (r->kind == SREC_EXIT)
				printf(" last=%d", r->exit.last_in_process);
			printf("\n");
		}
		done = sampler__done(s);
	}
	sampler__stop(s);
	while ((r = sampler__next(s)))
		printf("%llu %s pid=%u tid=%u (after stop)\n", (unsigned long long)r->time_ns,
		       kinds[r->kind], r->pid, r->tid);
	sampler__stats(s, &st);
	fprintf(stderr, "samples=%llu offcpu=%llu lost=%llu/%llu unpaired=%llu fds=%u\n",
		(unsigned long long)st.samples, (unsigned long long)st.off_cpu_spans,
		(unsigned long long)st.lost_records, (unsigned long long)st.lost_samples,
		(unsigned long long)st.unpaired_switches, st.events_open);
	sampler__free(s);
	return 0;
}
