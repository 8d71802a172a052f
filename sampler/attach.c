/* Attaching to a running process tree: events for every thread, records for what exists. */
#include "internal.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "procfs.h"

int push_synth(struct sampler *s, const struct sampler_rec *rec, const char *text)
{
	size_t len = text ? strlen(text) + 1 : 0;
	size_t size = sizeof(struct synth_record) + len;
	struct qrec *q = malloc(sizeof(*q) + size);
	struct synth_record *sr;

	if (!q)
		return -ENOMEM;
	q->py = NULL;
	sr = (struct synth_record *)q->data;
	sr->header.type = SYNTH_RECORD;
	sr->header.misc = 0;
	sr->header.size = 0; /* may exceed 16 bits; never read back from a ring */
	sr->rec = *rec;
	sr->rec.synthetic = true;
	if (text)
		memcpy(sr->text, text, len);
	q->size = (uint32_t)size;
	q->cpu = 0;
	q->time = rec->time_ns;
	if (queue__push(&s->queue, q)) {
		qrec_free(q);
		return -ENOMEM;
	}
	return 0;
}

/* Copies up to @size bytes of a thread's stack from @sp with process_vm_readv. */
uint8_t *read_stack(pid_t pid, uint64_t sp, uint64_t size, uint64_t *got)
{
	uint8_t *buf = malloc(size);
	uint64_t done = 0;

	if (!buf)
		return NULL;
	/* Page by page: the copy stops where the stack mapping ends. */
	while (done < size) {
		uint64_t chunk = 4096 - ((sp + done) & 4095);
		struct iovec local, remote;
		ssize_t n;

		if (chunk > size - done)
			chunk = size - done;
		local = (struct iovec){ buf + done, chunk };
		remote = (struct iovec){ (void *)(uintptr_t)(sp + done), chunk };
		n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		if (n <= 0)
			break;
		done += (uint64_t)n;
	}
	if (!done) {
		free(buf);
		return NULL;
	}
	*got = done;
	return buf;
}

/*
 * A thread that is blocked as we attach: a wait from now, with its stacks (native and
 * Python) read from outside. It can't move while blocked, so they are exact, if it was
 * still blocked once they were read.
 */
static void note_blocked(struct sampler *s, struct task_state *t)
{
	uint64_t arg, sp, pc;
	int64_t nr;
	char state = procfs_task_state((pid_t)t->pid, (pid_t)t->tid);

	if (state != 'S' && state != 'D')
		return;
	t->out = true;
	t->out_time = s->start_ns;
	t->wait = SAMPLER_WAIT_BLOCKED;
	t->outside_py = walk_python(s, t->pid, t->tid, true, s->start_ns);
	if (t->outside_py) {
		t->outside_read_ns = t->outside_py->read_ns;
		state = procfs_task_state((pid_t)t->pid, (pid_t)t->tid);
		if (state != 'S' && state != 'D') {
			py_stack_free(t->outside_py); /* it ran meanwhile: not what it waits in */
			t->outside_py = NULL;
		}
	}
	if (procfs_task_syscall((pid_t)t->pid, (pid_t)t->tid, &nr, &arg, &sp, &pc))
		return;
	t->outside_syscall = nr;
	t->outside_syscall_arg = arg;
	t->outside_regs[SREG_SP] = sp;
	t->outside_regs[SREG_IP] = pc;
	t->outside_stack =
		read_stack((pid_t)t->pid, sp, s->opts.stack_bytes, &t->outside_stack_size);
}

