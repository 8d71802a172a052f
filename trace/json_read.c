/*
 * Reads a written Trace Event JSON trace (gzip'd or not) back into a summary: its
 * Complete events nested again per thread by time (a parent before a child with the
 * same start and duration, as written), and its process and thread names. A small
 * JSON parser over the whole file in memory; anything else in the file is skipped.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../common/hashmap.h"
#include "read_feed.h"
#include "trace.h"

#define JSON_MAX_NESTING 64

struct json_in {
	const char *p, *end;
	int err; /* -EINVAL once the text is not JSON */
};

/* The event's fields that matter here, in the order they came. */
struct read_event {
	char ph[4];
	char *name, *cat, *arg_name, *arg_file;
	uint64_t pid, tid, ts, dur;
	uint64_t first_line, job, task;
	bool has_ts, has_dur;
};

static void skip_space(struct json_in *in)
{
	while (in->p < in->end &&
	       (*in->p == ' ' || *in->p == '\n' || *in->p == '\r' || *in->p == '\t'))
		in->p++;
}

static bool take(struct json_in *in, char c)
{
	skip_space(in);
	if (in->p < in->end && *in->p == c) {
		in->p++;
		return true;
	}
	return false;
}

static void fail(struct json_in *in)
{
	if (!in->err)
		in->err = -EINVAL;
	in->p = in->end;
}

static unsigned int hex4(struct json_in *in)
{
	unsigned int v = 0;
	int i;

	for (i = 0; i < 4; i++, in->p++) {
		char c = in->p < in->end ? *in->p : 0;

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned int)(c - '0');
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			v |= (unsigned int)((c | 0x20) - 'a' + 10);
		else
			fail(in);
	}
	return v;
}

/* Appends code point @cp (BMP; surrogates become U+FFFD) as UTF-8. */
static size_t put_utf8(char *out, unsigned int cp)
{
	if (cp >= 0xd800 && cp <= 0xdfff)
		cp = 0xfffd;
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | cp >> 6);
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	out[0] = (char)(0xe0 | cp >> 12);
	out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[2] = (char)(0x80 | (cp & 0x3f));
	return 3;
}

/* A string; returns it malloc'd when @keep, else NULL. */
static char *read_string(struct json_in *in, bool keep)
{
	const char *q;
	char *out = NULL;
	size_t n = 0;

	if (!take(in, '"')) {
		fail(in);
		return NULL;
	}
	for (q = in->p; q < in->end && *q != '"'; q++)
		q += *q == '\\'; /* the escaped character is not the end */
	if (q >= in->end) {
		fail(in);
		return NULL;
	}
	/* Escapes only shrink (\uXXXX: 6 bytes to at most 3). */
	if (keep && !(out = malloc((size_t)(q - in->p) + 1))) {
		in->err = -ENOMEM;
		in->p = in->end;
		return NULL;
	}
	while (in->p < q) {
		char c = *in->p++;

		if (c == '\\') {
			char e = *in->p++;
			char buf[4];
			size_t len = 1;

			buf[0] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
			if (e == 'b' || e == 'f')
				buf[0] = e == 'b' ? '\b' : '\f';
			if (e == 'u' && q - in->p < 4) {
				/* Not JSON; its U+FFFD would outgrow the copy ("\u": 2 bytes to 3). */
				fail(in);
				break;
			}
			if (e == 'u')
				len = put_utf8(buf, hex4(in));
			if (out)
				memcpy(out + n, buf, len);
			n += len;
		} else if (out) {
			out[n++] = c;
		}
	}
	in->p = q + 1;
	if (out)
		out[n] = '\0';
	return out;
}

/* A number as an unsigned integer (fractions dropped, negatives and NaN 0). */
static uint64_t read_number(struct json_in *in)
{
	char *end;
	double v;

	skip_space(in);
	v = strtod(in->p, &end);
	if (end == in->p || end > in->end) {
		fail(in);
		return 0;
	}
	in->p = end;
	/* Past 2^64 (1e30, inf) saturates: converting it is undefined (fuzz_json_read). */
	if (v >= 18446744073709551616.0)
		return UINT64_MAX;
	return v > 0 ? (uint64_t)v : 0;
}

static void skip_value(struct json_in *in, int nesting);

/* Calls @member for each "key": value of an object; it must consume the value. */
static void read_object(struct json_in *in, int nesting,
			void (*member)(struct json_in *in, const char *key, void *ctx, int nesting),
			void *ctx)
{
	if (!take(in, '{') || nesting > JSON_MAX_NESTING) {
		fail(in);
		return;
	}
	if (take(in, '}'))
		return;
	do {
		char *key = read_string(in, true);

		if (!key || !take(in, ':')) {
			free(key);
			fail(in);
			return;
		}
		member(in, key, ctx, nesting + 1);
		free(key);
	} while (take(in, ','));
	if (!take(in, '}'))
		fail(in);
}

