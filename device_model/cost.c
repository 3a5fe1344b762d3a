/*
 * cost.c -- the cost functions, one per cost class (isa_cost.def).  The
 * formulas are the NKI "estimated instruction cost" (written for
 * NeuronCore-v2, applied per generation with that generation's clocks and
 * data-path widths); each constant names its source.  N = free elements per
 * partition of the instruction's main operand.
 */
#include "cost.h"

typedef dm_cost (*cost_fn)(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx);

static uint64_t u64max(uint64_t a, uint64_t b) { return a > b ? a : b; }
static uint64_t u64min(uint64_t a, uint64_t b) { return a < b ? a : b; }
static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static uint64_t free_n(const isa_instr *in, int slot)
{
	return isa_ap_free_elems(&in->ap[slot]);
}

static bool is16(int dt) { return dt == ISA_DT_bf16 || dt == ISA_DT_fp16; }

/* compute engines finish a result a fixed number of cycles after they stop
 * issuing it (HW: "~100 cycles static overhead for dependent or tiny
 * Vector/Scalar instructions"; ScalarE: C-09's 264-cycle dependent
 * initiation interval, see chips.c) */
static dm_cost pipelined(const dm_chip *ch, int engine, uint64_t busy)
{
	dm_cost c = { busy, busy + (engine == ISA_ENGINE_SCALAR ? ch->scalar_overhead : ch->static_overhead) };
	return c;
}

static bool all_16bit(const isa_instr *in)
{
	for (int s = 0; s < ISA_MAX_AP; s++)
		if (((in->ap_mask >> s) & 1u) && !is16(in->ap[s].dtype))
			return false;
	return true;
}

static bool all_sbuf_contiguous(const isa_instr *in)
{
	for (int s = 0; s < ISA_MAX_AP; s++) {
		if (!((in->ap_mask >> s) & 1u))
			continue;
		const isa_ap *ap = &in->ap[s];
		if (ap->space != ISA_SPACE_SBUF || ap->ndims != 1 || ap->stride[0] != 1)
			return false;
	}
	return true;
}

/* v3+ VectorE performance modes (HW: 4x for bf16/fp16 contiguous SBUF->SBUF
 * tensor_copy/tensor_scalar, 2x non-contiguous or PSUM): the divisor */
static uint64_t vector_speedup(const dm_chip *ch, int engine, const isa_instr *in)
{
	if (engine != ISA_ENGINE_VECTOR || ch->vector_elems_16bit <= ISA_NUM_PARTITIONS ||
	    !all_16bit(in))
		return 1;
	return all_sbuf_contiguous(in) ? 4 : 2;
}

/* HW: LoadStationary up to 4x faster than MultiplyMoving of the same free size */
static dm_cost cost_load_stationary(const dm_chip *ch, int engine, const isa_instr *in,
				    const dm_cost_ctx *ctx)
{
	(void)ch, (void)engine, (void)ctx;
	uint64_t m = free_n(in, ISA_AP_SRC);
	uint64_t c = ceil_div(m, 4);
	if (in->ap[ISA_AP_SRC].dtype == ISA_DT_fp32 || in->ap[ISA_AP_SRC].dtype == ISA_DT_tf32)
		c *= 4;
	dm_cost r = { u64max(c, 1), u64max(c, 1) };
	return r;
}

/* HW: max(min(64, N_stationary), N_moving), x4 for fp32; double_row fp8
 * halves it (v3/v4: "K effectively 256 in BF16 K=128 time"); MX data
 * takes the BF16 time for four times the contraction (trn3 arch guide:
 * "4x the throughput compared to a BF16/FP16 matmul"); initiation
 * latency 64 TensorE cycles before results land in PSUM, an fp32 result
 * the chip's mm_fp32_drain (the four passes leave the array later) */
static dm_cost cost_matmul(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx)
{
	(void)engine;
	uint64_t n = free_n(in, ISA_AP_SRC);
	uint64_t c = u64max(u64min(64, ctx->stat_m), n);
	int dt = in->ap[ISA_AP_SRC].dtype;
	bool fp32 = dt == ISA_DT_fp32 || dt == ISA_DT_tf32;
	if (fp32)
		c *= 4;
	if (in->e[0] == ISA_PERF_DOUBLE_ROW)
		c = ceil_div(c, 2);
	dm_cost r = { c, c + (fp32 ? ch->mm_fp32_drain : 64) };
	return r;
}

