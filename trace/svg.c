/* An interactive SVG flame graph of the whole run: every process's stacks merged. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "../common/log.h"
#include "internal.h"
#include "json.h"

/*
 * Geometry, in SVG user units (pixels): frames hang from the root at the top (an icicle
 * graph), so the hot paths of deep stacks are seen without scrolling to the bottom.
 * The script below repeats W, PAD and CHAR_W.
 */
#define SVG_WIDTH 1200
#define SVG_PAD 10
#define SVG_TOP 56	   /* the title lines and buttons above the frames */
#define SVG_BOTTOM 34	   /* the details line below */
#define SVG_FRAME_H 16	   /* a row: 15 of rectangle, 1 of gap */
#define SVG_CHAR_W 7.08	   /* an average character of the 12px font */
#define SVG_MIN_SHARE 1000 /* frames under 1/1000 of the run's width are not drawn */

#define NODE_BLOCK 1024

/*
 * One node of the merged tree: the root ("all"), a process (@id: pid), a thread (@id:
 * tid) or a frame (@id: frame id), by depth 0, 1, 2, 3 and more. A node's children are
 * keyed by (its @index, their @id), so equal paths of every stack share their nodes.
 */
struct flame_node {
	struct flame_node *parent, *first_child, *next_sibling;
	uint64_t weight; /* periods of the stacks through it */
	uint64_t start;	 /* periods left of it on its row, set when drawing */
	uint32_t index;
	uint32_t id;
	uint32_t depth;
};

struct node_block {
	struct node_block *next;
	size_t used;
	struct flame_node nodes[NODE_BLOCK];
};

struct flame {
	struct node_block *blocks; /* newest first */
	struct hashmap *children;  /* parent index << 32 | child id -> child */
	struct flame_node *root;
	size_t count;
};

static void flame__free(struct flame *fl)
{
	struct node_block *b, *next;

	for (b = fl->blocks; b; b = next) {
		next = b->next;
		free(b);
	}
	hashmap__free(fl->children);
}

static struct flame_node *flame__node(struct flame *fl, struct flame_node *parent, uint32_t id)
{
	struct node_block *b = fl->blocks;
	struct flame_node *n;

	if (fl->count >= UINT32_MAX)
		return NULL;
	if (!b || b->used == NODE_BLOCK) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return NULL;
		b->next = fl->blocks;
		fl->blocks = b;
	}
	n = &b->nodes[b->used++];
	n->index = (uint32_t)fl->count++;
	n->id = id;
	n->parent = parent;
	if (parent) {
		n->depth = parent->depth + 1;
		n->next_sibling = parent->first_child;
		parent->first_child = n;
	}
	return n;
}

/* @parent's child @id, made when new; NULL when out of memory. */
static struct flame_node *flame__child(struct flame *fl, struct flame_node *parent, uint32_t id)
{
	uint64_t key = (uint64_t)parent->index << 32 | id;
	struct flame_node *n = hashmap__get(fl->children, key);

	if (n)
		return n;
	n = flame__node(fl, parent, id);
	if (!n)
		return NULL;
	if (hashmap__set(fl->children, key, n)) {
		/* Left linked but unkeyed: drawn once, never found again; the build fails. */
		return NULL;
	}
	return n;
}

/* Adds @s along the path all -> process -> thread -> its frames. 0 or -ENOMEM. */
static int flame__add(struct flame *fl, const struct folded_stack *s)
{
	struct flame_node *n = fl->root;
	uint32_t i;

	n->weight += s->weight;
	for (i = 0; i < s->nframes + 2; i++) {
		n = flame__child(fl, n, i == 0 ? s->pid : i == 1 ? s->tid : s->funcs[i - 2]);
		if (!n)
			return -ENOMEM;
		n->weight += s->weight;
	}
	return 0;
}

