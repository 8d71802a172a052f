/*
 * Fuzzes the line-table decoders of cpython/code.c behind cpython_line(): 3.8-3.9 lnotab,
 * 3.10 linetable (PEP 626) and the 3.11+ location table with its varints, as a target's
 * code object holds them. Input: the minor version (1 byte: 8 + b % 8), firstlineno and
 * lasti (4 bytes each, little endian), then the table (tests/fuzz/dump_linetables.py
 * writes real ones).
 */
#include "fuzz.h"

#include "../../cpython/cpython.h"

#define HEADER 9
#define SWEEP 64 /* instruction offsets tried besides the input's */

static enum cpython_lines lines_of(unsigned minor)
{
	const struct cpython_layout *l = cpython_builtin_layout(minor);

	return l ? l->lines : CPYTHON_LOCATIONS; /* 3.13+ */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum cpython_lines kind;
	uint32_t firstlineno;
	int32_t lasti;
	uint8_t *table;
	size_t len;
	int i;

	if (size < HEADER)
		return 0;
	kind = lines_of(8 + data[0] % 8);
	memcpy(&firstlineno, data + 1, 4);
	memcpy(&lasti, data + 5, 4);
	/* A copy of its own size: ASan sees a read one byte past the table. */
	len = size - HEADER;
	table = malloc(len ? len : 1);
	if (!table)
		return 0;
	memcpy(table, data + HEADER, len);
	cpython_line(kind, table, len, firstlineno, lasti);
	for (i = -1; i < SWEEP; i++)
		cpython_line(kind, table, len, firstlineno, i * 2);
	cpython_line(kind, len ? table : NULL, len, firstlineno, INT32_MAX);
	free(table);
	return 0;
}
