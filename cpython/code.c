/* Code objects, str objects and the three generations of line tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cpython.h"

#define MAX_STRING_CHARS 4096
#define MAX_LINETABLE (256 * 1024)

/* Appends code point @c as UTF-8; lone surrogates and bad values become U+FFFD. */
static size_t put_utf8(char *out, size_t room, uint32_t c)
{
	if ((c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
		c = 0xfffd;
	if (c < 0x80 && room >= 1) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800 && room >= 2) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000 && room >= 3) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	if (c >= 0x10000 && room >= 4) {
		out[0] = (char)(0xf0 | c >> 18);
		out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
		out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[3] = (char)(0x80 | (c & 0x3f));
		return 4;
	}
	return 0;
}

int cpython_read_string(const struct cpython_layout *l, const struct cpython_mem *mem,
			uint64_t addr, char *buf, size_t size)
{
	uint8_t raw[MAX_STRING_CHARS * 4];
	uint32_t state;
	int64_t length;
	unsigned kind, compact, ascii;
	size_t i, out = 0, chars;

	buf[0] = '\0';
	if (!addr || size < 5)
		return -EINVAL;
	if (mem->read(mem->ctx, addr + l->unicode_state, &state, 4) ||
	    mem->read(mem->ctx, addr + l->unicode_length, &length, 8))
		return -EFAULT;
	/* state bits: interned:2 kind:3 compact:1 ascii:1, the same from 3.8 to 3.14. */
	kind = (state >> 2) & 7;
	compact = (state >> 5) & 1;
	ascii = (state >> 6) & 1;
	if (!compact || (kind != 1 && kind != 2 && kind != 4) || length < 0 || (ascii && kind != 1))
		return -EINVAL;
	chars = (size_t)length < MAX_STRING_CHARS ? (size_t)length : MAX_STRING_CHARS;
	if (chars &&
	    mem->read(mem->ctx, addr + (ascii ? l->unicode_ascii_size : l->unicode_compact_size),
		      raw, chars * kind))
		return -EFAULT;
	for (i = 0; i < chars; i++) {
		uint32_t c;
		size_t w;

		if (kind == 1) {
			c = raw[i];
		} else if (kind == 2) {
			uint16_t u;

			memcpy(&u, raw + 2 * i, 2);
			c = u;
		} else {
			memcpy(&c, raw + 4 * i, 4);
		}
		w = put_utf8(buf + out, size - 1 - out, c);
		if (!w)
			break; /* out of room: truncated */
		out += w;
	}
	buf[out] = '\0';
	return 0;
}

static int read_bytes_object(const struct cpython_layout *l, const struct cpython_mem *mem,
			     uint64_t addr, uint8_t **data, uint32_t *len)
{
	int64_t size;

	*data = NULL;
	*len = 0;
	if (!addr || mem->read(mem->ctx, addr + l->bytes_size, &size, 8))
		return -EFAULT;
	if (size < 0 || size > MAX_LINETABLE)
		return -EINVAL;
	*data = malloc(size ? (size_t)size : 1);
	if (!*data)
		return -ENOMEM;
	if (size && mem->read(mem->ctx, addr + l->bytes_sval, *data, (size_t)size)) {
		free(*data);
		*data = NULL;
		return -EFAULT;
	}
	*len = (uint32_t)size;
	return 0;
}

/*
 * The names of the first parameters (positional, then keyword-only): the first names of
 * co_varnames (co_localsplusnames from 3.11). Left unnamed (nparams 0) when unreadable.
 */
static void read_params(const struct cpython_layout *l, const struct cpython_mem *mem,
			uint64_t code, struct cpython_code *out)
{
	int32_t counts[3]; /* co_argcount, co_posonlyargcount, co_kwonlyargcount */
	uint64_t names, items[CPYTHON_MAX_ARGS];
	uint32_t i, n;

	if (!l->code_argcount || !l->code_varnames ||
	    mem->read(mem->ctx, code + l->code_argcount, counts, sizeof(counts)) || counts[0] < 0 ||
	    counts[2] < 0 || counts[0] > 65535 || counts[2] > 65535)
		return;
	n = (uint32_t)counts[0] + (uint32_t)counts[2];
	if (n > CPYTHON_MAX_ARGS)
		n = CPYTHON_MAX_ARGS;
	if (!n || mem->read(mem->ctx, code + l->code_varnames, &names, 8) || !names ||
	    mem->read(mem->ctx, names + l->tuple_items, items, n * sizeof(items[0])))
		return;
	for (i = 0; i < n; i++) {
		if (cpython_read_string(l, mem, items[i], out->params[i], sizeof(out->params[i])))
			return;
	}
	out->nparams = (uint8_t)n;
}

