/*
 * writer.c -- observer records -> tracks, slices and counters (see writer.h).
 */
#include "writer.h"

#include "neuronsim/isa.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const trc_arg_names[TRC_NUM_ARG_NAMES] = {
#define TRC_X(n) #n,
	TRC_ARG_NAMES(TRC_X)
#undef TRC_X
};

const char *const trc_engine_track_names[] = { "TensorE", "VectorE", "ScalarE", "GpSimdE", "SyncE" };
_Static_assert(sizeof(trc_engine_track_names) / sizeof(trc_engine_track_names[0]) == ISA_NUM_ENGINES,
	       "one track name per isa engine");

const char *trc_opcode_name(int opcode)
{
	const char *name = isa_op_name(opcode);
	return name ? name : "?";
}

void trc_out(trc_writer *w, const void *buf, size_t n)
{
	if (fwrite(buf, 1, n, w->f) != n)
		w->io_error = true;
	w->bytes += n;
}

void trc_printf(trc_writer *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vfprintf(w->f, fmt, ap);
	va_end(ap);
	if (n < 0)
		w->io_error = true;
	else
		w->bytes += (uint64_t)n;
}

size_t trc_json_escape(char *out, size_t cap, const char *s)
{
	size_t n = 0;
	if (!cap)
		return 0;
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		char esc[8];
		int k;
		if (ch == '"' || ch == '\\')
			k = snprintf(esc, sizeof(esc), "\\%c", ch);
		else if (ch < 0x20)
			k = snprintf(esc, sizeof(esc), "\\u%04x", ch);
		else
			k = snprintf(esc, sizeof(esc), "%c", ch);
		if (n + (size_t)k >= cap)
			break;
		memcpy(out + n, esc, (size_t)k);
		n += (size_t)k;
	}
	out[n] = '\0';
	return n;
}

int trc_format_of(const char *path)
{
	size_t n = strlen(path);
	return n >= 5 && strcmp(path + n - 5, ".json") == 0 ? TRC_FORMAT_CHROME : TRC_FORMAT_PERFETTO;
}

/* ------------------------------------------------------------- budget */

/* an instant on the chip's "Trace notes" track */
static void note(trc_writer *w, const char *msg)
{
	if (!w->declared[TRC_CHIP][0]) {
		w->declared[TRC_CHIP][0] = 1;
		if (w->ops->track(w, trc_track_id(TRC_CHIP, 0), TRC_CHIP, 0, "Trace notes", false))
			w->io_error = true;
	}
	if (w->ops->instant(w, trc_track_id(TRC_CHIP, 0), msg, w->last_ps, NULL, 0))
		w->io_error = true;
}

static void counter(trc_writer *w, int core, const char *name, uint64_t t, double v);

/* Room for one more event?  Drops to per-program slices at half the budget
 * and stops a reserve short of it (1/16 of it, at most 64 KiB: more than any
 * one event and the closing marker). */
static bool admit(trc_writer *w)
{
	uint64_t reserve = w->max_bytes / 16 < (64u << 10) ? w->max_bytes / 16 : (64u << 10);
	if (w->full) {
		w->dropped++;
		return false;
	}
	if (w->bytes + reserve >= w->max_bytes) {
		w->full = true;
		w->obs.want_text = false;
		w->dropped++;
		return false;
	}
	if (w->detail == TRC_DETAIL_INSTR && w->bytes >= w->max_bytes / 2) {
		w->detail = TRC_DETAIL_OP;
		w->obs.want_text = false;
		note(w, "trace budget: per-program slices from here on");
	}
	if (w->detail == TRC_DETAIL_OP && w->bytes >= w->max_bytes / 4 * 3) {
		w->detail = TRC_DETAIL_UTIL;
		note(w, "trace budget: engine utilization per 1 ms from here on");
	}
	return true;
}

static bool in_range(int core)
{
	return core >= 0 && core < TRC_MAX_CORES;
}

/* A core's first slice track brings all five engine tracks with it: an
 * idle engine shows as an empty track, as on the hardware profiler. */
