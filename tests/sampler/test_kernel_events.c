/*
 * Tests of taking the eBPF reader's events into the sampler (sampler/kernel.c): a stack
 * deeper than an event holds comes with its frames in the slots the kernel's walk
 * wrapped around to, and arguments of frames cut; what is queued must be the kept
 * frames in order, innermost first, each with its own arguments.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "records.h"

#define PID 4194500
#define CODE(a) (0x100000ULL + (a)) /* the code of the walk's frame @a (0: innermost) */
#define STR_TYPE 0xabc000ULL

/* Appends a record of index @index of walk frame @frame, whose object is at @object. */
static uint32_t put_record(struct pytrace_event *e, uint32_t at, uint32_t frame, uint8_t index,
			   uint64_t object)
{
	struct pytrace_raw_arg a = { 0 };
	uint8_t *args = (uint8_t *)e->frames + e->nframes * sizeof(e->frames[0]);

	a.frame = frame;
	a.index = index;
	a.object = object;
	a.words[0] = 0xabc000; /* some type: not read here */
	memcpy(args + at, &a, sizeof(a));
	e->args_size = at + (uint32_t)sizeof(a);
	return e->args_size;
}

/* Appends a code name record (@index PYTRACE_ARG_NAME or _FILE), after the arguments. */
static uint32_t put_name(struct pytrace_event *e, uint32_t at, uint32_t frame, uint8_t index,
			 const char *text)
{
	struct pytrace_raw_arg a = { 0 };
	uint8_t *names = (uint8_t *)e->frames + e->nframes * sizeof(e->frames[0]) + e->args_size;

	a.frame = frame;
	a.index = index;
	a.object = 0x6000 + frame;
	/* A compact ASCII str as 3.12 lays it out: length at 16, state at 32. */
	a.words[0] = STR_TYPE;
	a.words[1] = strlen(text);
	a.words[3] = 1u << 2 | 1u << 5 | 1u << 6;
	a.text_len = (uint8_t)strlen(text);
	memcpy(names + at, &a, sizeof(a));
	memcpy(names + at + sizeof(a), text, a.text_len);
	e->names_size = at + (uint32_t)sizeof(a) + ((a.text_len + 7u) & ~7u);
	return e->names_size;
}

/* Appends an argument record (parameter 0) of walk frame @frame. */
static uint32_t put_arg(struct pytrace_event *e, uint32_t at, uint32_t frame, uint64_t object)
{
	return put_record(e, at, frame, 0, object);
}

static const struct pytrace_raw_frame *queued_frames(struct sampler *s, uint32_t *n)
{
	const struct pytrace_event *q;

	assert_int_equal(s->batch_count, 1);
	q = (const void *)(s->batch[0]->data + sizeof(struct perf_event_header));
	*n = q->nframes;
	return (const void *)(s->batch[0]->data + sizeof(struct perf_event_header) +
			      offsetof(struct pytrace_event, frames));
}

/* A sampler with a Python process of 3.12's layout at PID whose memory reads nothing. */
static struct sampler *new_sampler(struct cpython_process **proc)
{
	struct sampler *s = test_sampler();

	assert_non_null(s);
	*proc = cpython_process__new_mem(PID, 0x1000, 12, NULL);
	assert_non_null(*proc);
	(*proc)->types.addr[CPYTHON_TYPE_STR] = STR_TYPE;
	assert_int_equal(hashmap__set(s->pythons, PID, *proc), 0);
	return s;
}

/* The event header of a sample of PID's with @nframes frames, @cut cut before them. */
static struct pytrace_event *new_event(uint32_t nframes, uint32_t cut)
{
	struct pytrace_event *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	e->time_ns = 1000000;
	e->pid = e->tid = PID;
	e->kind = PYTRACE_EV_SAMPLE;
	e->nframes = nframes;
	e->cut = cut;
	return e;
}

static int read_nothing(void *ctx, uint64_t addr, void *buf, size_t len)
{
	(void)ctx;
	(void)addr;
	(void)buf;
	(void)len;
	return -EFAULT;
}

/* The object of the one argument kept for a frame under @id, or 0 when none is. */
static uint64_t arg_object(struct sampler *s, uint32_t id)
{
	struct pytrace_raw_arg a;
	const uint8_t *bytes;
	uint32_t len;

	if (!id)
		return 0;
	bytes = arg_store__get(s->args, id, &len);
	assert_non_null(bytes);
	assert_int_equal(len, sizeof(a));
	memcpy(&a, bytes, sizeof(a));
	return a.object;
}

