/*
 * hbm.c -- how fast the HBM model runs, per preset, as a table:
 *   request-level: bursts simulated per host second on a 64 MiB stream
 *   bulk: simulated GB per host second on a 1 GiB stream (calibration, which
 *         runs the request-level model once per access pattern, reported apart)
 * plus the simulated bandwidth each reaches.  Usage: bench/hbm
 */
#define _POSIX_C_SOURCE 200809L
#include "hbm.h"
#include "neuronsim/isa.h"

#include <stdio.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
	/* the published base presets, then every chip's derived part */
	const char *presets[16];
	size_t n = 0;
	for (unsigned i = 0; dm_hbm_preset_base_name(i) && n < 16; i++)
		presets[n++] = dm_hbm_preset_base_name(i);
	for (int t = 1; t < ISA_NUM_TARGETS && n < 16; t++)
		if (dm_hbm_preset_for_target(t))
			presets[n++] = dm_hbm_preset_for_target(t)->name;
	printf("%-10s %9s | %13s %10s | %11s %12s %14s %10s\n", "preset", "peak GB/s", "req-level Mreq/s",
	       "sim GB/s", "calib ms", "bulk 1GiB us", "bulk sim GB/hs", "sim GB/s");
	for (size_t i = 0; i < n; i++) {
		const dm_hbm_preset *p = dm_hbm_preset_get(presets[i]);
		double peak = dm_hbm_peak_bytes_per_ps(p) * 1000.0;

		dm_hbm_config cfg = { p, HBM_CLOSED_PAGE, -1, 0, true };
		dm_hbm *h = dm_hbm_new(&cfg);
		uint64_t bytes = 64ull << 20;
		double t0 = now();
		uint64_t end = dm_hbm_stream(h, 0, 0, bytes, 0, HBM_READS);
		double host = now() - t0;
		double mreq = (double)(bytes / p->burst_bytes) / host / 1e6;
		double req_bw = (double)bytes / (double)end * 1000.0;
		dm_hbm_free(h);

		dm_hbm_bulk *b = dm_hbm_bulk_new(p, true);
		t0 = now();
		dm_hbm_bulk_stream(b, 0, 0, 1 << 20, 0, HBM_READS);     /* calibrates */
		double calib = now() - t0;
		dm_hbm_bulk_reset(b);
		uint64_t gib = 1ull << 30;
		t0 = now();
		uint64_t bend = dm_hbm_bulk_stream(b, 0, 0, gib, 0, HBM_READS);
		double bhost = now() - t0;
		dm_hbm_bulk_free(b);
		printf("%-10s %9.1f | %13.2f %10.1f | %11.1f %12.2f %14.3g %10.1f\n", presets[i], peak,
		       mreq, req_bw, calib * 1e3, bhost * 1e6, (double)gib / 1e9 / bhost,
		       (double)gib / (double)bend * 1000.0);
	}
	printf("\nreq-level: every burst scheduled against every constraint (refresh on, closed page,\n"
	       "64-entry queues); bulk: O(1) per transfer once a pattern is calibrated.\n");
	return 0;
}
