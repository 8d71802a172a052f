/* Loading the kernel-side reader, feeding it offsets and thread states, draining it. */
#include "bpf_reader.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "kernel_layout.h"
#include "pytrace.skel.h"

#define KERNEL_BTF "/sys/kernel/btf/vmlinux"

struct bpf_reader {
	struct pytrace_bpf *skel;
	struct ring_buffer *ring;
	struct bpf_link **links; /* one per cpu-clock event sampled */
	size_t nlinks, links_capacity;
	void (*fn)(void *ctx, const struct pytrace_event *e);
	void *ctx;
};

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

/* How much the verifier checked of each program: most of our start-up (-vv). */
static void log_verifier_work(struct bpf_object *obj)
{
	struct bpf_program *prog;

	bpf_object__for_each_program(prog, obj)
	{
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_program__fd(prog) >= 0 &&
		    !bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			pr_debug("program %s: %u instructions verified", bpf_program__name(prog),
				 info.verified_insns);
	}
}

static int on_event(void *arg, void *data, size_t size)
{
	struct bpf_reader *b = arg;

	const struct pytrace_event *e = data;

	/* Events are sent at their length: the header, that many frames, their arguments. */
	if (size < PYTRACE_EVENT_HEADER_SIZE || !b->fn)
		return 0;
	if (e->nframes > PYTRACE_BPF_MAX_FRAMES || e->args_size > PYTRACE_BPF_ARGS_BYTES ||
	    e->names_size > PYTRACE_BPF_NAMES_BYTES ||
	    (e->cut && e->nframes != PYTRACE_BPF_MAX_FRAMES) ||
	    size < PYTRACE_EVENT_HEADER_SIZE + e->nframes * sizeof(e->frames[0]) + e->args_size +
			    e->names_size)
		return 0;
	b->fn(b->ctx, e);
	return 0;
}

struct bpf_reader *bpf_reader__open(bool pass_samples, bool read_switches, bool read_messages)
{
	struct bpf_reader *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return NULL;
	libbpf_set_print(silent);
	b->skel = pytrace_bpf__open();
	if (!b->skel) {
		err = -errno;
		goto out_free;
	}
	b->skel->rodata->pass_samples = pass_samples;
	/* Where the few kernel fields read are: the programs are built without CO-RE. */
	err = kernel_layout__read(KERNEL_BTF, &b->skel->rodata->kernel_offsets);
	if (err == -ESRCH || err == -EINVAL) {
		pr_info("%s does not describe task_struct and pt_regs as expected", KERNEL_BTF);
		err = -EOPNOTSUPP;
	}
	if (err)
		goto out_destroy;
	bpf_program__set_autoload(b->skel->progs.on_switch, read_switches);
	bpf_program__set_autoload(b->skel->progs.on_syscall_done, read_messages);
	err = libbpf_num_possible_cpus();
	if (err > 0)
		err = bpf_map__set_max_entries(b->skel->maps.scratch, 3 * (unsigned)err);
	if (err < 0)
		goto out_destroy;
	err = pytrace_bpf__load(b->skel);
	if (err)
		goto out_destroy;
	log_verifier_work(b->skel->obj);
	err = pytrace_bpf__attach(b->skel);
	if (err)
		goto out_destroy;
	b->ring = ring_buffer__new(bpf_map__fd(b->skel->maps.events), on_event, b, NULL);
	if (!b->ring) {
		err = -errno;
		goto out_destroy;
	}
	return b;

out_destroy:
	pytrace_bpf__destroy(b->skel);
out_free:
	free(b);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

void bpf_reader__free(struct bpf_reader *b)
{
	if (!b)
		return;
	/*
	 * A perf-event link closes its event's fd when destroyed, but the fds are the
	 * sampler's, closed by it (maybe already, and their numbers reused by then):
	 * disconnected, the link is only freed; the program goes with the event's fd.
	 */
	while (b->nlinks) {
		bpf_link__disconnect(b->links[--b->nlinks]);
		bpf_link__destroy(b->links[b->nlinks]);
	}
	free(b->links);
	ring_buffer__free(b->ring);
	pytrace_bpf__destroy(b->skel);
	free(b);
}

int bpf_reader__attach_sampling(struct bpf_reader *b, int fd, bool switches)
{
	struct bpf_link *link;

	if (b->nlinks == b->links_capacity) {
		size_t capacity = b->links_capacity ? b->links_capacity * 2 : 16;
		struct bpf_link **grown = realloc(b->links, capacity * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		b->links = grown;
		b->links_capacity = capacity;
	}
	link = bpf_program__attach_perf_event(
		switches ? b->skel->progs.on_switch_sample : b->skel->progs.on_sample, fd);
	if (!link)
		return -errno;
	b->links[b->nlinks++] = link;
	return 0;
}

/*
 * The smallest span of an object holding each field (@n offsets, each read as 8 bytes):
 * false when it is longer than the kernel reads at once.
 */
static bool span_of(const uint64_t *fields, size_t n, __u64 *at, __u64 *len)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		lo = fields[i] < lo ? fields[i] : lo;
		hi = fields[i] + 8 > hi ? fields[i] + 8 : hi;
	}
	*at = lo;
	*len = hi - lo;
	return hi - lo <= PYTRACE_BPF_SPAN;
}

