/*
 * hbm.h -- the HBM model behind DMA: JEDEC-style timing as data (constraint
 * rows + named presets), address mapping, and a request-level FR-FCFS
 * controller per pseudo-channel (Ramulator2's structure: a constraint says
 * "after command A at scope S, command B waits L cycles", optionally "at most
 * W of A within L").  Times inside the model are memory-clock cycles (tCK);
 * the interface takes and returns picoseconds.
 */
#ifndef NSIM_DM_HBM_H
#define NSIM_DM_HBM_H

#include <stdbool.h>
#include <stdint.h>

typedef enum dm_hbm_cmd {
	HBM_ACT = 0, HBM_PRE, HBM_RD, HBM_WR, HBM_PREA, HBM_REFAB, HBM_REFPB,
	HBM_NUM_CMDS
} dm_hbm_cmd;

typedef enum dm_hbm_scope { HBM_SCOPE_PC = 0, HBM_SCOPE_BG, HBM_SCOPE_BANK } dm_hbm_scope;

/* timing parameters, in cycles of tCK (index into dm_hbm_timing.t) */
typedef enum dm_hbm_param {
#define HBM_PARAM(name) HBM_##name,
#include "hbm_params.def"
#undef HBM_PARAM
	HBM_NUM_PARAMS
} dm_hbm_param;

typedef struct dm_hbm_preset {
	const char *name;             /* "HBM2E-3.2" */
	const char *source;           /* where the numbers come from */
	uint32_t    tck_ps;
	uint32_t    stacks;           /* per chip (the chip's HBM) */
	uint32_t    pcs_per_stack;    /* pseudo-channels */
	uint32_t    bankgroups, banks_per_group;
	uint32_t    rows;             /* per bank */
	uint32_t    columns;          /* bursts per row */
	uint32_t    burst_bytes;      /* bytes per RD/WR burst */
	uint32_t    t[HBM_NUM_PARAMS];/* cycles */
	bool        per_bank_refresh; /* default refresh policy */
} dm_hbm_preset;

/* one constraint row: after `prev` at `scope`, `next` waits `latency`;
 * window > 1: at most `window` of `prev` within `latency` (tFAW) */
typedef struct dm_hbm_constraint {
	uint8_t prev, next, scope, window;
	uint32_t latency;            /* cycles */
	const char *name;            /* the JEDEC parameter it encodes */
} dm_hbm_constraint;

const dm_hbm_preset *dm_hbm_preset_get(const char *name);   /* NULL if unknown */
/* the chip's part, derived from its chip row (chips.c); NULL if unknown */
const dm_hbm_preset *dm_hbm_preset_for_target(int isa_target);
/* the published base presets by index ("HBM2-2.0", ...); NULL past the end */
const char *dm_hbm_preset_base_name(unsigned i);
uint32_t dm_hbm_constraints(const dm_hbm_preset *p, dm_hbm_constraint *out, uint32_t cap);
double   dm_hbm_peak_bytes_per_ps(const dm_hbm_preset *p);   /* whole chip */

/* address -> location; the default interleave spreads consecutive bursts over
 * pseudo-channels, then bank groups, then columns, then banks, then rows */
typedef struct dm_hbm_loc {
	uint32_t pc;                 /* chip-wide pseudo-channel index */
	uint32_t bg, bank, row, col;
} dm_hbm_loc;
dm_hbm_loc dm_hbm_map(const dm_hbm_preset *p, uint64_t addr);

typedef struct dm_hbm_stats {
	uint64_t reads, writes, bytes;
	uint64_t row_hits, row_misses, row_conflicts;
	uint64_t refreshes;
	uint64_t latency_sum, latency_max;   /* cycles, arrival to first data (reads) */
	uint64_t acts, pres;
	uint64_t latency_hist[1024];         /* reads by latency in cycles; last = above */
} dm_hbm_stats;


typedef struct dm_hbm dm_hbm;

/* closed: a row is precharged as soon as no queued request wants it (the
 * default); open: rows stay open until a conflicting request needs the bank */
typedef enum dm_hbm_page { HBM_CLOSED_PAGE = 0, HBM_OPEN_PAGE } dm_hbm_page;

typedef struct dm_hbm_config {
	const dm_hbm_preset *preset;
	dm_hbm_page          page;
	int                  refresh;     /* -1 preset default, 0 all-bank, 1 per-bank */
	uint32_t             queue_depth; /* per PC read and write queues (0: 64) */
	bool                 refresh_on;  /* false: no refresh (constraint tests) */
} dm_hbm_config;

dm_hbm *dm_hbm_new(const dm_hbm_config *cfg);
void    dm_hbm_free(dm_hbm *h);

/* Request-level: `n` bursts of a transfer starting at `addr` (consecutive,
 * `stride` bytes apart), all available from `start_ps`; returns the time the
 * last burst's data has moved.  State (open rows, timing) carries over between
 * calls; calls must come in non-decreasing start order per model. */
uint64_t dm_hbm_transfer(dm_hbm *h, uint64_t start_ps, uint64_t addr, uint64_t bytes,
			 uint64_t stride, bool write);
/* a stream of bursts `stride` apart: all reads, all writes, or alternating
 * (every other burst a write: read-modify-write traffic) */
enum { HBM_READS = 0, HBM_WRITES = 1, HBM_MIXED = 2 };
uint64_t dm_hbm_stream(dm_hbm *h, uint64_t start_ps, uint64_t addr, uint64_t bytes,
		       uint64_t stride, int mode);

/* Bulk model: large regular streams in O(1), calibrated against the
 * request-level model.  For each (stride, mode) it runs the request-level
 * model (refresh off) on two sample sizes and keeps the line
 * time = intercept + bytes * slope; refresh stalls are added exactly where the
 * all-bank refresh schedule (every tREFI from time 0) falls inside the
 * transfer.  Shared bandwidth: transfers queue behind each other on one
 * chip-wide pipe. */
typedef struct dm_hbm_bulk dm_hbm_bulk;
dm_hbm_bulk *dm_hbm_bulk_new(const dm_hbm_preset *p, bool refresh_on);
void         dm_hbm_bulk_free(dm_hbm_bulk *b);
/* a new timeline from 0: nothing booked (calibration kept) */
void         dm_hbm_bulk_reset(dm_hbm_bulk *b);
uint64_t     dm_hbm_bulk_stream(dm_hbm_bulk *b, uint64_t start_ps, uint64_t addr,
				uint64_t bytes, uint64_t stride, int mode);

/* queue one burst arriving at start_ps; dm_hbm_drain runs every queued
 * request and returns when the last one's data has moved */
void     dm_hbm_submit(dm_hbm *h, uint64_t start_ps, uint64_t addr, bool write);
uint64_t dm_hbm_drain(dm_hbm *h);
/* single request, for tests: returns first-data time (reads) or write end */
uint64_t dm_hbm_request(dm_hbm *h, uint64_t start_ps, uint64_t addr, bool write);
const dm_hbm_stats *dm_hbm_get_stats(const dm_hbm *h);
/* read latency (cycles) below which a fraction q of reads fall, e.g. 0.99 */
uint64_t dm_hbm_latency_percentile(const dm_hbm *h, double q);
/* issue log for tests: every command with its cycle */
typedef struct dm_hbm_issue {
	uint64_t cycle;
	uint8_t  cmd;
	uint32_t pc, bg, bank, row;
} dm_hbm_issue;
void     dm_hbm_log(dm_hbm *h, dm_hbm_issue *buf, uint32_t cap);
uint32_t dm_hbm_log_count(const dm_hbm *h);

#endif
