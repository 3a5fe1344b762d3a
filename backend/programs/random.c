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
 * Tiles run one after another (one buffer set on the tile pipeline, whose
 * tiles GpSimd makes rather than loads): the engines' generator state is
 * sequential.
 */
#include "programs.h"
#include "pipeline.h"

#define P 128u
#define RAND_F 1024u

/* SBUF per partition, fp32 words: [0, F) bits, [F, 2F) u1 / sqrt term,
 * [2F, 3F) u2 / cos term, [3F, 4F) result; the seeds after them */
static isa_ap slot(unsigned k, uint64_t f) { return isa_ap_sbuf(ISA_DT_fp32, 0, P, k * RAND_F * 4, (uint32_t)f); }

/* draw k of a tile: u = (bits >> 8) * 2^-24 into slot 1 + k (+ 2^-24 for
 * Box-Muller's u1: in (0, 1], its log finite) */
static void draw(nk_em *e, unsigned k, bool normal, uint64_t f)
{
	isa_ap bits = isa_ap_sbuf(ISA_DT_uint32, 0, P, 0, (uint32_t)f), frac = slot(1 + k, f);
	isa_instr in = isa_instr_init(ISA_OP_rng);
	in.ap[ISA_AP_DST] = bits;
	in.ap_mask = 1u << ISA_AP_DST;
	nk_em_emit(e, ISA_ENGINE_GPSIMD, &in);
	if (!e->st)
		e->st = isa_builder_tensor_scalar(e->p, ISA_ENGINE_GPSIMD, bits, bits, ISA_ALU_shift_right, isa_imm_i32(8),
						  ISA_ALU_bypass, isa_imm_i32(0));
	nk_em_copy(e, ISA_ENGINE_GPSIMD, frac, bits);
	nk_em_ts(e, ISA_ENGINE_GPSIMD, frac, frac, ISA_ALU_add, normal && k == 0 ? 1.0f : 0.0f, NULL,
		 ISA_ALU_multiply, 0x1p-24f, NULL);
}

/* normal values by Box-Muller: ScalarE's sqrt(-2 ln u1) and
 * cos(2 pi u2 - pi), GpSimd's product scaled; hand-offs on to_act / to_gp */
static void box_muller(nk_em *e, const nk_random *r, uint64_t f, uint32_t to_act, uint32_t to_gp)
{
	isa_ap u1 = slot(1, f), u2 = slot(2, f), res = slot(3, f);
	nk_em_signal(e, ISA_ENGINE_GPSIMD, to_act);
	nk_em_wait(e, ISA_ENGINE_SCALAR, to_act, e->cnt[to_act]);
	nk_em_act(e, u1, u1, ISA_ACT_log, 1.0f, NULL, NULL);
	nk_em_act(e, u1, u1, ISA_ACT_sqrt, -2.0f, NULL, NULL);
	if (!e->st)
		e->st = isa_builder_activation(e->p, u2, u2, ISA_ACT_cos, 6.2831853f, -3.14159265f);
	nk_em_signal(e, ISA_ENGINE_SCALAR, to_gp);
	nk_em_wait(e, ISA_ENGINE_GPSIMD, to_gp, e->cnt[to_gp]);
	nk_em_tt(e, ISA_ENGINE_GPSIMD, res, u1, u2, ISA_ALU_multiply);
	nk_em_ts(e, ISA_ENGINE_GPSIMD, res, res, ISA_ALU_multiply, r->b, NULL, ISA_ALU_add, r->a, NULL);
}

/* the tile from element s: its whole rows of f from partition 0, then (the
 * last tile's) remainder as one row from the partition after them */