/* HW: TensorE max(P, min(64, F)); VectorE max(MIN_II, N) */
static dm_cost cost_transpose(const dm_chip *ch, int engine, const isa_instr *in,
			      const dm_cost_ctx *ctx)
{
	(void)ctx;
	uint64_t p = in->ap[ISA_AP_SRC].nparts, f = free_n(in, ISA_AP_SRC);
	if (engine == ISA_ENGINE_TENSOR) {
		uint64_t c = u64max(p, u64min(64, f));
		dm_cost r = { c, c + 64 };
		return r;
	}
	return pipelined(ch, engine, u64max(ch->min_ii, f));
}

/* HW: activation max(MIN_II, N), + MIN_II with reduce; v4 ScalarE doubles
 * the 16-bit data path (256 elements/cycle) */
static dm_cost cost_activation(const dm_chip *ch, int engine, const isa_instr *in,
			       const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	uint64_t n = free_n(in, ISA_AP_SRC);
	if (ch->scalar_elems_16bit > ISA_NUM_PARTITIONS && all_16bit(in))
		n = ceil_div(n * ISA_NUM_PARTITIONS, ch->scalar_elems_16bit);
	uint64_t c = u64max(ch->min_ii, n);
	if (in->e[1] != ISA_ALU_bypass)
		c += ch->min_ii;
	return pipelined(ch, engine, c);
}

/* HW: tensor_scalar, tensor_copy: max(MIN_II, N), v3+ VectorE perf modes */
static dm_cost cost_elementwise(const dm_chip *ch, int engine, const isa_instr *in,
				const dm_cost_ctx *ctx)
{
	(void)ctx;
	uint64_t n = ceil_div(free_n(in, ISA_AP_SRC), vector_speedup(ch, engine, in));
	return pipelined(ch, engine, u64max(ch->min_ii, n));
}

/* trn3 arch guide, "MX data-type Quantization": QuantizeMX takes four input
 * elements per partition per cycle (VectorE's 4x performance mode) */
static dm_cost cost_quantize(const dm_chip *ch, int engine, const isa_instr *in,
			     const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, ceil_div(free_n(in, ISA_AP_SRC), 4)));
}

/* HW (../shared/HARDWARE.md cost table, NKI cost model): tensor_scalar_reduce
 * max(MIN_II, N) + MIN_II, as activation_reduce */
static dm_cost cost_elementwise_reduce(const dm_chip *ch, int engine, const isa_instr *in,
				       const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, free_n(in, ISA_AP_SRC)) + ch->min_ii);
}

/* HW: max(MIN_II, N) with one input in PSUM and one in SBUF, or all bf16
 * add/mul/sub contiguous in SBUF; otherwise max(MIN_II, 2N).  v3: 2x for
 * bf16 tensor_tensor in SBUF. */
static dm_cost cost_tensor_tensor(const dm_chip *ch, int engine, const isa_instr *in,
				  const dm_cost_ctx *ctx)
{
	(void)ctx;
	uint64_t n = free_n(in, ISA_AP_SRC);
	int s0 = in->ap[ISA_AP_SRC].space, s1 = in->ap[ISA_AP_SRC1].space;
	int op = in->e[0];
	bool mixed = (s0 == ISA_SPACE_PSUM) != (s1 == ISA_SPACE_PSUM);
	bool fast_bf16 = all_16bit(in) && all_sbuf_contiguous(in) &&
			 (op == ISA_ALU_add || op == ISA_ALU_multiply || op == ISA_ALU_subtract);
	uint64_t c = (mixed || fast_bf16) ? n : 2 * n;
	if (engine == ISA_ENGINE_VECTOR && ch->vector_elems_16bit > ISA_NUM_PARTITIONS &&
	    all_16bit(in) && s0 == ISA_SPACE_SBUF && s1 == ISA_SPACE_SBUF)
		c = ceil_div(c, 2);
	return pipelined(ch, engine, u64max(ch->min_ii, c));
}

