/* Tests of the SVG flame graph writer, through the trace stage's public API. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../trace/trace.h"
#include "../common/support.h"

#define ORIGIN 5000000000ULL
#define MS 1000000ULL
#define DRAW_WIDTH 1180.0 /* the SVG's 1200 less its two margins of 10 */

struct fixture {
	char *dir;
	char path[512];
	struct frame_table *frames;
	uint32_t main_fn, work_fn, io_fn, sleep_marker;
	uint64_t t; /* the next observation's time */
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
		f->frames, &(struct frame_info){ "sleep", "", 0, FRAME_OFF_CPU });
	f->t = ORIGIN;
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

/* @n on-CPU samples of @funcs (root first) in @pid's thread @tid. */
static void sample(struct fixture *f, struct trace *trace, uint32_t pid, uint32_t tid,
		   const uint32_t *funcs, uint32_t nframes, int n)
{
	struct trace_frame frames[8];
	uint32_t i;

	assert_true(nframes <= 8);
	for (i = 0; i < nframes; i++)
		frames[i] = (struct trace_frame){ funcs[i], 1, i, 0 };
	while (n-- > 0) {
		struct trace_obs obs = { .pid = pid,
					 .tid = tid,
					 .kind = TRACE_ON_CPU,
					 .t_start_ns = f->t,
					 .nframes = nframes,
					 .frames = frames };

		assert_int_equal(trace__observe(trace, &obs), 0);
		f->t += MS;
	}
}

static char *read_file(const char *path)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long len;

	assert_non_null(fp);
	assert_int_equal(fseek(fp, 0, SEEK_END), 0);
	len = ftell(fp);
	assert_true(len >= 0);
	rewind(fp);
	buf = malloc((size_t)len + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)len, fp), (size_t)len);
	buf[len] = '\0';
	fclose(fp);
	return buf;
}

/* Closes @trace and returns the SVG it wrote, checked well-formed by Python's parser. */
static char *close_and_read(struct fixture *f, struct trace *trace)
{
	char cmd[800];
	char *out;
	int status;

	assert_int_equal(trace__close(trace, NULL), 0);
	snprintf(cmd, sizeof(cmd),
		 "python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "
		 "'%s' 2>&1",
		 f->path);
	out = support_run(cmd, &status);
	if (status)
		fprintf(stderr, "not well-formed XML: %s\n", out ? out : "");
	assert_int_equal(status, 0);
	free(out);
	return read_file(f->path);
}

/* One drawn frame as the SVG holds it. */
struct drawn {
	char label[512]; /* its title's first line */
	uint64_t start, weight;
	unsigned depth;
	double x, width;
	unsigned r, g, b;
	const char *title; /* the whole title, in the file's text */
};

/* The frames of @svg whose label is @label (all of them when NULL), at most @max. */
static int find_frames(const char *svg, const char *label, struct drawn *out, int max)
{
	const char *p = svg;
	int n = 0;

	while ((p = strstr(p, "<g class=\"f\"")) && n < max) {
		struct drawn d = { 0 };
		const char *title = strstr(p, "<title>"), *rect;
		size_t len;

		assert_int_equal(
			sscanf(p, "<g class=\"f\" data-s=\"%lu\" data-w=\"%lu\" data-d=\"%u\"",
			       &d.start, &d.weight, &d.depth),
			3);
		assert_non_null(title);
		title += strlen("<title>");
		len = strcspn(title, "\n<");
		assert_true(len < sizeof(d.label));
		memcpy(d.label, title, len);
		d.title = title;
		rect = strstr(title, "<rect x=\"");
		assert_non_null(rect);
		assert_int_equal(
			sscanf(rect, "<rect x=\"%lf\" y=\"%*u\" width=\"%lf\"", &d.x, &d.width), 2);
		rect = strstr(rect, "fill=\"rgb(");
		assert_non_null(rect);
		assert_int_equal(sscanf(rect, "fill=\"rgb(%u,%u,%u)", &d.r, &d.g, &d.b), 3);
		p = rect;
		if (!label || !strcmp(d.label, label))
			out[n++] = d;
	}
	return n;
}

static struct drawn the_frame(const char *svg, const char *label)
{
	struct drawn d[2];

	if (find_frames(svg, label, d, 2) != 1)
		fail_msg("not exactly one frame labelled \"%s\"", label);
	return d[0];
}

static void assert_near(double a, double b)
{
	if (a < b - 0.02 || a > b + 0.02)
		fail_msg("%f is not %f", a, b);
}