#define MAX_LOCALS_SEARCHED 64

/* The pool worker loops whose frames say which task they run, and the locals that say it. */
static const struct task_loop {
	enum cpython_task_kind kind;
	const char *name, *suffix;
	const char *locals[CPYTHON_TASK_LOCALS]; /* an executor's: its work item, twice */
} task_loops[] = {
	{ CPYTHON_TASK_MP_POOL, "worker", "/multiprocessing/pool.py", { "job", "i" } },
	{ CPYTHON_TASK_CF_PROCESS,
	  "_process_worker",
	  "/concurrent/futures/process.py",
	  { "call_item", "call_item" } },
};

static const struct task_loop *task_loop_of(const struct cpython_code *c)
{
	size_t flen = strlen(c->filename), i, slen;

	for (i = 0; i < sizeof(task_loops) / sizeof(task_loops[0]); i++) {
		slen = strlen(task_loops[i].suffix);
		if (!strcmp(c->name, task_loops[i].name) && flen >= slen &&
		    !strcmp(c->filename + flen - slen, task_loops[i].suffix))
			return &task_loops[i];
	}
	return NULL;
}

/*
 * Whether the code object is a pool worker's loop whose task locals the trace reads
 * (multiprocessing.pool.worker, concurrent.futures.process._process_worker), and where
 * those locals are: found by name.
 */
static void find_task_locals(const struct cpython_layout *l, const struct cpython_mem *mem,
			     uint64_t code, struct cpython_code *out)
{
	const struct task_loop *loop = task_loop_of(out);
	uint64_t names, items[MAX_LOCALS_SEARCHED];
	int64_t count;
	unsigned found = 0, i, k;
	char name[16];

	if (!loop || !l->code_varnames || mem->read(mem->ctx, code + l->code_varnames, &names, 8) ||
	    !names || mem->read(mem->ctx, names + 16, &count, 8) || count <= 0)
		return;
	if (count > MAX_LOCALS_SEARCHED)
		count = MAX_LOCALS_SEARCHED;
	if (mem->read(mem->ctx, names + l->tuple_items, items, (size_t)count * 8))
		return;
	for (i = 0; i < (unsigned)count; i++) {
		if (cpython_read_string(l, mem, items[i], name, sizeof(name)))
			continue;
		for (k = 0; k < CPYTHON_TASK_LOCALS; k++) {
			if (!strcmp(name, loop->locals[k]) && !(found & 1u << k)) {
				out->task_slots[k] = (uint16_t)i;
				found |= 1u << k;
			}
		}
	}
	if (found == (1u << CPYTHON_TASK_LOCALS) - 1)
		out->task_kind = loop->kind;
}

int cpython_read_code(const struct cpython_layout *l, const struct cpython_mem *mem, uint64_t code,
		      struct cpython_code *out)
{
	uint64_t filename, name, linetable;
	int32_t firstlineno;
	int err;

	memset(out, 0, sizeof(*out));
	if (mem->read(mem->ctx, code + l->code_filename, &filename, 8) ||
	    mem->read(mem->ctx, code + (l->code_qualname ? l->code_qualname : l->code_name), &name,
		      8) ||
	    mem->read(mem->ctx, code + l->code_linetable, &linetable, 8) ||
	    mem->read(mem->ctx, code + l->code_firstlineno, &firstlineno, 4))
		return -EFAULT;
	err = cpython_read_string(l, mem, name, out->name, sizeof(out->name));
	if (!err)
		err = cpython_read_string(l, mem, filename, out->filename, sizeof(out->filename));
	if (err)
		return err;
	out->firstlineno = firstlineno > 0 ? (uint32_t)firstlineno : 0;
	read_params(l, mem, code, out);
	find_task_locals(l, mem, code, out);
	/* Without a line table the function is still named; lines fall back to the first. */
	read_bytes_object(l, mem, linetable, &out->linetable, &out->linetable_len);
	return 0;
}

