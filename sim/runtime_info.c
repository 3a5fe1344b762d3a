/*
 * runtime_info.c -- the runtime API's descriptive calls: the chip a target
 * simulates, dtype conversion with the engines' numerics, the summary of
 * one execution, and layout facts for bindings in other languages (struct
 * sizes, the fields of nsim_exec_stats) so they check instead of copy.
 */
#include "runtime_internal.h"

#include "collectives.h"
#include "cost.h"
#include "numerics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

trc_device rt_trc_device(const dm_chip *chip)
{
	return (trc_device){
		.target = dm_chip_name(chip),
		.peak_flops_per_second = dm_chip_peak_flops(chip),
		.hbm_bytes_per_second = dm_chip_hbm_bytes_per_second(chip),
		.tensor_clock_mhz = chip->clock_mhz[ISA_ENGINE_TENSOR],
		.dma_engines = chip->dma_engines,
	};
}

void rt_stats_add(nsim_exec_stats *dst, const nsim_exec_stats *src)
{
	/* every field is a uint64_t counter: add them as an array */
	uint64_t *d = (uint64_t *)dst;
	const uint64_t *s = (const uint64_t *)src;
	for (size_t i = 0; i < sizeof(*dst) / sizeof(uint64_t); i++)
		d[i] += s[i];
}

nsim_status nsim_chip_info_get(const char *target, nsim_chip_info *out)
{
	const dm_chip *c = target ? dm_chip_by_name(target) : rt.init ? rt.chip : NULL;
	if (!out)
		return rt_fail(NSIM_INVALID, "nsim_chip_info_get: no output");
	if (!c)
		return target ? rt_fail(NSIM_INVALID, "nsim_chip_info_get: unknown target '%s'", target)
			      : rt_fail(NSIM_UNINITIALIZED, "nsim_chip_info_get: no target and no runtime");
	const dm_hbm_preset *hbm = dm_hbm_preset_for_target(c->target);
	memset(out, 0, sizeof(*out));
	out->target = dm_chip_name(c);
	out->core_name = dm_chip_core_name(c);
	out->hbm_standard = hbm ? hbm->name : "";
	out->cores = c->cores;
	memcpy(out->clock_mhz, c->clock_mhz, sizeof(out->clock_mhz));
	out->dma_engines = c->dma_engines;
	out->dma_queues = c->dma_queues;
	out->dma_engine_bytes_per_second = (uint64_t)c->dma_engine_rate * 1000000u;
	out->hbm_stacks = c->hbm_stacks;
	out->hbm_bytes = c->hbm_bytes;
	out->hbm_bytes_per_second = dm_chip_hbm_bytes_per_second(c);
	out->peak_flops_per_second = dm_chip_peak_flops(c);
	out->exec_startup_ps = c->exec_startup_ps;
	out->exec_teardown_ps = c->exec_teardown_ps;
	out->peer_signal_ps = dm_peer_signal_ps(c);
	out->min_ii = c->min_ii;
	out->static_overhead = c->static_overhead;
	out->scalar_overhead = c->scalar_overhead;
	out->dma_issue_latency_ps = c->dma_issue_latency_ps;
	return NSIM_SUCCESS;
}

nsim_status nsim_convert(int dst_dtype, void *dst, int src_dtype, const void *src, uint64_t n)
{
	unsigned dsz = isa_dtype_size(dst_dtype), ssz = isa_dtype_size(src_dtype);
	if (!dsz || !ssz)
		return rt_fail(NSIM_INVALID, "nsim_convert: unknown dtype (%d -> %d)", src_dtype, dst_dtype);
	if (n && (!dst || !src))
		return rt_fail(NSIM_INVALID, "nsim_convert: no buffer");
	if (dst_dtype == src_dtype) {
		memmove(dst, src, n * dsz);
		return NSIM_SUCCESS;
	}
	if (!isa_dtype_is_float(dst_dtype) || !isa_dtype_is_float(src_dtype))
		return rt_fail(NSIM_INVALID, "nsim_convert: %s -> %s is not a float conversion",
			       isa_dtype_name(src_dtype), isa_dtype_name(dst_dtype));
	/* through fp32, as the engines compute: exact widening, RNE narrowing */
	for (uint64_t i = 0; i < n; i++)
		dm_store(dst_dtype, (uint8_t *)dst + i * dsz, dm_load(src_dtype, (const uint8_t *)src + i * ssz));
	return NSIM_SUCCESS;
}

nsim_status nsim_summary_write(const char *path, const nsim_exec_stats *s, const char *label)
{
	if (!rt.init)
		return rt_fail(NSIM_UNINITIALIZED, "nsim_summary_write: nsim_init not called");
	if (!path || !s)
		return rt_fail(NSIM_INVALID, "nsim_summary_write: no path or statistics");
	FILE *f = fopen(path, "w");
	if (!f)
		return rt_fail(NSIM_INVALID, "cannot create summary '%s': %s", path, strerror(errno));
	trc_summary_row row = { .count = 1, .time_ps = s->total_ps, .flops = s->matmul_flops,
				.hbm_bytes = s->hbm_read_bytes + s->hbm_write_bytes };
	snprintf(row.label, sizeof(row.label), "%s", label ? label : "program");
	trc_device dev = rt_trc_device(rt.chip);
	int rc = trc_summary_write(f, &dev, s, s->total_ps, 1, &row, 1);
	if (fclose(f) != 0)
		rc = -1;
	return rc ? rt_fail(NSIM_FAILURE, "error writing the summary '%s'", path) : NSIM_SUCCESS;
}