static int by_weight(const void *a, const void *b)
{
	const struct flame_node *x = *(const struct flame_node *const *)a;
	const struct flame_node *y = *(const struct flame_node *const *)b;

	if (x->weight != y->weight)
		return x->weight > y->weight ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Orders every node's children biggest first (ties by id: pid, tid, or the frame's id,
 * which follows first appearance), so each row reads from the heaviest callee left.
 * @scratch holds fl->count pointers.
 */
static void flame__sort(struct flame *fl, struct flame_node **scratch)
{
	struct node_block *b;
	size_t i, n, k;

	for (b = fl->blocks; b; b = b->next) {
		for (i = 0; i < b->used; i++) {
			struct flame_node *p = &b->nodes[i], *c;

			if (!p->first_child || !p->first_child->next_sibling)
				continue;
			for (n = 0, c = p->first_child; c; c = c->next_sibling)
				scratch[n++] = c;
			qsort(scratch, n, sizeof(*scratch), by_weight);
			for (k = 0; k + 1 < n; k++)
				scratch[k]->next_sibling = scratch[k + 1];
			scratch[n - 1]->next_sibling = NULL;
			p->first_child = scratch[0];
		}
	}
}

/*
 * Writes @s (a target's name: untrusted) as XML character data, at most @max characters
 * of it as shown; with @out NULL only counts them. Markup characters become references;
 * what XML 1.0 forbids or a reader should not get raw (C0 controls, newlines included,
 * DEL, C1 controls, U+FFFE and U+FFFF, bytes that are not UTF-8) is written "\xNN", as
 * the folded format writes it. Returns the characters written, an "\xNN" counting 4.
 */
static size_t put_text(struct out_file *out, const char *s, size_t max)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0, shown = 0;
	char buf[256];

	while (*p && shown < max) {
		size_t len = *p >= 0x80 ? utf8_valid_length(p) : 1;
		/* U+0080..U+009F are 0xc2 0x80..0x9f; U+FFFE, U+FFFF 0xef 0xbf 0xbe..0xbf. */
		bool c1 = len == 2 && p[0] == 0xc2 && p[1] < 0xa0;
		bool nonchar = len == 3 && p[0] == 0xef && p[1] == 0xbf && p[2] >= 0xbe;
		const char *ref = *p == '&'    ? "&amp;"
				  : *p == '<'  ? "&lt;"
				  : *p == '>'  ? "&gt;"
				  : *p == '"'  ? "&quot;"
				  : *p == '\'' ? "&#39;"
					       : NULL;

		if (n > sizeof(buf) - 8) {
			if (out)
				out_file__write(out, buf, n);
			n = 0;
		}
		if (ref) {
			memcpy(buf + n, ref, strlen(ref));
			n += strlen(ref);
			shown++;
		} else if (*p < 0x20 || *p == 0x7f || !len || c1 || nonchar) {
			if (shown + 4 > max)
				break;
			buf[n++] = '\\';
			buf[n++] = 'x';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 0xf];
			len = 1; /* the rest of the sequence follows as escapes of its own */
			shown += 4;
		} else {
			memcpy(buf + n, p, len);
			n += len;
			shown++;
		}
		p += len;
	}
	if (out)
		out_file__write(out, buf, n);
	return shown;
}

/* What a node's rectangle says; NULL when out of memory. Caller frees. */
static char *node_label(const struct trace *trace, const struct flame_node *n,
			const struct frame_info **info)
{
	const char *name;
	char *label = NULL;

	*info = NULL;
	if (n->depth == 0)
		return strdup("all");
	if (n->depth <= 2) {
		uint32_t pid = n->depth == 1 ? n->id : n->parent->id;

		name = names__get(trace->names, pid, n->depth == 1 ? 0 : n->id);
		if (asprintf(&label, "%s (%s %" PRIu32 ")", name ? name : "?",
			     n->depth == 1 ? "pid" : "tid", n->id) < 0)
			return NULL;
		return label;
	}
	*info = frame_table__get(trace->opts.frames, n->id);
	return strdup(*info ? (*info)->name : "[bad frame id]");
}

