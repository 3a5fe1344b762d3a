/*
 * random.c -- random numbers on the device's PRNG (GpSimd's per-lane
 * XORWOW generators, NeuronCore-v3 and newer).
 *
 *   nk_random_program: "out"[n] uniform on [a, b) or normal(a, b), seeded
 *   from "seeds" (uint32 [128 x 6], one XORWOW state per lane, made by the
 *   host from the torch generator), so the same generator state gives the
 *   same numbers and the program itself stays cached across calls.
 *
 * Each [128, F] tile: GpSimd draws 32-bit words, keeps their top 24 bits as
 * an exact fp32 fraction u = bits * 2^-24 in [0, 1) and scales it.  Normal
 * values use Box-Muller over two such fractions: ScalarE computes
 * sqrt(-2 ln u1) (u1 in (0, 1]) and cos(2 pi u2 - pi) (the angle in
 * [-pi, pi), ScalarE's range for sin/cos), GpSimd multiplies and scales.
 * Tiles run one after another: the engines' generator state is sequential.
 */
#include "kernels.h"

#define P 128u
#define RAND_F 1024u

static isa_status store(isa_program *p, int to, int out_dtype, uint64_t first, uint32_t rows,
			uint64_t f, uint32_t row0, uint64_t count, unsigned queue, isa_diag *diag)
{
	isa_ap src = isa_ap_sbuf(ISA_DT_fp32, row0, rows, 3 * RAND_F * 4 /* the result slot */, (uint32_t)count);
	isa_ap dst = isa_ap_hbm(out_dtype, (uint32_t)to, first * isa_dtype_size(out_dtype), rows,
				(int64_t)f, (uint32_t)count);
	int d = isa_builder_dma(p, "", ISA_DMA_DIRECT, &dst, &src, NULL, diag);
	if (d < 0)
		return diag->code;
	return isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)d, queue, 0, 1);
}

