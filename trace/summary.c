/*
 * The end-of-run report: per process and thread, wall time, on-CPU time and waits by
 * reason; the functions with the most self time; the longest waits with their stacks.
 * Computed from the slices a trace holds (fed while writing, or read back from a JSON
 * trace), so it agrees with what a viewer shows.
 *
 * A thread's wall time runs from its first slice's start to its last one's end; the
 * time its root slices cover, less its waits, is its on-CPU time (a wait is a slice of
 * an off-CPU reason marker, "preempted" included). A function's self time is its
 * slices' time less their children's, waits included, so it is time on a CPU in it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../analyze/analyze.h"
#include "../common/hashmap.h"
#include "../common/term.h"
#include "trace.h"

#define SUMMARY_MAX_DEPTH 4096
#define SUMMARY_LONGEST 5	/* waits listed */
#define SUMMARY_TOP_FUNCTIONS 8 /* functions listed */
#define SUMMARY_PROCESSES 8	/* processes listed, busiest first */
#define SUMMARY_THREADS 4	/* threads listed per process */
#define SUMMARY_REASONS 3	/* wait reasons listed per line */
#define SUMMARY_STACK_FRAMES 4	/* frames of a wait's stack shown, leaf-most */
#define SUMMARY_FINDINGS 5	/* findings listed, largest first */

/* A function or wait reason by name: names are interned, compared as pointers. */
struct sum_name {
	char *name;
	int64_t self_ns;
};

struct sum_wait {
	const struct sum_name *reason;
	uint64_t ns;
};

struct sum_thread {
	uint32_t pid, tid;
	char *name;
	uint64_t first_ns, last_ns, covered_ns, waited_ns;
	uint64_t no_gil_ns; /* on a CPU without the GIL (marker slices, leaves) */
	struct sum_wait *waits;
	size_t nwaits;
	const struct sum_name **stack; /* open slices' functions by depth */
	uint32_t stack_cap;
};

struct sum_longest {
	uint64_t ns, start_ns;
	uint32_t pid, tid;
	const struct sum_name *reason;
	char stack[256];
};

struct trace_summary {
	struct hashmap *names;	 /* FNV-1a (+ probe) -> struct sum_name */
	struct hashmap *threads; /* (pid << 32 | tid) -> struct sum_thread; tid 0: a name */
	struct sum_longest longest[SUMMARY_LONGEST];
	struct analysis *analysis; /* fed the same slices: the findings */
};

static uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

static void free_name(void *value)
{
	struct sum_name *n = value;

	free(n->name);
	free(n);
}

static void free_thread(void *value)
{
	struct sum_thread *t = value;

	free(t->name);
	free(t->waits);
	free(t->stack);
	free(t);
}

struct trace_summary *trace_summary__new(void)
{
	struct trace_summary *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->names = hashmap__new();
	s->threads = hashmap__new();
	s->analysis = analysis__new();
	if (!s->names || !s->threads || !s->analysis) {
		trace_summary__free(s);
		errno = ENOMEM;
		return NULL;
	}
	return s;
}

void trace_summary__free(struct trace_summary *s)
{
	if (!s)
		return;
	hashmap__free_all(s->names, free_name);
	hashmap__free_all(s->threads, free_thread);
	analysis__free(s->analysis);
	free(s);
}

/* The interned @name: equal names give the same pointer. NULL on ENOMEM. */
static struct sum_name *intern(struct trace_summary *s, const char *name)
{
	uint64_t h = hash_string(name);
	struct sum_name *n;

	while ((n = hashmap__get(s->names, h)) && strcmp(n->name, name))
		h++; /* another name with this hash: probe on */
	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n || !(n->name = strdup(name)) || hashmap__set(s->names, h, n)) {
		if (n)
			free(n->name);
		free(n);
		return NULL;
	}
	return n;
}

