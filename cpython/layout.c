/*
 * CPython's layouts: built-in tables for 3.8-3.12 (checked against each installed
 * version's headers by tests/cpython/test_offsets.py) and decoders for the
 * _Py_DebugOffsets that 3.13, 3.14 and 3.15 keep at the start of _PyRuntime.
 */
#include <errno.h>
#include <string.h>

#include "cpython.h"

/* Fields shared by every version. */
#define COMMON_OBJECTS                                                                             \
	.object_type = 8, .type_name = 24, .unicode_state = 32, .unicode_length = 16,              \
	.bytes_size = 16, .bytes_sval = 32, .names_supported = true, .gil_last_holder = 8,         \
	.gil_locked = 16, .gil_cond = 32, .gil_mutex = 80, .gil_switch_cond = 120,                 \
	.type_flags = 168, .type_basicsize = 32, .type_dictoffset = 288, .dict_keys = 32,          \
	.dict_values = 40, .module_dict = 16, .long_size = 16, .long_digits = 24,                  \
	.tuple_items = 24, .float_value = 16, .dict_used = 16, .set_used = 24

static const struct cpython_layout layout_38_39 = {
	.runtime_interpreters_head = 32,
	.interp_next = 0,
	.interp_threads_head = 8,
	.tstate_next = 8,
	.tstate_interp = 16,
	.tstate_thread_id = 176,
	.tstate_frame = 24,
	.frame_previous = 24,
	.frame_code = 32,
	.frame_instr = 104,
	.frame_live = 116,
	.frame_localsplus = 360,
	.function_code = 16,
	.code_argcount = 16,
	.code_flags = 36,
	.code_varnames = 72,
	.live = CPYTHON_LIVE_EXECUTING,
	.dicts = CPYTHON_DICTS_38,
	.managed = CPYTHON_MANAGED_NONE,
	.frame_size = 120,
	.owner_first_skipped = 256,
	.instr = CPYTHON_LASTI_BYTES,
	.code_filename = 104,
	.code_name = 112,
	.code_firstlineno = 40,
	.code_linetable = 120,
	.lines = CPYTHON_LNOTAB,
	.unicode_ascii_size = 48,
	.unicode_compact_size = 72,
	COMMON_OBJECTS,
};

static const struct cpython_layout layout_310 = {
	.minor = 10,
	.runtime_interpreters_head = 32,
	.interp_next = 0,
	.interp_threads_head = 8,
	.tstate_next = 8,
	.tstate_interp = 16,
	.tstate_thread_id = 176,
	.tstate_frame = 24,
	.frame_previous = 24,
	.frame_code = 32,
	.frame_instr = 96,
	.frame_live = 108,
	.frame_localsplus = 352,
	.function_code = 48,
	.code_argcount = 16,
	.code_flags = 36,
	.code_varnames = 72,
	.live = CPYTHON_LIVE_STATE,
	.interp_modules = 856,
	.runtime_gil = 352,
	.heaptype_cached_keys = 872,
	.dicts = CPYTHON_DICTS_38,
	.managed = CPYTHON_MANAGED_NONE,
	.frame_size = 112,
	.owner_first_skipped = 256,
	.instr = CPYTHON_LASTI_UNITS,
	.code_filename = 104,
	.code_name = 112,
	.code_firstlineno = 40,
	.code_linetable = 120,
	.lines = CPYTHON_LINETABLE,
	.unicode_ascii_size = 48,
	.unicode_compact_size = 72,
	COMMON_OBJECTS,
};

static const struct cpython_layout layout_311 = {
	.minor = 11,
	.runtime_interpreters_head = 40,
	.interp_next = 0,
	.interp_threads_head = 16,
	.tstate_next = 8,
	.tstate_interp = 16,
	.tstate_thread_id = 152,
	.tstate_native_thread_id = 160,
	.tstate_frame = 56,
	.frame_via_cframe = true,
	.cframe_current_frame = 8,
	.frame_previous = 48,
	.frame_code = 32,
	.frame_instr = 56,
	.frame_owner = 69,
	.frame_is_entry = 68,
	.gen_frame_state_back = 5,
	.frame_localsplus = 72,
	.function_code = 48,
	.code_argcount = 56,
	.code_varnames = 96,
	.interp_modules = 888,
	.runtime_gil = 360,
	.heaptype_cached_keys = 872,
	.dicts = CPYTHON_DICTS_311,
	.managed = CPYTHON_MANAGED_311,
	.frame_size = 72,
	.owner_first_skipped = 3,
	.instr = CPYTHON_PREV_INSTR,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_firstlineno = 72,
	.code_linetable = 136,
	.code_adaptive = 184,
	.lines = CPYTHON_LOCATIONS,
	.unicode_ascii_size = 48,
	.unicode_compact_size = 72,
	COMMON_OBJECTS,
};