/* 3.8, 3.9: (address increment, line increment) byte pairs; addresses in bytes. */
static uint32_t lnotab_line(const uint8_t *t, size_t len, int64_t line, int32_t lasti)
{
	int64_t addr = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		addr += t[i];
		if (addr > lasti)
			break;
		line += (int8_t)t[i + 1];
	}
	return line > 0 ? (uint32_t)line : 0;
}

/* 3.10 (PEP 626): (start delta, line delta) pairs; -128 means "no line". */
static uint32_t linetable_line(const uint8_t *t, size_t len, int64_t line, int32_t lasti)
{
	int64_t end = 0, ar_line = -1;
	size_t i;

	for (i = 0; i + 1 < len; i += 2) {
		int64_t start = end;
		int8_t ldelta = (int8_t)t[i + 1];

		end = start + t[i];
		if (ldelta == -128) {
			ar_line = -1;
		} else {
			line += ldelta;
			ar_line = line;
		}
		if (lasti < end && lasti >= start)
			return ar_line > 0 ? (uint32_t)ar_line : 0;
	}
	return 0;
}

static uint64_t read_varint(const uint8_t *t, size_t len, size_t *i)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;

	do {
		if (*i >= len || shift > 60)
			return v;
		b = t[(*i)++];
		v |= (uint64_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int64_t read_svarint(const uint8_t *t, size_t len, size_t *i)
{
	uint64_t v = read_varint(t, len, i);

	return (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
}

/*
 * @line moved by @delta, a table's word: kept within +-2^32 (no real line is past 2^31),
 * so that a crafted table of huge deltas can't overflow it.
 */
static int64_t add_line(int64_t line, int64_t delta)
{
	const int64_t bound = (int64_t)1 << 32;
	int64_t sum;

	if (__builtin_add_overflow(line, delta, &sum))
		sum = delta > 0 ? bound : -bound;
	return sum > bound ? bound : sum < -bound ? -bound : sum;
}

/* 3.11+: the location table (InternalDocs/code_objects.md); lengths in code units. */
static uint32_t locations_line(const uint8_t *t, size_t len, int64_t line, int32_t lasti)
{
	int64_t end = 0;
	size_t i = 0;

	while (i < len) {
		uint8_t first = t[i++];
		unsigned code = (first >> 3) & 15;
		int64_t start = end, ar_line;

		if (!(first & 0x80))
			continue; /* resynchronise on the next entry start */
		end = start + 2 * ((first & 7) + 1);
		switch (code) {
		case 15: /* no location */
			ar_line = -1;
			break;
		case 14: /* long form */
		case 13: /* no column */
			line = add_line(line, read_svarint(t, len, &i));
			ar_line = line;
			break;
		case 10:
		case 11:
		case 12: /* one line, line delta in the code */
			line += code - 10;
			ar_line = line;
			break;
		default: /* short forms: same line */
			ar_line = line;
			break;
		}
		/* Skip the rest of the entry: bytes without the start bit. */
		while (i < len && !(t[i] & 0x80))
			i++;
		if (lasti >= start && lasti < end)
			return ar_line > 0 && ar_line <= UINT32_MAX ? (uint32_t)ar_line : 0;
	}
	return 0;
}

uint32_t cpython_line(enum cpython_lines kind, const uint8_t *table, size_t len,
		      uint32_t firstlineno, int32_t lasti)
{
	if (lasti < 0 || !table)
		return firstlineno;
	switch (kind) {
	case CPYTHON_LNOTAB:
		return lnotab_line(table, len, firstlineno, lasti);
	case CPYTHON_LINETABLE:
		return linetable_line(table, len, firstlineno, lasti);
	case CPYTHON_LOCATIONS:
		return locations_line(table, len, firstlineno, lasti);
	}
	return 0;
}