static void skip_member(struct json_in *in, const char *key, void *ctx, int nesting)
{
	(void)key;
	(void)ctx;
	skip_value(in, nesting);
}

static void skip_value(struct json_in *in, int nesting)
{
	skip_space(in);
	if (in->p >= in->end || nesting > JSON_MAX_NESTING) {
		fail(in);
		return;
	}
	if (*in->p == '{') {
		read_object(in, nesting, skip_member, NULL);
	} else if (*in->p == '[') {
		in->p++;
		if (take(in, ']'))
			return;
		do
			skip_value(in, nesting + 1);
		while (take(in, ','));
		if (!take(in, ']'))
			fail(in);
	} else if (*in->p == '"') {
		read_string(in, false);
	} else if (!strncmp(in->p, "true", 4) || !strncmp(in->p, "null", 4)) {
		in->p += 4;
	} else if (!strncmp(in->p, "false", 5)) {
		in->p += 5;
	} else {
		read_number(in);
	}
}

static void args_member(struct json_in *in, const char *key, void *ctx, int nesting)
{
	struct read_event *ev = ctx;

	skip_space(in);
	if (!strcmp(key, "name") && in->p < in->end && *in->p == '"') {
		free(ev->arg_name);
		ev->arg_name = read_string(in, true);
	} else if (!strcmp(key, "file") && in->p < in->end && *in->p == '"') {
		free(ev->arg_file);
		ev->arg_file = read_string(in, true);
	} else if (!strcmp(key, "first_line") && in->p < in->end && *in->p != '"') {
		ev->first_line = read_number(in);
	} else if (!strcmp(key, "pool_job") && in->p < in->end && *in->p != '"') {
		ev->job = read_number(in);
	} else if ((!strcmp(key, "pool_task") || !strcmp(key, "work_id")) && in->p < in->end &&
		   *in->p != '"') {
		ev->task = read_number(in);
	} else {
		skip_value(in, nesting);
	}
}

static void event_member(struct json_in *in, const char *key, void *ctx, int nesting)
{
	struct read_event *ev = ctx;
	char **text = !strcmp(key, "name") ? &ev->name : !strcmp(key, "cat") ? &ev->cat : NULL;

	skip_space(in);
	if (text && in->p < in->end && *in->p == '"') {
		free(*text);
		*text = read_string(in, true);
	} else if (!strcmp(key, "ph") && in->p < in->end && *in->p == '"') {
		char *ph = read_string(in, true);

		snprintf(ev->ph, sizeof(ev->ph), "%s", ph ? ph : "");
		free(ph);
	} else if (!strcmp(key, "pid") || !strcmp(key, "tid") || !strcmp(key, "ts") ||
		   !strcmp(key, "dur")) {
		uint64_t v = read_number(in);

		if (key[0] == 'p')
			ev->pid = v;
		else if (key[1] == 'i')
			ev->tid = v;
		else if (key[0] == 't')
			ev->ts = v, ev->has_ts = true;
		else
			ev->dur = v, ev->has_dur = true;
	} else if (!strcmp(key, "args")) {
		read_object(in, nesting, args_member, ev);
	} else {
		skip_value(in, nesting);
	}
}

struct reader {
	struct trace_summary *summary;
	struct hashmap *files; /* hash_string() (+ probe) -> the file's name, owned */
	struct read_slice *slices;
	size_t count, cap;
	uint64_t origin_ns;
	bool has_events;
	int err;
};

/* The one copy of @file's name (NULL when there is none or no memory for it). */
static const char *intern_file(struct reader *r, const char *file)
{
	uint64_t h;
	char *known, *copy;

	if (!file || !*file)
		return NULL;
	h = hash_string(file);
	while ((known = hashmap__get(r->files, h)) && strcmp(known, file))
		h++; /* another name with this hash: probe on */
	if (known)
		return known;
	copy = strdup(file);
	if (copy && hashmap__set(r->files, h, copy)) {
		free(copy);
		copy = NULL;
	}
	return copy;
}

