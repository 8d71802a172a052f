/* Loading the switch-out program, feeding it offsets and thread states, draining it. */
#include "bpf_switch.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "pytrace.skel.h"

struct bpf_switch {
	struct pytrace_bpf *skel;
	struct ring_buffer *ring;
	void (*fn)(void *ctx, const struct pytrace_switch_event *e);
	void *ctx;
};

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static int on_event(void *arg, void *data, size_t size)
{
	struct bpf_switch *b = arg;

	if (size >= sizeof(struct pytrace_switch_event) && b->fn)
		b->fn(b->ctx, data);
	return 0;
}

struct bpf_switch *bpf_switch__open(void)
{
	struct bpf_switch *b = calloc(1, sizeof(*b));
	int err;

	if (!b)
		return NULL;
	libbpf_set_print(silent);
	b->skel = pytrace_bpf__open_and_load();
	if (!b->skel) {
		err = -errno;
		goto out_free;
	}
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

void bpf_switch__free(struct bpf_switch *b)
{
	if (!b)
		return;
	ring_buffer__free(b->ring);
	pytrace_bpf__destroy(b->skel);
	free(b);
}

int bpf_switch__set_process(struct bpf_switch *b, uint32_t tgid, const struct cpython_layout *l)
{
	int fd = bpf_map__fd(b->skel->maps.py_cfg);
	struct pytrace_py_cfg cfg;

	if (!l)
		return bpf_map_delete_elem(fd, &tgid) && errno != ENOENT ? -errno : 0;
	memset(&cfg, 0, sizeof(cfg));
	cfg.tstate_frame = l->tstate_frame;
	cfg.cframe_current_frame = l->cframe_current_frame;
	cfg.via_cframe = l->frame_via_cframe;
	cfg.frame_previous = l->frame_previous;
	cfg.frame_code = l->frame_code;
	cfg.frame_instr = l->frame_instr;
	cfg.frame_owner = l->frame_owner;
	cfg.code_filename = l->code_filename;
	cfg.code_name = l->code_name;
	cfg.code_tagged = l->code_tagged;
	return bpf_map_update_elem(fd, &tgid, &cfg, BPF_ANY) ? -errno : 0;
}

int bpf_switch__set_thread(struct bpf_switch *b, uint32_t tid, uint64_t tstate)
{
	int fd = bpf_map__fd(b->skel->maps.tstates);

	return bpf_map_update_elem(fd, &tid, &tstate, BPF_ANY) ? -errno : 0;
}

void bpf_switch__forget_thread(struct bpf_switch *b, uint32_t tid)
{
	bpf_map_delete_elem(bpf_map__fd(b->skel->maps.tstates), &tid);
}

int bpf_switch__consume(struct bpf_switch *b,
			void (*fn)(void *ctx, const struct pytrace_switch_event *e), void *ctx)
{
	b->fn = fn;
	b->ctx = ctx;
	return ring_buffer__consume(b->ring);
}

uint64_t bpf_switch__dropped(struct bpf_switch *b)
{
	int fd = bpf_map__fd(b->skel->maps.stats);
	__u32 key = PYTRACE_STAT_RINGBUF_FULL;
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
