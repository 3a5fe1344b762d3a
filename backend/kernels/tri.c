/*
 * tri.c -- kernel generator for tril / triu: out[b, i, j] = x[b, i, j] where
 * j - i <= k (tril) or j - i >= k (triu), else 0, as GpSimd affine_select
 * over tiles of up to 128 rows of one matrix (the row index is affine in the
 * partition within a tile).  Sync loads, GpSimd selects and stores; two
 * buffers.  Any dtype of up to 4 bytes: floats, and integer / bool masks
 * (the select only moves elements and writes zeros).
 */
#include "kernels.h"

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
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	p->num_semaphores = 2;   /* 0 loads landed, 1 stores landed */
	uint64_t n[1] = { batch * rows * cols };
	int tx = isa_builder_tensor(p, "x", dtype, ISA_TK_INPUT, 1, n, diag);
	int to = isa_builder_tensor(p, "out", dtype, ISA_TK_OUTPUT, 1, n, diag);
	if (tx < 0 || to < 0) {
		st = diag->code;
		goto free_program;
	}
	uint32_t t = 0;
	for (uint64_t b = 0; b < batch; b++)
		for (uint64_t i0 = 0; i0 < rows; i0 += P, t++) {
			uint32_t r = (uint32_t)(rows - i0 < P ? rows - i0 : P);
			uint64_t off = ((b * rows + i0) * cols) * esz, buf = (t % 2) * cols * esz;
			isa_ap s = isa_ap_sbuf(dtype, 0, r, buf, (uint32_t)cols);
			isa_ap hx = isa_ap_hbm(dtype, (uint32_t)tx, off, r, (int64_t)cols, (uint32_t)cols);
			isa_ap ho = isa_ap_hbm(dtype, (uint32_t)to, off, r, (int64_t)cols, (uint32_t)cols);
			int dl = isa_builder_dma(p, "", ISA_DMA_DIRECT, &s, &hx, NULL, diag);
			int ds = isa_builder_dma(p, "", ISA_DMA_DIRECT, &ho, &s, NULL, diag);
			if (dl < 0 || ds < 0) {
				st = diag->code;
				goto free_program;
			}
			/* the buffer was stored two tiles ago */
			if (t >= 2 && (st = isa_builder_sem_wait(p, ISA_ENGINE_SYNC, 1, ISA_ALU_is_ge, t - 1)))
				goto free_program;
			if ((st = isa_builder_dma_copy(p, ISA_ENGINE_SYNC, (uint32_t)dl, 0, 0, 1)) ||
			    (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, t + 1)))
				goto free_program;
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
			if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)) ||
			    (st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)ds, 1, 1, 1)))
				goto free_program;
		}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, 1, t, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}
