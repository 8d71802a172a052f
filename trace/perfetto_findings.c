/* Perfetto's writer, the findings: a track each, under one of their own. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "perfetto.h"

/* A string argument under its own name (not interned: a finding's few). */
static void put_named_string(struct pb_buf *p, const char *name, const char *s)
{
	size_t a = pb_begin(p, TE_DEBUG_ANNOTATIONS);

	pb_string(p, DA_NAME, name);
	pb_string(p, DA_STRING_VALUE, s);
	pb_end(p, a);
}

/*
 * A finding: a track of its own ("1. imbalance 32%") under one "pytrace-sample
 * findings" track, with a slice over the time it concerns carrying its share, evidence,
 * where to look and what to try.
 */
int pftrace__finding(struct trace *trace, const struct trace_finding *f)
{
	struct pftrace *pf = trace->pftrace;
	uint64_t start_us = trace_to_us(trace, f->start_ns), end_us = trace_to_us(trace, f->end_ns);
	uint64_t uuid;
	struct pb_buf *p;
	char row[64], *name;
	size_t m, a;

	if (!pf->findings_uuid) {
		pf->findings_uuid = pf->next_uuid++;
		p = pf_packet_begin(pf, 0);
		m = pb_begin(p, PKT_TRACK_DESCRIPTOR);
		pb_uint(p, TD_UUID, pf->findings_uuid);
		pb_string(p, TD_NAME, "pytrace-sample findings");
		pb_end(p, m);
		pf_packet_end(trace);
	}
	uuid = pf->next_uuid++;
	snprintf(row, sizeof(row), "%" PRIu32 ". %s %.0f%%", f->rank, f->kind, f->share * 100);
	p = pf_packet_begin(pf, 0);
	m = pb_begin(p, PKT_TRACK_DESCRIPTOR);
	pb_uint(p, TD_UUID, uuid);
	pb_uint(p, TD_PARENT_UUID, pf->findings_uuid);
	pb_string(p, TD_NAME, row);
	pb_end(p, m);
	pf_packet_end(trace);
	if (end_us <= start_us)
		return 0;
	if (asprintf(&name, "%s: %s", f->kind, f->title) < 0)
		return -ENOMEM;
	p = pf_packet_begin(pf, start_us);
	m = pb_begin(p, PKT_TRACK_EVENT);
	pb_uint(p, TE_TYPE, TYPE_SLICE_BEGIN);
	pb_uint(p, TE_TRACK_UUID, uuid);
	pb_string(p, TE_NAME, name);
	free(name);
	put_named_string(p, "kind", f->kind);
	a = pb_begin(p, TE_DEBUG_ANNOTATIONS);
	pb_string(p, DA_NAME, "share");
	pb_double(p, DA_DOUBLE_VALUE, f->share);
	pb_end(p, a);
	put_named_string(p, "evidence", f->evidence);
	put_named_string(p, "where", f->where);
	put_named_string(p, "hint", f->hint);
	pb_end(p, m);
	pf_packet_end(trace);
	p = pf_packet_begin(pf, end_us);
	m = pb_begin(p, PKT_TRACK_EVENT);
	pb_uint(p, TE_TYPE, TYPE_SLICE_END);
	pb_uint(p, TE_TRACK_UUID, uuid);
	pb_end(p, m);
	pf_packet_end(trace);
	return 0;
}
