/* Collapsed-stack aggregation: a hash of (pid, tid, function ids) to a weight. */
#include "folded.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../common/hashmap.h"
#include "json.h"

struct folded {
	uint64_t period_ns;
	uint64_t count;
	struct hashmap *by_hash; /* hash -> first struct folded_stack */
	bool split;		 /* by line and task too (folded__split_detail()) */
	struct hashmap *task_of; /* pid << 32 | tid -> struct thread_task, when split */
	uint64_t tasks_untracked;
	uint64_t first_ns, last_ns; /* what the stacks cover; first > last while empty */
};

/* The pool task a thread is running. */
struct thread_task {
	int64_t job, task;
	bool executor;
};

struct folded *folded__new(uint64_t period_ns)
{
	struct folded *folded = calloc(1, sizeof(*folded));

	if (!folded)
		return NULL;
	folded->period_ns = period_ns ? period_ns : 1;
	folded->first_ns = UINT64_MAX;
	folded->by_hash = hashmap__new();
	if (!folded->by_hash) {
		free(folded);
		errno = ENOMEM;
		return NULL;
	}
	return folded;
}

void folded__free(struct folded *folded)
{
	size_t cursor = 0;
	uint64_t key;
	void *value;

	if (!folded)
		return;
	while (hashmap__next(folded->by_hash, &cursor, &key, &value)) {
		struct folded_stack *s = value, *next;

		for (; s; s = next) {
			next = s->next_same_hash;
			free(s);
		}
	}
	hashmap__free(folded->by_hash);
	hashmap__free_all(folded->task_of, free);
	free(folded);
}

void folded__split_detail(struct folded *folded)
{
	folded->split = true;
}

static uint64_t thread_key(uint32_t pid, uint32_t tid)
{
	return (uint64_t)pid << 32 | tid;
}

int folded__message(struct folded *folded, const struct trace_obs *obs)
{
	const struct trace_message *m = &obs->message;
	uint64_t key = thread_key(obs->pid, obs->tid);
	struct thread_task *t;

	if (!folded->split || obs->kind != TRACE_MESSAGE)
		return 0;
	if (m->result && m->sent) {
		free(hashmap__remove(folded->task_of, key));
		return 0;
	}
	if (m->result || m->sent)
		return 0; /* the parent's side: handing tasks out, taking results in */
	if (!folded->task_of) {
		folded->task_of = hashmap__new();
		if (!folded->task_of)
			return -ENOMEM;
	}
	t = hashmap__get(folded->task_of, key);
	if (!t) {
		if (hashmap__count(folded->task_of) >= FOLDED_MAX_TASK_THREADS) {
			folded->tasks_untracked++;
			return 0;
		}
		t = calloc(1, sizeof(*t));
		if (!t || hashmap__set(folded->task_of, key, t)) {
			free(t);
			return -ENOMEM;
		}
	}
	*t = (struct thread_task){ m->job, m->task, m->executor };
	return 0;
}

void folded__end_thread(struct folded *folded, uint32_t pid, uint32_t tid)
{
	if (folded->task_of)
		free(hashmap__remove(folded->task_of, thread_key(pid, tid)));
}

uint64_t folded__tasks_untracked(const struct folded *folded)
{
	return folded->tasks_untracked;
}

bool folded__span(const struct folded *folded, uint64_t *first_ns, uint64_t *last_ns)
{
	*first_ns = folded->first_ns;
	*last_ns = folded->last_ns;
	return folded->first_ns <= folded->last_ns;
}

/* What an observation is counted under: its thread, its stack and, when split, more. */
struct stack_key {
	const struct trace_obs *obs;
	const struct thread_task *task; /* NULL: none */
	bool lines;
};

static uint64_t hash_stack(const struct stack_key *k)
{
	const struct trace_obs *obs = k->obs;
	uint64_t h = FNV1A_OFFSET ^ ((uint64_t)obs->pid << 32 | obs->tid);
	uint32_t i;

	for (i = 0; i < obs->nframes; i++) {
		h = fnv1a_step(h, obs->frames[i].func);
		if (k->lines)
			h = fnv1a_step(h, obs->frames[i].line);
	}
	if (k->task)
		h = fnv1a_step(h, (uint64_t)k->task->job * 0x9e3779b97f4a7c15ULL ^
					  (uint64_t)k->task->task);
	return h ^ obs->nframes;
}

static bool same_stack(const struct folded_stack *s, const struct stack_key *k)
{
	const struct trace_obs *obs = k->obs;
	uint32_t i;

	if (s->pid != obs->pid || s->tid != obs->tid || s->nframes != obs->nframes)
		return false;
	if (k->task ? s->job != k->task->job || s->task != k->task->task ||
			      s->executor != k->task->executor
		    : s->job != -1 || s->task != -1)
		return false;
	for (i = 0; i < obs->nframes; i++) {
		if (s->funcs[i] != obs->frames[i].func)
			return false;
		if (s->lines && s->lines[i] != obs->frames[i].line)
			return false;
	}
	return true;
}

static struct folded_stack *new_stack(const struct stack_key *k, uint64_t weight)
{
	const struct trace_obs *obs = k->obs;
	size_t per_frame = sizeof(uint32_t) * (k->lines ? 2 : 1);
	struct folded_stack *s = calloc(1, sizeof(*s) + obs->nframes * per_frame);
	uint32_t *lines;
	uint32_t i;

