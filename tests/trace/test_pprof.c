/*
 * Tests of the pprof writer (trace/pprof.c) through the trace's API: a profile written
 * from known stacks, gunzipped and decoded here by hand against profile.proto.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "../../trace/trace.h"
#include "../common/support.h"

#define ORIGIN 5000000000ULL
#define MS 1000000ULL

/* profile.proto's field numbers, written out again: the test must not share pprof.c's. */
enum {
	F_SAMPLE_TYPE = 1,
	F_SAMPLE = 2,
	F_MAPPING = 3,
	F_LOCATION = 4,
	F_FUNCTION = 5,
	F_STRING_TABLE = 6,
	F_TIME_NANOS = 9,
	F_DURATION_NANOS = 10,
	F_PERIOD_TYPE = 11,
	F_PERIOD = 12,
	F_COMMENT = 13,
	F_DEFAULT_SAMPLE_TYPE = 14,
};

#define MAX_ITEMS 64

struct value_type {
	uint64_t type, unit;
};

struct label {
	uint64_t key, str, num;
};

struct sample {
	uint64_t locations[MAX_ITEMS];
	size_t nlocations;
	int64_t values[MAX_ITEMS];
	size_t nvalues;
	struct label labels[MAX_ITEMS];
	size_t nlabels;
};

struct location {
	uint64_t id, function_id, line;
	size_t nlines;
};

struct function {
	uint64_t id, name, system_name, filename, start_line;
};

/* What a profile holds, as decoded; arrays sized by the test's small inputs. */
struct profile {
	char **strings;
	size_t nstrings;
	struct sample *samples;
	size_t nsamples;
	struct location locations[256];
	size_t nlocations;
	struct function functions[256];
	size_t nfunctions;
	struct value_type sample_types[8], period_type;
	size_t nsample_types;
	size_t nmappings;
	bool mapping_symbolized; /* has_functions: pprof looks for no binary */
	uint64_t period, time_nanos, duration_nanos, default_sample_type;
	uint64_t comments[32];
	size_t ncomments;
};

struct reader {
	const uint8_t *p, *end;
};

static uint64_t read_varint(struct reader *r)
{
	uint64_t v = 0;
	int shift = 0;

	while (1) {
		uint8_t byte;

		assert_true(r->p < r->end);
		assert_true(shift < 64);
		byte = *r->p++;
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return v;
		shift += 7;
	}
}

/*
 * The next field of the message in @r: its number, and either its varint (@sub NULL) or
 * its bytes in @sub. Only the wire types the writer may use are accepted.
 */
static bool next_field(struct reader *r, uint32_t *field, int *wire, uint64_t *v,
		       struct reader *sub)
{
	uint64_t tag;

	if (r->p == r->end)
		return false;
	tag = read_varint(r);
	*field = (uint32_t)(tag >> 3);
	*wire = (int)(tag & 7);
	if (*wire == 0) {
		*v = read_varint(r);
	} else {
		assert_int_equal(*wire, 2);
		*v = read_varint(r);
		assert_true(*v <= (uint64_t)(r->end - r->p));
		sub->p = r->p;
		sub->end = r->p + *v;
		r->p += *v;
	}
	return true;
}

/* A repeated integer, packed or not, appended to @out. */
static void read_repeated(int wire, uint64_t v, struct reader *sub, uint64_t *out, size_t *n)
{
	if (wire == 0) {
		assert_true(*n < MAX_ITEMS);
		out[(*n)++] = v;
		return;
	}
	while (sub->p < sub->end) {
		assert_true(*n < MAX_ITEMS);
		out[(*n)++] = read_varint(sub);
	}
}

static struct value_type read_value_type(struct reader *r)
{
	struct value_type vt = { 0 };
	struct reader sub;
	uint32_t field;
	uint64_t v;
	int wire;

	while (next_field(r, &field, &wire, &v, &sub)) {
		if (field == 1)
			vt.type = v;
		else if (field == 2)
			vt.unit = v;
	}
	return vt;
}