struct palette {
	uint8_t r, g, b;    /* the palette's darkest */
	uint8_t dr, dg, db; /* and how far a name's hash moves each channel */
};

/* Warm for Python (and native) frames, blues and greys for time not running Python. */
static const struct palette palettes[] = {
	[FRAME_PYTHON] = { 210, 50, 20, 45, 120, 40 },		/* red to orange */
	[FRAME_NATIVE] = { 200, 190, 70, 40, 45, 40 },		/* ochre to khaki */
	[FRAME_KERNEL] = { 60, 175, 160, 50, 45, 40 },		/* aqua */
	[FRAME_OFF_CPU] = { 70, 115, 205, 50, 55, 45 },		/* blue: waiting */
	[FRAME_NO_GIL] = { 145, 155, 185, 30, 30, 30 },		/* grey-blue: no GIL */
	[FRAME_MESSAGE] = { 100, 190, 90, 50, 40, 40 },		/* green: a pool's message */
	[FRAME_KIND_COUNT] = { 170, 140, 210, 30, 30, 30 },	/* a process: purple */
	[FRAME_KIND_COUNT + 1] = { 200, 185, 230, 25, 25, 20 }, /* a thread: lavender */
};

/* A colour hashed from the label, so one function has one colour in every graph. */
static void put_fill(struct out_file *out, const struct flame_node *n, const struct frame_info *f,
		     const char *label)
{
	uint64_t h = hash_string(label);
	const struct palette *p;

	if (n->depth == 0) {
		out_file__puts(out, "rgb(200,200,200)");
		return;
	}
	p = n->depth == 1		      ? &palettes[FRAME_KIND_COUNT]
	    : n->depth == 2		      ? &palettes[FRAME_KIND_COUNT + 1]
	    : f && f->kind < FRAME_KIND_COUNT ? &palettes[f->kind]
					      : &palettes[FRAME_NATIVE];
	out_file__printf(out, "rgb(%u,%u,%u)", p->r + (unsigned)(p->dr * (h & 0xff) / 255),
			 p->g + (unsigned)(p->dg * (h >> 8 & 0xff) / 255),
			 p->b + (unsigned)(p->db * (h >> 16 & 0xff) / 255));
}

static void put_duration(struct out_file *out, uint64_t ns)
{
	if (ns >= 1000000000ULL)
		out_file__printf(out, "%.2f s", ns / 1e9);
	else if (ns >= 1000000ULL)
		out_file__printf(out, "%.1f ms", ns / 1e6);
	else
		out_file__printf(out, "%.0f us", ns / 1e3);
}

/*
 * One frame: a <g> with its place in periods (data-s, data-w) and row (data-d) for the
 * script, a <title> whose first line is the full label (the script's search reads it
 * there), the rectangle and the label cut to fit. Names go in character data only.
 */
static int put_node(struct trace *trace, const struct flame_node *n, uint64_t total)
{
	struct out_file *out = trace->out;
	double scale = (double)(SVG_WIDTH - 2 * SVG_PAD) / total;
	double x = SVG_PAD + n->start * scale, w = n->weight * scale;
	unsigned y = SVG_TOP + n->depth * SVG_FRAME_H;
	const struct frame_info *f;
	char *label = node_label(trace, n, &f);
	size_t fit = w > 6 ? (size_t)((w - 6) / SVG_CHAR_W) : 0;

	if (!label)
		return -ENOMEM;
	out_file__printf(out,
			 "<g class=\"f\" data-s=\"%" PRIu64 "\" data-w=\"%" PRIu64
			 "\" data-d=\"%" PRIu32 "\"><title>",
			 n->start, n->weight, n->depth);
	put_text(out, label, SIZE_MAX);
	if (f && f->file[0]) {
		out_file__puts(out, "\n");
		put_text(out, f->file, SIZE_MAX);
		if (f->line)
			out_file__printf(out, ":%" PRIu32, f->line);
	}
	if (f && f->kind != FRAME_PYTHON)
		out_file__printf(out, "\n%s", frame_kind__name(f->kind));
	out_file__printf(out, "\n%" PRIu64 " samples (", n->weight);
	put_duration(out, n->weight * folded__period_ns(trace->folded));
	out_file__printf(out,
			 "), %.2f%%</title><rect x=\"%.2f\" y=\"%u\" width=\"%.2f\" "
			 "height=\"%u\" fill=\"",
			 100.0 * n->weight / total, x, y, w, SVG_FRAME_H - 1);
	put_fill(out, n, f, label);
	out_file__printf(out, "\"/><text x=\"%.2f\" y=\"%u\">", x + 3, y + 11);
	if (fit >= 3) {
		if (put_text(NULL, label, SIZE_MAX) <= fit) {
			put_text(out, label, SIZE_MAX);
		} else {
			put_text(out, label, fit - 2);
			out_file__puts(out, "..");
		}
	}
	out_file__puts(out, "</text></g>\n");
	free(label);
	return 0;
}

