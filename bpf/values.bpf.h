/*
 * What the frame walk of pytrace.bpf.c reads with each frame besides the frame itself:
 * its parameters' values, a pool worker loop's task locals, and its code object's name
 * and file (read_values()). Included by pytrace.bpf.c after the walk's buffer (struct
 * walk_buf, span_u64()); not a header of its own.
 */
#ifndef PYTRACE_BPF_VALUES_BPF_H
#define PYTRACE_BPF_VALUES_BPF_H

/*
 * Where a str's or a bytes' contents start and how many bytes to keep (0: none), from
 * its first bytes as read into @a (the same rule as cpython/args.c).
 */
static __always_inline __u64 text_of(const struct pytrace_py_cfg *cfg,
				     const struct pytrace_raw_arg *a, __u32 *len)
{
	const __u8 *w = (const __u8 *)a->words;
	__s64 size;
	__u32 state, kind;

	*len = 0;
	if (cfg->str_type && a->words[0] == cfg->str_type) {
		if (cfg->str_length < 8 || cfg->str_length > 32 || cfg->str_state < 8 ||
		    cfg->str_state > 36)
			return 0;
		size = *(const __s64 *)(w + cfg->str_length - 8);
		state = *(const __u32 *)(w + cfg->str_state - 8);
		kind = (state >> 2) & 7;
		if (!((state >> 5) & 1) || size <= 0 || (kind != 1 && kind != 2 && kind != 4))
			return 0;
		*len = size > PYTRACE_BPF_ARG_TEXT / kind ? PYTRACE_BPF_ARG_TEXT
							  : (__u32)size * kind;
		return a->object +
		       (((state >> 6) & 1) ? cfg->str_ascii_data : cfg->str_compact_data);
	}
	if (cfg->bytes_type && a->words[0] == cfg->bytes_type) {
		if (cfg->bytes_size < 8 || cfg->bytes_size > 32)
			return 0;
		size = *(const __s64 *)(w + cfg->bytes_size - 8);
		if (size <= 0)
			return 0;
		*len = size > PYTRACE_BPF_ARG_TEXT ? PYTRACE_BPF_ARG_TEXT : (__u32)size;
		return a->object + cfg->bytes_data;
	}
	return 0;
}

/* Where @obj is remembered: objects are 16-aligned, the bits above tell them apart. */
static __always_inline __u32 seen_slot(__u64 obj)
{
	return (__u32)((obj >> 4) ^ (obj >> 10)) & (SEEN_OBJECTS - 1);
}

/*
 * Copies the record of @obj, when it was read earlier in this walk, to @at: true then.
 * Records lie in order, so a copy from an earlier one never overwrites its own source.
 */
static __always_inline bool copy_seen(struct walk_buf *b, __u64 obj, __u32 at)
{
	__u32 k = seen_slot(obj), from;

	if (b->seen_obj[k] != obj || b->seen_walk[k] != b->walk_id)
		return false;
	from = b->seen_at[k];
	asm volatile("" : "+r"(from)); /* masked, see read_frame */
	from &= PYTRACE_BPF_ARGS_BYTES - 1;
	if (from > PYTRACE_BPF_ARGS_BYTES - PYTRACE_BPF_ARG_MAX_BYTES ||
	    at > PYTRACE_BPF_ARGS_BYTES - PYTRACE_BPF_ARG_MAX_BYTES)
		return false;
	/* Overlapping only past the earlier record's own bytes: those are never written. */
	return !bpf_probe_read_kernel(b->args + at, PYTRACE_BPF_ARG_MAX_BYTES, b->args + from);
}

/* What read_arg() works with (a bpf_loop() body gets one pointer). */
struct arg_walk {
	struct walk_buf *buf;
	const struct pytrace_py_cfg *cfg;
};