/* HW: tensor_reduce N/2 for bf16 add/max, else N */
static dm_cost cost_reduce(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	uint64_t n = free_n(in, ISA_AP_SRC);
	int op = in->e[0];
	if (in->ap[ISA_AP_SRC].dtype == ISA_DT_bf16 && (op == ISA_ALU_add || op == ISA_ALU_max))
		n = ceil_div(n, 2);
	return pipelined(ch, engine, u64max(n, 1));
}

/* Not published (nki.isa.exponential and range_select give no cost): costed as ScalarE's
 * activation, max(MIN_II, N), + MIN_II when it also writes row sums */
static dm_cost cost_stream_reduce(const dm_chip *ch, int engine, const isa_instr *in,
				const dm_cost_ctx *ctx)
{
	(void)ctx;
	uint64_t c = u64max(ch->min_ii, free_n(in, ISA_AP_SRC));
	if ((in->ap_mask >> ISA_AP_AUX) & 1u)
		c += ch->min_ii;
	return pipelined(ch, engine, c);
}

/* HW (nki.isa.bn_stats, SDK nki/api/nki/isa/__init__.py at 716f08dc):
 * max(MIN_II, N) VectorE cycles */
static dm_cost cost_bn_stats(const dm_chip *ch, int engine, const isa_instr *in,
			     const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, free_n(in, ISA_AP_SRC)));
}

/* HW (nki.isa.max8 and nki.isa.nc_find_index8, SDK API reference, "Estimated
 * instruction cost: N engine cycles", N the elements per partition of the
 * source / data tile), issued no faster than MIN_II like every instruction */
static dm_cost cost_max8(const dm_chip *ch, int engine, const isa_instr *in, const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, free_n(in, ISA_AP_SRC)));
}

/* HW (nki.isa.bn_aggr, same source): max(MIN_II, 13*(N/3)) VectorE cycles,
 * N the elements per partition of the triples it reads */
static dm_cost cost_bn_aggr(const dm_chip *ch, int engine, const isa_instr *in,
			    const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, 13 * (free_n(in, ISA_AP_SRC) / 3)));
}

/* Not published.  Estimate: each of GpSimd's 8 cores owns 16 partitions
 * (HW Engines), so a cross-partition reduction streams N elements per core
 * row group plus a combine across the 8 cores: max(MIN_II, N) * ceil(P/16)
 * + 8 * MIN_II. */
static dm_cost cost_partition_reduce(const dm_chip *ch, int engine, const isa_instr *in,
				     const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	uint64_t n = free_n(in, ISA_AP_SRC), p = in->ap[ISA_AP_SRC].nparts;
	return pipelined(ch, engine, u64max(ch->min_ii, n) * ceil_div(p, 16) + 8 * ch->min_ii);
}

/* Not published.  select reads three operands; costed as the slow
 * tensor_tensor case, max(MIN_II, 2N). */
static dm_cost cost_select(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, 2 * free_n(in, ISA_AP_DST)));
}

/* HW: memset max(MIN_II, N/2) for zero bf16/fp16, else max(MIN_II, N) */
static dm_cost cost_memset(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	uint64_t n = free_n(in, ISA_AP_DST);
	if (is16(in->ap[ISA_AP_DST].dtype) && in->imm[0].bits == 0)
		n = ceil_div(n, 2);
	return pipelined(ch, engine, u64max(ch->min_ii, n));
}

/* HW: iota 150 + N */
static dm_cost cost_iota(const dm_chip *ch, int engine, const isa_instr *in,
			 const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	return pipelined(ch, engine, 150 + free_n(in, ISA_AP_DST));
}

/* HW: affine_select ~150 + N */
static dm_cost cost_affine_select(const dm_chip *ch, int engine, const isa_instr *in,
				  const dm_cost_ctx *ctx)
{
	(void)engine, (void)ctx;
	return pipelined(ch, engine, 150 + free_n(in, ISA_AP_SRC));
}

/* nc_n_gather: no published cost; as a GpSimd tensor_copy of the gathered
 * elements (dst's free size) */
static dm_cost cost_gather(const dm_chip *ch, int engine, const isa_instr *in,
			   const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, free_n(in, ISA_AP_DST)));
}

/* Not published (nki.isa.nonzero_with_count gives no cost): each of GpSimd's
 * eight cores scans its own partition's N elements, max(MIN_II, N) */
