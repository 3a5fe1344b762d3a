/*
 * chrome.c -- the Chrome trace-event JSON sink (chrome://tracing, Perfetto
 * UI).  Same tracks and content as the Perfetto sink (writer.h): a process
 * per NeuronCore, a thread per engine / DMA queue / program track, complete
 * ("X") events with their arguments, counters ("C").  Timestamps are
 * microseconds with six decimals, so picoseconds are exact.
 */
#include "writer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct chrome_sink {
	int     events;
	uint8_t process_named[TRC_MAX_CORES + 1];
} chrome_sink;

static int pid_of(int core)
{
	return core == TRC_CHIP ? 10000 : core;
}

/* JSON string body (names and instruction texts are short: 4 KiB bounds them) */
static void put_str(trc_writer *w, const char *s)
{
	char buf[4096];
	trc_out(w, buf, trc_json_escape(buf, sizeof(buf), s));
}

static void sep(trc_writer *w)
{
	chrome_sink *s = w->sink;
	if (s->events++)
		trc_out(w, ",\n", 2);
	else
		trc_out(w, "\n", 1);
}

/* ps -> us with 6 decimals */
static void put_us(trc_writer *w, uint64_t ps)
{
	trc_printf(w, "%" PRIu64 ".%06" PRIu64, ps / 1000000u, ps % 1000000u);
}

static void put_args(trc_writer *w, const trc_arg *args, int nargs)
{
	trc_printf(w, ",\"args\":{");
	for (int i = 0; i < nargs; i++) {
		trc_printf(w, "%s\"%s\":", i ? "," : "", trc_arg_names[args[i].name]);
		if (args[i].str) {
			trc_out(w, "\"", 1);
			put_str(w, args[i].str);
			trc_out(w, "\"", 1);
		} else {
			trc_printf(w, "%" PRIu64, args[i].u);
		}
	}
	trc_printf(w, "}");
}

static int ch_open(trc_writer *w)
{
	static chrome_sink zero;
	chrome_sink *s = malloc(sizeof(*s));
	if (!s)
		return -1;
	*s = zero;
	w->sink = s;
	trc_printf(w, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
	return w->io_error ? -1 : 0;
}

static int ch_track(trc_writer *w, uint32_t id, int core, int slot, const char *name, bool counter)
{
	chrome_sink *s = w->sink;
	(void)id;
	if (!s->process_named[core]) {
		s->process_named[core] = 1;
		sep(w);
		if (core == TRC_CHIP)
			trc_printf(w, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"Chip\"}}",
				   pid_of(core));
		else
			trc_printf(w, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"NeuronCore %d\"}}",
				   pid_of(core), core);
	}
	if (counter)             /* counters are named by their events */
		return w->io_error ? -1 : 0;
	sep(w);
	trc_printf(w, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"",
		   pid_of(core), slot);
	put_str(w, name);
	trc_printf(w, "\"}}");
	sep(w);
	trc_printf(w, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
		   pid_of(core), slot, slot);
	return w->io_error ? -1 : 0;
}

static int ch_slice(trc_writer *w, uint32_t track, int name_id, const char *name, const char *cat,
		    uint64_t start_ps, uint64_t end_ps, const trc_arg *args, int nargs)
{
	int core = (int)(track / TRC_SLOTS_PER_CORE), slot = (int)(track % TRC_SLOTS_PER_CORE);
	sep(w);
	trc_printf(w, "{\"name\":\"");
	put_str(w, name_id >= 0 ? trc_opcode_name(name_id) : name);
	trc_printf(w, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", cat, pid_of(core), slot);
	put_us(w, start_ps);
	trc_printf(w, ",\"dur\":");
	put_us(w, end_ps - start_ps);
	put_args(w, args, nargs);
	trc_printf(w, "}");
	return w->io_error ? -1 : 0;
}

static int ch_counter(trc_writer *w, uint32_t track, uint64_t t_ps, double value)
{
	int core = (int)(track / TRC_SLOTS_PER_CORE), slot = (int)(track % TRC_SLOTS_PER_CORE);
	sep(w);
	trc_printf(w, "{\"name\":\"");
	put_str(w, w->counter_name[core][slot - TRC_SLOT_COUNTER0]);
	trc_printf(w, "\",\"cat\":\"counter\",\"ph\":\"C\",\"pid\":%d,\"ts\":", pid_of(core));
	put_us(w, t_ps);
	trc_printf(w, ",\"args\":{\"value\":%.17g}}", value);
	return w->io_error ? -1 : 0;
}

static int ch_instant(trc_writer *w, uint32_t track, const char *name, uint64_t t_ps, const trc_arg *args,
		      int nargs)
{
	int core = (int)(track / TRC_SLOTS_PER_CORE), slot = (int)(track % TRC_SLOTS_PER_CORE);
	sep(w);
	trc_printf(w, "{\"name\":\"");
	put_str(w, name);
	trc_printf(w, "\",\"cat\":\"note\",\"ph\":\"i\",\"s\":\"g\",\"pid\":%d,\"tid\":%d,\"ts\":", pid_of(core), slot);
	put_us(w, t_ps);
	put_args(w, args, nargs);
	trc_printf(w, "}");
	return w->io_error ? -1 : 0;
}

static int ch_close(trc_writer *w)
{
	trc_printf(w, "\n]}\n");
	free(w->sink);
	w->sink = NULL;
	return w->io_error ? -1 : 0;
}

const trc_sink_ops trc_chrome_ops = { ch_open, ch_track, ch_slice, ch_counter, ch_instant, ch_close };