static void declare(trc_writer *w, int core, int slot, const char *name, bool counter)
{
	int c = core == TRC_CHIP ? TRC_CHIP : core;
	if (w->declared[c][slot])
		return;
	if (c != TRC_CHIP && !counter && !w->declared[c][TRC_SLOT_ENGINE(0)])
		for (int k = 0; k < 5; k++) {
			w->declared[c][TRC_SLOT_ENGINE(k)] = 1;
			if (w->ops->track(w, trc_track_id(c, k), c, k, trc_engine_track_names[k], false))
				w->io_error = true;
		}
	if (w->declared[c][slot])
		return;
	w->declared[c][slot] = 1;
	if (w->ops->track(w, trc_track_id(c, slot), c, slot, name, counter))
		w->io_error = true;
}

/* the non-overlapping part of [start, end) on a track (see writer.h) */
static void clip(trc_writer *w, int core, int slot, uint64_t *start, uint64_t *end)
{
	uint64_t *last = &w->track_end[core][slot];
	if (*start < *last)
		*start = *last;
	if (*end < *start)
		*end = *start;
	*last = *end;
	if (*end > w->last_ps)
		w->last_ps = *end;
}

static void aggregate(trc_agg *a, uint64_t s, uint64_t e, uint64_t bytes, uint64_t flops)
{
	if (!a->count)
		a->first_ps = s;
	a->last_ps = e;
	a->busy_ps += e - s;
	a->count++;
	a->bytes += bytes;
	a->flops += flops;
}

/* ------------------------------------------------- utilization windows */

/* (core, slot)'s window index + 1 in util_win (0: none yet) */
static void util_counter(trc_writer *w, int core, int slot, uint64_t win, double busy_ps)
{
	char name[32];
	if (slot < 8)
		snprintf(name, sizeof(name), "%s busy %%", trc_engine_track_names[slot]);
	else
		snprintf(name, sizeof(name), "DMA queue %d busy %%", slot - 8);
	counter(w, core, name, win * TRC_UTIL_WINDOW_PS, 100.0 * busy_ps / (double)TRC_UTIL_WINDOW_PS);
}

/* busy time [s, e) of (core, slot), split over 1 ms windows; a window's
 * percentage is written when a later one starts, idle windows read 0 */
static void util_add(trc_writer *w, int core, int slot, uint64_t s, uint64_t e)
{
	uint64_t *cur = &w->util_win[core][slot], *busy = &w->util_busy[core][slot];
	for (;;) {
		uint64_t win = s / TRC_UTIL_WINDOW_PS, hi = (win + 1) * TRC_UTIL_WINDOW_PS;
		if (*cur && *cur - 1 < win) {
			util_counter(w, core, slot, *cur - 1, (double)*busy);
			if (win > *cur)              /* idle windows in between */
				util_counter(w, core, slot, *cur, 0.0);
			*busy = 0;
		}
		if (!*cur || *cur - 1 < win)
			*cur = win + 1;
		uint64_t end = e < hi ? e : hi;
		*busy += end > s ? end - s : 0;
		if (e <= hi)
			return;
		s = hi;
	}
}

static void hbm_counter(trc_writer *w, int write, uint64_t win, double bytes)
{
	counter(w, TRC_CHIP, write ? "HBM write GB/s" : "HBM read GB/s", win * TRC_UTIL_WINDOW_PS,
		bytes / (double)TRC_UTIL_WINDOW_PS * 1000.0);
}

/* HBM bytes of a transfer, in the window where it starts */
static void util_hbm(trc_writer *w, uint64_t t, uint64_t rd, uint64_t wr)
{
	uint64_t win = t / TRC_UTIL_WINDOW_PS;
	if (w->hbm_win && w->hbm_win - 1 < win) {
		for (int k = 0; k < 2; k++) {
			hbm_counter(w, k, w->hbm_win - 1, (double)w->hbm_bytes[k]);
			if (win > w->hbm_win)        /* idle windows in between */
				hbm_counter(w, k, w->hbm_win, 0.0);
			w->hbm_bytes[k] = 0;
		}
	}
	if (!w->hbm_win || w->hbm_win - 1 < win)
		w->hbm_win = win + 1;
	w->hbm_bytes[0] += rd;
	w->hbm_bytes[1] += wr;
}

/* the last windows, then a closing 0 */
static void util_close(trc_writer *w)
{
	for (int c = 0; c < TRC_MAX_CORES; c++)
		for (int k = 0; k < TRC_SLOT_PROGRAMS; k++) {
			uint64_t cur = w->util_win[c][k];
			if (!cur)
				continue;
			util_counter(w, c, k, cur - 1, (double)w->util_busy[c][k]);
			util_counter(w, c, k, cur, 0.0);
		}
	for (int k = 0; w->hbm_win && k < 2; k++) {
		hbm_counter(w, k, w->hbm_win - 1, (double)w->hbm_bytes[k]);
		hbm_counter(w, k, w->hbm_win, 0.0);
	}
}

