/*
 * perfetto.c -- the Perfetto protobuf sink (.pftrace).
 *
 * A Perfetto trace is a `Trace` message: a repeated `packet` field.  Packing
 * a one-packet Trace per event and appending it produces exactly that
 * encoding (repeated fields concatenate), so the file streams to disk with
 * one reusable buffer and never holds more than a packet in memory; a trace
 * cut short by a crash is still readable up to its last whole packet.
 *
 * Layout: a process per NeuronCore (pid core + 1) and one for the chip
 * (pid 10000); engines, DMA queues and programs are thread tracks (tid =
 * pid * 1000 + slot + 1, so they sort in hardware order); counters are
 * counter tracks under their process.  All packets share one sequence; the
 * first one clears its incremental state and interns the opcode names,
 * categories and argument names, which later packets refer to by iid.
 * Timestamps are nanoseconds (Perfetto's unit), rounded down from the
 * simulated picoseconds; each slice's exact picoseconds are an argument.
 */
#include "writer.h"

#include <stdlib.h>
#include <string.h>

#include "neuronsim/isa.h"
#include "perfetto_trace.pb-c.h"

#define SEQ_ID 1u
#define SEQ_INCREMENTAL_STATE_CLEARED 1u
#define SEQ_NEEDS_INCREMENTAL_STATE 2u
#define CHIP_PID 10000

static const char *const categories[] = { "instruction", "dma", "program", "aggregate", "range", "note" };
#define NUM_CATEGORIES (sizeof(categories) / sizeof(categories[0]))
#define NUM_OPCODES (ISA_NUM_OPS)

typedef struct pf_sink {
	uint8_t *buf;
	size_t   cap;
	uint8_t  process_declared[TRC_MAX_CORES + 1];
} pf_sink;

static int pid_of(int core)
{
	return core == TRC_CHIP ? CHIP_PID : core + 1;
}

static uint64_t uuid_of(uint32_t track)
{
	return (uint64_t)track + 1;
}

static uint64_t process_uuid(int core)
{
	return 0x100000000ull + (uint64_t)pid_of(core);
}

/* packs `p` as a one-packet Trace and appends it */
static int emit(trc_writer *w, Perfetto__Protos__TracePacket *p)
{
	pf_sink *s = w->sink;
	p->has_trusted_packet_sequence_id = 1;
	p->trusted_packet_sequence_id = SEQ_ID;
	Perfetto__Protos__TracePacket *one[1] = { p };
	Perfetto__Protos__Trace t = PERFETTO__PROTOS__TRACE__INIT;
	t.n_packet = 1;
	t.packet = one;
	size_t n = perfetto__protos__trace__get_packed_size(&t);
	if (n > s->cap) {
		size_t cap = n * 2;
		uint8_t *b = realloc(s->buf, cap);
		if (!b)
			return -1;
		s->buf = b;
		s->cap = cap;
	}
	perfetto__protos__trace__pack(&t, s->buf);
	trc_out(w, s->buf, n);
	return w->io_error ? -1 : 0;
}

static int pf_open(trc_writer *w)
{
	pf_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	w->sink = s;

	Perfetto__Protos__EventName names[NUM_OPCODES];
	Perfetto__Protos__EventName *pnames[NUM_OPCODES];
	for (int i = 0; i < (int)NUM_OPCODES; i++) {
		perfetto__protos__event_name__init(&names[i]);
		names[i].has_iid = 1;
		names[i].iid = (uint64_t)i + 1;
		names[i].name = (char *)trc_opcode_name(i);
		pnames[i] = &names[i];
	}
	Perfetto__Protos__EventCategory cats[NUM_CATEGORIES];
	Perfetto__Protos__EventCategory *pcats[NUM_CATEGORIES];
	for (int i = 0; i < (int)NUM_CATEGORIES; i++) {
		perfetto__protos__event_category__init(&cats[i]);
		cats[i].has_iid = 1;
		cats[i].iid = (uint64_t)i + 1;
		cats[i].name = (char *)categories[i];
		pcats[i] = &cats[i];
	}
	Perfetto__Protos__DebugAnnotationName args[TRC_NUM_ARG_NAMES];
	Perfetto__Protos__DebugAnnotationName *pargs[TRC_NUM_ARG_NAMES];
	for (int i = 0; i < TRC_NUM_ARG_NAMES; i++) {
		perfetto__protos__debug_annotation_name__init(&args[i]);
		args[i].has_iid = 1;
		args[i].iid = (uint64_t)i + 1;
		args[i].name = (char *)trc_arg_names[i];
		pargs[i] = &args[i];
	}
	Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
	in.n_event_names = NUM_OPCODES;
	in.event_names = pnames;
	in.n_event_categories = NUM_CATEGORIES;
	in.event_categories = pcats;
	in.n_debug_annotation_names = TRC_NUM_ARG_NAMES;
	in.debug_annotation_names = pargs;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.interned_data = &in;
	p.has_sequence_flags = 1;
	p.sequence_flags = SEQ_INCREMENTAL_STATE_CLEARED;
	return emit(w, &p);
}

