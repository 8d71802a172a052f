/*
 * Tests of naming Python frames: a code object's name is kept by the symbolizer per
 * process (never written into the sampler's cache), so a code object at an address and
 * fingerprint another process or an earlier program used gets its own name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../../symbolize/internal.h"

struct fixture {
	struct frame_table *frames;
	struct symbolizer *sym;
};

static int setup(void **state)
{
	static struct fixture f;
	struct symbolizer_opts opts = { 0 };

	memset(&f, 0, sizeof(f));
	f.frames = frame_table__new();
	f.sym = f.frames ? symbolizer__new(&opts, f.frames) : NULL;
	*state = &f;
	return f.sym ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	symbolizer__free(f->sym);
	frame_table__free(f->frames);
	return 0;
}

static struct cpython_code_entry entry(uint64_t code, uint64_t fingerprint, const char *name)
{
	struct cpython_code_entry e;

	memset(&e, 0, sizeof(e));
	e.code = code;
	e.fingerprint = fingerprint;
	snprintf(e.info.name, sizeof(e.info.name), "%s", name);
	snprintf(e.info.filename, sizeof(e.info.filename), "job.py");
	e.info.firstlineno = 3;
	return e;
}

/* The name process @pid's one-frame sample in code entry @e comes out with. */
static const char *name_in(struct fixture *f, uint32_t pid, struct cpython_code_entry *e)
{
	struct cpython_frame frame = { .code = e->code,
				       .fingerprint = e->fingerprint,
				       .lasti = -1 };
	const struct cpython_code_entry *codes[1] = { e };
	struct sampler_rec rec;
	struct trace_frame out[1];
	const struct frame_info *info;

	memset(&rec, 0, sizeof(rec));
	rec.kind = SREC_SAMPLE;
	rec.pid = rec.tid = pid;
	rec.sample.py_lines = CPYTHON_LOCATIONS;
	rec.sample.py_frames = &frame;
	rec.sample.py_codes = codes;
	rec.sample.npy = 1;
	assert_int_equal(python_frames(f->sym, &rec, out, 1), 1);
	info = frame_table__get(f->frames, out[0].func);
	assert_non_null(info);
	assert_int_equal(out[0].line, 3);
	return info->name;
}

static void test_python_names__names_kept_per_process(void **state)
{
	struct fixture *f = *state;
	struct cpython_code_entry work = entry(0x1000, 7, "work"),
				  other = entry(0x1000, 7, "other");
	struct cpython_code_entry before;

	memcpy(&before, &work, sizeof(before));
	assert_string_equal(name_in(f, 10, &work), "work");
	/* The same address and fingerprint in another process: another code object. */
	assert_string_equal(name_in(f, 11, &other), "other");
	assert_string_equal(name_in(f, 10, &work), "work");
	/* Named without a byte of the sampler's entry changed. */
	assert_memory_equal(&before, &work, sizeof(work));
}

static void test_python_names__another_program_named_afresh(void **state)
{
	struct fixture *f = *state;
	struct cpython_code_entry work = entry(0x2000, 9, "work"),
				  later = entry(0x2000, 9, "later");
	struct sampler_rec exec_rec, exit_rec;

	assert_string_equal(name_in(f, 20, &work), "work");
	memset(&exec_rec, 0, sizeof(exec_rec));
	exec_rec.kind = SREC_EXEC;
	exec_rec.pid = exec_rec.tid = 20;
	exec_rec.comm.comm = "python";
	assert_int_equal(symbolizer__track(f->sym, &exec_rec), 0);
	assert_string_equal(name_in(f, 20, &later), "later");

	/* And a process that ended, its pid used again. */
	memset(&exit_rec, 0, sizeof(exit_rec));
	exit_rec.kind = SREC_EXIT;
	exit_rec.pid = exit_rec.tid = 20;
	exit_rec.exit.last_in_process = true;
	assert_int_equal(symbolizer__track(f->sym, &exit_rec), 0);
	assert_string_equal(name_in(f, 20, &work), "work");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_python_names__names_kept_per_process, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_python_names__another_program_named_afresh,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