/*
 * Two processes, two threads in the first, one stack with a wait: one tree under "all",
 * a level per process and per thread, widths proportional to the periods.
 */
static void test_svg__widths_and_levels(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "out.svg");
	uint32_t work[] = { f->main_fn, f->work_fn }, io[] = { f->main_fn, f->io_fn };
	struct trace_frame wait[] = { { f->main_fn, 3, 0, 0 },
				      { f->work_fn, 15, 40, 0 },
				      { f->sleep_marker, 0, 0, 0 } };
	struct trace_obs obs = {
		.pid = 200, .tid = 201, .kind = TRACE_OFF_CPU, .nframes = 3, .frames = wait
	};
	struct drawn all, d[4], sleep;
	char *svg;

	assert_int_equal(trace__name_process(trace, 100, "python main.py"), 0);
	assert_int_equal(trace__name_thread(trace, 100, 100, "python"), 0);
	assert_int_equal(trace__name_thread(trace, 100, 101, "worker-1"), 0);
	assert_int_equal(trace__name_process(trace, 200, "python main.py (worker)"), 0);
	assert_int_equal(trace__name_thread(trace, 200, 201, "worker-2"), 0);
	sample(f, trace, 100, 100, work, 2, 300);
	sample(f, trace, 100, 101, work, 2, 100);
	sample(f, trace, 100, 100, io, 2, 50);
	sample(f, trace, 200, 201, work, 2, 50);
	obs.t_start_ns = f->t;
	obs.t_end_ns = f->t + 20 * MS;
	assert_int_equal(trace__observe(trace, &obs), 0);
	svg = close_and_read(f, trace);

	assert_non_null(strstr(svg, "Flame graph: 520 samples of 1 ms"));
	assert_null(strstr(svg, "too narrow"));
	all = the_frame(svg, "all");
	assert_int_equal(all.depth, 0);
	assert_int_equal(all.weight, 520);
	assert_near(all.width, DRAW_WIDTH);

	/* A level per process, then per thread, the biggest first. */
	d[0] = the_frame(svg, "python main.py (pid 100)");
	d[1] = the_frame(svg, "python main.py (worker) (pid 200)");
	assert_int_equal(d[0].depth, 1);
	assert_int_equal(d[1].depth, 1);
	assert_int_equal(d[0].weight, 450);
	assert_int_equal(d[1].weight, 70);
	assert_true(d[0].x < d[1].x);
	assert_near(d[0].width, DRAW_WIDTH * 450 / 520);
	d[0] = the_frame(svg, "python (tid 100)");
	d[1] = the_frame(svg, "worker-1 (tid 101)");
	d[2] = the_frame(svg, "worker-2 (tid 201)");
	assert_int_equal(d[0].depth, 2);
	assert_int_equal(d[1].depth, 2);
	assert_int_equal(d[2].depth, 2);
	assert_int_equal(d[0].weight, 350);
	assert_int_equal(d[1].weight, 100);
	assert_int_equal(d[2].weight, 70);

	/* Merged: one <module> per thread, whatever the stacks under it. */
	assert_int_equal(find_frames(svg, "<module>", d, 4), 0); /* escaped, never raw */
	assert_int_equal(find_frames(svg, "&lt;module&gt;", d, 4), 3);

	/* Worker.run: 300 samples in thread 100, 100 in 101: three times as wide. */
	assert_int_equal(find_frames(svg, "Worker.run", d, 4), 3);
	assert_int_equal(d[0].depth, 4);
	{
		struct drawn *w300 = NULL, *w100 = NULL;
		int i;

		for (i = 0; i < 3; i++) {
			if (d[i].weight == 300)
				w300 = &d[i];
			if (d[i].weight == 100)
				w100 = &d[i];
		}
		assert_non_null(w300);
		assert_non_null(w100);
		assert_near(w300->width / w100->width, 3.0);
		assert_near(w300->width, DRAW_WIDTH * 300 / 520);
		assert_true(!strncmp(
			w300->title,
			"Worker.run\n/app/work.py:10\n300 samples (300.0 ms), 57.69%</title>",
			strlen("Worker.run\n/app/work.py:10\n300 samples (300.0 ms), "
			       "57.69%</title>")));
	}

	/* The wait: 20 periods, drawn in the blues of off-CPU markers. */
	sleep = the_frame(svg, "sleep");
	assert_int_equal(sleep.weight, 20);
	assert_int_equal(sleep.depth, 5);
	assert_near(sleep.width, DRAW_WIDTH * 20 / 520);
	assert_true(sleep.b > sleep.r && sleep.b > sleep.g);
	/* Python frames are warm. */
	assert_true(d[0].r > d[0].b && d[0].r > d[0].g);

	/* Inline script only: no external resource. */
	assert_non_null(strstr(svg, "<script type=\"text/ecmascript\"><![CDATA["));
	assert_null(strstr(svg, "href"));
	free(svg);
}

