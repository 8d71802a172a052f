/*
 * Python frames: names, files and lines from the code objects that cpython/ read when
 * the frames were walked (the process may be gone by now). Each cached code object
 * keeps its interned frame id, so a name is interned once per code object.
 */
#include <errno.h>

#include "internal.h"

static uint32_t unreadable(struct symbolizer *sym)
{
	struct frame_info info = { "[unreadable Python frame]", "", 0, FRAME_PYTHON };

	sym->stats.python_unreadable++;
	return frame_table__intern(sym->frames, &info);
}

int python_frames(struct symbolizer *sym, const struct sampler_rec *rec, struct trace_frame *frames,
		  uint32_t max)
{
	struct cpython_process *proc = rec->sample.python;
	uint32_t i, n = rec->sample.npy < max ? rec->sample.npy : max;

	/* Innermost first from the target; root first in the trace. */
	for (i = 0; i < n; i++) {
		uint32_t k = rec->sample.npy - 1 - i;
		const struct cpython_frame *f = &rec->sample.py_frames[k];
		struct cpython_code_entry *e =
			rec->sample.py_codes ? rec->sample.py_codes[k] : NULL;

		if (!e || e->unreadable) {
			frames[i].func = unreadable(sym);
			frames[i].line = 0;
		} else {
			if (!e->user) {
				struct frame_info info = { e->info.name, e->info.filename,
							   e->info.firstlineno, FRAME_PYTHON };

				e->user = frame_table__intern(sym->frames, &info);
			}
			frames[i].func = e->user;
			frames[i].line =
				cpython_line(proc->layout.lines, e->info.linetable,
					     e->info.linetable_len, e->info.firstlineno, f->lasti);
		}
		if (!frames[i].func)
			return -ENOMEM;
		/* Where the caller called from: its instruction offset. */
		frames[i].callsite =
			i ? (uint64_t)(rec->sample.py_frames[rec->sample.npy - i].lasti + 1) : 0;
	}
	sym->stats.python_frames += n;
	return (int)n;
}