/* How the kernel finds an instance's attribute values (bpf/pytrace_bpf.h). */
static uint8_t attr_mode(const struct cpython_layout *l)
{
	if (!l->names_supported)
		return PYTRACE_ATTR_NONE;
	switch (l->managed) {
	case CPYTHON_MANAGED_NONE:
		return PYTRACE_ATTR_DICTOFFSET;
	case CPYTHON_MANAGED_311:
		return PYTRACE_ATTR_311;
	case CPYTHON_MANAGED_312:
		return PYTRACE_ATTR_312;
	case CPYTHON_MANAGED_313:
		return PYTRACE_ATTR_313;
	}
	return PYTRACE_ATTR_NONE;
}

int bpf_reader__set_process(struct bpf_reader *b, uint32_t tgid, const struct cpython_process *proc,
			    bool read_args)
{
	const struct cpython_layout *l = proc ? &proc->layout : NULL;
	const struct cpython_types *types = proc ? &proc->types : NULL;
	uint32_t i;
	int fd = bpf_map__fd(b->skel->maps.py_cfg);
	struct pytrace_py_cfg cfg;
	uint64_t frame_fields[6], code_fields[5];
	size_t ncode = 2;
	size_t nframe = 0;

	if (!l)
		return bpf_map_delete_elem(fd, &tgid) && errno != ENOENT ? -errno : 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tstate_frame = l->tstate_frame;
	cfg.cframe_current_frame = l->cframe_current_frame;
	cfg.via_cframe = l->frame_via_cframe;
	frame_fields[nframe++] = l->frame_previous;
	frame_fields[nframe++] = l->frame_code;
	frame_fields[nframe++] = l->frame_instr;
	if (l->frame_owner)
		frame_fields[nframe++] = l->frame_owner;
	code_fields[0] = l->code_filename;
	code_fields[1] = l->code_name;
	if (l->code_version)
		code_fields[ncode++] = l->code_version; /* 8 bytes read: 4 past co_version */
	/* co_argcount and co_kwonlyargcount, 8 bytes on: 16 bytes from co_argcount. */
	code_fields[ncode] = l->code_argcount;
	code_fields[ncode + 1] = l->code_argcount + 8;
	cfg.read_args = read_args && l->code_argcount && l->frame_localsplus && types &&
			span_of(code_fields, ncode + 2, &cfg.code_span_at, &cfg.code_span_len);
	if (!cfg.read_args && !span_of(code_fields, ncode, &cfg.code_span_at, &cfg.code_span_len))
		return -EINVAL;
	if (!span_of(frame_fields, nframe, &cfg.frame_span_at, &cfg.frame_span_len))
		return -EINVAL;
	if (cfg.read_args) {
		/* The parameters' slots in the same read, when they lie close enough (3.11+). */
		__u64 at, len;

		frame_fields[nframe] = l->frame_localsplus;
		frame_fields[nframe + 1] = l->frame_localsplus + 8 * (PYTRACE_BPF_MAX_ARGS - 1);
		if (span_of(frame_fields, nframe + 2, &at, &len) && at == cfg.frame_span_at) {
			cfg.slots_in_span = 1;
			cfg.frame_base_len = cfg.frame_span_len;
			cfg.frame_span_len = len;
			cfg.frame_slots = l->frame_localsplus - at;
		}
	}
	cfg.frame_previous = l->frame_previous - cfg.frame_span_at;
	cfg.frame_code = l->frame_code - cfg.frame_span_at;
	cfg.frame_instr = l->frame_instr - cfg.frame_span_at;
	cfg.frame_owner = l->frame_owner ? l->frame_owner - cfg.frame_span_at : 0;
	cfg.code_filename = l->code_filename - cfg.code_span_at;
	cfg.code_name = l->code_name - cfg.code_span_at;
	if (l->code_version) {
		cfg.code_version = l->code_version - cfg.code_span_at;
		cfg.version_mask = 0xffff;
	}
	cfg.code_tagged = l->code_tagged;
	if (cfg.read_args) {
		cfg.code_argcount = l->code_argcount - cfg.code_span_at;
		cfg.frame_localsplus = l->frame_localsplus;
		cfg.str_type = types->addr[CPYTHON_TYPE_STR];
		cfg.bytes_type = types->addr[CPYTHON_TYPE_BYTES];
		cfg.str_length = l->unicode_length;
		cfg.str_state = l->unicode_state;
		cfg.str_ascii_data = l->unicode_ascii_size;
		cfg.str_compact_data = l->unicode_compact_size;
		cfg.bytes_size = l->bytes_size;
		cfg.bytes_data = l->bytes_sval;
		for (i = 0; i < proc->ntask_codes && i < 2; i++) {
			cfg.task_code[i] = proc->task_codes[i].code;
			cfg.task_slot[i][0] = proc->task_codes[i].slots[0];
			cfg.task_slot[i][1] = proc->task_codes[i].slots[1];
			cfg.task_item[i] = proc->task_codes[i].kind == CPYTHON_TASK_CF_PROCESS;
		}
		cfg.attr_mode = attr_mode(l);
		cfg.type_flags = l->type_flags;
		cfg.type_basicsize = l->type_basicsize;
		cfg.type_dictoffset = l->type_dictoffset;
		cfg.dict_values = l->dict_values;
		cfg.values_items = l->values_items;
		cfg.heaptype_cached_keys = l->heaptype_cached_keys;
		cfg.dict_keys = l->dict_keys;
		cfg.unicode_ascii_size = l->unicode_ascii_size;
	}
	cfg.runtime = proc->runtime;
	cfg.runtime_interpreters_head = l->runtime_interpreters_head;
	cfg.interp_threads_head = l->interp_threads_head;
	cfg.tstate_next = l->tstate_next;
	cfg.id_is_native = l->tstate_native_thread_id != 0;
	cfg.tstate_id = cfg.id_is_native ? l->tstate_native_thread_id : l->tstate_thread_id;
	if (proc->other_pidns) {
		cfg.pidns_dev = proc->pidns.dev;
		cfg.pidns_ino = proc->pidns.ino;
	}
	if (proc->gil_known) {
		cfg.gil_locked = proc->gil.locked;
		cfg.gil_holder = proc->gil.last_holder;
	}
	return bpf_map_update_elem(fd, &tgid, &cfg, BPF_ANY) ? -errno : 0;
}

