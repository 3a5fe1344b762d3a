/*
 * writer.h -- the trace model between the simulator's observer records and
 * the file formats.  A trc_writer receives observer events (its `obs`),
 * shapes them into tracks, slices and counters, and hands those to a sink
 * (Perfetto protobuf in perfetto.c, Chrome trace-event JSON in chrome.c), so
 * both formats carry the same content.
 *
 * Shaping:
 *  - one track per engine and per DMA queue of each core, a track of the
 *    programs (named by what launched them: the PyTorch op or graph), counter
 *    tracks for HBM read/write bandwidth and SBUF/PSUM allocation, and
 *    tracks of host-named ranges (compiled graphs, profiled regions) by depth;
 *  - a track's slices never overlap: an instruction that starts while the
 *    previous one on its engine is still busy (TensorE's LoadStationary under
 *    a MultiplyMoving) is drawn from where that one ends, so the slices of a
 *    track add up to exactly the engine's busy time in the summary; the
 *    exact duration in picoseconds is an argument (Perfetto's clock is ns);
 *  - detail TRC_DETAIL_OP draws one slice per program per engine / DMA queue
 *    instead of one per instruction / transfer; TRC_DETAIL_UTIL draws no
 *    slices, only each engine's and DMA queue's busy percentage and the HBM
 *    bandwidth per 1 ms window (under 20 MB per simulated minute);
 *  - a byte budget (default 400 MB, under the 500 MB a one-minute run must
 *    stay below): at half of it the writer drops to per-program slices, at
 *    three quarters to utilization counters, and just short of it stops,
 *    recording how many events it left out.
 * Events must arrive in per-track time order (the simulator reports each
 * engine's and queue's work in issue order).
 */
#ifndef NSIM_TRC_WRITER_H
#define NSIM_TRC_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "observer.h"

enum trc_format { TRC_FORMAT_AUTO, TRC_FORMAT_PERFETTO, TRC_FORMAT_CHROME };
enum trc_detail { TRC_DETAIL_INSTR, TRC_DETAIL_OP, TRC_DETAIL_UTIL };

#define TRC_UTIL_WINDOW_PS 1000000000ull     /* 1 ms */

#define TRC_DEFAULT_MAX_BYTES (400ull << 20)

typedef struct trc_options {
	int      format;       /* trc_format; AUTO: by file name (.json -> Chrome) */
	int      detail;       /* trc_detail */
	uint64_t max_bytes;    /* 0: TRC_DEFAULT_MAX_BYTES; UINT64_MAX: no limit */
	/* the device, recorded at time 0 so tools can draw rooflines (optional) */
	const char *target;
	uint64_t    peak_flops_per_second;
	uint64_t    hbm_bytes_per_second;
} trc_options;

/* slice arguments: names from one table, so Perfetto can intern them */
#define TRC_ARG_NAMES(X)                                                     \
	X(instruction) X(index) X(bytes) X(flops) X(sem_wait_ns) X(duration_ps) \
	X(dma_engines) X(descriptor) X(hbm_read_bytes) X(hbm_write_bytes)      \
	X(program) X(instructions) X(transfers) X(busy_ps) X(sbuf_bytes)        \
	X(psum_bytes) X(start_ps) X(target) X(peak_flops_per_second) X(hbm_bytes_per_second)   \
	X(algorithm) X(peers)
enum trc_arg_name {
#define TRC_X(n) TRC_ARG_##n,
	TRC_ARG_NAMES(TRC_X)
#undef TRC_X
	TRC_NUM_ARG_NAMES
};
extern const char *const trc_arg_names[TRC_NUM_ARG_NAMES];

typedef struct trc_arg {
	int         name;      /* trc_arg_name */
	const char *str;       /* string value, or NULL for `u` */
	uint64_t    u;
} trc_arg;

#define TRC_MAX_CORES        64
#define TRC_SLOTS_PER_CORE   128
/* track slots within a core */
#define TRC_SLOT_ENGINE(k)   (k)                /* 0..4 */
#define TRC_SLOT_DMA(q)      (8 + (q))          /* 8..23 */
#define TRC_SLOT_PROGRAMS    24
#define TRC_SLOT_RANGES      25                 /* 25..28: host ranges by depth */
#define TRC_MAX_RANGE_DEPTH  4
#define TRC_SLOT_COLLECTIVES 29                 /* collectives across cores */
#define TRC_SLOT_COUNTER0    32                 /* 32..127: counters by name */
#define TRC_CHIP             TRC_MAX_CORES      /* "core" of chip-wide tracks */