/* Reads argument @j of the frame being read; 1 ends (no room left). A bpf_loop() body. */
static long read_arg(__u32 j, void *arg)
{
	struct arg_walk *w = arg;
	struct walk_buf *b = w->buf;
	struct pytrace_raw_arg *a;
	__u32 at = b->args_used, len = 0;
	__u64 obj, text;

	if (j >= PYTRACE_BPF_MAX_ARGS || at > PYTRACE_BPF_ARGS_BYTES - PYTRACE_BPF_ARG_MAX_BYTES) {
		b->args_cut = 1;
		return 1;
	}
	asm volatile("" : "+r"(j)); /* masked, see read_frame */
	obj = b->slots[j & (PYTRACE_BPF_MAX_ARGS - 1)];
	if (w->cfg->code_tagged)
		obj &= ~3ULL; /* a _PyStackRef (3.14+): see cpython_untag() */
	a = (struct pytrace_raw_arg *)(b->args + at);
	if (obj && copy_seen(b, obj, at)) {
		a->frame = b->at;
		a->index = b->index_base + j;
		goto done;
	}
	a->frame = b->at;
	a->index = b->index_base + j;
	a->flags = 0;
	a->text_len = 0;
	a->pad = 0;
	a->object = obj;
	if (!obj) {
		a->flags = PYTRACE_ARG_UNBOUND;
		__builtin_memset(a->words, 0, sizeof(a->words));
	} else if (bpf_probe_read_user(a->words, sizeof(a->words), (const void *)(obj + 8))) {
		a->flags = PYTRACE_ARG_UNREADABLE;
		__builtin_memset(a->words, 0, sizeof(a->words));
	} else {
		text = text_of(w->cfg, a, &len);
		if (len > PYTRACE_BPF_ARG_TEXT)
			len = PYTRACE_BPF_ARG_TEXT;
		asm volatile("" : "+r"(len)); /* masked, see read_frame */
		len &= 2 * PYTRACE_BPF_ARG_TEXT - 1;
		if (text && len &&
		    bpf_probe_read_user(b->args + at + sizeof(*a), len, (const void *)text))
			a->flags = PYTRACE_ARG_UNREADABLE;
		else if (text)
			a->text_len = len;
		if (!a->flags) {
			__u32 k = seen_slot(obj);

			b->seen_obj[k] = obj;
			b->seen_at[k] = at;
			b->seen_walk[k] = b->walk_id;
		}
	}
done:
	b->args_used = at + sizeof(*a) + ((a->text_len + 7) & ~7U);
	return 0;
}

/*
 * Appends at @at of @b's names a record of index @index for the str at @obj with its
 * contents' first bytes, or with @tail their last (a file's name ends with what tells
 * it); returns where the next record goes (@at: none, it could not be read).
 */
static __always_inline __u32 put_text(struct walk_buf *b, const struct pytrace_py_cfg *cfg,
				      __u32 at, __u32 frame, __u8 index, __u64 obj, bool tail)
{
	struct pytrace_raw_arg *a;
	__u64 text, full;
	__u32 len = 0;

	asm volatile("" : "+r"(at)); /* masked, see read_frame */
	at &= PYTRACE_BPF_NAMES_BYTES - 1;
	if (at > PYTRACE_BPF_NAMES_BYTES - PYTRACE_BPF_ARG_MAX_BYTES || !obj)
		return at;
	a = (struct pytrace_raw_arg *)(b->names + at);
	a->pad = 0;
	a->index = index;
	a->flags = 0;
	a->text_len = 0;
	a->frame = frame;
	a->object = obj;
	if (bpf_probe_read_user(a->words, sizeof(a->words), (const void *)(obj + 8)))
		return at;
	text = text_of(cfg, a, &len);
	if (tail && text && a->words[0] == cfg->str_type && cfg->str_length >= 8 &&
	    cfg->str_length <= 32 && cfg->str_state >= 8 && cfg->str_state <= 36) {
		/* len is the first PYTRACE_BPF_ARG_TEXT bytes' at most: move to the last. */
		const __u8 *words = (const __u8 *)a->words;
		__u32 state = *(const __u32 *)(words + cfg->str_state - 8);
		__s64 size = *(const __s64 *)(words + cfg->str_length - 8);

		full = (__u64)size * ((state >> 2) & 7);
		if (size > 0 && full > len)
			text += full - len;
	}
	if (len > PYTRACE_BPF_ARG_TEXT)
		len = PYTRACE_BPF_ARG_TEXT;
	asm volatile("" : "+r"(len)); /* masked, see read_frame */
	len &= 2 * PYTRACE_BPF_ARG_TEXT - 1;
	if (!text || !len ||
	    bpf_probe_read_user(b->names + at + sizeof(*a), len, (const void *)text))
		return at;
	a->text_len = len;
	return at + sizeof(*a) + ((len + 7) & ~7U);
}