/*
 * Draws the nodes at least @min wide, breadth first through @queue (fl->count pointers;
 * no recursion: stacks can be thousands of frames deep), so that a file cut short by a
 * full disk still has the top rows, heaviest first. Each child starts where its elder
 * siblings end. Stops at the first write error, leaving it in trace->out.
 */
static int flame__draw(struct trace *trace, struct flame *fl, uint64_t min,
		       struct flame_node **queue)
{
	size_t head = 0, tail = 0;
	int err;

	queue[tail++] = fl->root;
	while (head < tail) {
		struct flame_node *n = queue[head++], *c;
		uint64_t at = n->start;

		err = put_node(trace, n, fl->root->weight);
		if (err)
			return err;
		out_file__mark(trace->out);
		if (out_file__error(trace->out))
			return 0;
		for (c = n->first_child; c; c = c->next_sibling) {
			c->start = at;
			at += c->weight;
			if (c->weight >= min)
				queue[tail++] = c;
		}
	}
	return 0;
}

/*
 * The script: zoom on click, search on Ctrl-F, details on hover. It holds no name: it
 * reads them from the frames' titles, and writes them only through textContent.
 */
static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"// All but init() in a scope of its own: window has an onclick, a frames ...\n"
	"var init = (function () {\n"
	"\"use strict\";\n"
	"var W = 1200, PAD = 10, CHAR_W = 7.08, HIT = \"rgb(230,0,230)\";\n"
	"var frames = [], root = null, term = null, details, resetbtn, searchbtn, matched;\n"
	"function init() {\n"
	"\tvar gs = document.getElementsByTagName(\"g\"), i, g, t;\n"
	"\tdetails = document.getElementById(\"details\");\n"
	"\tresetbtn = document.getElementById(\"reset\");\n"
	"\tsearchbtn = document.getElementById(\"search\");\n"
	"\tmatched = document.getElementById(\"matched\");\n"
	"\tfor (i = 0; i < gs.length; i++) {\n"
	"\t\tg = gs[i];\n"
	"\t\tif (g.getAttribute(\"class\") !== \"f\")\n"
	"\t\t\tcontinue;\n"
	"\t\tg.fs = Number(g.getAttribute(\"data-s\"));\n"
	"\t\tg.fw = Number(g.getAttribute(\"data-w\"));\n"
	"\t\tg.fd = Number(g.getAttribute(\"data-d\"));\n"
	"\t\tt = g.getElementsByTagName(\"title\")[0].textContent;\n"
	"\t\tg.finfo = t.split(\"\\n\").join(\"  |  \");\n"
	"\t\tg.fname = t.split(\"\\n\")[0];\n"
	"\t\tg.frect = g.getElementsByTagName(\"rect\")[0];\n"
	"\t\tg.ftext = g.getElementsByTagName(\"text\")[0];\n"
	"\t\tg.ffill = g.frect.getAttribute(\"fill\");\n"
	"\t\tframes.push(g);\n"
	"\t\tif (g.fd === 0)\n"
	"\t\t\troot = g;\n"
	"\t}\n"
	"\tif (!root)\n"
	"\t\treturn;\n"
	"\tvar svg = document.documentElement;\n"
	"\tsvg.addEventListener(\"click\", clicked);\n"
	"\tsvg.addEventListener(\"mouseover\", function (e) {\n"
	"\t\tvar g = frameof(e.target);\n"
	"\t\tif (g)\n"
	"\t\t\tdetails.textContent = g.finfo;\n"
	"\t});\n"
	"\tsvg.addEventListener(\"mouseout\", function () {\n"
	"\t\tdetails.textContent = \" \";\n"
	"\t});\n"
	"\twindow.addEventListener(\"keydown\", function (e) {\n"
	"\t\tif ((e.ctrlKey || e.metaKey) && (e.key === \"f\" || e.key === \"F\") ||\n"
	"\t\t    e.key === \"F3\") {\n"
	"\t\t\te.preventDefault();\n"
	"\t\t\task();\n"
	"\t\t} else if (e.key === \"Escape\") {\n"
	"\t\t\tclearsearch();\n"
	"\t\t\tzoom(root);\n"
	"\t\t}\n"
	"\t});\n"
	"}\n"
	"function frameof(el) {\n"
	"\twhile (el && el.getAttribute && el.getAttribute(\"class\") !== \"f\")\n"
	"\t\tel = el.parentNode;\n"
	"\treturn el && el.getAttribute ? el : null;\n"
	"}\n"
	"function clicked(e) {\n"
	"\tvar g = frameof(e.target);\n"
	"\tif (e.target === resetbtn)\n"
	"\t\tzoom(root);\n"
	"\telse if (e.target === searchbtn)\n"
	"\t\tterm === null ? ask() : clearsearch();\n"
	"\telse if (g)\n"
	"\t\tzoom(g);\n"
	"}\n"
	"function label(name, w) {\n"
	"\tvar fit = Math.floor((w - 6) / CHAR_W);\n"
	"\tif (fit < 3)\n"
	"\t\treturn \"\";\n"
	"\treturn name.length <= fit ? name : name.substring(0, fit - 2) + \"..\";\n"
	"}\n"
	"function place(g, x, w) {\n"
	"\tg.frect.setAttribute(\"x\", x.toFixed(2));\n"
	"\tg.frect.setAttribute(\"width\", w.toFixed(2));\n"
	"\tg.ftext.setAttribute(\"x\", (x + 3).toFixed(2));\n"
	"\tg.ftext.textContent = label(g.fname, w);\n"
	"}\n"
	"// A frame's subtree fills the width; its callers span it, faded; the rest hides.\n"
	"function zoom(z) {\n"
	"\tvar scale = (W - 2 * PAD) / z.fw, i, g;\n"
	"\tfor (i = 0; i < frames.length; i++) {\n"
	"\t\tg = frames[i];\n"
	"\t\tif (g.fd >= z.fd && g.fs >= z.fs && g.fs + g.fw <= z.fs + z.fw) {\n"
	"\t\t\tg.style.display = \"\";\n"
	"\t\t\tg.style.opacity = \"\";\n"
	"\t\t\tplace(g, PAD + (g.fs - z.fs) * scale, g.fw * scale);\n"
	"\t\t} else if (g.fd < z.fd && g.fs <= z.fs && g.fs + g.fw >= z.fs + z.fw) {\n"
	"\t\t\tg.style.display = \"\";\n"
	"\t\t\tg.style.opacity = \"0.5\";\n"
	"\t\t\tplace(g, PAD, W - 2 * PAD);\n"
	"\t\t} else {\n"
	"\t\t\tg.style.display = \"none\";\n"
	"\t\t}\n"
	"\t}\n"
	"\tresetbtn.style.display = z === root ? \"none\" : \"\";\n"
	"}\n"
	"function ask() {\n"
	"\tvar t = window.prompt(\"Highlight the frames whose name contains:\", term || \"\");\n"
	"\tif (t === null)\n"
	"\t\treturn;\n"
	"\tif (t === \"\")\n"
	"\t\tclearsearch();\n"
	"\telse\n"
	"\t\tsearch(t);\n"
	"}\n"
	"// The matched share counts a recursive function's nested frames once.\n"
	"function search(t) {\n"
	"\tvar hits = [], sum = 0, reach = 0, i, g;\n"
	"\tterm = t;\n"
	"\tfor (i = 0; i < frames.length; i++) {\n"
	"\t\tg = frames[i];\n"
	"\t\tif (g.fname.indexOf(t) >= 0) {\n"
	"\t\t\tg.frect.setAttribute(\"fill\", HIT);\n"
	"\t\t\thits.push(g);\n"
	"\t\t} else {\n"
	"\t\t\tg.frect.setAttribute(\"fill\", g.ffill);\n"
	"\t\t}\n"
	"\t}\n"
	"\thits.sort(function (a, b) { return a.fs - b.fs || b.fw - a.fw; });\n"
	"\tfor (i = 0; i < hits.length; i++) {\n"
	"\t\tg = hits[i];\n"
	"\t\tif (g.fs + g.fw > reach) {\n"
	"\t\t\tsum += g.fs + g.fw - Math.max(g.fs, reach);\n"
	"\t\t\treach = g.fs + g.fw;\n"
	"\t\t}\n"
	"\t}\n"
	"\tmatched.textContent = \"Matched: \" + (100 * sum / root.fw).toFixed(2) + \"% (\" +\n"
	"\t\thits.length + (hits.length === 1 ? \" frame)\" : \" frames)\");\n"
	"\tsearchbtn.textContent = \"Reset Search\";\n"
	"}\n"
	"function clearsearch() {\n"
	"\tfor (var i = 0; i < frames.length; i++)\n"
	"\t\tframes[i].frect.setAttribute(\"fill\", frames[i].ffill);\n"
	"\tterm = null;\n"
	"\tmatched.textContent = \" \";\n"
	"\tsearchbtn.textContent = \"Search\";\n"
	"}\n"
	"return init;\n"
	"}());\n"
	"]]></script>\n";

