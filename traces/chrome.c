/*
 * chrome.c -- Chrome trace-event JSON writer (see chrome.h).
 */
#include "chrome.h"

#include <inttypes.h>
#include <string.h>

static const char *const engine_tracks[] = { "TensorE", "VectorE", "ScalarE", "GpSimdE", "SyncE" };
static const char *const opnames[] = {
#define ISA_OP(name, code, engines, format, cost, synopsis) #name,
#include "isa.def"
#undef ISA_OP
};

/* JSON string body: escapes quotes, backslashes and control bytes */
static void put_str(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
}

static void sep(trc_chrome *w)
{
	fputs(w->events++ ? ",\n" : "\n", w->f);
}

/* ps -> us with 6 decimals (exact: trace timestamps are microseconds) */
static void put_us(FILE *f, uint64_t ps)
{
	fprintf(f, "%" PRIu64 ".%06" PRIu64, ps / 1000000u, ps % 1000000u);
}

static void name_track(trc_chrome *w, int core, int track, const char *name)
{
	if (core < 0 || core >= 64 || track < 0 || track >= 64 || w->named[core][track])
		return;
	if (!w->named[core][63]) {
		w->named[core][63] = 1;
		sep(w);
		fprintf(w->f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"NeuronCore %d\"}}",
			core, core);
	}
	w->named[core][track] = 1;
	sep(w);
	fprintf(w->f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"", core, track);
	put_str(w->f, name);
	fputs("\"}}", w->f);
	sep(w);
	fprintf(w->f, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
		core, track, track);
}

static void on_instr(void *ctx, const trc_instr_event *e)
{
	trc_chrome *w = ctx;
	if (e->engine < 0 || e->engine >= 5)
		return;
	name_track(w, e->core, e->engine, engine_tracks[e->engine]);
	sep(w);
	fprintf(w->f, "{\"name\":\"%s\",\"cat\":\"instruction\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":",
		e->opcode >= 0 && e->opcode < (int)(sizeof(opnames) / sizeof(opnames[0])) ? opnames[e->opcode] : "?",
		e->core, e->engine);
	put_us(w->f, e->start_ps);
	fputs(",\"dur\":", w->f);
	put_us(w->f, e->end_ps - e->start_ps);
	fprintf(w->f, ",\"args\":{\"index\":%" PRId64 ",\"bytes\":%" PRIu64 ",\"flops\":%" PRIu64,
		e->index, e->bytes, e->flops);
	if (e->text) {
		fputs(",\"instruction\":\"", w->f);
		put_str(w->f, e->text);
		fputc('"', w->f);
	}
	fputs("}}", w->f);
}

static void on_dma(void *ctx, const trc_dma_event *e)
{
	trc_chrome *w = ctx;
	char track[32];
	snprintf(track, sizeof(track), "DMA queue %d", e->queue);
	name_track(w, e->core, TRC_TRACK_DMA_BASE + e->queue, track);
	sep(w);
	fputs("{\"name\":\"", w->f);
	put_str(w->f, e->desc_name);
	fprintf(w->f, "\",\"cat\":\"dma\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", e->core,
		TRC_TRACK_DMA_BASE + e->queue);
	put_us(w->f, e->start_ps);
	fputs(",\"dur\":", w->f);
	put_us(w->f, e->end_ps - e->start_ps);
	fprintf(w->f, ",\"args\":{\"dma_engine\":%d,\"bytes\":%" PRIu64 ",\"hbm_read_bytes\":%" PRIu64
		",\"hbm_write_bytes\":%" PRIu64 "}}",
		e->dma_engine, e->bytes, e->hbm_read_bytes, e->hbm_write_bytes);
}

static void on_sem(void *ctx, const trc_sem_event *e)
{
	trc_chrome *w = ctx;
	sep(w);
	fprintf(w->f, "{\"name\":\"sem%u\",\"cat\":\"semaphore\",\"ph\":\"C\",\"pid\":%d,\"ts\":", e->sem,
		e->core);
	put_us(w->f, e->time_ps);
	fprintf(w->f, ",\"args\":{\"value\":%" PRId64 "}}", e->value);
}

static void on_program(void *ctx, const trc_program_event *e)
{
	trc_chrome *w = ctx;
	name_track(w, e->core, 63 - 1, "Programs");
	sep(w);
	fputs("{\"name\":\"", w->f);
	put_str(w->f, e->name);
	fprintf(w->f, "\",\"cat\":\"program\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":", e->core, 62);
	put_us(w->f, e->start_ps);
	fputs(",\"dur\":", w->f);
	put_us(w->f, e->end_ps - e->start_ps);
	fputs("}", w->f);
}

static void on_counter(void *ctx, const trc_counter_event *e)
{
	trc_chrome *w = ctx;
	sep(w);
	fputs("{\"name\":\"", w->f);
	put_str(w->f, e->name);
	fprintf(w->f, "\",\"cat\":\"counter\",\"ph\":\"C\",\"pid\":%d,\"ts\":", e->core < 0 ? 1000 : e->core);
	put_us(w->f, e->time_ps);
	fprintf(w->f, ",\"args\":{\"value\":%.6g}}", e->value);
}

int trc_chrome_open(trc_chrome *w, const char *path)
{
	memset(w, 0, sizeof(*w));
	w->f = fopen(path, "w");
	if (!w->f)
		return -1;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", w->f);
	w->obs.ctx = w;
	w->obs.instr = on_instr;
	w->obs.dma = on_dma;
	w->obs.sem = on_sem;
	w->obs.program = on_program;
	w->obs.counter = on_counter;
	return 0;
}

int trc_chrome_close(trc_chrome *w)
{
	if (!w->f)
		return 0;
	fputs("\n]}\n", w->f);
	int rc = ferror(w->f) ? -1 : 0;
	if (fclose(w->f) != 0)
		rc = -1;
	w->f = NULL;
	return rc;
}