static const struct cpython_layout layout_312 = {
	.minor = 12,
	.runtime_interpreters_head = 40,
	.interp_next = 0,
	.interp_threads_head = 72,
	.tstate_next = 8,
	.tstate_interp = 16,
	.tstate_thread_id = 136,
	.tstate_native_thread_id = 144,
	.tstate_frame = 56,
	.frame_via_cframe = true,
	.cframe_current_frame = 0,
	.interp_modules = 944,
	.interp_gil = 384,
	.heaptype_cached_keys = 880,
	.dicts = CPYTHON_DICTS_311,
	.managed = CPYTHON_MANAGED_312,
	.long_tagged = true,
	.frame_previous = 8,
	.frame_code = 0,
	.frame_instr = 56,
	.frame_owner = 70,
	.gen_frame_state_back = 5,
	.frame_localsplus = 72,
	.function_code = 48,
	.code_argcount = 52,
	.code_varnames = 96,
	.frame_size = 72,
	.owner_first_skipped = 3,
	.instr = CPYTHON_PREV_INSTR,
	.code_filename = 112,
	.code_name = 120,
	.code_qualname = 128,
	.code_firstlineno = 68,
	.code_linetable = 136,
	.code_adaptive = 192,
	.code_version = 92,
	.lines = CPYTHON_LOCATIONS,
	.unicode_ascii_size = 40,
	.unicode_compact_size = 56,
	COMMON_OBJECTS,
};

const struct cpython_layout *cpython_builtin_layout(unsigned minor)
{
	static struct cpython_layout l38, l39;

	switch (minor) {
	case 8:
		l38 = layout_38_39;
		l38.minor = 8;
		l38.interp_modules = 56;
		l38.runtime_gil = 1152;
		l38.heaptype_cached_keys = 872;
		return &l38;
	case 9:
		l39 = layout_38_39;
		l39.minor = 9;
		l39.interp_modules = 856;
		l39.runtime_gil = 352;
		l39.heaptype_cached_keys = 864;
		return &l39;
	case 10:
		return &layout_310;
	case 11:
		return &layout_311;
	case 12:
		return &layout_312;
	default:
		return NULL;
	}
}

/* _Py_DebugOffsets of 3.13, as in its Include/internal/pycore_runtime.h. */
struct debug_offsets_313 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct {
		uint64_t size, finalizing, interpreters_head;
	} runtime_state;
	struct {
		uint64_t size, id, next, threads_head, gc, imports_modules, sysdict, builtins,
			ceval_gil, gil_runtime_state, gil_enabled, gil_locked, gil_holder;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			datastack_chunk, status;
	} thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive;
	} code_object;
	struct {
		uint64_t size, ob_type;
	} pyobject;
	struct {
		uint64_t size, tp_name, tp_repr, tp_flags;
	} type_object;
	struct {
		uint64_t size, ob_item, ob_size;
	} tuple_object, list_object;
	struct {
		uint64_t size, ma_keys, ma_values;
	} dict_object;
	struct {
		uint64_t size, ob_fval;
	} float_object;
	struct {
		uint64_t size, lv_tag, ob_digit;
	} long_object;
	struct {
		uint64_t size, ob_size, ob_sval;
	} bytes_object;
	struct {
		uint64_t size, state, length, asciiobject_size;
	} unicode_object;
	struct {
		uint64_t size, collecting;
	} gc;
};

/*
 * _Py_DebugOffsets of 3.14 (Include/internal/pycore_debug_offsets.h): interpreter state
 * gained threads_main, code_object_generation and tlbc_generation; frames stackpointer
 * and tlbc_index; code objects co_tlbc; a set object section sits before dict.
 */