/*
 * The name and file of a code object, the first time this CPU sees it in its process
 * lately: module and class bodies, comprehensions before 3.12 and code run by exec()
 * are freed right after they ran, often before user space named them from outside,
 * and their co_name and at times co_filename with them. Sent as records of index
 * PYTRACE_ARG_NAME and PYTRACE_ARG_FILE in the walk's names (@b->names, apart from the
 * arguments). A code seen again costs a look at this CPU's cache. A global
 * function: the verifier checks it once, not once for every state of the walk it is
 * called in (inline, it doubled the walk's verification).
 */
__noinline int read_code_name(struct walk_buf *b, const struct pytrace_py_cfg *cfg, __u32 frame,
			      __u64 code)
{
	__u32 pid = b ? b->pid : 0;
	__u32 k = (__u32)(code >> 4) & (NAMED_CODES - 1), at, next;
	__u64 name, filename, fingerprint;

	if (!b || !cfg)
		return 0;
	at = b->names_used;
	name = span_u64(b->code, cfg->code_name);
	filename = span_u64(b->code, cfg->code_filename);
	/* Tells one made at a freed one's address. */
	fingerprint = PYTRACE_FINGERPRINT(filename, name_word(b->code, cfg));
	if (b->named_code[k] == code && b->named_fingerprint[k] == fingerprint &&
	    b->named_pid[k] == pid)
		return 0;
	/* Once a walk (a recursion's frames share their code). */
	for (int i = 0; i < SENDING_NAMES; i++) {
		if (i >= b->nsending)
			break;
		if (b->sending_code[i] == code && b->sending_fingerprint[i] == fingerprint)
			return 0;
	}
	next = put_text(b, cfg, at, frame, PYTRACE_ARG_NAME, name, false);
	if (next == at)
		return 0;
	b->names_used = next;
	at = put_text(b, cfg, next, frame, PYTRACE_ARG_FILE, filename, true);
	if (at == next)
		return 0; /* the name alone: sent again next time, with its file */
	b->names_used = at;
	k = b->nsending;
	if (k < SENDING_NAMES) {
		b->sending_code[k] = code;
		b->sending_fingerprint[k] = fingerprint;
		b->nsending = k + 1;
	}
	return 0;
}

/* The parameters of the frame just read (its code object's span in the walk's buffer). */
static __always_inline void read_args(struct arg_walk *w, __u64 frame)
{
	const struct pytrace_py_cfg *cfg = w->cfg;
	struct walk_buf *b = w->buf;
	__s32 argc, kwonly;
	__u32 n;

	if (cfg->code_argcount > PYTRACE_BPF_SPAN - 16)
		return;
	argc = *(const __s32 *)(b->code + cfg->code_argcount);
	kwonly = *(const __s32 *)(b->code + cfg->code_argcount + 8);
	if (argc < 0 || kwonly < 0 || argc > 65535 || kwonly > 65535)
		return;
	n = (__u32)argc + (__u32)kwonly;
	if (n > PYTRACE_BPF_MAX_ARGS)
		n = PYTRACE_BPF_MAX_ARGS;
	if (!n)
		return;
	asm volatile("" : "+r"(n)); /* masked, see read_frame: slots has room for 15 */
	n &= 2 * PYTRACE_BPF_MAX_ARGS - 1;
	if (b->slots_read) {
		for (int k = 0; k < PYTRACE_BPF_MAX_ARGS; k++)
			b->slots[k] = span_u64(b->frame, cfg->frame_slots + 8 * k);
	} else if (bpf_probe_read_user(b->slots, n * 8,
				       (const void *)(frame + cfg->frame_localsplus))) {
		return; /* the frame goes without its arguments */
	}
	bpf_loop(n, read_arg, w, 0);
}