static dm_cost cost_nonzero(const dm_chip *ch, int engine, const isa_instr *in, const dm_cost_ctx *ctx)
{
	(void)ctx;
	return pipelined(ch, engine, u64max(ch->min_ii, free_n(in, ISA_AP_SRC)));
}

/* Not published: GpSimd runs topk as code, not as a data-path stream.
 * Estimate: each of the 8 cores serves 16 partitions (HW Engines) and works
 * through its rows one after another, one compare-and-move step a cycle:
 * the heap select (64k <= n) scans the row once and ranks k with about
 * 2 k log2 k steps; the quick select (CPU's nth_element) partitions about
 * 3 n; a full sort is an introsort, about 2 n log2 n.  Plus iota's 150-cycle
 * GpSimd start-up (HW cost table). */
static dm_cost cost_topk(const dm_chip *ch, int engine, const isa_instr *in,
			 const dm_cost_ctx *ctx)
{
	(void)ctx;
	bool span = in->flags & ISA_FLAG_SPAN;   /* one row: one core runs it */
	uint64_t n = free_n(in, ISA_AP_SRC) * (span ? in->ap[ISA_AP_SRC].nparts : 1);
	uint64_t k = free_n(in, ISA_AP_DST) * (span ? in->ap[ISA_AP_DST].nparts : 1);
	uint64_t rows = span ? 1 : u64min(in->ap[ISA_AP_SRC].nparts, 16), steps;
	if (in->flags & ISA_FLAG_SORT)
		steps = 2 * n * dm_log2_ceil(n);
	else if (k * 64 <= n)
		steps = n + 2 * k * dm_log2_ceil(k + 1);
	else
		steps = 3 * n + k * dm_log2_ceil(k + 1);
	return pipelined(ch, engine, 150 + u64max(ch->min_ii, rows * steps));
}

/* Triggering a DMA occupies the issuing sequencer for one MIN_II (its
 * descriptors are prebuilt); the transfer's own time is the DMA model's. */
static dm_cost cost_dma(const dm_chip *ch, int engine, const isa_instr *in,
			const dm_cost_ctx *ctx)
{
	(void)engine, (void)in, (void)ctx;
	dm_cost r = { ch->min_ii, ch->min_ii };
	return r;
}

/* Sequencer work: one cycle, nop its cycles, end nothing. */
static dm_cost cost_control(const dm_chip *ch, int engine, const isa_instr *in,
			    const dm_cost_ctx *ctx)
{
	(void)ch, (void)engine, (void)ctx;
	uint64_t c = in->opcode == ISA_OP_nop ? in->u[0] : in->opcode == ISA_OP_end ? 0 : 1;
	dm_cost r = { c, c };
	return r;
}

static const cost_fn cost_fns[ISA_NUM_COST_CLASSES] = {
#define ISA_COST(name, formula) [ISA_COST_##name] = cost_##name,
#include "neuronsim/isa_cost.def"
#undef ISA_COST
};

dm_cost dm_cost_of(const dm_chip *chip, int engine, const isa_instr *in, const dm_cost_ctx *ctx)
{
	return cost_fns[isa_ops[in->opcode].cost](chip, engine, in, ctx);
}

/* ------------------------------------------------------------------ DMA */

/* descriptors per row: contiguous runs of both sides, split at chunk size */
static uint64_t dma_descs_per_row(const dm_chip *chip, const isa_dma_desc *d)
{
	const isa_ap *aps[2] = { &d->dst, &d->src };
	uint64_t run = UINT64_MAX;
	for (int i = 0; i < 2; i++) {
		const isa_ap *ap = aps[i];
		uint64_t r = 1;
		for (int k = ap->ndims - 1; k >= 0; k--) {
			if (ap->stride[k] != (int64_t)r)
				break;
			r *= ap->size[k];
		}
		run = r < run ? r : run;
	}
	uint64_t elems = isa_ap_free_elems(&d->dst);
	uint64_t runs = (elems + run - 1) / run;
	uint64_t run_bytes = run * isa_dtype_size(d->dst.dtype);
	uint64_t chunks = (run_bytes + chip->dma_chunk_bytes - 1) / chip->dma_chunk_bytes;
	return runs * (chunks ? chunks : 1);
}