struct debug_offsets_314 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct {
		uint64_t size, finalizing, interpreters_head;
	} runtime_state;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict,
			builtins, ceval_gil, gil_runtime_state, gil_enabled, gil_locked, gil_holder,
			code_object_generation, tlbc_generation;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id,
			datastack_chunk, status;
	} thread_state;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer,
			tlbc_index;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
	} code_object;
	struct {
		uint64_t size, ob_type;
	} pyobject;
	struct {
		uint64_t size, tp_name, tp_repr, tp_flags;
	} type_object;
	struct {
		uint64_t size, ob_item, ob_size;
	} tuple_object, list_object;
	struct {
		uint64_t size, used, table, mask;
	} set_object;
	struct {
		uint64_t size, ma_keys, ma_values;
	} dict_object;
	struct {
		uint64_t size, ob_fval;
	} float_object;
	struct {
		uint64_t size, lv_tag, ob_digit;
	} long_object;
	struct {
		uint64_t size, ob_size, ob_sval;
	} bytes_object;
	struct {
		uint64_t size, state, length, asciiobject_size;
	} unicode_object;
};

/*
 * _Py_DebugOffsets of 3.15 (888 bytes): thread state gained base_frame,
 * last_profiled_frame(_seq), holds_gil, gil_requested, current_exception and exc_state,
 * then an error stack item section; type objects tp_basicsize and tp_dictoffset, and a
 * heap type section follows; unicode objects the compact object's size. Checked against
 * the real 3.15 by tests/e2e/test_cpython_offsets.py.
 */
struct debug_offsets_315 {
	char cookie[8];
	uint64_t version, free_threaded;
	struct {
		uint64_t size, finalizing, interpreters_head;
	} runtime_state;
	struct {
		uint64_t size, id, next, threads_head, threads_main, gc, imports_modules, sysdict,
			builtins, ceval_gil, gil_runtime_state, gil_enabled, gil_locked, gil_holder,
			code_object_generation, tlbc_generation;
	} interpreter_state;
	struct {
		uint64_t size, prev, next, interp, current_frame, base_frame, last_profiled_frame,
			last_profiled_frame_seq, thread_id, native_thread_id, datastack_chunk,
			status, holds_gil, gil_requested, current_exception, exc_state;
	} thread_state;
	struct {
		uint64_t exc_value;
	} err_stackitem;
	struct {
		uint64_t size, previous, executable, instr_ptr, localsplus, owner, stackpointer,
			tlbc_index;
	} interpreter_frame;
	struct {
		uint64_t size, filename, name, qualname, linetable, firstlineno, argcount,
			localsplusnames, localspluskinds, co_code_adaptive, co_tlbc;
	} code_object;
	struct {
		uint64_t size, ob_type;
	} pyobject;
	struct {
		uint64_t size, tp_name, tp_repr, tp_flags, tp_basicsize, tp_dictoffset;
	} type_object;
	struct {
		uint64_t size, ht_cached_keys;
	} heap_type_object;
	struct {
		uint64_t size, ob_item, ob_size;
	} tuple_object, list_object;
	struct {
		uint64_t size, used, table, mask;
	} set_object;
	struct {
		uint64_t size, ma_keys, ma_values;
	} dict_object;
	struct {
		uint64_t size, ob_fval;
	} float_object;
	struct {
		uint64_t size, lv_tag, ob_digit;
	} long_object;
	struct {
		uint64_t size, ob_size, ob_sval;
	} bytes_object;
	struct {
		uint64_t size, state, length, asciiobject_size, compactunicodeobject_size;
	} unicode_object;
	struct {
		uint64_t size, collecting, frame, generation_stats_size, generation_stats;
	} gc;
	struct {
		uint64_t size, gi_name, gi_iframe, gi_frame_state;
	} gen_object;
	struct {
		uint64_t next, prev;
	} llist_node;
	struct {
		uint64_t eval_breaker, remote_debugger_support, remote_debugging_enabled,
			debugger_pending_call, debugger_script_path, debugger_script_path_size;
	} debugger_support;
};
_Static_assert(sizeof(struct debug_offsets_315) == 888, "3.15's _Py_DebugOffsets is 888 bytes");

/* Offsets read from a target are data: bound them before use. */
static bool plausible(uint64_t offset)
{
	return offset < 1u << 20;
}

static uint64_t max3(uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t m = a > b ? a : b;

	return m > c ? m : c;
}