static void test_kernel_events__cut_stack_in_order(void **state)
{
	uint32_t a, n, at = 0, cut = 10, j;
	struct cpython_process *proc;
	struct sampler *s = new_sampler(&proc);
	/* A walk of 1,034 frames: frame a in slot a % 1024, the first 10 overwritten. */
	struct pytrace_event *e = new_event(PYTRACE_BPF_MAX_FRAMES, cut);
	const struct pytrace_raw_frame *f;
	struct cpython_frame gone[2] = { { .code = CODE(11) }, { .code = CODE(5) } };
	struct cpython_mem mem = { .read = read_nothing, .ctx = NULL };
	const struct cpython_code_entry *c;

	(void)state;
	for (a = 0; a < cut + PYTRACE_BPF_MAX_FRAMES; a++)
		e->frames[a % PYTRACE_BPF_MAX_FRAMES].code = CODE(a);
	/* Arguments of a frame cut, then of the innermost two kept and the root. */
	at = put_arg(e, at, 5, 0x5005);
	at = put_arg(e, at, 10, 0x5010);
	at = put_arg(e, at, 11, 0x5011);
	put_arg(e, at, cut + PYTRACE_BPF_MAX_FRAMES - 1, 0x5999);
	/* Code names after the arguments, of a frame cut and of one kept. */
	at = put_name(e, 0, 5, PYTRACE_ARG_NAME, "gone");
	at = put_name(e, at, 11, PYTRACE_ARG_NAME, "<module>");
	put_name(e, at, 11, PYTRACE_ARG_FILE, "/x/m.py");
	take_kernel_event(s, e);
	f = queued_frames(s, &n);
	assert_int_equal(n, PYTRACE_BPF_MAX_FRAMES);
	for (j = 0; j < n; j++)
		assert_int_equal(f[j].code, CODE(cut + j));
	assert_int_equal(arg_object(s, f[0].args_id), 0x5010);
	assert_int_equal(arg_object(s, f[1].args_id), 0x5011);
	assert_int_equal(arg_object(s, f[2].args_id), 0);
	assert_int_equal(arg_object(s, f[n - 1].args_id), 0x5999);
	/*
	 * Their code objects gone when named (nothing can be read): the kept frame's is
	 * named from what the kernel sent, the cut one's (not noted) is not.
	 */
	cpython_read_codes(proc, &mem, gone, 2);
	c = cpython_code_lookup(proc, CODE(11), 0);
	assert_non_null(c);
	assert_false(c->unreadable);
	assert_string_equal(c->info.name, "<module>");
	assert_string_equal(c->info.filename, "/x/m.py");
	c = cpython_code_lookup(proc, CODE(5), 0);
	assert_non_null(c);
	assert_true(c->unreadable);
	free(e);
	sampler__free(s);
}

/* An argument record for a frame past those sent breaks the bounds: none is kept. */
static void test_kernel_events__args_out_of_bounds(void **state)
{
	struct cpython_process *proc;
	struct sampler *s = new_sampler(&proc);
	struct pytrace_event *e = new_event(3, 0);
	const struct pytrace_raw_frame *f;
	uint32_t a, n, at = 0;

	(void)state;
	for (a = 0; a < 3; a++)
		e->frames[a].code = CODE(a);
	at = put_arg(e, at, 0, 0x5000);
	put_arg(e, at, 3, 0x5003);
	take_kernel_event(s, e);
	f = queued_frames(s, &n);
	assert_int_equal(n, 3);
	for (a = 0; a < 3; a++) {
		assert_int_equal(f[a].code, CODE(a));
		assert_int_equal(f[a].args_id, 0);
	}
	free(e);
	sampler__free(s);
}

/*
 * A deep stack's arguments filled the kernel's room: the frames after the last one with
 * arguments sent, and that one, are not known (matching any call), not without (which
 * would split a call from a reading of it that has them). With room left, a frame
 * without records has none.
 */
static void test_kernel_events__args_room_ran_out(void **state)
{
	struct cpython_process *proc;
	struct sampler *s = new_sampler(&proc);
	struct pytrace_event *e = new_event(64, 0);
	const struct pytrace_raw_frame *f;
	uint32_t a, n, at = 0, k, last = 0;

	(void)state;
	for (a = 0; a < 64; a++)
		e->frames[a].code = CODE(a);
	/* 8 arguments a frame, innermost first, until the room is all but gone. */
	for (k = 0; at <= PYTRACE_BPF_ARGS_BYTES - PYTRACE_BPF_ARG_MAX_BYTES; k++) {
		last = k / 8;
		at = put_record(e, at, last, (uint8_t)(k % 8), 0x5000 + 16 * k);
	}
	assert_true(last > 0 && last < 63);
	take_kernel_event(s, e);
	f = queued_frames(s, &n);
	assert_int_equal(n, 64);
	for (a = 0; a < last; a++)
		assert_true(f[a].args_id && f[a].args_id != ARG_STORE_UNKNOWN);
	for (a = last; a < 64; a++)
		assert_int_equal(f[a].args_id, ARG_STORE_UNKNOWN);
	qrec_free(s->batch[0]);
	s->batch_count = 0;
	/* Room left: the frames after the last with arguments had none to send. */
	e->args_size = 0;
	at = put_arg(e, 0, 0, 0x5000);
	put_arg(e, at, 1, 0x5001);
	take_kernel_event(s, e);
	f = queued_frames(s, &n);
	assert_int_equal(arg_object(s, f[1].args_id), 0x5001);
	for (a = 2; a < 64; a++)
		assert_int_equal(f[a].args_id, 0);
	free(e);
	sampler__free(s);
}

