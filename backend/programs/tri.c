/*
 * tri.c -- kernel generator for tril / triu: out[b, i, j] = x[b, i, j] where
 * j - i <= k (tril) or j - i >= k (triu), else 0, as GpSimd affine_select
 * over tiles of up to 128 rows of one matrix (the row index is affine in the
 * partition within a tile), a tile pipeline (pipeline.h): Sync loads,
 * GpSimd selects and stores, two buffers.  Any dtype of up to 4 bytes: floats, and integer / bool masks
 * (the select only moves elements and writes zeros).
 */
#include "programs.h"
#include "pipeline.h"

#define P 128u

isa_status nk_tri_program(int target, const nk_tri *prm, uint8_t **bin, size_t *len,
			  isa_diag *diag)
{
	int dtype = prm->dtype;
	uint64_t batch = prm->batch, rows = prm->rows, cols = prm->cols;
	int64_t k = prm->k;
	bool upper = prm->upper;
	*bin = NULL;
	*len = 0;
	const isa_target_info *ti = isa_target_get(target);
	uint64_t tiles = batch * ((rows + P - 1) / P);
	unsigned esz = isa_dtype_size(dtype);
	if (!ti || !esz || esz > 4 || !batch || !rows || !cols || tiles > 65536 ||
	    2 * cols * esz + 4096 > ti->sbuf_partition_bytes || rows > INT32_MAX / 2 || cols > INT32_MAX / 2 ||
	    k > INT32_MAX / 2 || k < -(INT32_MAX / 2)) {
		nk_fail(diag, ISA_E_LIMIT, "tril/triu kernel: %llu x %llu x %llu", (unsigned long long)batch,
			(unsigned long long)rows, (unsigned long long)cols);
		return ISA_E_LIMIT;
	}
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, cols * esz, diag))
		return pp.em.st;
	int tx = nk_pipe_tensor(&pp, "x", dtype, ISA_TK_INPUT, batch * rows * cols);
	int to = nk_pipe_tensor(&pp, "out", dtype, ISA_TK_OUTPUT, batch * rows * cols);
	for (uint64_t b = 0; b < batch; b++)
		for (uint64_t i0 = 0; i0 < rows && !pp.em.st; i0 += P) {
			uint32_t r = (uint32_t)(rows - i0 < P ? rows - i0 : P);
			uint64_t off = ((b * rows + i0) * cols) * esz;
			isa_ap s = isa_ap_sbuf(dtype, 0, r, nk_pipe_tile(&pp), (uint32_t)cols);
			nk_pipe_load(&pp, s, isa_ap_hbm(dtype, (uint32_t)tx, off, r, (int64_t)cols, (uint32_t)cols), 0);
			/* keep where (i0 + p) - j + k >= 0 (tril) or j - (i0 + p) - k >= 0 (triu) */
			isa_instr in = isa_instr_init(ISA_OP_affine_select);
			in.ap[ISA_AP_DST] = s;
			in.ap[ISA_AP_SRC] = s;
			in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
			in.e[0] = ISA_ALU_is_ge;
			in.imm[0] = isa_imm_i32(upper ? (int32_t)(-(int64_t)i0 - k) : (int32_t)((int64_t)i0 + k));
			in.imm[1] = isa_imm_i32(upper ? -1 : 1);
			in.imm[2] = isa_imm_f32(0.0f);
			in.nivec = 1;
			in.ivec[0] = upper ? 1 : -1;
			nk_pipe_compute(&pp, ISA_ENGINE_GPSIMD);
			if (!pp.em.st)
				nk_pipe_check(&pp, isa_builder_emit(pp.em.p, ISA_ENGINE_GPSIMD, &in, diag));
			nk_pipe_computed(&pp, ISA_ENGINE_GPSIMD);
			nk_pipe_store(&pp, isa_ap_hbm(dtype, (uint32_t)to, off, r, (int64_t)cols, (uint32_t)cols), s, 1);
		}
	return nk_pipe_finish(&pp, bin, len);
}