static const char svg_style[] =
	"<style type=\"text/css\">\n"
	"text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
	"g.f text { pointer-events: none; }\n"
	"g.f:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; cursor: pointer; }\n"
	"#title { font-size: 17px; }\n"
	"#hint { fill: rgb(110,110,110); }\n"
	"#reset, #search { cursor: pointer; fill: rgb(0,0,160); }\n"
	"</style>\n";

/* The document up to the frames: size, style, script, title lines and buttons. */
static void put_header(struct trace *trace, unsigned rows, uint64_t total, size_t dropped)
{
	struct out_file *out = trace->out;
	unsigned height = SVG_TOP + rows * SVG_FRAME_H + SVG_BOTTOM;
	uint64_t period_ns = folded__period_ns(trace->folded);

	out_file__puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n");
	out_file__printf(out,
			 "<svg version=\"1.1\" width=\"%d\" height=\"%u\" "
			 "viewBox=\"0 0 %d %u\" onload=\"init(evt)\" "
			 "xmlns=\"http://www.w3.org/2000/svg\">\n",
			 SVG_WIDTH, height, SVG_WIDTH, height);
	out_file__puts(out, svg_style);
	out_file__puts(out, svg_script);
	out_file__printf(out,
			 "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%u\" "
			 "fill=\"rgb(250,250,245)\"/>\n",
			 SVG_WIDTH, height);
	out_file__printf(out,
			 "<text id=\"title\" x=\"%d\" y=\"24\" text-anchor=\"middle\">"
			 "Flame graph: %" PRIu64 " samples of %.3g ms",
			 SVG_WIDTH / 2, total, period_ns / 1e6);
	if (total) {
		out_file__puts(out, " (");
		put_duration(out, total * period_ns);
		out_file__puts(out, ")");
	}
	if (dropped)
		out_file__printf(out, ", %zu frame%s too narrow to draw (under 0.1%%)", dropped,
				 dropped == 1 ? "" : "s");
	out_file__puts(out, "</text>\n");
	out_file__printf(out,
			 "<text id=\"hint\" x=\"%d\" y=\"42\" text-anchor=\"middle\">%s</text>\n",
			 SVG_WIDTH / 2,
			 total ? "width: time on CPU and waiting; click a frame to zoom, "
				 "Ctrl-F to search, Esc to reset"
			       : "no samples were recorded");
	out_file__printf(out,
			 "<text id=\"reset\" x=\"%d\" y=\"42\" style=\"display: none\">"
			 "Reset Zoom</text>\n",
			 SVG_PAD);
	out_file__printf(out,
			 "<text id=\"search\" x=\"%d\" y=\"42\" text-anchor=\"end\">"
			 "Search</text>\n",
			 SVG_WIDTH - SVG_PAD);
	out_file__printf(out,
			 "<text id=\"matched\" x=\"%d\" y=\"%u\" text-anchor=\"end\"> "
			 "</text>\n",
			 SVG_WIDTH - SVG_PAD, height - 12);
	out_file__printf(out, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", SVG_PAD,
			 height - 12);
}