static void read_sample(struct reader *r, struct sample *s)
{
	struct reader sub, lsub;
	uint32_t field;
	uint64_t v, values[MAX_ITEMS];
	size_t i, nvalues = 0;
	int wire;

	memset(s, 0, sizeof(*s));
	while (next_field(r, &field, &wire, &v, &sub)) {
		if (field == 1) {
			read_repeated(wire, v, &sub, s->locations, &s->nlocations);
		} else if (field == 2) {
			read_repeated(wire, v, &sub, values, &nvalues);
		} else if (field == 3) {
			struct label *l = &s->labels[s->nlabels++];

			assert_int_equal(wire, 2);
			assert_true(s->nlabels < MAX_ITEMS);
			while (next_field(&sub, &field, &wire, &v, &lsub)) {
				if (field == 1)
					l->key = v;
				else if (field == 2)
					l->str = v;
				else if (field == 3)
					l->num = v;
			}
		}
	}
	for (i = 0; i < nvalues; i++)
		s->values[i] = (int64_t)values[i];
	s->nvalues = nvalues;
}

static void read_location(struct reader *r, struct location *l)
{
	struct reader sub, lsub;
	uint32_t field;
	uint64_t v;
	int wire;

	memset(l, 0, sizeof(*l));
	while (next_field(r, &field, &wire, &v, &sub)) {
		if (field == 1) {
			l->id = v;
		} else if (field == 4) {
			l->nlines++;
			while (next_field(&sub, &field, &wire, &v, &lsub)) {
				if (field == 1)
					l->function_id = v;
				else if (field == 2)
					l->line = v;
			}
		}
	}
}

static void read_function(struct reader *r, struct function *f)
{
	struct reader sub;
	uint32_t field;
	uint64_t v;
	int wire;

	memset(f, 0, sizeof(*f));
	while (next_field(r, &field, &wire, &v, &sub)) {
		if (field == 1)
			f->id = v;
		else if (field == 2)
			f->name = v;
		else if (field == 3)
			f->system_name = v;
		else if (field == 4)
			f->filename = v;
		else if (field == 5)
			f->start_line = v;
	}
}

static void read_top_field(struct profile *pr, uint32_t field, int wire, uint64_t v,
			   struct reader *sub)
{
	struct reader msub;

	switch (field) {
	case F_SAMPLE_TYPE:
		assert_true(pr->nsample_types < 8);
		pr->sample_types[pr->nsample_types++] = read_value_type(sub);
		break;
	case F_SAMPLE:
		pr->samples = realloc(pr->samples, (pr->nsamples + 1) * sizeof(*pr->samples));
		assert_non_null(pr->samples);
		read_sample(sub, &pr->samples[pr->nsamples++]);
		break;
	case F_MAPPING:
		pr->nmappings++;
		while (next_field(sub, &field, &wire, &v, &msub)) {
			if (field == 7)
				pr->mapping_symbolized = v;
		}
		break;
	case F_LOCATION:
		assert_true(pr->nlocations < 256);
		read_location(sub, &pr->locations[pr->nlocations++]);
		break;
	case F_FUNCTION:
		assert_true(pr->nfunctions < 256);
		read_function(sub, &pr->functions[pr->nfunctions++]);
		break;
	case F_STRING_TABLE:
		assert_int_equal(wire, 2);
		pr->strings = realloc(pr->strings, (pr->nstrings + 1) * sizeof(*pr->strings));
		assert_non_null(pr->strings);
		pr->strings[pr->nstrings] = strndup((const char *)sub->p, v);
		assert_non_null(pr->strings[pr->nstrings]);
		assert_int_equal(strlen(pr->strings[pr->nstrings]), v); /* no NUL inside */
		pr->nstrings++;
		break;
	case F_TIME_NANOS:
		pr->time_nanos = v;
		break;
	case F_DURATION_NANOS:
		pr->duration_nanos = v;
		break;
	case F_PERIOD_TYPE:
		pr->period_type = read_value_type(sub);
		break;
	case F_PERIOD:
		pr->period = v;
		break;
	case F_COMMENT:
		read_repeated(wire, v, sub, pr->comments, &pr->ncomments);
		break;
	case F_DEFAULT_SAMPLE_TYPE:
		pr->default_sample_type = v;
		break;
	default:
		fail_msg("unexpected field %u", field);
	}
}