dm_dma_shape dm_dma_shape_of(const dm_chip *chip, const isa_dma_desc *d)
{
	dm_dma_shape sh;
	sh.rows = isa_dma_mode_indexed(d->mode) ? d->index.nparts : d->dst.nparts;
	sh.src_row = isa_ap_free_elems(&d->src) * isa_dtype_size(d->src.dtype);
	sh.dst_row = isa_ap_free_elems(&d->dst) * isa_dtype_size(d->dst.dtype);
	/* reshaping transfer: rows of the destination, bytes conserved */
	if (!isa_dma_mode_indexed(d->mode) && d->src.nparts != d->dst.nparts)
		sh.src_row = sh.dst_row * isa_dtype_size(d->src.dtype) / isa_dtype_size(d->dst.dtype);
	/* the adds (scatter_add, add, gather_add) read each destination row
	 * back before writing it: the engine moves those bytes too (HBM reads
	 * when the destination is in HBM) */
	sh.rmw_row = isa_dma_mode_rmw(d->mode) ? sh.dst_row : 0;
	sh.row_bytes = (sh.src_row > sh.dst_row ? sh.src_row : sh.dst_row) + sh.rmw_row;
	sh.descs_per_row = dma_descs_per_row(chip, d);
	sh.rate_pct = 100;
	if (d->mode == ISA_DMA_TRANSPOSE) {
		/* the engines' transpose mode writes whole destination rows (one
		 * descriptor per chunk of a row), at the published share of the
		 * copy rate */
		uint64_t chunks = (sh.dst_row + chip->dma_chunk_bytes - 1) / chip->dma_chunk_bytes;
		sh.descs_per_row = chunks ? chunks : 1;
		sh.rate_pct = d->src.space == ISA_SPACE_HBM ? chip->dma_transpose_hbm_pct
							    : chip->dma_transpose_sbuf_pct;
		if (!sh.rate_pct)
			sh.rate_pct = 100;    /* validated: no transpose on this generation */
	}
	return sh;
}

uint64_t dm_peer_signal_ps(const dm_chip *chip)
{
	return (uint64_t)chip->dma_issue_latency_ps + chip->dma_desc_overhead_ps;
}

uint64_t dm_dma_engine_ps(const dm_chip *chip, const dm_dma_shape *sh, uint64_t rows)
{
	uint64_t bytes = rows * sh->row_bytes, descs = rows * sh->descs_per_row;
	uint64_t rate = (uint64_t)chip->dma_engine_rate * sh->rate_pct;   /* bytes/us x 100 */
	return descs * chip->dma_desc_overhead_ps + (bytes * 100000000u + rate - 1) / rate;
}

void dm_dma_rows_per_engine(const dm_chip *chip, const isa_dma_desc *d, uint64_t total_rows,
			    uint32_t nengines, uint64_t *rows)
{
	(void)chip;
	for (uint32_t k = 0; k < nengines; k++)
		rows[k] = 0;
	if (!nengines || !total_rows)
		return;
	/* the partition the first row sits on: the on-chip side's (indirect:
	 * the index's, whose partitions the rows follow) */
	const isa_ap *onchip = isa_dma_mode_indexed(d->mode)          ? &d->index
			       : d->dst.space != ISA_SPACE_HBM ? &d->dst
			       : d->src.space != ISA_SPACE_HBM ? &d->src
							       : NULL;
	uint64_t first = onchip ? onchip->start : 0;
	uint64_t per = (ISA_NUM_PARTITIONS + nengines - 1) / nengines;   /* partitions per engine */
	uint64_t blk0 = first / per, blk1 = (first + total_rows - 1) / per;
	if (blk1 - blk0 >= 4ull * nengines) {
		/* many blocks (long HBM-to-HBM transfers): every engine gets its
		 * share, the remainder to the first ones */
		for (uint32_t k = 0; k < nengines; k++)
			rows[k] = total_rows / nengines + (k < total_rows % nengines ? 1 : 0);
		return;
	}
	for (uint64_t b = blk0; b <= blk1; b++) {
		uint64_t lo = b * per > first ? b * per : first;
		uint64_t hi = (b + 1) * per < first + total_rows ? (b + 1) * per : first + total_rows;
		rows[b % nengines] += hi - lo;
	}
}
