/*
 * Writes a pseudo-random multi-process trace with the real trace stage, for the viewer
 * test. Every function is named for the depth it is called at ("d3_f1"), every thread
 * "worker-<tid>", every process "proc-<pid>", so a viewer's tree can be checked against
 * the names alone.  usage: gen_trace OUTPUT SEED [flat]  (flat: as with --flat)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../trace/trace.h"

#define MAX_DEPTH 12
#define PERIOD 1000000ULL

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

static uint32_t frame_id(struct frame_table *frames, uint32_t depth, uint32_t n, bool wait)
{
	char name[32];

	snprintf(name, sizeof(name), wait ? "d%u_wait%u" : "d%u_f%u", depth, n);
	return frame_table__intern(
		frames,
		&(struct frame_info){ name, "gen.py", 1, wait ? FRAME_OFF_CPU : FRAME_PYTHON });
}

static int run_thread(struct trace *trace, struct frame_table *frames, uint32_t pid, uint32_t tid)
{
	struct trace_frame stack[MAX_DEPTH + 1];
	uint32_t depth = 0, i, k;
	uint64_t t = 1000000000ULL + rnd(5000) * 1000ULL + rnd(1000);

	for (k = 0; k < 400; k++) {
		uint32_t pop = depth ? rnd(depth + 1) : 0, push = rnd(4);
		struct trace_obs obs = { .pid = pid, .tid = tid, .t_start_ns = t, .frames = stack };

		depth -= pop;
		for (i = 0; i < push && depth < MAX_DEPTH; i++, depth++) {
			stack[depth].func = frame_id(frames, depth, rnd(3), false);
			stack[depth].callsite = rnd(2);
			stack[depth].args = 0;
			stack[depth].line = 1 + rnd(50);
		}
		obs.nframes = depth;
		if (rnd(6) == 0) {
			stack[depth] = (struct trace_frame){ frame_id(frames, depth, rnd(2), true),
							     0, 0, 0 };
			obs.nframes++;
			obs.kind = TRACE_OFF_CPU;
			obs.t_end_ns = t + 1 + rnd(5 * PERIOD);
			t = obs.t_end_ns;
		}
		if (trace__observe(trace, &obs))
			return -1;
		switch (rnd(10)) {
		case 0: /* the same instant */
			break;
		case 1: /* a gap */
			t += 3 * PERIOD + rnd(10 * PERIOD);
			break;
		default:
			t += PERIOD - 50000 + rnd(100000);
		}
	}
	return trace__end_thread(trace, pid, tid, t);
}

int main(int argc, char **argv)
{
	struct frame_table *frames = frame_table__new();
	struct trace_opts opts = { .period_ns = PERIOD, .origin_ns = 1000000000ULL };
	struct trace *trace;
	uint32_t p, th;
	char name[32];

	if (argc < 3 || argc > 4 || !frames) {
		fprintf(stderr, "usage: gen_trace OUTPUT SEED [flat]\n");
		return 2;
	}
	rng = strtoull(argv[2], NULL, 10) * 0x9e3779b97f4a7c15ULL + 1;
	opts.path = argv[1];
	opts.flat = argc == 4 && !strcmp(argv[3], "flat");
	opts.frames = frames;
	trace = trace__open(&opts);
	if (!trace) {
		perror(argv[1]);
		return 1;
	}
	for (p = 0; p < 3; p++) {
		uint32_t pid = 1000 + p * 10;

		snprintf(name, sizeof(name), "proc-%u", pid);
		trace__name_process(trace, pid, name);
		for (th = 0; th < 2; th++) {
			snprintf(name, sizeof(name), "worker-%u", pid + th);
			trace__name_thread(trace, pid, pid + th, name);
			if (run_thread(trace, frames, pid, pid + th))
				return 1;
		}
	}
	if (trace__close(trace, NULL))
		return 1;
	frame_table__free(frames);
	return 0;
}