/* Records for what a process already is: its maps, its threads and their names. */
static int describe_process(struct sampler *s, pid_t pid)
{
	struct sampler_rec rec = { .time_ns = s->start_ns,
				   .pid = (uint32_t)pid,
				   .tid = (uint32_t)pid };
	struct procfs_map *maps = NULL;
	pid_t *tids = NULL;
	size_t nmaps = 0, ntids = 0, i;
	char path[1024], comm[64];
	pid_t ppid;
	int err;

	rec.kind = SREC_FORK;
	ppid = procfs_ppid(pid);
	rec.fork.ppid = ppid > 0 ? (uint32_t)ppid : 0; /* 0: unknown (it may be gone) */
	rec.fork.ptid = rec.fork.ppid;
	err = push_synth(s, &rec, procfs_cmdline(pid, path, sizeof(path)) ? NULL : path);
	if (!err && !procfs_exec_maps(pid, &maps, &nmaps)) {
		for (i = 0; i < nmaps && !err; i++) {
			rec = (struct sampler_rec){ .kind = SREC_MMAP,
						    .time_ns = s->start_ns,
						    .pid = (uint32_t)pid,
						    .tid = (uint32_t)pid };
			rec.mmap.start = maps[i].start;
			rec.mmap.len = maps[i].end - maps[i].start;
			rec.mmap.pgoff = maps[i].pgoff;
			err = push_synth(s, &rec, maps[i].path);
		}
		procfs_maps_free(maps, nmaps);
	}
	if (!err && !procfs_tasks(pid, &tids, &ntids)) {
		for (i = 0; i < ntids && !err; i++) {
			snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tids[i]);
			if (procfs_read(path, comm, sizeof(comm)) < 0)
				continue;
			rec = (struct sampler_rec){ .kind = SREC_COMM,
						    .time_ns = s->start_ns,
						    .pid = (uint32_t)pid,
						    .tid = (uint32_t)tids[i] };
			err = push_synth(s, &rec, comm);
		}
		free(tids);
	}
	return err;
}

/* Opens events for every thread of @pid not yet traced. Returns how many were new. */
static int attach_process(struct sampler *s, pid_t pid)
{
	pid_t *tids = NULL;
	size_t ntids = 0, i;
	int err, added = 0;
	bool known = hashmap__get(s->procs, (uint64_t)pid) != NULL;

	err = procfs_tasks(pid, &tids, &ntids);
	if (err)
		return err;
	if (!hashmap__get(s->pythons, (uint64_t)pid)) {
		unsigned minor;
		struct cpython_process *proc = cpython_process__find(pid, &minor);
		int why = proc ? 0 : errno;

		set_python(s, (uint32_t)pid, proc, 0);
		if (!known && why && why != ENOENT && why != EACCES && why != EPERM && why != ESRCH)
			note_unreadable(s, (uint32_t)pid, sampler_now_ns(), minor, why);
	}
	if (!known && s->bpf)
		bpf_reader__trace_process(s->bpf, (uint32_t)pid);
	for (i = 0; i < ntids; i++) {
		struct task_state *t;

		if (hashmap__get(s->tasks, (uint64_t)tids[i]))
			continue;
		err = open_task_events(s, tids[i]);
		if (err == -ESRCH)
			continue; /* it ended meanwhile */
		if (err)
			break;
		t = task_get(s, (uint32_t)pid, (uint32_t)tids[i], true);
		if (!t) {
			err = -ENOMEM;
			break;
		}
		proc_add_task(s, (uint32_t)pid, false);
		note_blocked(s, t);
		added++;
	}
	free(tids);
	if (err)
		return err;
	if (!known && added)
		err = describe_process(s, pid);
	return err ? err : added;
}

struct sampler *sampler__attach(const struct sampler_opts *opts, const pid_t *pids, size_t npids,
				pid_t *bad_pid)
{
	struct sampler *s = sampler__new(opts);
	int round, err = 0, added;
	size_t i;

	if (!s)
		return NULL;
	for (i = 0; i < npids; i++) {
		if (kill(pids[i], 0) && errno == ESRCH) {
			*bad_pid = pids[i];
			err = -ESRCH;
			goto out_free;
		}
	}
	/* Threads and children may appear while we attach: go round until nothing is new. */
	for (round = 0; round < ATTACH_ROUNDS; round++) {
		added = 0;
		for (i = 0; i < npids; i++) {
			pid_t *tree = NULL;
			size_t n = 0, j;

			err = procfs_descendants(pids[i], &tree, &n);
			for (j = 0; !err && j < n; j++) {
				int r = attach_process(s, tree[j]);

				if (r == -ESRCH && j)
					continue; /* a descendant that exited meanwhile */
				if (r < 0) {
					*bad_pid = tree[j];
					err = r;
				} else {
					added += r;
				}
			}
			free(tree);
			if (err)
				goto out_free;
		}
		if (!added)
			break;
	}
	err = start_drainer(s);
	if (err)
		goto out_free;
	return s;

out_free:
	sampler__free(s);
	errno = -err;
	return NULL;
}