/* Gunzips (every member) and decodes the profile at @path. */
static void read_profile(const char *path, struct profile *pr)
{
	gzFile gz = gzopen(path, "rb");
	size_t len = 0, cap = 1 << 16;
	uint8_t *data = malloc(cap);
	struct reader r, sub;
	uint32_t field;
	uint64_t v;
	int n, wire;

	assert_non_null(gz);
	assert_non_null(data);
	while ((n = gzread(gz, data + len, (unsigned)(cap - len))) > 0) {
		len += (size_t)n;
		if (len == cap) {
			cap *= 2;
			data = realloc(data, cap);
			assert_non_null(data);
		}
	}
	assert_int_equal(n, 0);
	gzclose(gz);
	memset(pr, 0, sizeof(*pr));
	r = (struct reader){ data, data + len };
	while (next_field(&r, &field, &wire, &v, &sub))
		read_top_field(pr, field, wire, v, &sub);
	free(data);
}

static void free_profile(struct profile *pr)
{
	size_t i;

	for (i = 0; i < pr->nstrings; i++)
		free(pr->strings[i]);
	free(pr->strings);
	free(pr->samples);
}

static const char *str(const struct profile *pr, uint64_t i)
{
	assert_true(i < pr->nstrings);
	return pr->strings[i];
}

static const struct location *location(const struct profile *pr, uint64_t id)
{
	size_t i;

	for (i = 0; i < pr->nlocations; i++) {
		if (pr->locations[i].id == id)
			return &pr->locations[i];
	}
	fail_msg("no location %llu", (unsigned long long)id);
	return NULL;
}

static const struct function *function(const struct profile *pr, uint64_t id)
{
	size_t i;

	for (i = 0; i < pr->nfunctions; i++) {
		if (pr->functions[i].id == id)
			return &pr->functions[i];
	}
	fail_msg("no function %llu", (unsigned long long)id);
	return NULL;
}

/* Sample @s's stack as "leaf:line<caller:line<...", the order its locations come in. */
static void stack_text(const struct profile *pr, const struct sample *s, char *buf, size_t size)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < s->nlocations; i++) {
		const struct location *l = location(pr, s->locations[i]);
		const struct function *f = function(pr, l->function_id);

		assert_int_equal(l->nlines, 1);
		n += (size_t)snprintf(buf + n, size - n, "%s%s:%llu", i ? "<" : "",
				      str(pr, f->name), (unsigned long long)l->line);
		assert_true(n < size);
	}
}

/* The label @key of @s: its string (NULL when a number), its number in @num. */
static bool label(const struct profile *pr, const struct sample *s, const char *key,
		  const char **text, uint64_t *num)
{
	size_t i;

	for (i = 0; i < s->nlabels; i++) {
		if (!strcmp(str(pr, s->labels[i].key), key)) {
			*text = s->labels[i].str ? str(pr, s->labels[i].str) : NULL;
			*num = s->labels[i].num;
			return true;
		}
	}
	return false;
}

/* The sample whose stack text is @stack and whose pool_task is @task (NULL: none). */
static const struct sample *find_sample(const struct profile *pr, const char *stack,
					const char *task)
{
	char text[1024];
	size_t i;

	for (i = 0; i < pr->nsamples; i++) {
		const char *t;
		uint64_t num;
		bool has = label(pr, &pr->samples[i], "pool_task", &t, &num);

		stack_text(pr, &pr->samples[i], text, sizeof(text));
		if (strcmp(text, stack) || has != !!task || (task && (!t || strcmp(t, task))))
			continue;
		return &pr->samples[i];
	}
	fail_msg("no sample %s in task %s", stack, task ? task : "(none)");
	return NULL;
}