/* The part of a layout every 3.13+ version shares once its offsets are known. */
static void modern_defaults(struct cpython_layout *l, unsigned minor)
{
	l->minor = minor;
	l->frame_via_cframe = false;
	l->owner_first_skipped = 3;
	l->instr = CPYTHON_INSTR_PTR;
	l->lines = CPYTHON_LOCATIONS;
	l->code_tagged = minor >= 14;
	l->frame_size = (max3(l->frame_previous, l->frame_code, l->frame_instr) > l->frame_owner
				 ? max3(l->frame_previous, l->frame_code, l->frame_instr)
				 : l->frame_owner) +
			8;
	/* PyCompactUnicodeObject = PyASCIIObject + utf8_length + utf8 since 3.12. */
	l->unicode_compact_size = l->unicode_ascii_size + 16;
	/*
	 * Not in 3.13's or 3.14's _Py_DebugOffsets: the rest of what names and the GIL need,
	 * as in their headers (the same in 3.13, 3.14 and 3.15; checked against each real
	 * build's headers by tests/e2e/test_cpython_offsets.py). 3.15 gives some of them
	 * itself: those are copied after this.
	 */
	l->long_tagged = true;
	l->dicts = CPYTHON_DICTS_311;
	l->dict_used = 16; /* ma_used and a set's used: the same from 3.8 to 3.14 */
	l->set_used = 24;
	l->function_code = 48; /* func_code after globals, builtins, name, qualname */
	if (!plausible(l->gil_locked) || !plausible(l->gil_last_holder))
		l->interp_gil = 0; /* the GIL is not read; frames still are */
	/* co_version right before co_localsplusnames, as in 3.12. */
	l->code_version = l->code_varnames >= 4 ? l->code_varnames - 4 : 0;
	l->gen_frame_state_back = 5;
	/* 3.15 renumbered generator states: 0 is now "created", 4 "executing". */
	l->gen_executing = minor >= 15 ? 4 : 0;
	l->names_supported = true;
	l->managed = CPYTHON_MANAGED_313;
	l->gil_cond = 32;
	l->gil_mutex = 80;
	l->gil_switch_cond = 120;
	l->type_basicsize = 32;
	l->type_dictoffset = 288;
	l->heaptype_cached_keys = 880;
	l->values_items = 8;
	l->module_dict = 16;
}

/* What 3.15's table says that 3.13's and 3.14's don't. */
static void copy_315(struct cpython_layout *l, const struct debug_offsets_315 *d)
{
	l->type_basicsize = d->type_object.tp_basicsize;
	l->type_dictoffset = d->type_object.tp_dictoffset;
	l->heaptype_cached_keys = d->heap_type_object.ht_cached_keys;
	l->unicode_compact_size = d->unicode_object.compactunicodeobject_size;
	if (d->gen_object.gi_iframe > d->gen_object.gi_frame_state)
		l->gen_frame_state_back = d->gen_object.gi_iframe - d->gen_object.gi_frame_state;
	l->tstate_holds_gil = d->thread_state.holds_gil;
	l->tstate_gil_requested = d->thread_state.gil_requested;
}

