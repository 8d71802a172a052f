/* pprof's profile.proto (what `go tool pprof` and Pyroscope read), from the run's stacks. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../common/hashmap.h"
#include "internal.h"
#include "pb.h"

/* Field numbers of github.com/google/pprof's proto/profile.proto. */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_COMMENT = 13,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3 };
enum {
	MAPPING_ID = 1,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
};
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_LINE = 4 };
enum { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum {
	FUNCTION_ID = 1,
	FUNCTION_NAME = 2,
	FUNCTION_FILENAME = 4,
	FUNCTION_START_LINE = 5,
};

/*
 * Strings are written at most this long (in bytes, cut at a character's start): names
 * come from the target and a process's name is its whole command line.
 */
#define PPROF_MAX_STRING 4096

struct pprof_string {
	const char *s; /* borrowed from the frame table or the names, or @own */
	char *own;
	uint32_t next; /* the next index with the same hash, + 1; 0 ends the chain */
};

/*
 * The string table: every string once, at its index; [0] is "" as profile.proto wants.
 * After an allocation failure intern() returns 0 and @err holds -ENOMEM.
 */
struct string_table {
	struct pprof_string *strs;
	uint32_t n, cap;
	struct hashmap *by_hash; /* hash_string() -> first index + 1 */
	int err;
};

/* What the writer builds: the strings, the locations and functions, their messages. */
struct pprof {
	struct trace *trace;
	struct string_table strings;
	struct hashmap *locations; /* frame id << 32 | line -> location id */
	struct hashmap *functions; /* frame id -> 1, once its Function is in @defs */
	uint32_t nlocations;
	uint32_t strings_written; /* the table's length when it was written */
	struct pb_buf defs;	  /* the Location and Function messages */
	struct pb_buf buf;	  /* the message being written */
	uint8_t *packed;	  /* a packed repeated field's varints */
	size_t packed_cap;
	uint32_t key_pid, key_tid, key_process, key_thread, key_task;
};

static uint32_t intern_string(struct string_table *t, const char *s, bool copy)
{
	uint64_t hash = hash_string(s);
	uintptr_t first = (uintptr_t)hashmap__get(t->by_hash, hash), i;
	struct pprof_string *e;

	if (t->err)
		return 0;
	for (i = first; i; i = t->strs[i - 1].next) {
		if (!strcmp(t->strs[i - 1].s, s))
			return (uint32_t)(i - 1);
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 256;
		struct pprof_string *grown =
			t->cap < UINT32_MAX / 2 ? realloc(t->strs, cap * sizeof(*grown)) : NULL;

		if (!grown)
			goto out_nomem;
		t->strs = grown;
		t->cap = cap;
	}
	e = &t->strs[t->n];
	*e = (struct pprof_string){ .s = s, .next = (uint32_t)first };
	if (copy) {
		e->own = strdup(s);
		if (!e->own)
			goto out_nomem;
		e->s = e->own;
	}
	if (hashmap__set(t->by_hash, hash, (void *)(uintptr_t)(t->n + 1))) {
		free(e->own);
		goto out_nomem;
	}
	return t->n++;

out_nomem:
	t->err = -ENOMEM;
	return 0;
}

static uint32_t intern(struct pprof *p, const char *s)
{
	return intern_string(&p->strings, s, false);
}

static void string_table__release(struct string_table *t)
{
	uint32_t i;

	for (i = 0; i < t->n; i++)
		free(t->strs[i].own);
	free(t->strs);
	hashmap__free(t->by_hash);
}

/* @s as a string field, cut to PPROF_MAX_STRING bytes; pb_string() mends bad UTF-8. */
static void put_string(struct pb_buf *b, uint32_t field, const char *s)
{
	char cut[PPROF_MAX_STRING + 1];
	size_t n = strnlen(s, PPROF_MAX_STRING + 1), back;

	if (n <= PPROF_MAX_STRING) {
		pb_string(b, field, s);
		return;
	}
	/* Not inside a character: back over up to 3 continuation bytes. */
	n = PPROF_MAX_STRING;
	for (back = 0; back < 3 && ((unsigned char)s[n] & 0xc0) == 0x80; back++)
		n--;
	memcpy(cut, s, n);
	cut[n] = '\0';
	pb_string(b, field, cut);
}

/* A repeated integer field, packed as profile.proto's writers do. */
static void put_packed(struct pprof *p, struct pb_buf *b, uint32_t field, const uint64_t *v,
		       size_t n)
{
	size_t len = 0, i;

	if (n * 10 > p->packed_cap) {
		uint8_t *grown = realloc(p->packed, n * 10);

		if (!grown) {
			b->err = -ENOMEM;
			return;
		}
		p->packed = grown;
		p->packed_cap = n * 10;
	}
	for (i = 0; i < n; i++) {
		uint64_t x = v[i];

		while (x >= 0x80) {
			p->packed[len++] = (uint8_t)(x | 0x80);
			x >>= 7;
		}
		p->packed[len++] = (uint8_t)x;
	}
	pb_bytes(b, field, p->packed, len);
}

static void put_value_type(struct pb_buf *b, uint32_t field, uint32_t type, uint32_t unit)
{
	size_t m = pb_begin(b, field);

	pb_uint(b, VALUE_TYPE_TYPE, type);
	pb_uint(b, VALUE_TYPE_UNIT, unit);
	pb_end(b, m);
}

/* Writes frame @func's Function message into p->defs the first time it is named. */
static void define_function(struct pprof *p, uint32_t func)
{
	const struct frame_info *f = frame_table__get(p->trace->opts.frames, func);
	uint32_t name, file;
	size_t m;

	if (hashmap__get(p->functions, func))
		return;
	if (hashmap__set(p->functions, func, (void *)1)) {
		p->defs.err = -ENOMEM;
		return;
	}
	name = intern(p, f ? f->name : "[bad frame id]");
	file = intern(p, f ? f->file : "");
	m = pb_begin(&p->defs, PROFILE_FUNCTION);
	pb_uint(&p->defs, FUNCTION_ID, func);
	/*
	 * No system_name: pprof takes a name equal to it for a C++ one still to demangle
	 * and strips what is between <> and (), making "<module>" "".
	 */
	pb_uint(&p->defs, FUNCTION_NAME, name);
	pb_uint(&p->defs, FUNCTION_FILENAME, file);
	if (f && f->line)
		pb_uint(&p->defs, FUNCTION_START_LINE, f->line);
	pb_end(&p->defs, m);
}

/*
 * The id of the Location of frame @func running @line (0: not known), written into
 * p->defs with its Function when new; 0 when out of memory.
 */
static uint32_t location_of(struct pprof *p, uint32_t func, uint32_t line)
{
	uint64_t key = (uint64_t)func << 32 | line;
	uintptr_t id = (uintptr_t)hashmap__get(p->locations, key);
	size_t m, l;

	if (id)
		return (uint32_t)id;
	id = ++p->nlocations;
	if (hashmap__set(p->locations, key, (void *)id)) {
		p->defs.err = -ENOMEM;
		return 0;
	}
	define_function(p, func);
	m = pb_begin(&p->defs, PROFILE_LOCATION);
	pb_uint(&p->defs, LOCATION_ID, id);
	pb_uint(&p->defs, LOCATION_MAPPING_ID, 1);
	l = pb_begin(&p->defs, LOCATION_LINE);
	pb_uint(&p->defs, LINE_FUNCTION_ID, func);
	if (line)
		pb_uint(&p->defs, LINE_LINE, line);
	pb_end(&p->defs, l);
	pb_end(&p->defs, m);
	return (uint32_t)id;
}

/*
 * The pool_task label's text: "job J task T" for a Pool's task (job and task are the
 * numbers the pool_task slices of a JSON trace carry), "work_id W" for a
 * ProcessPoolExecutor's; false when the sample ran in none.
 */
static bool task_label(const struct folded_stack *s, char *buf, size_t size)
{
	if (s->job < 0 && s->task < 0)
		return false;
	if (s->executor)
		snprintf(buf, size, "work_id %" PRId64, s->task);
	else
		snprintf(buf, size, "job %" PRId64 " task %" PRId64, s->job, s->task);
	return true;
}

/* Interns what sample @s will name: its locations, functions and label values. */
static void prepare_sample(struct pprof *p, const struct folded_stack *s)
{
	const char *process = names__get(p->trace->names, s->pid, 0);
	const char *thread = names__get(p->trace->names, s->pid, s->tid);
	char task[64];
	uint32_t i;

	for (i = 0; i < s->nframes; i++)
		location_of(p, s->funcs[i], s->lines ? s->lines[i] : 0);
	if (process)
		intern(p, process);
	if (thread)
		intern(p, thread);
	if (task_label(s, task, sizeof(task)))
		intern_string(&p->strings, task, true);
}

static void put_label(struct pb_buf *b, uint32_t key, bool is_str, uint64_t v)
{
	size_t m = pb_begin(b, SAMPLE_LABEL);

	pb_uint(b, LABEL_KEY, key);
	pb_uint(b, is_str ? LABEL_STR : LABEL_NUM, v);
	pb_end(b, m);
}

/*
 * One Sample: its locations leaf first, its values (samples, then nanoseconds), labels
 * pid, tid, process, thread and pool_task (see task_label()).
 */
static int write_sample(struct pprof *p, const struct folded_stack *s, uint64_t period_ns,
			uint64_t *ids)
{
	const char *process = names__get(p->trace->names, s->pid, 0);
	const char *thread = names__get(p->trace->names, s->pid, s->tid);
	uint64_t values[2] = { s->weight, s->weight * period_ns };
	struct pb_buf *b = &p->buf;
	char task[64];
	uint32_t i;
	size_t m;

	if ((period_ns && values[1] / period_ns != s->weight) || values[1] > INT64_MAX)
		values[1] = INT64_MAX;
	for (i = 0; i < s->nframes; i++) {
		uint32_t k = s->nframes - 1 - i;
		uint64_t key = (uint64_t)s->funcs[k] << 32 | (s->lines ? s->lines[k] : 0);

		/* Defined by prepare_sample(), before the table was written. */
		ids[i] = (uintptr_t)hashmap__get(p->locations, key);
		if (!ids[i])
			return -EINVAL;
	}
	pb_buf__reset(b);
	m = pb_begin(b, PROFILE_SAMPLE);
	put_packed(p, b, SAMPLE_LOCATION_ID, ids, s->nframes);
	put_packed(p, b, SAMPLE_VALUE, values, 2);
	put_label(b, p->key_pid, false, s->pid);
	put_label(b, p->key_tid, false, s->tid);
	if (process)
		put_label(b, p->key_process, true, intern(p, process));
	if (thread)
		put_label(b, p->key_thread, true, intern(p, thread));
	if (task_label(s, task, sizeof(task)))
		put_label(b, p->key_task, true, intern_string(&p->strings, task, true));
	pb_end(b, m);
	if (b->err || p->strings.err)
		return -ENOMEM;
	if (p->strings.n != p->strings_written)
		return -EINVAL; /* a string prepare_sample() missed: not in the table */
	out_file__write(p->trace->out, b->data, b->len);
	out_file__mark(p->trace->out);
	return 0;
}

/* When the stacks start on the wall clock, from the kernel's CLOCK_MONOTONIC; 0: unknown. */
static uint64_t wall_time_of(uint64_t monotonic_ns)
{
	struct timespec mono, real;
	uint64_t mono_ns, real_ns;

	if (clock_gettime(CLOCK_MONOTONIC, &mono) || clock_gettime(CLOCK_REALTIME, &real))
		return 0;
	mono_ns = (uint64_t)mono.tv_sec * 1000000000 + (uint64_t)mono.tv_nsec;
	real_ns = (uint64_t)real.tv_sec * 1000000000 + (uint64_t)real.tv_nsec;
	if (monotonic_ns > mono_ns || mono_ns - monotonic_ns > real_ns)
		return 0;
	return real_ns - (mono_ns - monotonic_ns);
}

/*
 * Interns the comments pprof prints above every report: the tool, then the trace's
 * notes (lost samples, ...) that are not 0 on one line, and untracked pool tasks.
 */
static void intern_comments(struct pprof *p, uint32_t *ids, size_t *n)
{
	struct trace *trace = p->trace;
	uint64_t untracked = folded__tasks_untracked(trace->folded);
	char text[PPROF_MAX_STRING];
	size_t i, len = 0;

	*n = 0;
	ids[(*n)++] = intern(p, "pytrace-sample " PYTRACE_VERSION);
	for (i = 0; i < trace->nnotes && len < sizeof(text); i++) {
		if (trace->notes[i].value)
			len += (size_t)snprintf(text + len, sizeof(text) - len, "%s%s %" PRIu64,
						len ? ", " : "notes: ", trace->notes[i].key,
						trace->notes[i].value);
	}
	if (len)
		ids[(*n)++] = intern_string(&p->strings, text, true);
	if (untracked) {
		snprintf(text, sizeof(text),
			 "pool tasks of %" PRIu64 " threads not tracked (more than %d at once)",
			 untracked, FOLDED_MAX_TASK_THREADS);
		ids[(*n)++] = intern_string(&p->strings, text, true);
	}
}

/*
 * The profile's fields but its samples, as one record: the sample types, the period,
 * when and how long, the comments, the string table, the Locations and Functions.
 */
static int write_head(struct pprof *p, const uint32_t *comments, size_t ncomments)
{
	struct folded *folded = p->trace->folded;
	uint32_t samples = intern(p, "samples"), count = intern(p, "count");
	uint32_t time = intern(p, "time"), ns = intern(p, "nanoseconds");
	struct pb_buf *b = &p->buf;
	uint64_t first, last;
	uint32_t i;
	size_t m;

	pb_buf__reset(b);
	put_value_type(b, PROFILE_SAMPLE_TYPE, samples, count);
	put_value_type(b, PROFILE_SAMPLE_TYPE, time, ns);
	put_value_type(b, PROFILE_PERIOD_TYPE, time, ns);
	pb_uint(b, PROFILE_PERIOD, folded__period_ns(folded));
	pb_uint(b, PROFILE_DEFAULT_SAMPLE_TYPE, time);
	/* Every location in one mapping, said to be symbolized: pprof looks for no binary. */
	m = pb_begin(b, PROFILE_MAPPING);
	pb_uint(b, MAPPING_ID, 1);
	pb_uint(b, MAPPING_HAS_FUNCTIONS, 1);
	pb_uint(b, MAPPING_HAS_FILENAMES, 1);
	pb_uint(b, MAPPING_HAS_LINE_NUMBERS, 1);
	pb_end(b, m);
	if (folded__span(folded, &first, &last)) {
		uint64_t wall = wall_time_of(first);

		if (wall)
			pb_uint(b, PROFILE_TIME_NANOS, wall);
		pb_uint(b, PROFILE_DURATION_NANOS, last - first);
	}
	for (i = 0; i < ncomments; i++)
		pb_uint(b, PROFILE_COMMENT, comments[i]);
	if (p->strings.err)
		return p->strings.err;
	for (i = 0; i < p->strings.n; i++)
		put_string(b, PROFILE_STRING_TABLE, p->strings.strs[i].s);
	p->strings_written = p->strings.n;
	if (b->err || p->defs.err)
		return -ENOMEM;
	out_file__write(p->trace->out, b->data, b->len);
	out_file__write(p->trace->out, p->defs.data, p->defs.len);
	out_file__mark(p->trace->out);
	return 0;
}

static void pprof__release(struct pprof *p)
{
	string_table__release(&p->strings);
	hashmap__free(p->locations);
	hashmap__free(p->functions);
	pb_buf__release(&p->defs);
	pb_buf__release(&p->buf);
	free(p->packed);
}

/*
 * Two passes over the stacks: the first interns every string and defines every
 * location, so the string table can come first and each sample after it is a record
 * of its own (a full disk ends the profile at its last whole sample, still readable);
 * the second writes the samples. Memory: the strings, locations and functions, bounded
 * by the distinct frames, lines and names; one sample's message.
 */
int pprof__write(struct trace *trace)
{
	struct pprof p = { .trace = trace };
	const struct folded_stack *s = NULL;
	uint64_t period_ns = folded__period_ns(trace->folded), *ids = NULL;
	uint32_t comments[3], max_frames = 0;
	size_t cursor = 0, ncomments;
	int err = -ENOMEM;

	p.strings.by_hash = hashmap__new();
	p.locations = hashmap__new();
	p.functions = hashmap__new();
	if (!p.strings.by_hash || !p.locations || !p.functions)
		goto out_release;
	intern(&p, "");
	p.key_pid = intern(&p, "pid");
	p.key_tid = intern(&p, "tid");
	p.key_process = intern(&p, "process");
	p.key_thread = intern(&p, "thread");
	p.key_task = intern(&p, "pool_task");
	intern_comments(&p, comments, &ncomments);
	while (folded__next(trace->folded, &cursor, &s)) {
		prepare_sample(&p, s);
		if (s->nframes > max_frames)
			max_frames = s->nframes;
	}
	ids = calloc(max_frames ? max_frames : 1, sizeof(*ids));
	if (!ids)
		goto out_release;
	err = write_head(&p, comments, ncomments);
	cursor = 0;
	s = NULL;
	while (!err && folded__next(trace->folded, &cursor, &s))
		err = write_sample(&p, s, period_ns, ids);
	if (!err)
		err = out_file__error(trace->out);
out_release:
	free(ids);
	pprof__release(&p);
	return err;
}