struct fixture {
	char *dir;
	char path[512];
	struct frame_table *frames;
	uint32_t main_fn, work_fn, io_fn, sleep_marker, task_marker;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dir = support_tempdir();
	f->frames = frame_table__new();
	if (!f->dir || !f->frames)
		return -1;
	f->main_fn = frame_table__intern(
		f->frames, &(struct frame_info){ "<module>", "/app/main.py", 1, FRAME_PYTHON });
	f->work_fn = frame_table__intern(
		f->frames, &(struct frame_info){ "Worker.run", "/app/work.py", 10, FRAME_PYTHON });
	f->io_fn = frame_table__intern(
		f->frames,
		&(struct frame_info){ "read_all", "/usr/lib/libio.so", 0, FRAME_NATIVE });
	f->sleep_marker = frame_table__intern(
		f->frames, &(struct frame_info){ "[sleep]", "", 0, FRAME_OFF_CPU });
	f->task_marker = frame_table__intern(
		f->frames, &(struct frame_info){ "pool task received", "", 0, FRAME_MESSAGE });
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	frame_table__free(f->frames);
	support_rmdir(f->dir);
	free(f);
	return 0;
}

static struct trace *open_trace(struct fixture *f, const char *name)
{
	struct trace_opts opts = {
		.path = f->path,
		.period_ns = MS,
		.origin_ns = ORIGIN,
		.frames = f->frames,
	};
	struct trace *trace;

	snprintf(f->path, sizeof(f->path), "%s/%s", f->dir, name);
	trace = trace__open(&opts);
	assert_non_null(trace);
	return trace;
}

static void observe(struct trace *trace, uint32_t pid, uint32_t tid, enum trace_obs_kind kind,
		    uint64_t start, uint64_t end, const struct trace_frame *frames, uint32_t n)
{
	struct trace_obs obs = {
		.pid = pid,
		.tid = tid,
		.kind = kind,
		.t_start_ns = start,
		.t_end_ns = end,
		.nframes = n,
		.frames = frames,
	};

	assert_int_equal(trace__observe(trace, &obs), 0);
}

/* A pool message of @tid at @t: a task or a result, read or written. */
static void message(struct fixture *f, struct trace *trace, uint32_t pid, uint32_t tid, uint64_t t,
		    struct trace_message m)
{
	struct trace_frame frames[] = { { f->main_fn, 5, 0, 0 }, { f->task_marker, 0, 0, 0 } };
	struct trace_obs obs = {
		.pid = pid,
		.tid = tid,
		.kind = TRACE_MESSAGE,
		.t_start_ns = t,
		.t_end_ns = t + 1000,
		.nframes = 2,
		.frames = frames,
		.message = m,
	};

	assert_int_equal(trace__observe(trace, &obs), 0);
}

/* A parent's 3 samples in native code; a worker computing 4 ms, then sleeping 12. */
static void write_scenario(struct fixture *f, struct trace *trace)
{
	struct trace_frame work[] = { { f->main_fn, 3, 0, 0 }, { f->work_fn, 12, 40, 0 } };
	struct trace_frame wait[] = { { f->main_fn, 3, 0, 0 },
				      { f->work_fn, 15, 40, 0 },
				      { f->sleep_marker, 0, 0, 0 } };
	struct trace_frame parent[] = { { f->main_fn, 7, 0, 0 }, { f->io_fn, 0, 0x1234, 0 } };
	uint64_t t;

	assert_int_equal(trace__name_process(trace, 100, "python main.py"), 0);
	assert_int_equal(trace__name_thread(trace, 100, 100, "python"), 0);
	assert_int_equal(trace__name_process(trace, 200, "python main.py (worker)"), 0);
	assert_int_equal(trace__name_thread(trace, 200, 201, "worker-1"), 0);
	for (t = 0; t < 3; t++)
		observe(trace, 100, 100, TRACE_ON_CPU, ORIGIN + t * MS, 0, parent, 2);
	for (t = 4; t < 8; t++)
		observe(trace, 200, 201, TRACE_ON_CPU, ORIGIN + t * MS, 0, work, 2);
	observe(trace, 200, 201, TRACE_OFF_CPU, ORIGIN + 8 * MS + 250, ORIGIN + 20 * MS, wait, 3);
	assert_int_equal(trace__end_thread(trace, 200, 201, ORIGIN + 20 * MS), 0);
	assert_int_equal(trace__note(trace, "lost_samples", 7), 0);
}