const char *nsim_trace_track_name(int engine)
{
	if (engine < 0 || engine >= ISA_NUM_ENGINES)
		return NULL;
	return trc_engine_track_names[engine];
}

size_t nsim_struct_size(const char *name)
{
	static const struct { const char *name; size_t size; } sizes[] = {
		{ "isa_diag", sizeof(isa_diag) },
		{ "isa_ap", sizeof(isa_ap) },
		{ "isa_instr", sizeof(isa_instr) },
		{ "isa_imm", sizeof(isa_imm) },
		{ "isa_tensor", sizeof(isa_tensor) },
		{ "isa_dma_desc", sizeof(isa_dma_desc) },
		{ "isa_program", sizeof(isa_program) },
		{ "isa_field_info", sizeof(isa_field_info) },
		{ "isa_target_info", sizeof(isa_target_info) },
		{ "nsim_exec_stats", sizeof(nsim_exec_stats) },
		{ "nsim_config", sizeof(nsim_config) },
		{ "nsim_exec_options", sizeof(nsim_exec_options) },
		{ "nsim_profile_options", sizeof(nsim_profile_options) },
		{ "nsim_chip_info", sizeof(nsim_chip_info) },
		{ "nsim_collective_cost", sizeof(nsim_collective_cost) },
	};
	for (size_t i = 0; name && i < sizeof(sizes) / sizeof(sizes[0]); i++)
		if (!strcmp(sizes[i].name, name))
			return sizes[i].size;
	return 0;
}

/* nsim_exec_stats in declaration order; a field added to the struct and not
 * here makes nsim_stats_field return NULL for every index, which the
 * bindings refuse at load and a test checks */
#define STAT(f) { #f, sizeof(((nsim_exec_stats *)0)->f) / sizeof(uint64_t) }
static const struct { const char *name; unsigned words; } stat_fields[] = {
	STAT(total_ps), STAT(engine_busy_ps), STAT(engine_instructions), STAT(dma_transfers),
	STAT(dma_bytes), STAT(dma_busy_ps), STAT(dma_active_ps), STAT(hbm_read_bytes), STAT(hbm_write_bytes),
	STAT(matmul_flops), STAT(matmul_instructions), STAT(instructions), STAT(sbuf_read_bytes),
	STAT(sbuf_write_bytes), STAT(psum_read_bytes), STAT(psum_write_bytes), STAT(op_instructions),
	STAT(op_busy_ps),
};
#undef STAT

static unsigned stat_words(void)
{
	unsigned n = 0;
	for (size_t i = 0; i < sizeof(stat_fields) / sizeof(stat_fields[0]); i++)
		n += stat_fields[i].words;
	return n;
}

const char *nsim_stats_field(unsigned i, unsigned *words)
{
	if (i >= sizeof(stat_fields) / sizeof(stat_fields[0]) ||
	    stat_words() * sizeof(uint64_t) != sizeof(nsim_exec_stats))
		return NULL;
	if (words)
		*words = stat_fields[i].words;
	return stat_fields[i].name;
}

nsim_status nsim_collective_estimate(const char *target, const char *op, uint32_t ranks, uint64_t bytes,
				     nsim_collective_cost *out)
{
	return nsim_collective_estimate_ranks(target, op, NULL, ranks, bytes, out);
}

nsim_status nsim_collective_estimate_ranks(const char *target, const char *op, const uint32_t *ranks, uint32_t n,
					   uint64_t bytes, nsim_collective_cost *out)
{
	const dm_chip *c = target ? dm_chip_by_name(target) : rt.init ? rt.chip : NULL;
	if (!out || !op)
		return rt_fail(NSIM_INVALID, "nsim_collective_estimate: no op or output");
	if (!c)
		return target ? rt_fail(NSIM_INVALID, "nsim_collective_estimate: unknown target '%s'", target)
			      : rt_fail(NSIM_UNINITIALIZED, "nsim_collective_estimate: no target and no runtime");
	int k = 0;
	while (k < DM_COLL_NUM_OPS && strcmp(dm_coll_op_name((dm_coll_op)k), op))
		k++;
	if (k == DM_COLL_NUM_OPS)
		return rt_fail(NSIM_INVALID, "nsim_collective_estimate: unknown collective '%s' (all_reduce, "
			       "all_gather, reduce_scatter, broadcast, all_to_all, send_recv, barrier)", op);
	dm_coll_place place;
	if (ranks && dm_coll_place_ranks(c, ranks, n, &place))
		return rt_fail(NSIM_INVALID, "nsim_collective_estimate: a group of %u ranks needs ranks 0..%u", n,
			       DM_COLL_MAX_RANK);
	dm_coll_cost cost;
	if (dm_coll_estimate_placed(c, (dm_coll_op)k, n, ranks ? &place : NULL, bytes, &cost))
		return rt_fail(NSIM_INVALID, "nsim_collective_estimate: %s over %u ranks of %llu bytes", op, n,
			       (unsigned long long)bytes);
	*out = (nsim_collective_cost){ .ps = cost.ps, .algorithm = dm_coll_algo_name(cost.algo), .steps = cost.steps,
				       .rings = cost.rings, .wire_bytes = cost.wire_bytes };
	return NSIM_SUCCESS;
}