/* Rows to draw and nodes too narrow to, among the nodes at least @min wide. */
static unsigned flame__rows(const struct flame *fl, uint64_t min, size_t *dropped)
{
	const struct node_block *b;
	unsigned rows = 0;
	size_t i;

	*dropped = 0;
	for (b = fl->blocks; b; b = b->next) {
		for (i = 0; i < b->used; i++) {
			const struct flame_node *n = &b->nodes[i];

			/* A node at least @min wide has ancestors as wide: it is drawn. */
			if (n->weight < min)
				(*dropped)++;
			else if (n->depth + 1 > rows)
				rows = n->depth + 1;
		}
	}
	return rows;
}

int svg__write(struct trace *trace)
{
	struct flame fl = { 0 };
	const struct folded_stack *s = NULL;
	struct flame_node **scratch = NULL;
	size_t cursor = 0, dropped;
	uint64_t total, min;
	unsigned rows;
	int err = -ENOMEM;

	fl.children = hashmap__new();
	if (!fl.children)
		goto out_free;
	fl.root = flame__node(&fl, NULL, 0);
	if (!fl.root)
		goto out_free;
	while (folded__next(trace->folded, &cursor, &s)) {
		err = flame__add(&fl, s);
		if (err)
			goto out_free;
	}
	err = -ENOMEM;
	scratch = calloc(fl.count, sizeof(*scratch));
	if (!scratch)
		goto out_free;
	flame__sort(&fl, scratch);

	total = fl.root->weight;
	/* Narrower than 1/SVG_MIN_SHARE of the run: weight * SVG_MIN_SHARE < total. */
	min = total / SVG_MIN_SHARE + (total % SVG_MIN_SHARE != 0);
	rows = total ? flame__rows(&fl, min, &dropped) : 0;
	if (!total)
		dropped = 0;
	put_header(trace, rows, total, dropped);
	out_file__mark(trace->out);
	err = out_file__error(trace->out);
	if (err)
		goto out_free;
	if (total) {
		err = flame__draw(trace, &fl, min, scratch);
		if (err)
			goto out_free;
	}
	/* A full disk: end the file at its last whole frame, in the room kept for that. */
	err = out_file__error(trace->out);
	if (err) {
		pr_warn("writing the flame graph failed (%s); ending it at the last whole frame",
			strerror(-err));
		out_file__recover(trace->out);
	}
	out_file__puts(trace->out, "</svg>\n");

out_free:
	free(scratch);
	flame__free(&fl);
	return err;
}