#define COPY_COMMON(l, d)                                                                          \
	do {                                                                                       \
		(l)->runtime_interpreters_head = (d)->runtime_state.interpreters_head;             \
		(l)->interp_next = (d)->interpreter_state.next;                                    \
		(l)->interp_threads_head = (d)->interpreter_state.threads_head;                    \
		(l)->tstate_next = (d)->thread_state.next;                                         \
		(l)->tstate_interp = (d)->thread_state.interp;                                     \
		(l)->tstate_thread_id = (d)->thread_state.thread_id;                               \
		(l)->tstate_native_thread_id = (d)->thread_state.native_thread_id;                 \
		(l)->tstate_frame = (d)->thread_state.current_frame;                               \
		(l)->frame_previous = (d)->interpreter_frame.previous;                             \
		(l)->frame_code = (d)->interpreter_frame.executable;                               \
		(l)->frame_instr = (d)->interpreter_frame.instr_ptr;                               \
		(l)->frame_owner = (d)->interpreter_frame.owner;                                   \
		(l)->code_filename = (d)->code_object.filename;                                    \
		(l)->code_name = (d)->code_object.name;                                            \
		(l)->code_qualname = (d)->code_object.qualname;                                    \
		(l)->code_firstlineno = (d)->code_object.firstlineno;                              \
		(l)->code_linetable = (d)->code_object.linetable;                                  \
		(l)->code_adaptive = (d)->code_object.co_code_adaptive;                            \
		(l)->object_type = (d)->pyobject.ob_type;                                          \
		(l)->type_name = (d)->type_object.tp_name;                                         \
		(l)->unicode_state = (d)->unicode_object.state;                                    \
		(l)->unicode_length = (d)->unicode_object.length;                                  \
		(l)->unicode_ascii_size = (d)->unicode_object.asciiobject_size;                    \
		(l)->bytes_size = (d)->bytes_object.ob_size;                                       \
		(l)->bytes_sval = (d)->bytes_object.ob_sval;                                       \
		(l)->interp_modules = (d)->interpreter_state.imports_modules;                      \
		(l)->interp_gil = (d)->interpreter_state.ceval_gil;                                \
		(l)->gil_locked = (d)->interpreter_state.gil_locked -                              \
				  (d)->interpreter_state.gil_runtime_state;                        \
		(l)->gil_last_holder = (d)->interpreter_state.gil_holder -                         \
				       (d)->interpreter_state.gil_runtime_state;                   \
		(l)->type_flags = (d)->type_object.tp_flags;                                       \
		(l)->dict_keys = (d)->dict_object.ma_keys;                                         \
		(l)->dict_values = (d)->dict_object.ma_values;                                     \
		(l)->long_size = (d)->long_object.lv_tag;                                          \
		(l)->long_digits = (d)->long_object.ob_digit;                                      \
		(l)->frame_localsplus = (d)->interpreter_frame.localsplus;                         \
		(l)->code_argcount = (d)->code_object.argcount;                                    \
		(l)->code_varnames = (d)->code_object.localsplusnames;                             \
		(l)->tuple_items = (d)->tuple_object.ob_item;                                      \
		(l)->float_value = (d)->float_object.ob_fval;                                      \
	} while (0)

static bool layout_plausible(const struct cpython_layout *l)
{
	const uint64_t fields[] = {
		l->runtime_interpreters_head,
		l->interp_next,
		l->interp_threads_head,
		l->tstate_next,
		l->tstate_interp,
		l->tstate_native_thread_id,
		l->tstate_frame,
		l->frame_previous,
		l->frame_code,
		l->frame_instr,
		l->frame_owner,
		l->code_filename,
		l->code_name,
		l->code_qualname,
		l->code_firstlineno,
		l->code_linetable,
		l->code_adaptive,
		l->object_type,
		l->type_name,
		l->unicode_state,
		l->unicode_length,
		l->unicode_ascii_size,
		l->bytes_size,
		l->bytes_sval,
		l->frame_localsplus,
		l->code_argcount,
		l->code_varnames,
		l->tuple_items,
		l->float_value,
	};
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		if (!plausible(fields[i]))
			return false;
	}
	return l->frame_size <= 4096 && l->unicode_ascii_size >= 16 && l->code_adaptive &&
	       l->code_adaptive <= 4096;
}

int cpython_decode_debug_offsets(const uint8_t *image, size_t len, unsigned minor,
				 struct cpython_layout *out)
{
	uint64_t version, free_threaded;
	unsigned image_minor;

	if (len < 24 || memcmp(image, "xdebugpy", 8))
		return -EINVAL;
	memcpy(&version, image + 8, 8);
	memcpy(&free_threaded, image + 16, 8);
	if (version >> 24 != 3)
		return -EINVAL;
	image_minor = (unsigned)(version >> 16) & 0xff;
	if (minor && image_minor != minor)
		return -EINVAL;
	if (free_threaded)
		return -ENOTSUP;
	memset(out, 0, sizeof(*out));
	if (image_minor == 13) {
		struct debug_offsets_313 d;

		if (len < sizeof(d))
			return -EINVAL;
		memcpy(&d, image, sizeof(d));
		COPY_COMMON(out, &d);
	} else if (image_minor == 14) {
		struct debug_offsets_314 d;

		if (len < sizeof(d))
			return -EINVAL;
		memcpy(&d, image, sizeof(d));
		COPY_COMMON(out, &d);
	} else if (image_minor == 15) {
		struct debug_offsets_315 d;

		if (len < sizeof(d))
			return -EINVAL;
		memcpy(&d, image, sizeof(d));
		COPY_COMMON(out, &d);
		modern_defaults(out, image_minor);
		copy_315(out, &d);
		return layout_plausible(out) ? 0 : -EINVAL;
	} else {
		return -EPROTONOSUPPORT; /* a version whose offsets we don't know */
	}
	modern_defaults(out, image_minor);
	return layout_plausible(out) ? 0 : -EINVAL;
}