typedef struct trc_writer trc_writer;

/* what a file format implements; every function returns 0 or -1 (I/O error) */
typedef struct trc_sink_ops {
	int (*open)(trc_writer *w);
	/* declare a track before its first event; core == TRC_CHIP: chip-wide */
	int (*track)(trc_writer *w, uint32_t id, int core, int slot, const char *name, bool counter);
	/* name_id >= 0: an opcode (internable); otherwise `name` */
	int (*slice)(trc_writer *w, uint32_t track, int name_id, const char *name, const char *cat,
		     uint64_t start_ps, uint64_t end_ps, const trc_arg *args, int nargs);
	int (*counter)(trc_writer *w, uint32_t track, uint64_t t_ps, double value);
	int (*instant)(trc_writer *w, uint32_t track, const char *name, uint64_t t_ps, const trc_arg *args,
		       int nargs);
	int (*close)(trc_writer *w);
} trc_sink_ops;

/* per program, per engine / DMA queue: the aggregate drawn at detail OP */
typedef struct trc_agg {
	uint64_t first_ps, last_ps, busy_ps, count, bytes, flops;
} trc_agg;

struct trc_writer {
	FILE               *f;
	uint64_t            bytes;          /* written so far */
	uint64_t            max_bytes;
	int                 detail;         /* current (drops to OP at half budget) */
	bool                full;           /* budget reached: events dropped */
	bool                io_error;
	uint64_t            dropped;
	uint64_t            last_ps;        /* latest time seen (for the closing marker) */
	const trc_sink_ops *ops;
	void               *sink;           /* the format's state */
	uint8_t             declared[TRC_MAX_CORES + 1][TRC_SLOTS_PER_CORE];
	uint64_t            track_end[TRC_MAX_CORES][TRC_SLOTS_PER_CORE];
	trc_agg             agg[TRC_MAX_CORES][TRC_SLOT_PROGRAMS];
	/* TRC_DETAIL_UTIL: busy ps of the current window per engine / DMA queue,
	 * and the chip's HBM bytes (read, write) in its current window */
	uint64_t            util_win[TRC_MAX_CORES][TRC_SLOT_PROGRAMS];
	uint64_t            util_busy[TRC_MAX_CORES][TRC_SLOT_PROGRAMS];
	uint64_t            hbm_win, hbm_bytes[2];
	char                counter_name[TRC_MAX_CORES + 1][TRC_SLOTS_PER_CORE - TRC_SLOT_COUNTER0][48];
	double              counter_last[TRC_MAX_CORES + 1][TRC_SLOTS_PER_CORE - TRC_SLOT_COUNTER0];
	trc_observer        obs;            /* hooks bound to this writer */
};

/* 0, or -1 with errno set (the file cannot be created, or no such format) */
int  trc_writer_open(trc_writer **out, const char *path, const trc_options *opt);
/* writes the closing records, frees the writer; 0, or -1 on a write error */
int  trc_writer_close(trc_writer *w);
/* format from a file name: .json -> Chrome, anything else -> Perfetto */
int  trc_format_of(const char *path);

static inline uint32_t trc_track_id(int core, int slot)
{
	return (uint32_t)core * TRC_SLOTS_PER_CORE + (uint32_t)slot;
}

/* `s` as a JSON string body (quotes, backslashes, control bytes escaped)
 * into out[cap], NUL-terminated, cut short rather than overflow; the length */
size_t trc_json_escape(char *out, size_t cap, const char *s);

/* sinks write through this (counts bytes; remembers an I/O error) */
void trc_out(trc_writer *w, const void *buf, size_t n);
void trc_printf(trc_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

extern const trc_sink_ops trc_perfetto_ops;
extern const trc_sink_ops trc_chrome_ops;
extern const char *const trc_engine_track_names[];   /* per isa engine */
const char *trc_opcode_name(int opcode);

#endif