static void store(nk_pipe *pp, int to, const nk_random *r, uint64_t s, uint64_t f)
{
	const uint64_t esz = isa_dtype_size(r->dtype), left = r->n - s;
	uint64_t rows = left / f, tail = left % f;
	if (rows >= P) {
		rows = P;
		tail = 0;
	}
	if (rows)
		nk_pipe_store(pp, isa_ap_hbm(r->dtype, (uint32_t)to, s * esz, (uint32_t)rows, (int64_t)f, (uint32_t)f),
			      isa_ap_sbuf(ISA_DT_fp32, 0, (uint32_t)rows, 3 * RAND_F * 4, (uint32_t)f), pp->stores % 4);
	if (tail)
		nk_pipe_store(pp, isa_ap_hbm(r->dtype, (uint32_t)to, (s + rows * f) * esz, 1, (int64_t)f, (uint32_t)tail),
			      isa_ap_sbuf(ISA_DT_fp32, (uint32_t)rows, 1, 3 * RAND_F * 4, (uint32_t)tail), pp->stores % 4);
}

/* the seeds loaded and set as the lanes' generator state: tile 0's load */
static void seed(nk_pipe *pp, int ts)
{
	isa_ap seeds = isa_ap_sbuf(ISA_DT_uint32, 0, P, 4 * RAND_F * 4, 6);
	nk_pipe_load(pp, seeds, isa_ap_hbm(ISA_DT_uint32, (uint32_t)ts, 0, P, 6, 6), 0);
	nk_pipe_compute(pp, ISA_ENGINE_GPSIMD);
	isa_instr in = isa_instr_init(ISA_OP_rand_set_state);
	in.ap[ISA_AP_SRC] = seeds;
	in.ap_mask = 1u << ISA_AP_SRC;
	nk_em_emit(&pp->em, ISA_ENGINE_GPSIMD, &in);
}

isa_status nk_random_program(int target, const nk_random *r, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	if (!isa_target_has(target, ISA_FEAT_rng_state_gpsimd)) {
		nk_fail(diag, ISA_E_BAD_ENGINE, "random kernel: seeding the PRNG needs NeuronCore-v%u or newer",
			isa_feature_first_core(ISA_FEAT_rng_state_gpsimd));
		return ISA_E_BAD_ENGINE;
	}
	if (!r->n || r->n > ((uint64_t)1 << 40) ||
	    (r->dtype != ISA_DT_fp32 && r->dtype != ISA_DT_bf16 && r->dtype != ISA_DT_fp16)) {
		nk_fail(diag, ISA_E_LIMIT, "random kernel: %llu elements of dtype %d",
			(unsigned long long)r->n, r->dtype);
		return ISA_E_LIMIT;
	}
	bool normal = r->kind == NK_RAND_NORMAL;
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 1, 4 * RAND_F * 4, diag))
		return nk_pipe_finish(&pp, bin, len);
	pp.load_engine = ISA_ENGINE_GPSIMD;   /* GpSimd makes the tiles */
	uint32_t to_act = nk_pipe_sem(&pp), to_gp = nk_pipe_sem(&pp);
	int ts = nk_pipe_tensor(&pp, "seeds", ISA_DT_uint32, ISA_TK_INPUT, P * 6);
	int to = nk_pipe_tensor(&pp, "out", r->dtype, ISA_TK_OUTPUT, r->n);
	uint64_t f = (r->n + P - 1) / P;
	f = f > RAND_F ? RAND_F : f;
	for (uint64_t s = 0; s < r->n && !pp.em.st; s += P * f) {
		nk_pipe_tile(&pp);
		if (s == 0)
			seed(&pp, ts);
		for (unsigned k = 0; k < (normal ? 2u : 1u); k++)
			draw(&pp.em, k, normal, f);
		if (normal)
			box_muller(&pp.em, r, f, to_act, to_gp);
		else
			nk_em_ts(&pp.em, ISA_ENGINE_GPSIMD, slot(3, f), slot(1, f), ISA_ALU_multiply, r->b - r->a, NULL,
				 ISA_ALU_add, r->a, NULL);
		nk_pipe_computed(&pp, ISA_ENGINE_GPSIMD);
		store(&pp, to, r, s, f);
	}
	return nk_pipe_finish(&pp, bin, len);
}
