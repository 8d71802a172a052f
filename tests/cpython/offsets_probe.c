/*
 * Prints, from a CPython version's own headers, the offsets the reader uses, in the form
 * "name value" per line. Compiled once per installed interpreter by the offsets test,
 * which compares them with cpython/layout.c's built-in tables (3.8-3.12).
 */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h>
#endif
#include <internal/pycore_pystate.h>
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_frame.h>
#endif
#if PY_VERSION_HEX >= 0x03090000
#include <internal/pycore_interp.h>
#endif
#if PY_VERSION_HEX >= 0x03090000
#include <internal/pycore_runtime.h>
#endif
#if PY_VERSION_HEX >= 0x030B0000
#include <internal/pycore_dict.h>
#endif
#include <internal/pycore_gil.h>

#define P(name, value) printf("%s %zu\n", name, (size_t)(value))

int main(void)
{
	P("runtime.interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
	P("interp.next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
	P("interp.threads_head", offsetof(PyInterpreterState, threads.head));
#else
	P("interp.threads_head", offsetof(PyInterpreterState, tstate_head));
#endif
	P("tstate.next", offsetof(PyThreadState, next));
	P("tstate.interp", offsetof(PyThreadState, interp));
	P("tstate.thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030D0000
	P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
	P("tstate.current_frame", offsetof(PyThreadState, current_frame));
	P("iframe.code", offsetof(_PyInterpreterFrame, f_executable));
	P("iframe.previous", offsetof(_PyInterpreterFrame, previous));
	P("iframe.instr", offsetof(_PyInterpreterFrame, instr_ptr));
	P("iframe.owner", offsetof(_PyInterpreterFrame, owner));
	P("gen.frame_state_back",
	  offsetof(PyGenObject, gi_iframe) - offsetof(PyGenObject, gi_frame_state));
	P("iframe.localsplus", offsetof(_PyInterpreterFrame, localsplus));
	P("code.qualname", offsetof(PyCodeObject, co_qualname));
	P("code.linetable", offsetof(PyCodeObject, co_linetable));
	P("code.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	P("code.localsplusnames", offsetof(PyCodeObject, co_localsplusnames));
#elif PY_VERSION_HEX >= 0x030B0000
	P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
	P("tstate.cframe", offsetof(PyThreadState, cframe));
	P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
	P("iframe.code", offsetof(_PyInterpreterFrame, f_code));
	P("iframe.previous", offsetof(_PyInterpreterFrame, previous));
	P("iframe.instr", offsetof(_PyInterpreterFrame, prev_instr));
	P("iframe.owner", offsetof(_PyInterpreterFrame, owner));
	P("gen.frame_state_back",
	  offsetof(PyGenObject, gi_iframe) - offsetof(PyGenObject, gi_frame_state));
	P("iframe.localsplus", offsetof(_PyInterpreterFrame, localsplus));
	P("code.qualname", offsetof(PyCodeObject, co_qualname));
	P("code.linetable", offsetof(PyCodeObject, co_linetable));
	P("code.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
	P("code.localsplusnames", offsetof(PyCodeObject, co_localsplusnames));
#else
	P("tstate.frame", offsetof(PyThreadState, frame));
	P("frame.back", offsetof(PyFrameObject, f_back));
	P("frame.code", offsetof(PyFrameObject, f_code));
	P("frame.lasti", offsetof(PyFrameObject, f_lasti));
	P("code.flags", offsetof(PyCodeObject, co_flags));
#if PY_VERSION_HEX >= 0x030A0000
	P("frame.live", offsetof(PyFrameObject, f_state));
#else
	P("frame.live", offsetof(PyFrameObject, f_executing));
#endif
	P("frame.localsplus", offsetof(PyFrameObject, f_localsplus));
	P("code.code", offsetof(PyCodeObject, co_code));
	P("code.varnames", offsetof(PyCodeObject, co_varnames));
#if PY_VERSION_HEX >= 0x030A0000
	P("code.linetable", offsetof(PyCodeObject, co_linetable));
#else
	P("code.linetable", offsetof(PyCodeObject, co_lnotab));
#endif
#endif
	P("code.filename", offsetof(PyCodeObject, co_filename));
	P("code.name", offsetof(PyCodeObject, co_name));
	P("code.firstlineno", offsetof(PyCodeObject, co_firstlineno));
#if PY_VERSION_HEX >= 0x030C0000
	P("code.version", offsetof(PyCodeObject, co_version));
#endif
	P("code.argcount", offsetof(PyCodeObject, co_argcount));
	P("code.kwonlyargcount", offsetof(PyCodeObject, co_kwonlyargcount));
	P("float.fval", offsetof(PyFloatObject, ob_fval));
	P("dict.used", offsetof(PyDictObject, ma_used));
	P("set.used", offsetof(PySetObject, used));
	P("function.code", offsetof(PyFunctionObject, func_code));
	P("object.type", offsetof(PyObject, ob_type));
	P("type.name", offsetof(PyTypeObject, tp_name));
	P("unicode.state", offsetof(PyASCIIObject, state));
	P("unicode.length", offsetof(PyASCIIObject, length));
	P("unicode.ascii_size", sizeof(PyASCIIObject));
	P("unicode.compact_size", sizeof(PyCompactUnicodeObject));
	P("bytes.size", offsetof(PyVarObject, ob_size));
	P("bytes.sval", offsetof(PyBytesObject, ob_sval));
	P("tuple.item", offsetof(PyTupleObject, ob_item));
	/* Names (cpython/names.c, objects.c) and the GIL (cpython/gil.c). */
#if PY_VERSION_HEX >= 0x030C0000
	P("interp.modules", offsetof(PyInterpreterState, imports.modules));
	P("interp.gil", offsetof(PyInterpreterState, ceval.gil));
	P("long.size", offsetof(PyLongObject, long_value.lv_tag));
	P("long.digits", offsetof(PyLongObject, long_value.ob_digit));
#else
	P("interp.modules", offsetof(PyInterpreterState, modules));
	P("runtime.gil", offsetof(_PyRuntimeState, ceval.gil));
	P("long.size", offsetof(PyVarObject, ob_size));
	P("long.digits", offsetof(PyLongObject, ob_digit));
#endif
	P("gil.last_holder", offsetof(struct _gil_runtime_state, last_holder));
	P("gil.locked", offsetof(struct _gil_runtime_state, locked));
	P("gil.cond", offsetof(struct _gil_runtime_state, cond));
	P("gil.mutex", offsetof(struct _gil_runtime_state, mutex));
	P("gil.switch_cond", offsetof(struct _gil_runtime_state, switch_cond));
	P("type.flags", offsetof(PyTypeObject, tp_flags));
	P("type.basicsize", offsetof(PyTypeObject, tp_basicsize));
	P("type.dictoffset", offsetof(PyTypeObject, tp_dictoffset));
	P("heaptype.cached_keys", offsetof(PyHeapTypeObject, ht_cached_keys));
	P("dict.keys", offsetof(PyDictObject, ma_keys));
	P("dict.values", offsetof(PyDictObject, ma_values));
#if PY_VERSION_HEX >= 0x030B0000
	/* objects.c reads keys objects from these fixed places (3.11+). */
	P("keys.log2_size", offsetof(PyDictKeysObject, dk_log2_size));
	P("keys.log2_index_bytes", offsetof(PyDictKeysObject, dk_log2_index_bytes));
	P("keys.kind", offsetof(PyDictKeysObject, dk_kind));
	P("keys.nentries", offsetof(PyDictKeysObject, dk_nentries));
	P("keys.indices", offsetof(PyDictKeysObject, dk_indices));
#endif
#if PY_VERSION_HEX >= 0x030D0000
	P("values.items", offsetof(PyDictValues, values));
	P("values.valid", offsetof(PyDictValues, valid));
#endif
	return 0;
}
