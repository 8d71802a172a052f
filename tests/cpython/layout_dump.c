/*
 * Prints the layout the reader uses, as "name value" lines named like
 * offsets_probe.c's: built-in for `layout_dump MINOR`, decoded from a live process
 * for `layout_dump --pid PID`. tests/e2e/test_cpython_offsets.py compares the two.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cpython/cpython.h"

static void print_layout(const struct cpython_layout *l)
{
#define P(name, value) printf("%s %llu\n", name, (unsigned long long)(value))
	P("runtime.interpreters_head", l->runtime_interpreters_head);
	P("interp.next", l->interp_next);
	P("interp.threads_head", l->interp_threads_head);
	P("tstate.next", l->tstate_next);
	P("tstate.interp", l->tstate_interp);
	P("tstate.thread_id", l->tstate_thread_id);
	if (l->tstate_native_thread_id)
		P("tstate.native_thread_id", l->tstate_native_thread_id);
	if (l->minor <= 10) {
		P("tstate.frame", l->tstate_frame);
		P("frame.back", l->frame_previous);
		P("frame.code", l->frame_code);
		P("frame.lasti", l->frame_instr);
		P("code.flags", l->code_flags);
		P("frame.live", l->frame_live);
	} else {
		if (l->frame_via_cframe) {
			P("tstate.cframe", l->tstate_frame);
			P("cframe.current_frame", l->cframe_current_frame);
		} else {
			P("tstate.current_frame", l->tstate_frame);
		}
		P("iframe.code", l->frame_code);
		P("iframe.previous", l->frame_previous);
		P("iframe.instr", l->frame_instr);
		P("iframe.owner", l->frame_owner);
		P("gen.frame_state_back", l->gen_frame_state_back);
		P("code.qualname", l->code_qualname);
		P("code.code_adaptive", l->code_adaptive);
	}
	P("code.filename", l->code_filename);
	P("code.name", l->code_name);
	P("code.firstlineno", l->code_firstlineno);
	if (l->code_version)
		P("code.version", l->code_version);
	P("code.linetable", l->code_linetable);
	P("object.type", l->object_type);
	P("type.name", l->type_name);
	P("unicode.state", l->unicode_state);
	P("unicode.length", l->unicode_length);
	P("unicode.ascii_size", l->unicode_ascii_size);
	P("unicode.compact_size", l->unicode_compact_size);
	P("bytes.size", l->bytes_size);
	P("bytes.sval", l->bytes_sval);
	/* Arguments (cpython/args.c). */
	P(l->minor <= 10 ? "frame.localsplus" : "iframe.localsplus", l->frame_localsplus);
	P("code.argcount", l->code_argcount);
	P("code.kwonlyargcount", l->code_argcount + 8);
	P(l->minor <= 10 ? "code.varnames" : "code.localsplusnames", l->code_varnames);
	P("tuple.item", l->tuple_items);
	P("float.fval", l->float_value);
	P("dict.used", l->dict_used);
	P("set.used", l->set_used);
	P("function.code", l->function_code);
	if (l->names_supported) {
		P("interp.modules", l->interp_modules);
		if (l->runtime_gil)
			P("runtime.gil", l->runtime_gil);
		else
			P("interp.gil", l->interp_gil);
		P("long.size", l->long_size);
		P("long.digits", l->long_digits);
		P("gil.last_holder", l->gil_last_holder);
		P("gil.locked", l->gil_locked);
		P("gil.cond", l->gil_cond);
		P("gil.mutex", l->gil_mutex);
		P("gil.switch_cond", l->gil_switch_cond);
		P("type.flags", l->type_flags);
		P("type.basicsize", l->type_basicsize);
		P("type.dictoffset", l->type_dictoffset);
		P("heaptype.cached_keys", l->heaptype_cached_keys);
		P("dict.keys", l->dict_keys);
		P("dict.values", l->dict_values);
		if (l->dicts == CPYTHON_DICTS_311) {
			/* The fixed places cpython/objects.c reads keys objects from. */
			P("keys.log2_size", 8);
			P("keys.log2_index_bytes", 9);
			P("keys.kind", 10);
			P("keys.nentries", 24);
			P("keys.indices", 32);
		}
		if (l->values_items) {
			P("values.items", l->values_items);
			P("values.valid", 3);
		}
	}
#undef P
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "--pid")) {
		struct cpython_process *p = cpython_process__find(atoi(argv[2]), NULL);

		if (!p) {
			perror("no CPython runtime found");
			return 1;
		}
		printf("minor %u\n", p->layout.minor);
		print_layout(&p->layout);
		cpython_process__put(p);
		return 0;
	}
	if (argc == 2) {
		const struct cpython_layout *l = cpython_builtin_layout((unsigned)atoi(argv[1]));

		if (!l)
			return 1;
		print_layout(l);
		return 0;
	}
	fprintf(stderr, "usage: layout_dump MINOR | --pid PID\n");
	return 2;
}