/* Frames under 0.1 % of the run are left out, and the title says how many. */
static void test_svg__narrow_frames_dropped(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "narrow.svg");
	uint32_t work[] = { f->main_fn, f->work_fn }, io[] = { f->main_fn, f->io_fn };
	uint32_t deeper[] = { f->main_fn, f->io_fn, f->work_fn };
	struct drawn d[2];
	char *svg;

	sample(f, trace, 1, 1, work, 2, 1998);
	sample(f, trace, 1, 1, io, 2, 1);
	sample(f, trace, 1, 1, deeper, 3, 1);
	svg = close_and_read(f, trace);
	/* read_all is 2 of 2000 (kept), the Worker.run under it 1 (dropped). */
	assert_non_null(strstr(svg, "2000 samples of 1 ms (2.00 s), 1 frame too narrow to draw"));
	assert_int_equal(find_frames(svg, "read_all", d, 2), 1);
	assert_int_equal(d[0].weight, 2);
	assert_int_equal(find_frames(svg, "Worker.run", d, 2), 1);
	assert_int_equal(d[0].weight, 1998);
	free(svg);

	/* Exactly 0.1 % is drawn. */
	trace = open_trace(f, "edge.svg");
	sample(f, trace, 1, 1, work, 2, 999);
	sample(f, trace, 1, 1, io, 2, 1);
	svg = close_and_read(f, trace);
	assert_null(strstr(svg, "too narrow"));
	assert_int_equal(find_frames(svg, "read_all", d, 2), 1);
	free(svg);
}

/*
 * Stacks far deeper than the timeline's cap and many stacks sharing a prefix: drawn
 * without recursion, each shared frame once.
 */
static void test_svg__deep_and_merged(void **state)
{
	enum { DEPTH = 5000, LEAVES = 100 };
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "deep.svg");
	struct trace_frame *frames = calloc(DEPTH, sizeof(*frames));
	static struct drawn d[DEPTH + 8];
	uint32_t leaf[LEAVES];
	char *svg;
	int i, j;

	assert_non_null(frames);
	for (i = 0; i < DEPTH; i++)
		frames[i] = (struct trace_frame){ i % 2 ? f->work_fn : f->main_fn, 1, 0, 0 };
	assert_int_equal(trace__observe(trace, &(struct trace_obs){ .pid = 1,
								    .tid = 1,
								    .t_start_ns = f->t,
								    .nframes = DEPTH,
								    .frames = frames }),
			 0);
	svg = close_and_read(f, trace);
	assert_int_equal(find_frames(svg, NULL, d, DEPTH + 8), DEPTH + 3);
	assert_int_equal(find_frames(svg, "Worker.run", d, DEPTH), DEPTH / 2);
	for (i = 0; i < DEPTH / 2; i++)
		assert_near(d[i].width, DRAW_WIDTH);
	free(svg);

	trace = open_trace(f, "merged.svg");
	for (i = 0; i < LEAVES; i++) {
		char name[32];

		snprintf(name, sizeof(name), "leaf%d", i);
		leaf[i] = frame_table__intern(
			f->frames, &(struct frame_info){ name, "/app/x.py", 1, FRAME_PYTHON });
		assert_true(leaf[i] != 0);
	}
	for (i = 0; i < LEAVES; i++) {
		for (j = 0; j < 50; j++)
			frames[j] =
				(struct trace_frame){ j % 2 ? f->work_fn : f->main_fn, 1, 0, 0 };
		frames[50] = (struct trace_frame){ leaf[i], 1, 0, 0 };
		assert_int_equal(trace__observe(trace, &(struct trace_obs){ .pid = 1,
									    .tid = 1,
									    .t_start_ns = f->t,
									    .nframes = 51,
									    .frames = frames }),
				 0);
		f->t += MS;
	}
	svg = close_and_read(f, trace);
	/* all, the process, the thread, the 50 shared frames, the 100 leaves. */
	assert_int_equal(find_frames(svg, NULL, d, DEPTH), 3 + 50 + LEAVES);
	assert_int_equal(find_frames(svg, "leaf7", d, 2), 1);
	assert_near(d[0].width, DRAW_WIDTH / LEAVES);
	free(svg);
	free(frames);
}