static int declare_process(trc_writer *w, int core)
{
	pf_sink *s = w->sink;
	if (s->process_declared[core])
		return 0;
	s->process_declared[core] = 1;
	char name[32];
	if (core == TRC_CHIP)
		snprintf(name, sizeof(name), "Chip");
	else
		snprintf(name, sizeof(name), "NeuronCore %d", core);
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	pd.has_pid = 1;
	pd.pid = pid_of(core);
	pd.process_name = name;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = process_uuid(core);
	td.process = &pd;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.track_descriptor = &td;
	return emit(w, &p);
}

static int pf_track(trc_writer *w, uint32_t id, int core, int slot, const char *name, bool counter)
{
	if (declare_process(w, core))
		return -1;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = uuid_of(id);
	td.name = (char *)name;
	if (counter) {
		td.has_parent_uuid = 1;
		td.parent_uuid = process_uuid(core);
		if (strstr(name, "bytes")) {
			cd.has_unit = 1;
			cd.unit = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__UNIT__UNIT_SIZE_BYTES;
		} else if (strstr(name, "GB/s")) {
			cd.unit_name = "GB/s";
		}
		td.counter = &cd;
	} else {
		th.has_pid = 1;
		th.pid = pid_of(core);
		th.has_tid = 1;
		th.tid = pid_of(core) * 1000 + slot + 1;
		th.thread_name = (char *)name;
		td.thread = &th;
	}
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.track_descriptor = &td;
	return emit(w, &p);
}

static int category_of(const char *cat)
{
	for (int i = 0; i < (int)NUM_CATEGORIES; i++)
		if (strcmp(cat, categories[i]) == 0)
			return i + 1;
	return NUM_CATEGORIES;   /* "note" */
}

static int event(trc_writer *w, uint32_t track, int type, uint64_t t_ps, int name_id,
		 const char *name, const char *cat, const trc_arg *args, int nargs, const double *value)
{
	Perfetto__Protos__DebugAnnotation ann[8];
	Perfetto__Protos__DebugAnnotation *pann[8];
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	uint64_t cat_iid;
	te.has_type = 1;
	te.type = (Perfetto__Protos__TrackEvent__Type)type;
	te.has_track_uuid = 1;
	te.track_uuid = uuid_of(track);
	if (name_id >= 0 && name_id < (int)NUM_OPCODES) {
		te.has_name_iid = 1;
		te.name_iid = (uint64_t)name_id + 1;
	} else if (name) {
		te.name = (char *)name;
	}
	if (cat) {
		cat_iid = (uint64_t)category_of(cat);
		te.n_category_iids = 1;
		te.category_iids = &cat_iid;
	}
	if (nargs > 8)
		nargs = 8;
	for (int i = 0; i < nargs; i++) {
		perfetto__protos__debug_annotation__init(&ann[i]);
		ann[i].has_name_iid = 1;
		ann[i].name_iid = (uint64_t)args[i].name + 1;
		if (args[i].str) {
			ann[i].string_value = (char *)args[i].str;
		} else {
			ann[i].has_uint_value = 1;
			ann[i].uint_value = args[i].u;
		}
		pann[i] = &ann[i];
	}
	te.n_debug_annotations = (size_t)nargs;
	te.debug_annotations = pann;
	if (value) {
		te.has_double_counter_value = 1;
		te.double_counter_value = *value;
	}
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	p.has_timestamp = 1;
	p.timestamp = t_ps / 1000u;
	p.has_sequence_flags = 1;
	p.sequence_flags = SEQ_NEEDS_INCREMENTAL_STATE;
	p.track_event = &te;
	return emit(w, &p);
}

static int pf_slice(trc_writer *w, uint32_t track, int name_id, const char *name, const char *cat,
		    uint64_t start_ps, uint64_t end_ps, const trc_arg *args, int nargs)
{
	if (event(w, track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, start_ps, name_id, name,
		  cat, args, nargs, NULL))
		return -1;
	return event(w, track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END, end_ps, -1, NULL, NULL,
		     NULL, 0, NULL);
}

static int pf_counter(trc_writer *w, uint32_t track, uint64_t t_ps, double value)
{
	return event(w, track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER, t_ps, -1, NULL, NULL, NULL,
		     0, &value);
}

static int pf_instant(trc_writer *w, uint32_t track, const char *name, uint64_t t_ps, const trc_arg *args,
		      int nargs)
{
	return event(w, track, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, t_ps, -1, name, "note",
		     args, nargs, NULL);
}

static int pf_close(trc_writer *w)
{
	pf_sink *s = w->sink;
	if (s) {
		free(s->buf);
		free(s);
	}
	w->sink = NULL;
	return 0;
}

const trc_sink_ops trc_perfetto_ops = { pf_open, pf_track, pf_slice, pf_counter, pf_instant, pf_close };