#define TPFLAGS_INLINE_VALUES (1ULL << 2) /* 3.13+ */
#define TPFLAGS_MANAGED_DICT (1ULL << 4)  /* 3.11+ */

/* PyDictKeysObject (3.11+): where cpython/objects.c reads them too. */
#define KEYS_LOG2_INDEX_BYTES 9
#define KEYS_KIND 10
#define KEYS_NENTRIES 24
#define KEYS_INDICES 32
#define KEYS_MAX_SEARCHED 16 /* entries compared; a work item has four attributes */

/* "work_id" and its NUL, as the 8 bytes of a compact ASCII str's text. */
#define WORK_ID_TEXT 0x0064695f6b726f77ULL

/*
 * The index of the key "work_id" among the entries of split keys @keys (unicode keys:
 * 16-byte entries, key first), or -1. Bounded: at most KEYS_MAX_SEARCHED entries.
 */
static __always_inline int work_id_index(const struct pytrace_py_cfg *cfg, __u64 keys)
{
	__u8 log2_index_bytes = 0, kind = 0;
	__u64 n, entries, key, text;
	int err = 0;

	if (bpf_probe_read_user(&log2_index_bytes, 1,
				(const void *)(keys + KEYS_LOG2_INDEX_BYTES)) ||
	    bpf_probe_read_user(&kind, 1, (const void *)(keys + KEYS_KIND)) || kind == 0 ||
	    log2_index_bytes > 16)
		return -1; /* kind 0: general keys, not a split dict's */
	n = read_u64(keys + KEYS_NENTRIES, &err);
	entries = keys + KEYS_INDICES + (1ULL << log2_index_bytes);
	for (int i = 0; i < KEYS_MAX_SEARCHED; i++) {
		if (err || (__u64)i >= n)
			return -1;
		key = read_u64(entries + 16 * i, &err);
		text = key ? read_u64(key + cfg->unicode_ascii_size, &err) : 0;
		if (!err && text == WORK_ID_TEXT)
			return i;
	}
	return -1;
}

/*
 * The work id of @obj, an executor's work item, from its split dict's or inline values,
 * as cpython/objects.c finds attributes by name; before 3.13, the first of them (its
 * class's __init__ sets work_id first, and unpickling restores it so); 0 when it is not
 * laid out that way (a combined dict) or can't be read.
 */