/* --------------------------------------------------------- observer hooks */

static void on_instr(void *ctx, const trc_instr_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core) || e->engine < 0 || e->engine >= 5)
		return;
	uint64_t s = e->start_ps, end = e->end_ps;
	clip(w, e->core, TRC_SLOT_ENGINE(e->engine), &s, &end);
	if (w->detail != TRC_DETAIL_INSTR || !admit(w)) {
		if (w->detail == TRC_DETAIL_UTIL)
			util_add(w, e->core, TRC_SLOT_ENGINE(e->engine), s, end);
		else
			aggregate(&w->agg[e->core][TRC_SLOT_ENGINE(e->engine)], s, end, e->bytes, e->flops);
		return;
	}
	declare(w, e->core, TRC_SLOT_ENGINE(e->engine), trc_engine_track_names[e->engine], false);
	trc_arg a[6];
	int n = 0;
	if (e->text)
		a[n++] = (trc_arg){ TRC_ARG_instruction, e->text, 0 };
	a[n++] = (trc_arg){ TRC_ARG_index, NULL, (uint64_t)e->index };
	a[n++] = (trc_arg){ TRC_ARG_duration_ps, NULL, end - s };
	if (e->bytes)
		a[n++] = (trc_arg){ TRC_ARG_bytes, NULL, e->bytes };
	if (e->flops)
		a[n++] = (trc_arg){ TRC_ARG_flops, NULL, e->flops };
	if (e->sem_wait_ps)
		a[n++] = (trc_arg){ TRC_ARG_sem_wait_ns, NULL, e->sem_wait_ps / 1000 };
	if (w->ops->slice(w, trc_track_id(e->core, TRC_SLOT_ENGINE(e->engine)), e->opcode, NULL,
			  "instruction", s, end, a, n))
		w->io_error = true;
}

static void on_dma(void *ctx, const trc_dma_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core) || e->queue < 0 || e->queue >= 16)
		return;
	int slot = TRC_SLOT_DMA(e->queue);
	uint64_t s = e->start_ps, end = e->end_ps;
	clip(w, e->core, slot, &s, &end);
	if (w->detail != TRC_DETAIL_INSTR || !admit(w)) {
		if (w->detail == TRC_DETAIL_UTIL) {
			util_add(w, e->core, slot, s, end);
			util_hbm(w, s, e->hbm_read_bytes, e->hbm_write_bytes);
		} else {
			aggregate(&w->agg[e->core][slot], s, end, e->bytes, 0);
		}
		return;
	}
	char name[24];
	snprintf(name, sizeof(name), "DMA queue %d", e->queue);
	declare(w, e->core, slot, name, false);
	trc_arg a[6] = {
		{ TRC_ARG_descriptor, NULL, e->desc },
		{ TRC_ARG_duration_ps, NULL, end - s },
		{ TRC_ARG_bytes, NULL, e->bytes },
		{ TRC_ARG_dma_engines, NULL, (uint64_t)e->dma_engines },
		{ TRC_ARG_hbm_read_bytes, NULL, e->hbm_read_bytes },
		{ TRC_ARG_hbm_write_bytes, NULL, e->hbm_write_bytes },
	};
	if (w->ops->slice(w, trc_track_id(e->core, slot), -1, e->desc_name ? e->desc_name : "dma", "dma",
			  s, end, a, 6))
		w->io_error = true;
}

/* counter track of `name` on `core` (TRC_CHIP: chip-wide); -1 when all 96 are taken */
static int counter_slot(trc_writer *w, int core, const char *name)
{
	for (int i = 0; i < TRC_SLOTS_PER_CORE - TRC_SLOT_COUNTER0; i++) {
		char *n = w->counter_name[core][i];
		if (!n[0]) {
			snprintf(n, sizeof(w->counter_name[core][i]), "%s", name);
			w->counter_last[core][i] = -1.0;
			declare(w, core, TRC_SLOT_COUNTER0 + i, n, true);
			return TRC_SLOT_COUNTER0 + i;
		}
		if (strncmp(n, name, sizeof(w->counter_name[core][i]) - 1) == 0)
			return TRC_SLOT_COUNTER0 + i;
	}
	return -1;
}

