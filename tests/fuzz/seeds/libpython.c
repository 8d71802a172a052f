/* Seed of fuzz_elf: a libpython's exports, as cpython_find_runtime() looks for them. */
struct object {
	char bytes[32];
};

struct object _PyRuntime = { { 1 } };
const unsigned int Py_Version = 0x030C04F0; /* 3.12.4 */
struct object PyLong_Type = { { 1 } }, PyUnicode_Type = { { 1 } }, _Py_NoneStruct = { { 1 } };