static void check_labels(const struct profile *pr, const struct sample *s, uint64_t pid,
			 uint64_t tid, const char *process, const char *thread)
{
	const char *text;
	uint64_t num;

	assert_true(label(pr, s, "pid", &text, &num));
	assert_null(text);
	assert_int_equal(num, pid);
	assert_true(label(pr, s, "tid", &text, &num));
	assert_int_equal(num, tid);
	assert_true(label(pr, s, "process", &text, &num));
	assert_string_equal(text, process);
	assert_true(label(pr, s, "thread", &text, &num));
	assert_string_equal(text, thread);
}

/* The header, the string table, and each stack's sample with its weights and labels. */
static void test_pprof__content(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.pb.gz");
	const struct sample *s;
	struct trace_stats stats;
	struct profile pr;
	size_t i;
	bool version = false, lost = false;

	write_scenario(f, trace);
	assert_int_equal(trace__close(trace, &stats), 0);
	read_profile(f->path, &pr);

	assert_true(pr.nstrings > 0);
	assert_string_equal(pr.strings[0], "");
	for (i = 1; i < pr.nstrings; i++) {
		size_t j;

		for (j = 0; j < i; j++)
			assert_string_not_equal(pr.strings[i], pr.strings[j]); /* interned */
	}
	assert_int_equal(pr.nsample_types, 2);
	assert_string_equal(str(&pr, pr.sample_types[0].type), "samples");
	assert_string_equal(str(&pr, pr.sample_types[0].unit), "count");
	assert_string_equal(str(&pr, pr.sample_types[1].type), "time");
	assert_string_equal(str(&pr, pr.sample_types[1].unit), "nanoseconds");
	assert_string_equal(str(&pr, pr.period_type.type), "time");
	assert_string_equal(str(&pr, pr.period_type.unit), "nanoseconds");
	assert_string_equal(str(&pr, pr.default_sample_type), "time");
	assert_int_equal(pr.period, MS);
	assert_int_equal(pr.nmappings, 1);
	assert_true(pr.mapping_symbolized);
	assert_int_equal(pr.duration_nanos, 20 * MS); /* the first sample to the wait's end */
	for (i = 0; i < pr.ncomments; i++) {
		version |= !strncmp(str(&pr, pr.comments[i]), "pytrace-sample ", 15);
		lost |= !strcmp(str(&pr, pr.comments[i]), "notes: lost_samples 7");
	}
	assert_true(version);
	assert_true(lost);

	assert_int_equal(pr.nsamples, 3);
	assert_int_equal(stats.stacks, 3);
	/* Leaf first, each frame at the line it ran. */
	s = find_sample(&pr, "read_all:0<<module>:7", NULL);
	assert_int_equal(s->nvalues, 2);
	assert_int_equal(s->values[0], 3);
	assert_int_equal(s->values[1], 3 * MS);
	check_labels(&pr, s, 100, 100, "python main.py", "python");
	s = find_sample(&pr, "Worker.run:12<<module>:3", NULL);
	assert_int_equal(s->values[0], 4);
	assert_int_equal(s->values[1], 4 * MS);
	check_labels(&pr, s, 200, 201, "python main.py (worker)", "worker-1");
	s = find_sample(&pr, "[sleep]:0<Worker.run:15<<module>:3", NULL);
	assert_int_equal(s->values[0], 12); /* 11.75 ms of waiting, in whole periods */
	assert_int_equal(s->values[1], 12 * MS);

	/* A Function per frame: its name, file and first line; a Location per line run. */
	assert_int_equal(pr.nfunctions, 4);
	assert_int_equal(pr.nlocations, 6);
	for (i = 0; i < pr.nfunctions; i++) {
		const struct function *fn = &pr.functions[i];

		/* Not equal to its name, or pprof "demangles" <module> to "". */
		assert_int_equal(fn->system_name, 0);
		if (!strcmp(str(&pr, fn->name), "Worker.run")) {
			assert_string_equal(str(&pr, fn->filename), "/app/work.py");
			assert_int_equal(fn->start_line, 10);
		} else if (!strcmp(str(&pr, fn->name), "read_all")) {
			assert_string_equal(str(&pr, fn->filename), "/usr/lib/libio.so");
			assert_int_equal(fn->start_line, 0);
		}
	}
	free_profile(&pr);
}