/* counters are step functions: a sample equal to the last one is left out */
static void counter(trc_writer *w, int core, const char *name, uint64_t t, double v)
{
	int slot = counter_slot(w, core, name);
	if (slot < 0)
		return;
	double *last = &w->counter_last[core][slot - TRC_SLOT_COUNTER0];
	if (*last == v || !admit(w))
		return;
	*last = v;
	if (w->ops->counter(w, trc_track_id(core, slot), t, v))
		w->io_error = true;
}

static void on_sem(void *ctx, const trc_sem_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core) || w->detail != TRC_DETAIL_INSTR)
		return;
	char name[32];
	snprintf(name, sizeof(name), "semaphore %u", e->sem);
	counter(w, e->core, name, e->time_ps, (double)e->value);
}

static void on_counter(void *ctx, const trc_counter_event *e)
{
	trc_writer *w = ctx;
	int core = e->core < 0 ? TRC_CHIP : e->core;
	if ((core != TRC_CHIP && !in_range(core)) || w->detail == TRC_DETAIL_UTIL)
		return;
	counter(w, core, e->name, e->time_ps, e->value);
}

/* the program's slice, its aggregated engine/DMA slices (detail OP), and
 * its SBUF/PSUM allocation for its duration */
static void on_program(void *ctx, const trc_program_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core))
		return;
	const char *name = e->label && e->label[0] ? e->label : e->program;
	if (w->detail == TRC_DETAIL_UTIL) {       /* windows only */
		memset(w->agg[e->core], 0, sizeof(w->agg[e->core]));
		return;
	}
	for (int slot = 0; slot < TRC_SLOT_PROGRAMS; slot++) {
		trc_agg *a = &w->agg[e->core][slot];
		if (!a->count)
			continue;
		if (admit(w)) {
			char tname[24];
			if (slot < 8)
				snprintf(tname, sizeof(tname), "%s", trc_engine_track_names[slot]);
			else
				snprintf(tname, sizeof(tname), "DMA queue %d", slot - 8);
			declare(w, e->core, slot, tname, false);
			trc_arg args[5] = {
				{ slot < 8 ? TRC_ARG_instructions : TRC_ARG_transfers, NULL, a->count },
				{ TRC_ARG_busy_ps, NULL, a->busy_ps },
				{ TRC_ARG_bytes, NULL, a->bytes },
				{ TRC_ARG_flops, NULL, a->flops },
				{ TRC_ARG_program, e->program, 0 },
			};
			if (w->ops->slice(w, trc_track_id(e->core, slot), -1, name, "aggregate", a->first_ps,
					  a->last_ps, args, 5))
				w->io_error = true;
		}
		memset(a, 0, sizeof(*a));
	}
	if (e->end_ps > w->last_ps)
		w->last_ps = e->end_ps;
	if (!admit(w))
		return;
	declare(w, e->core, TRC_SLOT_PROGRAMS, "Programs (PyTorch ops)", false);
	trc_arg args[5] = {
		{ TRC_ARG_program, e->program, 0 },
		{ TRC_ARG_start_ps, NULL, e->start_ps },
		{ TRC_ARG_duration_ps, NULL, e->end_ps - e->start_ps },
		{ TRC_ARG_sbuf_bytes, NULL, e->sbuf_bytes },
		{ TRC_ARG_psum_bytes, NULL, e->psum_bytes },
	};
	if (w->ops->slice(w, trc_track_id(e->core, TRC_SLOT_PROGRAMS), -1, name, "program", e->start_ps,
			  e->end_ps, args, 5))
		w->io_error = true;
	counter(w, e->core, "SBUF allocated bytes", e->start_ps, (double)e->sbuf_bytes);
	counter(w, e->core, "PSUM allocated bytes", e->start_ps, (double)e->psum_bytes);
	counter(w, e->core, "SBUF allocated bytes", e->end_ps, 0.0);
	counter(w, e->core, "PSUM allocated bytes", e->end_ps, 0.0);
}