/* Nothing sampled: still a well-formed SVG, saying so. */
static void test_svg__empty(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "empty.svg");
	struct drawn d[1];
	char *svg = close_and_read(f, trace);

	assert_non_null(strstr(svg, "no samples were recorded"));
	assert_int_equal(find_frames(svg, NULL, d, 1), 0);
	free(svg);
}

/* True when every '&' of @s starts one of the five references the writer makes. */
static bool references_only(const char *s)
{
	static const char *const refs[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&#39;" };

	while ((s = strchr(s, '&'))) {
		size_t i;

		for (i = 0; i < 5 && strncmp(s, refs[i], strlen(refs[i])); i++)
			;
		if (i == 5)
			return false;
		s++;
	}
	return true;
}

/*
 * Every name is a target's: escape sequences, markup, quotes, a newline and bytes that
 * are not UTF-8 reach the SVG escaped, in character data only, never in the script.
 */
static void test_svg__hostile_names(void **state)
{
	struct fixture *f = *state;
	struct trace *trace = open_trace(f, "evil.svg");
	uint32_t evil = frame_table__intern(
		f->frames,
		&(struct frame_info){ "e\x1b]0;x\x07\n\xff\xc2\x85<script>alert(1)</script>&\"'"
				      "\xef\xbf\xbe]]>\xc3\xa9",
				      "/app/<b>\"x\".py\x1b", 4, FRAME_PYTHON });
	uint32_t stack[] = { f->main_fn, evil };
	const unsigned char *p;
	const char *script, *end;
	struct drawn d[2];
	char *svg;

	assert_int_equal(trace__name_process(trace, 100, "py\x1b[31m<svg onload=x>\"&'\t"), 0);
	assert_int_equal(trace__name_thread(trace, 100, 100, "t\n\xff</title><script>"), 0);
	sample(f, trace, 100, 100, stack, 2, 3);
	svg = close_and_read(f, trace);

	assert_int_equal(find_frames(svg,
				     "e\\x1b]0;x\\x07\\x0a\\xff\\xc2\\x85&lt;script&gt;"
				     "alert(1)&lt;/script&gt;&amp;&quot;&#39;"
				     "\\xef\\xbf\\xbe]]&gt;\xc3\xa9",
				     d, 2),
			 1);
	assert_non_null(strstr(d[0].title, "\n/app/&lt;b&gt;&quot;x&quot;.py\\x1b:4\n"));
	assert_int_equal(
		find_frames(svg, "py\\x1b[31m&lt;svg onload=x&gt;&quot;&amp;&#39;\\x09 (pid 100)",
			    d, 2),
		1);
	assert_int_equal(
		find_frames(svg, "t\\x0a\\xff&lt;/title&gt;&lt;script&gt; (tid 100)", d, 2), 1);

	/*
	 * No raw control character but the titles' line breaks and the script's tabs, which
	 * names never bring (theirs are "\x09"), no byte that is not UTF-8.
	 */
	for (p = (const unsigned char *)svg; *p; p++)
		assert_true(*p >= 0x20 ? *p != 0x7f : *p == '\n' || *p == '\t');
	assert_true(support_valid_utf8(svg));
	assert_null(strstr(svg, "\xc2\x85"));
	assert_null(strstr(svg, "\xef\xbf\xbe"));
	assert_null(strstr(svg, "<script>"));
	assert_null(strstr(svg, "<b>"));
	assert_null(strstr(svg, "onload=x>"));
	assert_null(strstr(svg, "</title><script>"));

	/* One script, the writer's, holding no name; outside it only the writer's references. */
	script = strstr(svg, "<![CDATA[");
	assert_non_null(script);
	end = strstr(script, "]]>");
	assert_non_null(end);
	assert_true(references_only(end));
	assert_null(strstr(end + 3, "<![CDATA["));
	assert_null(strstr(end + 3, "]]>"));
	assert_null(memmem(script, (size_t)(end - script), "alert", 5));
	assert_null(memmem(script, (size_t)(end - script), "onload=x", 8));
	free(svg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_svg__widths_and_levels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_svg__narrow_frames_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_svg__deep_and_merged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_svg__empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_svg__hostile_names, setup, teardown),
	};

	return cmocka_run_group_tests_name("svg", tests, NULL, NULL);
}