/* A pool's message (result of task @task of job 0) written or read by @pid at @time. */
static struct qrec *message(uint32_t pid, bool sent, int64_t task, uint64_t time)
{
	struct synth_record sr = { .header = { .type = SYNTH_RECORD } };
	struct qrec *q;

	sr.rec = (struct sampler_rec){
		.kind = SREC_MESSAGE,
		.pid = pid,
		.tid = pid,
		.time_ns = time,
		.message = { .kind = CPYTHON_MESSAGE_POOL_RESULT, .sent = sent, .task = task }
	};
	q = test_qrec(&sr, sizeof(sr), time);
	assert_non_null(q);
	return q;
}

/* @q's time after order_message(), as its record says it too. */
static uint64_t ordered(struct sampler *s, struct qrec *q)
{
	uint64_t time;

	order_message(s, q);
	time = q->time;
	assert_int_equal(((struct synth_record *)q->data)->rec.time_ns, time);
	qrec_free(q);
	return time;
}

/*
 * A write stamped after the read of it (the writer still in its call when the reader,
 * on another CPU, had read it: 18 us in a suite run) is moved to 1 us before the read,
 * so that a flow never goes back in time. Not when in order, nor from far apart (10 ms:
 * another message with the same numbers), nor within one process.
 */
static void test_kernel_events__write_before_its_read(void **state)
{
	struct sampler *s = test_sampler();
	struct sampler_stats st;

	(void)state;
	assert_non_null(s);
	assert_int_equal(ordered(s, message(10, false, 4, 1221769000)), 1221769000);
	assert_int_equal(ordered(s, message(20, true, 4, 1221787000)), 1221768000);
	/* In order: as stamped. */
	assert_int_equal(ordered(s, message(20, true, 5, 1300000000)), 1300000000);
	assert_int_equal(ordered(s, message(10, false, 5, 1300050000)), 1300050000);
	/* Read 20 ms before: not this write's. */
	assert_int_equal(ordered(s, message(10, false, 6, 1400000000)), 1400000000);
	assert_int_equal(ordered(s, message(20, true, 6, 1420000000)), 1420000000);
	/* One process both ends: as stamped. */
	assert_int_equal(ordered(s, message(10, false, 7, 1500000000)), 1500000000);
	assert_int_equal(ordered(s, message(10, true, 7, 1500010000)), 1500010000);
	sampler__stats(s, &st);
	assert_int_equal(st.messages_restamped, 1);
	sampler__free(s);
}

/*
 * Ends whose other end never came are forgotten by age when too many wait: a pair whose
 * read came just before is still followed (all were dropped at once before).
 */
static void test_kernel_events__old_ends_forgotten_first(void **state)
{
	struct sampler *s = test_sampler();
	struct sampler_stats st;
	int64_t task;

	(void)state;
	assert_non_null(s);
	/* Reads of results whose writes were never seen, a second ago. */
	for (task = 1000; task < 1000 + MESSAGE_ENDS_MAX - 1; task++)
		ordered(s, message(10, false, task, 1000000000 + (uint64_t)task));
	assert_int_equal(ordered(s, message(10, false, 4, 2000000000)), 2000000000);
	/* One more unmatched end: over the bound. */
	assert_int_equal(ordered(s, message(10, false, 5, 2000005000)), 2000005000);
	assert_int_equal(ordered(s, message(20, true, 4, 2000018000)), 1999999000);
	sampler__stats(s, &st);
	assert_int_equal(st.messages_restamped, 1);
	sampler__free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_events__cut_stack_in_order),
		cmocka_unit_test(test_kernel_events__args_out_of_bounds),
		cmocka_unit_test(test_kernel_events__args_room_ran_out),
		cmocka_unit_test(test_kernel_events__write_before_its_read),
		cmocka_unit_test(test_kernel_events__old_ends_forgotten_first),
	};

	return cmocka_run_group_tests_name("kernel_events", tests, NULL, NULL);
}