static void on_range(void *ctx, const trc_range_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core) || e->depth < 0 || e->depth >= TRC_MAX_RANGE_DEPTH || e->end_ps < e->start_ps ||
	    w->detail == TRC_DETAIL_UTIL || !admit(w))
		return;
	char tname[32];
	snprintf(tname, sizeof(tname), "Ranges (depth %d)", e->depth);
	declare(w, e->core, TRC_SLOT_RANGES + e->depth, tname, false);
	trc_arg args[2] = { { TRC_ARG_start_ps, NULL, e->start_ps },
			    { TRC_ARG_duration_ps, NULL, e->end_ps - e->start_ps } };
	if (w->ops->slice(w, trc_track_id(e->core, TRC_SLOT_RANGES + e->depth), -1, e->name, "range",
			  e->start_ps, e->end_ps, args, 2))
		w->io_error = true;
}

static void on_collective(void *ctx, const trc_collective_event *e)
{
	trc_writer *w = ctx;
	if (!in_range(e->core) || e->end_ps < e->start_ps || w->detail == TRC_DETAIL_UTIL || !admit(w))
		return;
	declare(w, e->core, TRC_SLOT_COLLECTIVES, "Collectives", false);
	trc_arg args[5] = { { TRC_ARG_bytes, NULL, e->bytes }, { TRC_ARG_start_ps, NULL, e->start_ps },
			    { TRC_ARG_duration_ps, NULL, e->end_ps - e->start_ps } };
	int nargs = 3;
	if (e->algorithm)
		args[nargs++] = (trc_arg){ TRC_ARG_algorithm, e->algorithm, 0 };
	if (e->peers)
		args[nargs++] = (trc_arg){ TRC_ARG_peers, e->peers, 0 };
	if (w->ops->slice(w, trc_track_id(e->core, TRC_SLOT_COLLECTIVES), -1, e->name, "collective", e->start_ps,
			  e->end_ps, args, nargs))
		w->io_error = true;
}

/* ------------------------------------------------------------ open/close */

int trc_writer_open(trc_writer **out, const char *path, const trc_options *opt)
{
	trc_options o = opt ? *opt : (trc_options){ 0 };
	int format = o.format == TRC_FORMAT_AUTO ? trc_format_of(path) : o.format;
	if ((format != TRC_FORMAT_PERFETTO && format != TRC_FORMAT_CHROME) ||
	    (o.detail != TRC_DETAIL_INSTR && o.detail != TRC_DETAIL_OP && o.detail != TRC_DETAIL_UTIL)) {
		errno = EINVAL;
		return -1;
	}
	trc_writer *w = calloc(1, sizeof(*w));
	if (!w)
		return -1;
	w->f = fopen(path, "wb");
	if (!w->f)
		goto free_writer;
	w->max_bytes = o.max_bytes ? o.max_bytes : TRC_DEFAULT_MAX_BYTES;
	w->detail = o.detail;
	w->ops = format == TRC_FORMAT_PERFETTO ? &trc_perfetto_ops : &trc_chrome_ops;
	if (w->ops->open(w))
		goto close_file;
	w->obs = (trc_observer){ w, o.detail == TRC_DETAIL_INSTR, on_instr, on_dma, on_sem, on_program, on_counter,
				 on_range, on_collective };
	if (o.target) {
		trc_arg a[3] = { { TRC_ARG_target, o.target, 0 },
				 { TRC_ARG_peak_flops_per_second, NULL, o.peak_flops_per_second },
				 { TRC_ARG_hbm_bytes_per_second, NULL, o.hbm_bytes_per_second } };
		w->declared[TRC_CHIP][0] = 1;
		if (w->ops->track(w, trc_track_id(TRC_CHIP, 0), TRC_CHIP, 0, "Trace notes", false) ||
		    w->ops->instant(w, trc_track_id(TRC_CHIP, 0), "device", 0, a, 3)) {
			trc_writer_close(w);
			return -1;
		}
	}
	*out = w;
	return 0;

close_file:
	fclose(w->f);
free_writer:
	free(w);
	return -1;
}

int trc_writer_close(trc_writer *w)
{
	if (!w)
		return 0;
	if (w->detail == TRC_DETAIL_UTIL)
		util_close(w);
	if (w->dropped) {
		char msg[96];
		snprintf(msg, sizeof(msg), "trace budget reached: %llu later events left out",
			 (unsigned long long)w->dropped);
		note(w, msg);
	}
	int rc = w->ops->close(w) || w->io_error ? -1 : 0;
	if (fclose(w->f) != 0)
		rc = -1;
	free(w);
	return rc;
}
