/* The analysis's results: for a terminal (escaped) and as one JSON object for scripts. */
#include <inttypes.h>
#include <string.h>

#include "../common/term.h"
#include "../trace/json.h"
#include "internal.h"

/* Why a pool's findings can be missing: said, not left out silently. */
#define UNDECIDED                                                                                  \
	"imbalance, task-overhead and worker-startup not decided: pool workers ran, but the "      \
	"trace has no task markers (they are read by the eBPF backend, as root)"

int analysis__finish(struct analysis *a)
{
	int err;

	if (a->finished)
		return 0;
	err = an_find_pools(a);
	if (!err)
		err = an_find_causes(a);
	a->finished = !err;
	return err;
}

size_t analysis__findings(const struct analysis *a, const struct finding **findings)
{
	*findings = a->findings;
	return a->nfindings;
}

size_t analysis__npools(const struct analysis *a)
{
	return a->npools;
}

const struct pool_view *analysis__pool(const struct analysis *a, size_t i)
{
	return i < a->npools ? &a->pools[i].view : NULL;
}

/* A pool's kind, for people or (@json) for scripts. */
static const char *pool_kind(const struct pool_view *v, bool json)
{
	if (v->threads)
		return json ? "thread_executor" : "thread pool";
	return v->executor ? "executor" : "pool";
}

void analysis__print(const struct analysis *a, FILE *f, size_t max)
{
	size_t i;

	if (!a->nfindings) {
		fprintf(f, "findings: none above %.0f%% of the work threads' time\n",
			FINDING_MIN_SHARE * 100);
	} else {
		fprintf(f, "findings (share of the work threads' time):\n");
	}
	for (i = 0; i < a->nfindings && i < max; i++) {
		const struct finding *x = &a->findings[i];
		char where[TERM_ESCAPED(FINDING_TEXT)];

		/* Titles, evidence and hints are ours; the where holds the target's names. */
		fprintf(f, "%2zu. %3.0f%%  %s: %s\n      %s\n      where: %s\n      try: %s\n",
			i + 1, x->share * 100, finding_kind__name(x->kind), x->title, x->evidence,
			term_escape(where, sizeof(where), x->where, FINDING_TEXT), x->hint);
	}
	for (i = 0; i < a->npools; i++) {
		const struct pool_view *v = &a->pools[i].view;
		char b1[32], b2[32], b3[32], b4[32];

		fprintf(f,
			"%s of process %" PRIu32 ": %" PRIu32 " tasks on %" PRIu32
			" workers; task run p50 %s, p90 %s, max %s; %s%s\n",
			pool_kind(v, false), v->pid, v->tasks, v->nworkers,
			an_fmt_ns(b1, sizeof(b1), v->run.p50),
			an_fmt_ns(b2, sizeof(b2), v->run.p90),
			an_fmt_ns(b3, sizeof(b3), v->run.max),
			/* A thread pool's queue is in memory: no marker says when a task went in. */
			v->threads ? "queue delay not seen" : "queue delay p50 ",
			v->threads ? "" : an_fmt_ns(b4, sizeof(b4), v->queue.p50));
	}
	if (!a->npools && a->pool_loops)
		fprintf(f, "findings: %s\n", UNDECIDED);
	if (a->dropped)
		fprintf(f, "findings: a table was full; the figures are of what fit\n");
}

static void put_file(void *ctx, const char *buf, size_t n)
{
	fwrite(buf, 1, n, ctx);
}

static void put_spread(FILE *f, const char *name, const struct pool_spread *s)
{
	fprintf(f,
		"\"%s\": {\"p50_ns\": %" PRIu64 ", \"p90_ns\": %" PRIu64 ", \"max_ns\": %" PRIu64
		"}",
		name, s->p50, s->p90, s->max);
}

void analysis__print_json(const struct analysis *a, FILE *f)
{
	size_t i;
	uint32_t w;

	fprintf(f, "{\"findings\": [");
	for (i = 0; i < a->nfindings; i++) {
		const struct finding *x = &a->findings[i];

		fprintf(f,
			"%s{\"kind\": \"%s\", \"share\": %.4f, \"start_ns\": %" PRIu64
			", \"end_ns\": %" PRIu64 ", \"title\": ",
			i ? ", " : "", finding_kind__name(x->kind), x->share, x->start_ns,
			x->end_ns);
		json_escape(x->title, put_file, f);
		fprintf(f, ", \"evidence\": ");
		json_escape(x->evidence, put_file, f);
		fprintf(f, ", \"where\": ");
		json_escape(x->where, put_file, f);
		fprintf(f, ", \"hint\": ");
		json_escape(x->hint, put_file, f);
		fprintf(f, "}");
	}
	fprintf(f, "], \"pools\": [");
	for (i = 0; i < a->npools; i++) {
		const struct pool_view *v = &a->pools[i].view;

		fprintf(f,
			"%s{\"kind\": \"%s\", \"pid\": %" PRIu32 ", \"tasks\": %" PRIu32
			", \"done\": %" PRIu32 ", \"start_ns\": %" PRIu64 ", \"end_ns\": %" PRIu64
			", ",
			i ? ", " : "", pool_kind(v, true), v->pid, v->tasks, v->done,
			v->start_ns == UINT64_MAX ? 0 : v->start_ns, v->end_ns);
		put_spread(f, "run", &v->run);
		fprintf(f, ", ");
		put_spread(f, "queue", &v->queue);
		fprintf(f, ", ");
		put_spread(f, "result", &v->result);
		fprintf(f, ", \"workers_not_shown\": %" PRIu32 ", \"workers\": [",
			v->workers_not_shown);
		for (w = 0; w < v->nworkers; w++) {
			const struct pool_worker *k = &v->workers[w];

			fprintf(f,
				"%s{\"pid\": %" PRIu32 ", \"tid\": %" PRIu32 ", \"tasks\": %" PRIu32
				", \"busy_ns\": %" PRIu64 ", \"idle_ns\": %" PRIu64
				", \"startup_ns\": %" PRIu64 "}",
				w ? ", " : "", k->pid, k->tid, k->tasks, k->busy_ns, k->idle_ns,
				k->startup_ns);
		}
		fprintf(f, "]}");
	}
	fprintf(f, "], \"undecided\": [");
	if (!a->npools && a->pool_loops)
		fprintf(f,
			"{\"kinds\": [\"imbalance\", \"task-overhead\", \"worker-startup\"], "
			"\"why\": \"%s\"}",
			UNDECIDED);
	fprintf(f, "], \"cpus\": %u, \"incomplete\": %s}\n", a->cpus,
		a->dropped ? "true" : "false");
}