/*
 * A worker's samples are labelled with the task it read until it sent the task's
 * result; the parent's messages (handing tasks out, taking results in) start none, and
 * a thread's end ends its task.
 */
static void test_pprof__pool_tasks(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "pool.pprof");
	struct trace_frame work[] = { { f->main_fn, 3, 0, 0 }, { f->work_fn, 12, 40, 0 } };
	struct trace_message take = { .job = 3, .task = 0 };
	struct trace_message give = { .result = true, .sent = true, .job = 3, .task = 0 };
	const struct sample *s;
	struct profile pr;
	const char *text;
	uint64_t num, t = ORIGIN;
	int i;

	/* The parent hands out two tasks and takes a result in: none of its own. */
	message(f, trace, 100, 101, t, (struct trace_message){ .sent = true, .job = 3 });
	message(f, trace, 100, 102, t, (struct trace_message){ .result = true, .job = 3 });
	observe(trace, 100, 101, TRACE_ON_CPU, t, 0, work, 2);
	observe(trace, 100, 102, TRACE_ON_CPU, t, 0, work, 2);
	/* The worker: task 0 for 2 samples, task 1 for 3, then one sample between tasks. */
	message(f, trace, 200, 200, t, take);
	for (i = 0; i < 2; i++)
		observe(trace, 200, 200, TRACE_ON_CPU, t += MS, 0, work, 2);
	message(f, trace, 200, 200, t += MS, give);
	take.task = give.task = 1;
	message(f, trace, 200, 200, t += MS, take);
	for (i = 0; i < 3; i++)
		observe(trace, 200, 200, TRACE_ON_CPU, t += MS, 0, work, 2);
	message(f, trace, 200, 200, t += MS, give);
	observe(trace, 200, 200, TRACE_ON_CPU, t += MS, 0, work, 2);
	/* An executor's worker, whose thread ends in its task: its tid reused after. */
	message(f, trace, 300, 300, t += MS, (struct trace_message){ .executor = true, .task = 5 });
	observe(trace, 300, 300, TRACE_ON_CPU, t += MS, 0, work, 2);
	assert_int_equal(trace__end_thread(trace, 300, 300, t += MS), 0);
	observe(trace, 300, 300, TRACE_ON_CPU, t += MS, 0, work, 2);
	assert_int_equal(trace__close(trace, NULL), 0);

	read_profile(f->path, &pr);
	assert_int_equal(pr.nsamples, 7);
	s = find_sample(&pr, "Worker.run:12<<module>:3", "job 3 task 0");
	assert_int_equal(s->values[0], 2);
	assert_true(label(&pr, s, "pid", &text, &num));
	assert_int_equal(num, 200);
	s = find_sample(&pr, "Worker.run:12<<module>:3", "job 3 task 1");
	assert_int_equal(s->values[0], 3);
	s = find_sample(&pr, "Worker.run:12<<module>:3", "work_id 5");
	assert_int_equal(s->values[0], 1);
	for (i = 0; i < (int)pr.nsamples; i++) {
		s = &pr.samples[i];
		assert_true(label(&pr, s, "pid", &text, &num));
		if (num == 100 || (num == 200 && s->values[0] == 1))
			assert_false(label(&pr, s, "pool_task", &text, &num));
		/* No names given: no process or thread label rather than a made-up one. */
		assert_false(label(&pr, s, "process", &text, &num));
	}
	free_profile(&pr);
}