/* Keeps a Complete event, names a process or thread; drops the rest. */
static void take_event(struct reader *r, struct read_event *ev)
{
	/* The findings the trace was written with: the report makes its own. */
	if ((ev->cat && !strcmp(ev->cat, "finding")) || ev->pid == TRACE_FINDINGS_PID)
		return;
	if (!strcmp(ev->ph, "X") && ev->has_ts && ev->has_dur && ev->name) {
		if (r->count == r->cap) {
			size_t cap = r->cap ? 2 * r->cap : 1024;
			struct read_slice *grown = realloc(r->slices, cap * sizeof(*grown));

			if (!grown) {
				r->err = -ENOMEM;
				return;
			}
			r->slices = grown;
			r->cap = cap;
		}
		r->slices[r->count] = (struct read_slice){
			.pid = (uint32_t)ev->pid,
			.tid = (uint32_t)ev->tid,
			.ts = ev->ts,
			.dur = ev->dur,
			.name = ev->name,
			.file = intern_file(r, ev->arg_file),
			.line = (uint32_t)ev->first_line,
			.job = (int64_t)ev->job,
			.task = (int64_t)ev->task,
			.off_cpu = ev->cat && !strcmp(ev->cat, "off-cpu"),
			.no_gil = ev->cat && !strcmp(ev->cat, "no-gil"),
			.message = ev->cat && !strcmp(ev->cat, "message"),
			.order = r->count,
		};
		r->count++;
		ev->name = NULL;
	} else if (!strcmp(ev->ph, "M") && ev->name && ev->arg_name) {
		if (!strcmp(ev->name, "process_name"))
			r->err =
				trace_summary__name(r->summary, (uint32_t)ev->pid, 0, ev->arg_name);
		else if (!strcmp(ev->name, "thread_name") && ev->tid)
			r->err = trace_summary__name(r->summary, (uint32_t)ev->pid,
						     (uint32_t)ev->tid, ev->arg_name);
	}
}

static void other_member(struct json_in *in, const char *key, void *ctx, int nesting)
{
	struct reader *r = ctx;

	if (!strcmp(key, "origin_ns"))
		r->origin_ns = read_number(in);
	else if (!strcmp(key, "cpus"))
		trace_summary__cpus(r->summary, (unsigned)read_number(in));
	else if (!strcmp(key, "tool_cpu_ns"))
		trace_summary__tool_cpu(r->summary, read_number(in));
	else
		skip_value(in, nesting);
}

static void top_member(struct json_in *in, const char *key, void *ctx, int nesting)
{
	struct reader *r = ctx;

	if (!strcmp(key, "otherData") && (skip_space(in), in->p < in->end && *in->p == '{')) {
		read_object(in, nesting, other_member, r);
		return;
	}
	if (strcmp(key, "traceEvents")) {
		skip_value(in, nesting);
		return;
	}
	if (!take(in, '[')) {
		fail(in);
		return;
	}
	r->has_events = true;
	if (take(in, ']'))
		return;
	do {
		struct read_event ev = { .ph = "" };

		read_object(in, nesting + 1, event_member, &ev);
		if (!in->err && !r->err)
			take_event(r, &ev);
		free(ev.name);
		free(ev.cat);
		free(ev.arg_name);
		free(ev.arg_file);
	} while (!in->err && !r->err && take(in, ','));
	if (!in->err && !r->err && !take(in, ']'))
		fail(in);
}

/* Each thread's slices nested again and fed; ts 1 us is the origin (trace_to_us()). */
static int feed(struct reader *r)
{
	return read_feed(r->summary, r->slices, r->count, r->origin_ns - 1000, 1000);
}

/* The whole file, uncompressed when gzip'd, with a NUL after it. */
static int read_all(const char *path, char **data, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	size_t cap = 1 << 20, n = 0;
	char *buf = NULL;
	int got = 1, err = 0;

	if (!gz)
		return errno ? -errno : -ENOMEM;
	while (got > 0) {
		if (!buf || cap - n <= 65536) {
			char *grown = realloc(buf, buf ? cap *= 2 : cap);

			if (!grown) {
				err = -ENOMEM;
				break;
			}
			buf = grown;
		}
		got = gzread(gz, buf + n, 65536);
		if (got > 0)
			n += (size_t)got;
		else if (got < 0)
			err = -EINVAL; /* not gzip'd data after a gzip header */
	}
	gzclose(gz);
	if (err) {
		free(buf);
		return err;
	}
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

int trace_summary__read_json(struct trace_summary *s, const char *path)
{
	struct reader r = { .summary = s };
	struct json_in in;
	size_t len, i;
	char *data;
	int err = read_all(path, &data, &len);

	if (err)
		return err;
	r.files = hashmap__new();
	if (!r.files) {
		free(data);
		return -ENOMEM;
	}
	in = (struct json_in){ .p = data, .end = data + len };
	read_object(&in, 0, top_member, &r);
	err = r.err ? r.err : in.err;
	if (!err && !r.has_events)
		err = -EINVAL;
	if (!err)
		err = feed(&r);
	for (i = 0; i < r.count; i++)
		free((char *)r.slices[i].name);
	free(r.slices);
	hashmap__free_all(r.files, free);
	free(data);
	return err;
}