static struct sum_thread *find_thread(struct trace_summary *s, uint32_t pid, uint32_t tid)
{
	struct sum_thread *t = hashmap__get(s->threads, thread_key(pid, tid));

	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->tid = tid;
	t->first_ns = UINT64_MAX;
	if (hashmap__set(s->threads, thread_key(pid, tid), t)) {
		free(t);
		return NULL;
	}
	return t;
}

int trace_summary__name(struct trace_summary *s, uint32_t pid, uint32_t tid, const char *name)
{
	struct sum_thread *t = find_thread(s, pid, tid);
	char *copy = strdup(name ? name : "");

	if (!t || !copy) {
		free(copy);
		return -ENOMEM;
	}
	free(t->name);
	t->name = copy;
	return 0;
}

int trace_summary__open(struct trace_summary *s, uint32_t pid, uint32_t tid, uint32_t depth,
			const char *name, const char *file)
{
	struct sum_thread *t = find_thread(s, pid, tid);
	struct sum_name *n = intern(s, name);

	if (!t || !n || analysis__open(s->analysis, pid, tid, depth, n->name, file))
		return -ENOMEM;
	if (depth >= SUMMARY_MAX_DEPTH)
		return 0;
	if (depth >= t->stack_cap) {
		uint32_t cap = t->stack_cap ? t->stack_cap : 32;
		const struct sum_name **grown;

		while (cap <= depth)
			cap *= 2;
		grown = realloc(t->stack, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		memset(grown + t->stack_cap, 0, (cap - t->stack_cap) * sizeof(*grown));
		t->stack = grown;
		t->stack_cap = cap;
	}
	t->stack[depth] = n;
	return 0;
}

static int add_wait(struct sum_thread *t, const struct sum_name *reason, uint64_t ns)
{
	struct sum_wait *grown;
	size_t i;

	t->waited_ns += ns;
	for (i = 0; i < t->nwaits; i++) {
		if (t->waits[i].reason == reason) {
			t->waits[i].ns += ns;
			return 0;
		}
	}
	grown = realloc(t->waits, (t->nwaits + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	t->waits = grown;
	t->waits[t->nwaits++] = (struct sum_wait){ reason, ns };
	return 0;
}

static bool longer(uint64_t ns, uint64_t start_ns, const struct sum_longest *than)
{
	return ns > than->ns || (ns == than->ns && start_ns < than->start_ns);
}

/*
 * Keeps the wait among the longest (earlier first at equal lengths, so the order does
 * not depend on the order slices come in), with its stack, leaf-most frames.
 */
static void note_longest(struct trace_summary *s, const struct sum_thread *t,
			 const struct trace_summary_slice *sl, const struct sum_name *reason)
{
	uint64_t ns = sl->end_ns - sl->start_ns;
	uint32_t depth = sl->depth;
	struct sum_longest *slot = &s->longest[SUMMARY_LONGEST - 1];
	uint32_t from = depth > SUMMARY_STACK_FRAMES ? depth - SUMMARY_STACK_FRAMES : 0, d;
	size_t len = 0;

	if (slot->ns && !longer(ns, sl->start_ns, slot))
		return;
	while (slot > s->longest && (!slot[-1].ns || longer(ns, sl->start_ns, &slot[-1]))) {
		slot[0] = slot[-1];
		slot--;
	}
	*slot = (struct sum_longest){
		.ns = ns, .start_ns = sl->start_ns, .pid = t->pid, .tid = t->tid, .reason = reason
	};
	if (from)
		len = (size_t)snprintf(slot->stack, sizeof(slot->stack), "... > ");
	for (d = from; d < depth && d < t->stack_cap && len < sizeof(slot->stack); d++)
		len += (size_t)snprintf(slot->stack + len, sizeof(slot->stack) - len, "%s%s",
					t->stack[d] ? t->stack[d]->name : "?",
					d + 1 < depth ? " > " : "");
}

int trace_summary__close(struct trace_summary *s, const struct trace_summary_slice *sl)
{
	struct sum_thread *t = find_thread(s, sl->pid, sl->tid);
	uint64_t ns = sl->end_ns - sl->start_ns;
	struct sum_name *n;

	if (!t || sl->end_ns <= sl->start_ns)
		return t ? 0 : -ENOMEM;
	n = intern(s, sl->name);
	if (!n || analysis__close(s->analysis, sl, n->name))
		return -ENOMEM;
	if (sl->message)
		return 0; /* a marker: no time of its own */
	t->first_ns = sl->start_ns < t->first_ns ? sl->start_ns : t->first_ns;
	t->last_ns = sl->end_ns > t->last_ns ? sl->end_ns : t->last_ns;
	if (!sl->depth)
		t->covered_ns += ns;
	if (sl->no_gil) {
		t->no_gil_ns += ns; /* a state of its parent's time, not a function of its own */
		return 0;
	}
	if (sl->depth && sl->depth - 1 < t->stack_cap && t->stack[sl->depth - 1])
		((struct sum_name *)t->stack[sl->depth - 1])->self_ns -= (int64_t)ns;
	if (!sl->off_cpu) {
		n->self_ns += (int64_t)ns;
		return 0;
	}
	note_longest(s, t, sl, n);
	return add_wait(t, n, ns);
}

/* A duration that reads well and parses back: "12.3 ms" under 10 s, else "12.35 s". */
static const char *fmt_ns(char *buf, size_t size, uint64_t ns)
{
	if (ns < 10000000000ULL)
		snprintf(buf, size, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, size, "%.2f s", (double)ns / 1e9);
	return buf;
}

/* Totals of one process (its threads') or of one thread. */
struct sum_totals {
	uint32_t pid, tid;
	const char *name;
	uint64_t first_ns, last_ns, cpu_ns, waited_ns, no_gil_ns;
	struct sum_wait waits[16];
	size_t nwaits;
	size_t nthreads;
};

static void add_totals(struct sum_totals *to, const struct sum_thread *t)
{
	size_t i, j;

	to->first_ns = t->first_ns < to->first_ns ? t->first_ns : to->first_ns;
	to->last_ns = t->last_ns > to->last_ns ? t->last_ns : to->last_ns;
	to->cpu_ns += t->covered_ns > t->waited_ns ? t->covered_ns - t->waited_ns : 0;
	to->waited_ns += t->waited_ns;
	to->no_gil_ns += t->no_gil_ns;
	to->nthreads++;
	for (i = 0; i < t->nwaits; i++) {
		for (j = 0; j < to->nwaits && to->waits[j].reason != t->waits[i].reason; j++)
			;
		if (j == to->nwaits) {
			if (j == sizeof(to->waits) / sizeof(to->waits[0]))
				continue; /* in the total, not listed */
			to->waits[to->nwaits++] = (struct sum_wait){ t->waits[i].reason, 0 };
		}
		to->waits[j].ns += t->waits[i].ns;
	}
}

static int by_wait_ns(const void *a, const void *b)
{
	const struct sum_wait *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns < y->ns ? 1 : -1;
	return strcmp(x->reason->name, y->reason->name);
}

/* "wall 1.2 s, on-CPU 0.4 s (33%), waits 0.8 s: sleep 0.5 s, ..." */
static void print_totals(FILE *f, struct sum_totals *to)
{
	uint64_t wall = to->last_ns > to->first_ns ? to->last_ns - to->first_ns : 0;
	char a[32], b[32], c[32], esc[TERM_ESCAPED(40)];
	size_t i;

	qsort(to->waits, to->nwaits, sizeof(to->waits[0]), by_wait_ns);
	fprintf(f, "wall %s, on-CPU %s (%.0f%%", fmt_ns(a, sizeof(a), wall),
		fmt_ns(b, sizeof(b), to->cpu_ns),
		wall ? 100.0 * (double)to->cpu_ns / (double)wall : 0);
	if (to->no_gil_ns)
		fprintf(f, ", %s without the GIL", fmt_ns(a, sizeof(a), to->no_gil_ns));
	fprintf(f, "), waits %s", fmt_ns(c, sizeof(c), to->waited_ns));
	for (i = 0; i < to->nwaits && i < SUMMARY_REASONS; i++) {
		const char *name = to->waits[i].reason->name, *more = strstr(name, " (");

		/* "preempted (runnable, waiting for a CPU)": the words before the details */
		fprintf(f, "%s%s %s", i ? ", " : ": ",
			term_escape(esc, sizeof(esc), name,
				    more && more - name < 40 ? (size_t)(more - name) : 40),
			fmt_ns(a, sizeof(a), to->waits[i].ns));
	}
	if (to->nwaits > SUMMARY_REASONS)
		fprintf(f, ", ...");
	fputc('\n', f);
}

static int by_cpu(const void *a, const void *b)
{
	const struct sum_totals *x = a, *y = b;

	if (x->cpu_ns != y->cpu_ns)
		return x->cpu_ns < y->cpu_ns ? 1 : -1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int by_self(const void *a, const void *b)
{
	const struct sum_name *x = *(const struct sum_name *const *)a;
	const struct sum_name *y = *(const struct sum_name *const *)b;

	if (x->self_ns != y->self_ns)
		return x->self_ns < y->self_ns ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* Every thread's totals and every process's, each busiest first. */
static int gather(const struct trace_summary *s, struct sum_totals **threads, size_t *nthreads,
		  struct sum_totals **procs, size_t *nprocs)
{
	size_t n = hashmap__count(s->threads), cursor = 0, j;
	struct sum_totals *th = calloc(n + 1, sizeof(*th)), *pr = calloc(n + 1, sizeof(*pr));
	uint64_t key;
	void *value;

	*threads = th;
	*procs = pr;
	*nthreads = *nprocs = 0;
	if (!th || !pr)
		return -ENOMEM;
	while (hashmap__next(s->threads, &cursor, &key, &value)) {
		const struct sum_thread *t = value;

		if (!t->tid || t->first_ns == UINT64_MAX)
			continue;
		th[*nthreads] = (struct sum_totals){
			.pid = t->pid, .tid = t->tid, .name = t->name, .first_ns = UINT64_MAX
		};
		add_totals(&th[(*nthreads)++], t);
		for (j = 0; j < *nprocs && pr[j].pid != t->pid; j++)
			;
		if (j == *nprocs) {
			const struct sum_thread *p =
				hashmap__get(s->threads, thread_key(t->pid, 0));

			pr[(*nprocs)++] = (struct sum_totals){ .pid = t->pid,
							       .name = p ? p->name : NULL,
							       .first_ns = UINT64_MAX };
		}
		add_totals(&pr[j], t);
	}
	qsort(th, *nthreads, sizeof(*th), by_cpu);
	qsort(pr, *nprocs, sizeof(*pr), by_cpu);
	return 0;
}

static void print_functions(const struct trace_summary *s, FILE *f, uint64_t cpu_ns)
{
	size_t n = hashmap__count(s->names), cursor = 0, k = 0, i;
	const struct sum_name **all = calloc(n + 1, sizeof(*all));
	uint64_t key;
	void *value;
	char a[32], esc[TERM_ESCAPED(512)];

	if (!all)
		return;
	while (hashmap__next(s->names, &cursor, &key, &value)) {
		const struct sum_name *nm = value;

		if (nm->self_ns > 0)
			all[k++] = nm;
	}
	qsort(all, k, sizeof(*all), by_self);
	fprintf(f, "top functions by self time (on CPU):\n");
	for (i = 0; i < k && i < SUMMARY_TOP_FUNCTIONS; i++)
		fprintf(f, "  %10s %3.0f%%  %s\n", fmt_ns(a, sizeof(a), (uint64_t)all[i]->self_ns),
			cpu_ns ? 100.0 * (double)all[i]->self_ns / (double)cpu_ns : 0,
			term_escape(esc, sizeof(esc), all[i]->name, 512));
	free(all);
}

int trace_summary__print(const struct trace_summary *s, FILE *f)
{
	struct sum_totals *th = NULL, *pr = NULL, all = { .first_ns = UINT64_MAX };
	size_t nth, npr, i, j, shown;
	char a[32], esc[TERM_ESCAPED(64)], stack[TERM_ESCAPED(256)];
	int err = gather(s, &th, &nth, &pr, &npr);

	if (err)
		goto out_free;
	for (i = 0; i < npr; i++) {
		all.first_ns = pr[i].first_ns < all.first_ns ? pr[i].first_ns : all.first_ns;
		all.last_ns = pr[i].last_ns > all.last_ns ? pr[i].last_ns : all.last_ns;
		all.cpu_ns += pr[i].cpu_ns;
		all.waited_ns += pr[i].waited_ns;
	}
	fprintf(f, "pytrace-sample report: %zu processes, %zu threads over %s\n", npr, nth,
		fmt_ns(a, sizeof(a), all.last_ns > all.first_ns ? all.last_ns - all.first_ns : 0));
	err = analysis__finish(s->analysis);
	if (err)
		goto out_free;
	analysis__print(s->analysis, f, SUMMARY_FINDINGS);
	for (i = 0; i < npr && i < SUMMARY_PROCESSES; i++) {
		/* "... (pid 1 in its namespace)": a container's own pid survives the cut */
		fprintf(f, "process %" PRIu32 " %s: ", pr[i].pid,
			term_escape_keep_tail(esc, sizeof(esc), pr[i].name, 64));
		print_totals(f, &pr[i]);
		for (j = 0, shown = 0; j < nth; j++) {
			if (th[j].pid != pr[i].pid || pr[i].nthreads == 1)
				continue; /* one thread: the process's line says it all */
			if (shown++ == SUMMARY_THREADS) {
				fprintf(f, "  ... more threads\n");
				break;
			}
			fprintf(f, "  thread %" PRIu32 " %s: ", th[j].tid,
				term_escape(esc, sizeof(esc), th[j].name, 30));
			print_totals(f, &th[j]);
		}
	}
	if (npr > SUMMARY_PROCESSES)
		fprintf(f, "... %zu more processes\n", npr - SUMMARY_PROCESSES);
	print_functions(s, f, all.cpu_ns);
	if (s->longest[0].ns)
		fprintf(f, "longest waits:\n");
	for (i = 0; i < SUMMARY_LONGEST && s->longest[i].ns; i++)
		fprintf(f, "  %10s  %s  %" PRIu32 "/%" PRIu32 ": %s\n",
			fmt_ns(a, sizeof(a), s->longest[i].ns),
			term_escape(esc, sizeof(esc), s->longest[i].reason->name, 40),
			s->longest[i].pid, s->longest[i].tid,
			term_escape(stack, sizeof(stack), s->longest[i].stack, SIZE_MAX));
out_free:
	free(th);
	free(pr);
	return err;
}

int trace_summary__print_json(const struct trace_summary *s, FILE *f)
{
	int err = analysis__finish(s->analysis);

	if (!err)
		analysis__print_json(s->analysis, f);
	return err;
}

const struct analysis *trace_summary__analysis(struct trace_summary *s)
{
	return analysis__finish(s->analysis) ? NULL : s->analysis;
}

void trace_summary__cpus(struct trace_summary *s, unsigned cpus)
{
	analysis__cpus(s->analysis, cpus);
}

void trace_summary__tool_cpu(struct trace_summary *s, uint64_t ns)
{
	analysis__tool_cpu(s->analysis, ns);
}