static __noinline __u64 first_attr(const struct pytrace_py_cfg *cfg, __u64 obj)
{
	__u64 type, flags, dict = 0, values = 0, basicsize, v, keys = 0;
	__s64 offset;
	__u8 valid = 0;
	int err = 0, index = 0;

	type = read_u64(obj + 8, &err);
	flags = type ? read_u64(type + cfg->type_flags, &err) : 0;
	if (err || !type)
		return 0;
	if (cfg->attr_mode >= PYTRACE_ATTR_311 && !(flags & TPFLAGS_MANAGED_DICT))
		return 0;
	switch (cfg->attr_mode) {
	case PYTRACE_ATTR_DICTOFFSET:
		offset = (__s64)read_u64(type + cfg->type_dictoffset, &err);
		if (err || offset <= 0 || offset > 4096)
			return 0;
		dict = read_u64(obj + (__u64)offset, &err);
		break;
	case PYTRACE_ATTR_311:
		values = read_u64(obj - 32, &err);
		if (!values)
			dict = read_u64(obj - 24, &err);
		break;
	case PYTRACE_ATTR_312:
		dict = read_u64(obj - 24, &err);
		if (dict & 1) {
			values = dict + 1;
			dict = 0;
		}
		break;
	case PYTRACE_ATTR_313:
		dict = read_u64(obj - 24, &err);
		if (dict || !(flags & TPFLAGS_INLINE_VALUES))
			break;
		/* Inline values right after the object; "valid" is their fourth byte. */
		basicsize = read_u64(type + cfg->type_basicsize, &err);
		if (err || basicsize < 16 || basicsize > 4096 ||
		    bpf_probe_read_user(&valid, 1, (const void *)(obj + basicsize + 3)))
			return 0;
		if (valid)
			values = obj + basicsize;
		break;
	default:
		return 0;
	}
	if (!values && dict && !err) {
		values = read_u64(dict + cfg->dict_values, &err); /* NULL when combined */
		if (cfg->attr_mode == PYTRACE_ATTR_313)
			keys = read_u64(dict + cfg->dict_keys, &err);
	} else if (values && cfg->attr_mode == PYTRACE_ATTR_313) {
		keys = read_u64(type + cfg->heaptype_cached_keys, &err);
	}
	if (err || !values)
		return 0;
	if (cfg->attr_mode == PYTRACE_ATTR_313) {
		index = keys ? work_id_index(cfg, keys) : -1;
		if (index < 0)
			return 0;
	}
	v = read_u64(values + cfg->values_items + 8 * (__u64)(index & (KEYS_MAX_SEARCHED - 1)),
		     &err);
	return err ? 0 : v;
}

/* A pool worker loop's frame: the locals that say which task it runs (cpython/args.c). */
static __always_inline void read_task(struct arg_walk *w, __u64 frame, __u32 k)
{
	const struct pytrace_py_cfg *cfg = w->cfg;
	struct walk_buf *b = w->buf;
	__u64 locals = frame + cfg->frame_localsplus;

	k &= 1;
	if (bpf_probe_read_user(&b->slots[0], 8,
				(const void *)(locals + cfg->task_slot[k][0] * 8)) ||
	    bpf_probe_read_user(&b->slots[1], 8, (const void *)(locals + cfg->task_slot[k][1] * 8)))
		return;
	if (cfg->code_tagged) {
		b->slots[0] &= ~3ULL;
		b->slots[1] &= ~3ULL;
	}
	if (cfg->task_item[k]) {
		/* An executor's work item: its work id, no task between tasks (see args.c). */
		b->slots[0] = b->slots[0] ? first_attr(cfg, b->slots[0]) : 0;
		b->slots[1] = 0;
	}
	b->index_base = 0x80;
	bpf_loop(2, read_arg, w, 0);
	b->index_base = 0;
}

/*
 * What a walk reads with the frame it just read (@frame, its code object @code in
 * @b->code): the parameters' values, a pool loop's task locals, the code's names. A
 * global function: the verifier checks it once, apart from the walk's states (inline,
 * it checked it in each of them: ~77,000 instructions a program, 0.2 s of start-up).
 */
__noinline int read_values(struct walk_buf *b, const struct pytrace_py_cfg *cfg, __u64 frame,
			   __u64 code)
{
	struct arg_walk w = { b, cfg };

	if (!b || !cfg)
		return 0;
	if (!b->args_cut) {
		read_args(&w, frame);
		if (code == cfg->task_code[0] || code == cfg->task_code[1])
			read_task(&w, frame, code == cfg->task_code[1]);
	}
	read_code_name(b, cfg, b->at, code);
	return 0;
}

/* The names this walk put in its event went out: not sent again for a while. */
static __always_inline void names_sent(struct walk_buf *b, __u32 pid)
{
	for (int i = 0; i < SENDING_NAMES; i++) {
		__u64 code;
		__u32 k;

		if (i >= b->nsending)
			break;
		code = b->sending_code[i];
		k = (__u32)(code >> 4) & (NAMED_CODES - 1);
		b->named_code[k] = code;
		b->named_fingerprint[k] = b->sending_fingerprint[i];
		b->named_pid[k] = pid;
	}
}

#endif
