/* The Perfetto writer's CPU % counter track per process, from the on-CPU samples. */
#include <errno.h>

#include "perfetto.h"

/* A counter event of the process's CPU use in the bucket that starts at @bucket. */
static void write_cpu(struct trace *trace, struct pf_track *proc, uint64_t bucket, double pct)
{
	struct pb_buf *p = pf_packet_begin(
		trace->pftrace,
		trace_to_us(trace, trace->opts.origin_ns + bucket * PF_COUNTER_BUCKET_NS));
	size_t m = pb_begin(p, PKT_TRACK_EVENT);

	pb_uint(p, TE_TYPE, TYPE_COUNTER);
	pb_uint(p, TE_TRACK_UUID, proc->counter_uuid);
	pb_double(p, TE_DOUBLE_COUNTER_VALUE, pct);
	pb_end(p, m);
	pf_packet_end(trace);
}

/* The process's "CPU %" counter track, under its process track. */
static void describe_counter(struct trace *trace, struct pf_track *proc)
{
	struct pb_buf *p = pf_packet_begin(trace->pftrace, 0);
	size_t m = pb_begin(p, PKT_TRACK_DESCRIPTOR), c;

	proc->counter_uuid = trace->pftrace->next_uuid++;
	pb_uint(p, TD_UUID, proc->counter_uuid);
	pb_uint(p, TD_PARENT_UUID, proc->uuid);
	pb_string(p, TD_NAME, "CPU %");
	c = pb_begin(p, TD_COUNTER);
	pb_string(p, COUNTER_UNIT_NAME, "%");
	pb_end(p, c);
	pb_end(p, m);
	pf_packet_end(trace);
}

/* Ends the process's current bucket: its CPU use, and 0 at the next when it stays idle. */
void pf_end_bucket(struct trace *trace, struct pf_track *proc, uint64_t next)
{
	double period = (double)trace->opts.period_ns;

	write_cpu(trace, proc, proc->bucket,
		  100.0 * proc->bucket_samples * period / (double)PF_COUNTER_BUCKET_NS);
	if (next > proc->bucket + 1)
		write_cpu(trace, proc, proc->bucket + 1, 0);
}

/*
 * Counts an on-CPU sample into its process's CPU counter: each covers one period. A
 * sample older than the current bucket (threads interleave) counts in the current one.
 */
int pftrace__observe(struct trace *trace, const struct trace_obs *obs)
{
	struct pf_track *proc;
	uint64_t bucket;

	if (obs->kind != TRACE_ON_CPU)
		return 0;
	proc = pf_find_track(trace->pftrace, obs->pid, 0);
	if (!proc || !pf_thread_track(trace, obs->pid, obs->tid))
		return -ENOMEM;
	bucket = obs->t_start_ns > trace->opts.origin_ns
			 ? (obs->t_start_ns - trace->opts.origin_ns) / PF_COUNTER_BUCKET_NS
			 : 0;
	if (!proc->counter_uuid)
		describe_counter(trace, proc);
	if (!proc->counting) {
		proc->counting = true;
		proc->bucket = bucket;
	} else if (bucket > proc->bucket) {
		pf_end_bucket(trace, proc, bucket);
		proc->bucket = bucket;
		proc->bucket_samples = 0;
	}
	proc->bucket_samples++;
	return 0;
}