	if (!s)
		return NULL;
	s->pid = obs->pid;
	s->tid = obs->tid;
	s->weight = weight;
	s->job = k->task ? k->task->job : -1;
	s->task = k->task ? k->task->task : -1;
	s->executor = k->task && k->task->executor;
	s->nframes = obs->nframes;
	lines = k->lines ? s->funcs + obs->nframes : NULL;
	for (i = 0; i < obs->nframes; i++) {
		s->funcs[i] = obs->frames[i].func;
		if (lines)
			lines[i] = obs->frames[i].line;
	}
	s->lines = lines;
	return s;
}

/* Widens what the stacks cover to @obs: a sample's period, a wait's exact ends. */
static void cover(struct folded *folded, const struct trace_obs *obs)
{
	uint64_t end = obs->kind == TRACE_OFF_CPU && obs->t_end_ns > obs->t_start_ns
			       ? obs->t_end_ns
			       : obs->t_start_ns + folded->period_ns;

	if (obs->t_start_ns < folded->first_ns)
		folded->first_ns = obs->t_start_ns;
	if (end > folded->last_ns)
		folded->last_ns = end;
}

int folded__add(struct folded *folded, const struct trace_obs *obs)
{
	struct stack_key k = {
		.obs = obs,
		.task = folded->task_of
				? hashmap__get(folded->task_of, thread_key(obs->pid, obs->tid))
				: NULL,
		.lines = folded->split,
	};
	uint64_t hash = hash_stack(&k), weight = 1;
	struct folded_stack *first = hashmap__get(folded->by_hash, hash), *s;

	if (obs->kind == TRACE_OFF_CPU && obs->t_end_ns > obs->t_start_ns) {
		weight = (obs->t_end_ns - obs->t_start_ns + folded->period_ns / 2) /
			 folded->period_ns;
		if (!weight)
			weight = 1;
	}
	cover(folded, obs);
	for (s = first; s; s = s->next_same_hash) {
		if (same_stack(s, &k)) {
			s->weight += weight;
			return 0;
		}
	}
	s = new_stack(&k, weight);
	if (!s)
		return -ENOMEM;
	s->next_same_hash = first;
	if (hashmap__set(folded->by_hash, hash, s)) {
		free(s);
		return -ENOMEM;
	}
	folded->count++;
	return 0;
}

uint64_t folded__period_ns(const struct folded *folded)
{
	return folded->period_ns;
}

uint64_t folded__count(const struct folded *folded)
{
	return folded->count;
}

bool folded__next(const struct folded *folded, size_t *cursor, const struct folded_stack **stack)
{
	uint64_t key;
	void *value;

	if (*stack && (*stack)->next_same_hash) {
		*stack = (*stack)->next_same_hash;
		return true;
	}
	if (!hashmap__next(folded->by_hash, cursor, &key, &value))
		return false;
	*stack = value;
	return true;
}

/*
 * Writes @name (a target's, untrusted) with the characters that carry meaning in the
 * format replaced (';' by ':'), and what no reader of it should get raw (control
 * characters, newlines, DEL, C1 controls, bytes that are not UTF-8: an SVG made from the
 * file is XML, which forbids them; a terminal showing it obeys them) written "\xNN".
 */
static void put_name(struct out_file *out, const char *name)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)name;
	char buf[256];
	size_t n = 0;

	while (*p) {
		size_t len = *p >= 0x80 ? utf8_valid_length(p) : 1;
		/* U+0080..U+009F, the C1 controls, are 0xc2 0x80..0x9f in UTF-8. */
		bool c1 = len == 2 && p[0] == 0xc2 && p[1] < 0xa0;

		if (n > sizeof(buf) - 8) {
			out_file__write(out, buf, n);
			n = 0;
		}
		if (*p == ';') {
			buf[n++] = ':';
		} else if (*p < 0x20 || *p == 0x7f || !len || c1) {
			buf[n++] = '\\';
			buf[n++] = 'x';
			buf[n++] = hex[*p >> 4];
			buf[n++] = hex[*p & 0xf];
			len = 1; /* a C1's second byte follows as its own escape */
		} else {
			memcpy(buf + n, p, len);
			n += len;
		}
		p += len;
	}
	out_file__write(out, buf, n);
}

static void put_owner(struct out_file *out, const struct names *names, uint32_t pid, uint32_t tid)
{
	const char *name = names__get(names, pid, tid);

	put_name(out, name ? name : "?");
	out_file__printf(out, " (%" PRIu32 ")", tid ? tid : pid);
}

void folded__write(const struct folded *folded, struct out_file *out,
		   const struct frame_table *frames, const struct names *names)
{
	const struct folded_stack *s = NULL;
	size_t cursor = 0;

	while (folded__next(folded, &cursor, &s)) {
		uint32_t i;

		put_owner(out, names, s->pid, 0);
		out_file__puts(out, ";");
		put_owner(out, names, s->pid, s->tid);
		for (i = 0; i < s->nframes; i++) {
			const struct frame_info *f = frame_table__get(frames, s->funcs[i]);

			out_file__puts(out, ";");
			put_name(out, f ? f->name : "[bad frame id]");
		}
		out_file__printf(out, " %" PRIu64 "\n", s->weight);
		out_file__mark(out);
	}
}