/* The folded output is not split by line or task: pprof's detail is pprof's alone. */
static void test_pprof__folded_unsplit(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.folded");
	struct trace_frame a[] = { { f->main_fn, 3, 0, 0 }, { f->work_fn, 12, 40, 0 } };
	struct trace_frame b[] = { { f->main_fn, 4, 0, 0 }, { f->work_fn, 13, 40, 0 } };
	char *text, cmd[600];
	int status;

	observe(trace, 200, 200, TRACE_ON_CPU, ORIGIN, 0, a, 2);
	message(f, trace, 200, 200, ORIGIN + MS, (struct trace_message){ .job = 1, .task = 2 });
	observe(trace, 200, 200, TRACE_ON_CPU, ORIGIN + 2 * MS, 0, b, 2);
	assert_int_equal(trace__close(trace, NULL), 0);
	snprintf(cmd, sizeof(cmd), "cat '%s'", f->path);
	text = support_run(cmd, &status);
	assert_int_equal(status, 0);
	assert_string_equal(text, "? (200);? (200);<module>;Worker.run 2\n");
	free(text);
}

/*
 * A target's names: bytes that are not UTF-8 mended (a proto3 string must be UTF-8, or
 * Pyroscope's decoder refuses the profile), a command line of 100 kB cut to 4096 bytes
 * at a character's start.
 */
static void test_pprof__hostile_names(void **state)
{
	enum { LONG = 100000 };
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "evil.pb.gz");
	uint32_t evil = frame_table__intern(
		f->frames, &(struct frame_info){ "e\xff\xc0\x80x\xed\xa0\x80", "/app/\xfe.py", 1,
						 FRAME_PYTHON });
	struct trace_frame stack[] = { { f->main_fn, 3, 0, 0 }, { evil, 4, 8, 0 } };
	char *name = malloc(LONG + 1);
	struct profile pr;
	const char *text;
	uint64_t num;
	size_t i;

	assert_non_null(name);
	memset(name, 'a', LONG);
	for (i = 4091; i + 2 <= LONG; i += 2)
		memcpy(name + i, "\xc3\xa9", 2); /* é: the one at 4095 ends past 4096 */
	name[LONG] = '\0';
	assert_int_equal(trace__name_process(trace, 100, name), 0);
	assert_int_equal(trace__name_thread(trace, 100, 100, "t\xff"), 0);
	observe(trace, 100, 100, TRACE_ON_CPU, ORIGIN, 0, stack, 2);
	assert_int_equal(trace__close(trace, NULL), 0);
	free(name);

	read_profile(f->path, &pr);
	for (i = 0; i < pr.nstrings; i++) {
		assert_true(support_valid_utf8(pr.strings[i]));
		assert_true(strlen(pr.strings[i]) <= 4096);
	}
	assert_int_equal(pr.nsamples, 1);
	assert_true(label(&pr, &pr.samples[0], "process", &text, &num));
	assert_int_equal(strlen(text), 4095);
	assert_memory_equal(text + 4091, "\xc3\xa9\xc3\xa9", 4);
	assert_true(label(&pr, &pr.samples[0], "thread", &text, &num));
	assert_string_equal(text, "t\xef\xbf\xbd");
	free_profile(&pr);
}

/* Nothing sampled: still a profile pprof reads, with its types and an empty string first. */
static void test_pprof__empty(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "empty.pb.gz");
	struct profile pr;

	assert_int_equal(trace__close(trace, NULL), 0);
	read_profile(f->path, &pr);
	assert_true(pr.nstrings > 0);
	assert_string_equal(pr.strings[0], "");
	assert_int_equal(pr.nsample_types, 2);
	assert_int_equal(pr.nsamples, 0);
	assert_int_equal(pr.period, MS);
	assert_int_equal(pr.nmappings, 1);
	assert_true(pr.mapping_symbolized);
	assert_int_equal(pr.duration_nanos, 0);
	free_profile(&pr);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_pprof__content, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pprof__pool_tasks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pprof__folded_unsplit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pprof__hostile_names, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pprof__empty, setup, teardown),
	};

	return cmocka_run_group_tests_name("pprof", tests, NULL, NULL);
}