int bpf_reader__set_thread(struct bpf_reader *b, uint32_t tid, uint64_t tstate)
{
	int fd = bpf_map__fd(b->skel->maps.tstates);

	return bpf_map_update_elem(fd, &tid, &tstate, BPF_ANY) ? -errno : 0;
}

int bpf_reader__trace_process(struct bpf_reader *b, uint32_t tgid)
{
	int fd = bpf_map__fd(b->skel->maps.traced);
	uint8_t yes = 1;

	return bpf_map_update_elem(fd, &tgid, &yes, BPF_ANY) ? -errno : 0;
}

void bpf_reader__forget_thread(struct bpf_reader *b, uint32_t tid)
{
	bpf_map_delete_elem(bpf_map__fd(b->skel->maps.tstates), &tid);
}

int bpf_reader__consume(struct bpf_reader *b, void (*fn)(void *ctx, const struct pytrace_event *e),
			void *ctx)
{
	b->fn = fn;
	b->ctx = ctx;
	return ring_buffer__consume(b->ring);
}

uint64_t bpf_reader__stat(struct bpf_reader *b, enum pytrace_bpf_stat which)
{
	int fd = bpf_map__fd(b->skel->maps.stats);
	__u32 key = which;
	int ncpus = libbpf_num_possible_cpus();
	uint64_t total = 0, *values;
	int i;

	if (ncpus <= 0)
		return 0;
	values = calloc((size_t)ncpus, sizeof(*values));
	if (values && !bpf_map_lookup_elem(fd, &key, values)) {
		for (i = 0; i < ncpus; i++)
			total += values[i];
	}
	free(values);
	return total;
}