isa_status nk_random_program(int target, const nk_random *r, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	const isa_target_info *ti = isa_target_get(target);
	if (!ti || ti->core_version < 3) {
		nk_fail(diag, ISA_E_BAD_ENGINE, "random kernel: seeding the PRNG needs NeuronCore-v3 or newer");
		return ISA_E_BAD_ENGINE;
	}
	if (!r->n || r->n > ((uint64_t)1 << 40) ||
	    (r->dtype != ISA_DT_fp32 && r->dtype != ISA_DT_bf16 && r->dtype != ISA_DT_fp16)) {
		nk_fail(diag, ISA_E_LIMIT, "random kernel: %llu elements of dtype %d",
			(unsigned long long)r->n, r->dtype);
		return ISA_E_LIMIT;
	}
	bool normal = r->kind == NK_RAND_NORMAL;
	isa_status st = ISA_E_NOMEM;
	isa_program *p = isa_program_new(target);
	if (!p)
		return st;
	/* 0 stores/seed load, 1 fractions ready (ScalarE), 2 ScalarE done */
	p->num_semaphores = 3;
	uint64_t ss[1] = { P * 6 }, so[1] = { r->n };
	int ts = isa_builder_tensor(p, "seeds", ISA_DT_uint32, ISA_TK_INPUT, 1, ss, diag);
	int to = isa_builder_tensor(p, "out", r->dtype, ISA_TK_OUTPUT, 1, so, diag);
	if (ts < 0 || to < 0) {
		st = diag->code;
		goto free_program;
	}
	/* SBUF per partition: [0, F) bits, [F, 2F) u1 / sqrt term, [2F, 3F) u2 /
	 * cos term, [3F, 4F) result (fp32 words); seeds after them */
	const uint64_t seed_off = 4 * RAND_F * 4;
	isa_ap seeds = isa_ap_sbuf(ISA_DT_uint32, 0, P, seed_off, 6);
	isa_ap hs = isa_ap_hbm(ISA_DT_uint32, (uint32_t)ts, 0, P, 6, 6);
	int d = isa_builder_dma(p, "", ISA_DMA_DIRECT, &seeds, &hs, NULL, diag);
	if (d < 0) {
		st = diag->code;
		goto free_program;
	}
	uint32_t done = 1;   /* completions counted on semaphore 0 */
	if ((st = isa_builder_dma_copy(p, ISA_ENGINE_GPSIMD, (uint32_t)d, 0, 0, 1)) ||
	    (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, done)))
		goto free_program;
	isa_instr in = isa_instr_init(ISA_OP_rand_set_state);
	in.ap[ISA_AP_SRC] = seeds;
	in.ap_mask = 1u << ISA_AP_SRC;
	if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)))
		goto free_program;

	uint64_t f = (r->n + P - 1) / P;
	f = f > RAND_F ? RAND_F : f;
	uint64_t per_tile = f * P;
	uint32_t tiles = 0;
	for (uint64_t s = 0; s < r->n; s += per_tile, tiles++) {
		/* the previous tile's stores have read the result slot */
		if ((st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 0, ISA_ALU_is_ge, done)))
			goto free_program;
		unsigned draws = normal ? 2 : 1;
		for (unsigned k = 0; k < draws; k++) {
			isa_ap bits = isa_ap_sbuf(ISA_DT_uint32, 0, P, 0, (uint32_t)f);
			isa_ap frac = isa_ap_sbuf(ISA_DT_fp32, 0, P, (1 + k) * RAND_F * 4, (uint32_t)f);
			in = isa_instr_init(ISA_OP_rng);
			in.ap[ISA_AP_DST] = bits;
			in.ap_mask = 1u << ISA_AP_DST;
			/* u = (bits >> 8) * 2^-24 (+ 2^-24 for u1: in (0, 1], ln finite) */
			if ((st = isa_builder_emit(p, ISA_ENGINE_GPSIMD, &in, diag)) ||
			    (st = isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, bits, bits, ISA_ALU_shift_right,
							    isa_imm_i32(8), ISA_ALU_bypass, isa_imm_i32(0))) ||
			    (st = isa_builder_tensor_copy(p, ISA_ENGINE_GPSIMD, frac, bits)) ||
			    (st = isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, frac, frac, ISA_ALU_add,
							    isa_imm_f32(normal && k == 0 ? 1.0f : 0.0f),
							    ISA_ALU_multiply, isa_imm_f32(0x1p-24f))))
				goto free_program;
		}
		isa_ap res = isa_ap_sbuf(ISA_DT_fp32, 0, P, 3 * RAND_F * 4, (uint32_t)f);
		if (!normal) {
			if ((st = isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, res,
							    isa_ap_sbuf(ISA_DT_fp32, 0, P, RAND_F * 4, (uint32_t)f),
							    ISA_ALU_multiply, isa_imm_f32(r->b - r->a),
							    ISA_ALU_add, isa_imm_f32(r->a))))
				goto free_program;
		} else {
			isa_ap u1 = isa_ap_sbuf(ISA_DT_fp32, 0, P, RAND_F * 4, (uint32_t)f);
			isa_ap u2 = isa_ap_sbuf(ISA_DT_fp32, 0, P, 2 * RAND_F * 4, (uint32_t)f);
			if ((st = isa_builder_sem_signal(p, ISA_ENGINE_GPSIMD, 1, ISA_SEMOP_ADD, 1)) ||
			    (st = isa_builder_sem_wait(p, ISA_ENGINE_SCALAR, 1, ISA_ALU_is_ge, tiles + 1)) ||
			    (st = isa_builder_activation(p, u1, u1, ISA_ACT_log, 1.0f, 0.0f)) ||
			    (st = isa_builder_activation(p, u1, u1, ISA_ACT_sqrt, -2.0f, 0.0f)) ||
			    (st = isa_builder_activation(p, u2, u2, ISA_ACT_cos, 6.2831853f, -3.14159265f)) ||
			    (st = isa_builder_sem_signal(p, ISA_ENGINE_SCALAR, 2, ISA_SEMOP_ADD, 1)) ||
			    (st = isa_builder_sem_wait(p, ISA_ENGINE_GPSIMD, 2, ISA_ALU_is_ge, tiles + 1)) ||
			    (st = isa_builder_tensor_tensor(p, ISA_ENGINE_GPSIMD, res, u1, u2, ISA_ALU_multiply)) ||
			    (st = isa_builder_tensor_scalar(p, ISA_ENGINE_GPSIMD, res, res, ISA_ALU_multiply,
							    isa_imm_f32(r->b), ISA_ALU_add, isa_imm_f32(r->a))))
				goto free_program;
		}
		uint64_t left = r->n - s, rows = left / f, tail = left % f;
		if (rows >= P) {   /* a full tile: the remainder starts the next one */
			rows = P;
			tail = 0;
		}
		if (rows) {
			if ((st = store(p, to, r->dtype, s, (uint32_t)rows, f, 0, f, done % 4, diag)))
				goto free_program;
			done++;
		}
		if (tail) {
			if ((st = store(p, to, r->dtype, s + rows * f, 1, tail, (uint32_t)rows, tail, done % 4, diag)))
				goto free_program;
			done++;
		}
	}
	if ((st = nk_finish(p, ISA_ENGINE_GPSIMD, 0, done, bin, len, diag)))
		goto free_program;
	st = ISA_OK;
free_program:
	isa_program_free(p);
	return st;
}
