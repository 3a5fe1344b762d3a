/*
 * attention.c -- kernel generator: scaled-dot-product attention's forward as
 * one flash-attention tile loop (NKI's flash_fwd structure): the scores of
 * a tile of queries against a block of keys live in PSUM and SBUF only, an
 * online softmax (running max m, running sum l, the output accumulator o
 * rescaled by exp(m_old - m_new)) folds the blocks in one by one, and only
 * q, k, v (and the mask) are read from HBM and only the output written.
 *
 * Per group (a batch and key/value head): K and V are loaded whole, 128 keys
 * on the partitions per tile (one DMA each), and K turned round on TensorE
 * into K^T [d, S], the score matmul's moving operand.  Per query tile (up to
 * 128 rows of one head on the partitions): q turned round into q^T [d, rows]
 * (stationary).  Per block of up to 512 keys (one PSUM bank of fp32):
 *   TensorE  s = q k^T                           -> PSUM [rows, keys]
 *   ScalarE  x = scale * s  (masked blocks only: the mask needs SBUF)
 *   GpSimd   x += mask / x = mask ? x : -inf / causal affine_select
 *   VectorE  -m_new = min(-m_old, -scale * max(s))
 *   ScalarE  p = exp(scale * s - m_new) (v's dtype), row sums; exp(m_old - m_new)
 *   TensorE  p^T per 128 keys (VectorE copies it out of PSUM), o_blk = p @ v
 *   GpSimd   o = o * exp(m_old - m_new), l likewise;  VectorE  o += o_blk
 * and at a tile's end out = o / l, stored by GpSimd's DMA queue.  A fully
 * masked row gives zeros, as PyTorch's SDPA (_safe_softmax).  Blocks above
 * a causal diagonal are skipped.  Emission is skewed by one block (block
 * i's scores and softmax are issued before block i-1's P @ V), with two
 * slots for every per-block buffer, so TensorE, VectorE and ScalarE work on
 * neighbouring blocks at once; K / V of up to four groups sit in SBUF, the
 * group nreg ahead loading into the
 * other region as soon as the group before has been consumed.
 */
#include "programs.h"
#include "pipeline.h"

#include <float.h>
#include <math.h>
#include <string.h>

#define P 128u
#define SB 512u            /* keys per block: one 2 KiB PSUM bank of fp32 */
#define BANK 2048u
#define TR_BANK0 4u        /* PSUM banks 4..7 hold transposes */
#define TR_SLOT 512u       /* bytes per partition of one transpose slot */
#define TR_SLOTS (4u * BANK / TR_SLOT)
#define PT_SLOTS 8u        /* SBUF p^T tiles */
#define MAX_BLOCKS (1u << 20)
#define MAX_REGIONS 4u    /* groups whose K / V are in SBUF at once */

/* the hand-offs, each a semaphore the tile pipeline gives out; q's loads
 * are the pipeline's loads, a tile's normalization its "computed" and the
 * output tiles its stores (GpSimd, queue 2) */
typedef struct sems {
	uint32_t lkv;   /* K / V loads landed (GpSimd, queue 0) */
	uint32_t lm;    /* mask loads landed (Sync, queue 1) */
	uint32_t tr;    /* TensorE transposes */
	uint32_t tc;    /* VectorE copies of transposes out of PSUM */
	uint32_t tca;   /* ScalarE copies of transposes out of PSUM */
	uint32_t qk;    /* score matmuls, one per block */
	uint32_t xs;    /* scaled scores in SBUF (ScalarE), one per masked block */
	uint32_t xm;    /* masked scores (GpSimd), one per masked block */
	uint32_t st;    /* block statistics (VectorE) */
	uint32_t exp;   /* exponentials (ScalarE), one per block */
	uint32_t pv;    /* P @ V matmuls, one per 128 keys */
	uint32_t rs;    /* accumulators rescaled (GpSimd), one per block but a tile's first */
	uint32_t upd;   /* accumulator updates (VectorE), one per block */
} sems;

/* one block of keys against one query tile */
typedef struct blk {
	uint64_t b, h, g, l0, j0;   /* batch, head, group, first query row, first key */
	uint32_t rows, n;           /* query rows, keys */
	uint32_t tile;              /* query tile number */
	bool first, last;           /* of its tile */
	bool masked;                /* goes through SBUF (a mask or the causal diagonal) */
	bool diag;                  /* crosses the causal diagonal */
	uint32_t i;                 /* block number */
	uint32_t slots[SB / P];     /* its p^T tiles' SBUF slots */
	/* semaphore counts once the block's steps are done */
	uint32_t qk, xs, xm, st, exp, tr, tc, tca, pv, upd;
	uint32_t bank_sem, bank_free;   /* the score bank's last reader */
} blk;

typedef struct ag {
	nk_pipe pipe;               /* program, first error, q loads, output stores */
	sems sem;
	const nk_attention *at;
	int dt, tq, tk, tv, tm, to;
	unsigned esz;
	uint32_t nkt;               /* 128-key tiles per group */
	uint32_t qrows;             /* query rows per tile */
	/* SBUF byte offsets per partition */
	uint64_t kst[MAX_REGIONS], v[MAX_REGIONS], kt[MAX_REGIONS];   /* K rows, V rows, K^T */
	uint64_t q[2], qt[2], o[2], ot[2], l[2];                      /* per query tile slot */
	uint64_t x[2], mk[2], pp[2], stat[3], pt, ninf;               /* per block slot */
	/* per K / V region: whether a group used it, when its data landed / was read */
	uint32_t nreg;
	uint32_t kv_ready[MAX_REGIONS], kt_ready[MAX_REGIONS], k_read[MAX_REGIONS], v_read[MAX_REGIONS],
		kt_read[MAX_REGIONS];
	bool kv_used[MAX_REGIONS];
	uint64_t kv_loaded;         /* groups whose load was issued */
	/* per query tile slot */
	uint32_t q_read[2], qt_ready[2], qt_read[2], store_done[2];
	uint32_t trans;             /* transposes issued (PSUM slot = trans % TR_SLOTS) */
	uint8_t tr_sem[TR_SLOTS];   /* per PSUM slot: the copy that read it last */
	uint32_t tr_cnt[TR_SLOTS];
	uint32_t pt_uses, pt_free[PT_SLOTS];
	blk ring[4];                /* the blocks in flight (block number % 4) */
} ag;

static uint32_t umin32(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }
static isa_ap f32(uint32_t rows, uint64_t off, uint32_t n) { return isa_ap_sbuf(ISA_DT_fp32, 0, rows, off, n); }
/* block j (NULL before the first): its record while in the ring */
static blk *block(ag *g, int64_t j) { return j < 0 ? NULL : &g->ring[j % 4]; }
/* statistic k ([rows, 1] fp32) of slot s (block number % 3): 0 -max(s), 1 -m_new, 2 row sum, 3 correction */
static isa_ap stat(const ag *g, unsigned s, uint32_t rows, unsigned k) { return f32(rows, g->stat[s] + 4u * k, 1); }

/* TensorE turns src [rows, cols] (SBUF, cols <= 128) round into a PSUM slot
 * once `ready` allows; `engine` (VectorE or ScalarE) copies it to dst
 * [cols, rows] (SBUF) and counts the copy on its own semaphore. */
static void transpose(ag *g, isa_ap dst, isa_ap src, unsigned ready_sem, uint32_t ready, int engine)
{
	nk_em *e = &g->pipe.em;
	uint32_t slot = g->trans % TR_SLOTS;
	unsigned sem = engine == ISA_ENGINE_SCALAR ? g->sem.tca : g->sem.tc;
	if (g->trans >= TR_SLOTS)   /* the slot's previous transpose was copied out */
		nk_em_wait(e, ISA_ENGINE_TENSOR, g->tr_sem[slot], g->tr_cnt[slot]);
	nk_em_wait(e, ISA_ENGINE_TENSOR, ready_sem, ready);
	isa_ap ps = isa_ap_psum(g->dt, 0, dst.nparts, TR_BANK0 * BANK + slot * TR_SLOT, src.nparts);
	isa_instr in = isa_instr_init(ISA_OP_nc_transpose);
	in.ap[ISA_AP_DST] = ps;
	in.ap[ISA_AP_SRC] = src;
	in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
	nk_em_emit(e, ISA_ENGINE_TENSOR, &in);
	nk_em_signal(e, ISA_ENGINE_TENSOR, g->sem.tr);
	g->trans++;
	nk_em_wait(e, engine, g->sem.tr, e->cnt[g->sem.tr]);
	nk_em_copy(e, engine, dst, ps);
	nk_em_signal(e, engine, sem);
	g->tr_sem[slot] = (uint8_t)sem;
	g->tr_cnt[slot] = e->cnt[sem];
}

/* GpSimd issues group grp's K and V loads into region grp % nreg (128 keys
 * per partition tile), once the group nreg back stopped reading it; the
 * loads of the queries and masks go from Sync, so they never queue behind
 * a wait this far ahead */
static void load_kv(ag *g, uint64_t grp)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	unsigned r = (unsigned)(grp % g->nreg);
	uint64_t b = grp / at->kv_heads, kh = grp % at->kv_heads;
	if (g->kv_used[r]) {
		nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.tr, g->k_read[r]);
		nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.pv, g->v_read[r]);
	}
	uint32_t full = (uint32_t)(at->s / P), rem = (uint32_t)(at->s % P);
	for (int which = 0; which < 2; which++) {
		const int64_t *sd = which ? at->v_stride : at->k_stride;
		uint64_t base = b * (uint64_t)sd[0] + kh * (uint64_t)sd[1];
		uint64_t dst = which ? g->v[r] : g->kst[r];
		int tensor = which ? g->tv : g->tk;
		if (full) {
			int32_t str[2] = { (int32_t)(P * sd[2]), 1 };
			uint32_t sz[2] = { full, (uint32_t)at->d };
			isa_ap h = isa_ap_dims(isa_ap_hbm(g->dt, (uint32_t)tensor, base * g->esz, P, sd[2], 1), 2, str, sz);
			uint32_t d = nk_em_dma(e, isa_ap_sbuf(g->dt, 0, P, dst, full * (uint32_t)at->d), h);
			nk_em_dma_start(e, ISA_ENGINE_GPSIMD, d, 0, g->sem.lkv);
		}
		if (rem) {
			isa_ap h = isa_ap_hbm(g->dt, (uint32_t)tensor, (base + (uint64_t)full * P * sd[2]) * g->esz, rem,
					      sd[2], (uint32_t)at->d);
			uint32_t d = nk_em_dma(e, isa_ap_sbuf(g->dt, 0, rem, dst + (uint64_t)full * at->d * g->esz,
							       (uint32_t)at->d), h);
			nk_em_dma_start(e, ISA_ENGINE_GPSIMD, d, 0, g->sem.lkv);
		}
	}
	g->kv_ready[r] = e->cnt[g->sem.lkv];
	g->kv_used[r] = true;
	g->kv_loaded = grp + 1;
}

/* group grp's K^T [d, S] into region r (TensorE transposes, VectorE copies),
 * once the score matmuls of the group nreg back are done */
static void group_start(ag *g, uint64_t grp)
{
	const nk_attention *at = g->at;
	unsigned r = (unsigned)(grp % g->nreg);
	while (g->kv_loaded <= grp)
		load_kv(g, g->kv_loaded);
	nk_em_wait(&g->pipe.em, ISA_ENGINE_VECTOR, g->sem.qk, g->kt_read[r]);
	for (uint32_t t = 0; t < g->nkt; t++) {
		uint32_t w = umin32(at->s - (uint64_t)t * P, P);
		isa_ap src = isa_ap_sbuf(g->dt, 0, w, g->kst[r] + (uint64_t)t * at->d * g->esz, (uint32_t)at->d);
		isa_ap dst = isa_ap_sbuf(g->dt, 0, (uint32_t)at->d, g->kt[r] + (uint64_t)t * P * g->esz, w);
		transpose(g, dst, src, g->sem.lkv, g->kv_ready[r], ISA_ENGINE_VECTOR);
	}
	g->k_read[r] = g->pipe.em.cnt[g->sem.tr];
	g->kt_ready[r] = g->pipe.em.cnt[g->sem.tc];
}

/* a query tile: q rows into slot u, turned round into q^T */
static void tile_start(ag *g, const blk *k)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	unsigned u = k->tile % 2;
	uint64_t off = k->b * (uint64_t)at->q_stride[0] + k->h * (uint64_t)at->q_stride[1] +
		       k->l0 * (uint64_t)at->q_stride[2];
	nk_em_wait(e, ISA_ENGINE_SYNC, g->sem.tr, g->q_read[u]);
	nk_pipe_load(&g->pipe, isa_ap_sbuf(g->dt, 0, k->rows, g->q[u], (uint32_t)at->d),
		     isa_ap_hbm(g->dt, (uint32_t)g->tq, off * g->esz, k->rows, at->q_stride[2], (uint32_t)at->d), 1);
	nk_em_wait(e, ISA_ENGINE_VECTOR, g->sem.qk, g->qt_read[u]);
	transpose(g, isa_ap_sbuf(g->dt, 0, (uint32_t)at->d, g->qt[u], k->rows),
		  isa_ap_sbuf(g->dt, 0, k->rows, g->q[u], (uint32_t)at->d), g->pipe.sem_loaded, g->pipe.loads,
		  ISA_ENGINE_VECTOR);
	g->q_read[u] = e->cnt[g->sem.tr];
	g->qt_ready[u] = e->cnt[g->sem.tc];
}

/* a masked block: ScalarE writes x = scale * s (PSUM to SBUF: the mask
 * needs SBUF), GpSimd applies the mask and the causal diagonal to it */
static void mask_block(ag *g, blk *k, isa_ap ps, isa_ap x)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	unsigned s = k->i % 2;
	const blk *old = block(g, (int64_t)k->i - 2);
	float sc = at->scale;
	nk_em_wait(e, ISA_ENGINE_SCALAR, g->sem.qk, k->qk);
	nk_em_act(e, x, ps, ISA_ACT_identity, sc, NULL, NULL);
	nk_em_signal(e, ISA_ENGINE_SCALAR, g->sem.xs);
	k->xs = e->cnt[g->sem.xs];
	k->bank_sem = g->sem.xs;
	k->bank_free = k->xs;
	nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.xs, k->xs);
	if (at->mask_dtype) {
		uint64_t moff = k->b * (uint64_t)at->mask_stride[0] + k->h * (uint64_t)at->mask_stride[1] +
				k->l0 * (uint64_t)at->mask_stride[2] + k->j0;
		bool bl = at->mask_dtype == ISA_DT_bool;
		isa_ap m = isa_ap_sbuf(bl ? ISA_DT_bool : ISA_DT_fp32, 0, k->rows, g->mk[s], k->n);
		if (old)   /* the slot's previous mask was applied */
			nk_em_wait(e, ISA_ENGINE_SYNC, g->sem.xm, old->xm);
		uint32_t d = nk_em_dma(e, m, isa_ap_hbm(at->mask_dtype, (uint32_t)g->tm,
							  moff * isa_dtype_size(at->mask_dtype), k->rows,
							  at->mask_stride[2], k->n));
		nk_em_dma_start(e, ISA_ENGINE_SYNC, d, 1, g->sem.lm);
		nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.lm, e->cnt[g->sem.lm]);
		if (bl) {
			int32_t z[1] = { 0 };
			uint32_t nn[1] = { k->n };
			isa_ap ninf = isa_ap_dims(f32(k->rows, g->ninf, 1), 1, z, nn);
			nk_em_select(e, ISA_ENGINE_GPSIMD, x, m, x, ninf);
		} else {
			nk_em_tt(e, ISA_ENGINE_GPSIMD, x, x, m, ISA_ALU_add);
		}
	}
	if (k->diag) {   /* keep key j0 + j where (l0 + p) - (j0 + j) >= 0 */
		isa_instr in = isa_instr_init(ISA_OP_affine_select);
		in.ap[ISA_AP_DST] = x;
		in.ap[ISA_AP_SRC] = x;
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
		in.e[0] = ISA_ALU_is_ge;
		in.imm[0] = isa_imm_i32((int32_t)((int64_t)k->l0 - (int64_t)k->j0));
		in.imm[1] = isa_imm_i32(1);
		in.imm[2] = isa_imm_f32(-INFINITY);
		in.nivec = 1;
		in.ivec[0] = -1;
		nk_em_emit(e, ISA_ENGINE_GPSIMD, &in);
	}
	nk_em_signal(e, ISA_ENGINE_GPSIMD, g->sem.xm);
	k->xm = e->cnt[g->sem.xm];
}

/* block i: scores, mask, statistics, exponentials */
static void scores(ag *g, blk *k)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	uint32_t i = k->i;
	unsigned s = i % 2, s3 = i % 3, u = k->tile % 2, r = (unsigned)(k->g % g->nreg);
	const blk *old = block(g, (int64_t)i - 2);    /* the block whose bank, x, mask, p these were */
	const blk *old3 = block(g, (int64_t)i - 3);   /* and whose statistics */
	float sc = at->scale;
	/* TensorE: s = q k^T into bank s, once its previous reader is done */
	isa_ap ps = isa_ap_psum(ISA_DT_fp32, 0, k->rows, (uint64_t)s * BANK, k->n);
	uint32_t tc_ready = g->qt_ready[u] > g->kt_ready[r] ? g->qt_ready[u] : g->kt_ready[r];
	nk_em_wait(e, ISA_ENGINE_TENSOR, g->sem.tc, tc_ready);
	if (old)
		nk_em_wait(e, ISA_ENGINE_TENSOR, old->bank_sem, old->bank_free);
	if (!e->st)
		e->st = isa_builder_load_stationary(e->p, isa_ap_sbuf(g->dt, 0, (uint32_t)at->d, g->qt[u], k->rows),
						    ISA_PERF_NONE);
	if (!e->st)
		e->st = isa_builder_multiply_moving(e->p, ps,
						    isa_ap_sbuf(g->dt, 0, (uint32_t)at->d,
								g->kt[r] + k->j0 * g->esz, k->n),
						    false, ISA_PERF_NONE);
	nk_em_signal(e, ISA_ENGINE_TENSOR, g->sem.qk);
	k->qk = e->cnt[g->sem.qk];
	g->qt_read[u] = g->kt_read[r] = k->qk;

	isa_ap src = ps, x = f32(k->rows, g->x[s], k->n);
	float src_scale = sc;
	if (k->masked) {
		mask_block(g, k, ps, x);
		src = x;
		src_scale = 1.0f;
	}

	/* VectorE: -m_new = min(-m_old, -max(src_scale * src)), and the step */
	isa_ap nbm = stat(g, s3, k->rows, 0), nm = stat(g, s3, k->rows, 1);
	isa_ap nm_old = stat(g, (i + 2) % 3, k->rows, 1);
	nk_em_wait(e, ISA_ENGINE_VECTOR, k->masked ? g->sem.xm : g->sem.qk, k->masked ? k->xm : k->qk);
	if (old3)   /* the slot's statistics were used by its exponentials */
		nk_em_wait(e, ISA_ENGINE_VECTOR, g->sem.exp, old3->exp);
	nk_em_reduce(e, ISA_ENGINE_VECTOR, nbm, src, ISA_ALU_max, true);
	if (k->first) {
		nk_em_ts(e, ISA_ENGINE_VECTOR, nm, nbm, ISA_ALU_multiply, src_scale, NULL, ISA_ALU_min, FLT_MAX, NULL);
	} else {
		nk_em_ts(e, ISA_ENGINE_VECTOR, nm, nbm, ISA_ALU_multiply, src_scale, NULL, ISA_ALU_min, 0, &nm_old);
	}
	nk_em_signal(e, ISA_ENGINE_VECTOR, g->sem.st);
	k->st = e->cnt[g->sem.st];

	/* ScalarE: p = exp(src_scale * src - m_new) with its row sums; the correction */
	isa_ap p = isa_ap_sbuf(g->dt, 0, k->rows, g->pp[s], k->n);
	isa_ap rs = stat(g, s3, k->rows, 2), corr = stat(g, s3, k->rows, 3);
	nk_em_wait(e, ISA_ENGINE_SCALAR, g->sem.st, k->st);
	if (old)    /* p's slot was turned round */
		nk_em_wait(e, ISA_ENGINE_SCALAR, g->sem.tr, old->tr);
	if (old3)   /* the row sums and correction were used */
		nk_em_wait(e, ISA_ENGINE_SCALAR, g->sem.upd, old3->upd);
	nk_em_act(e, p, src, ISA_ACT_exp, src_scale, &nm, &rs);
	if (!k->first)   /* exp(m_old - m_new) = exp(-1 * -m_old + -m_new) */
		nk_em_act(e, corr, nm_old, ISA_ACT_exp, -1.0f, &nm, NULL);
	nk_em_signal(e, ISA_ENGINE_SCALAR, g->sem.exp);
	k->exp = e->cnt[g->sem.exp];
	if (!k->masked) {
		k->bank_sem = g->sem.exp;
		k->bank_free = k->exp;
	}
}

/* block k's p turned round, 128 keys at a time (the copies alternate
 * between VectorE and ScalarE, which balances them: VectorE also reduces
 * and updates, ScalarE exponentiates) */
static void transposes(ag *g, blk *k)
{
	nk_em *e = &g->pipe.em;
	unsigned s = k->i % 2;
	uint32_t nt = (k->n + P - 1) / P;
	for (uint32_t t = 0; t < nt; t++) {
		uint32_t w = umin32(k->n - t * P, P), slot = g->pt_uses++ % PT_SLOTS;
		int eng = t % 2 ? ISA_ENGINE_SCALAR : ISA_ENGINE_VECTOR;
		isa_ap dst = isa_ap_sbuf(g->dt, 0, w, g->pt + (uint64_t)slot * P * g->esz, k->rows);
		nk_em_wait(e, eng, g->sem.pv, g->pt_free[slot]);
		transpose(g, dst, isa_ap_sbuf(g->dt, 0, k->rows, g->pp[s] + (uint64_t)t * P * g->esz, w), g->sem.exp, k->exp,
			  eng);
		k->slots[t] = slot;
	}
	k->tr = e->cnt[g->sem.tr];
	k->tc = e->cnt[g->sem.tc];
	k->tca = e->cnt[g->sem.tca];
}

/* block k: o_blk = p @ v, the accumulator update, and at the tile's end the
 * normalized output stored */
static void accumulate(ag *g, blk *k)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	unsigned s = k->i % 2, s3 = k->i % 3, u = k->tile % 2, r = (unsigned)(k->g % g->nreg);
	const blk *old = block(g, (int64_t)k->i - 2);
	uint32_t nt = (k->n + P - 1) / P;
	/* TensorE: o_blk into bank 2 + s, once the block two back's update read it */
	isa_ap pv = isa_ap_psum(ISA_DT_fp32, 0, k->rows, (uint64_t)(2 + s) * BANK, (uint32_t)at->d);
	nk_em_wait(e, ISA_ENGINE_TENSOR, g->sem.tc, k->tc);
	nk_em_wait(e, ISA_ENGINE_TENSOR, g->sem.tca, k->tca);
	if (old)
		nk_em_wait(e, ISA_ENGINE_TENSOR, g->sem.upd, old->upd);
	for (uint32_t t = 0; t < nt; t++) {
		uint32_t w = umin32(k->n - t * P, P);
		uint64_t key_tile = k->j0 / P + t;
		if (!e->st)
			e->st = isa_builder_load_stationary(
				e->p, isa_ap_sbuf(g->dt, 0, w, g->pt + (uint64_t)k->slots[t] * P * g->esz, k->rows),
				ISA_PERF_NONE);
		if (!e->st)
			e->st = isa_builder_multiply_moving(
				e->p, pv, isa_ap_sbuf(g->dt, 0, w, g->v[r] + key_tile * at->d * g->esz, (uint32_t)at->d),
				t > 0, ISA_PERF_NONE);
		nk_em_signal(e, ISA_ENGINE_TENSOR, g->sem.pv);
		g->pt_free[k->slots[t]] = e->cnt[g->sem.pv];
	}
	k->pv = e->cnt[g->sem.pv];
	g->v_read[r] = k->pv;

	/* o = o * corr + o_blk, l = l * corr + row sum: GpSimd (otherwise
	 * idle; VectorE is the busiest engine) rescales in SBUF once the
	 * previous update and the correction are in, VectorE adds o_blk from
	 * PSUM (GpSimd cannot reach PSUM) */
	isa_ap o = f32(k->rows, g->o[u], (uint32_t)at->d), l = f32(k->rows, g->l[u], 1);
	isa_ap rs = stat(g, s3, k->rows, 2), corr = stat(g, s3, k->rows, 3);
	if (!k->first) {
		nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.upd, e->cnt[g->sem.upd]);
		nk_em_wait(e, ISA_ENGINE_GPSIMD, g->sem.exp, k->exp);
		nk_em_ts(e, ISA_ENGINE_GPSIMD, o, o, ISA_ALU_multiply, 0, &corr, ISA_ALU_bypass, 0, NULL);
		nk_em_ts(e, ISA_ENGINE_GPSIMD, l, l, ISA_ALU_multiply, 0, &corr, ISA_ALU_add, 0, &rs);
		nk_em_signal(e, ISA_ENGINE_GPSIMD, g->sem.rs);
		nk_em_wait(e, ISA_ENGINE_VECTOR, g->sem.rs, e->cnt[g->sem.rs]);
	}
	nk_em_wait(e, ISA_ENGINE_VECTOR, g->sem.pv, k->pv);
	if (k->first) {
		nk_em_copy(e, ISA_ENGINE_VECTOR, o, pv);
		nk_em_copy(e, ISA_ENGINE_VECTOR, l, rs);
	} else {
		nk_em_tt(e, ISA_ENGINE_VECTOR, o, o, pv, ISA_ALU_add);
	}
	nk_em_signal(e, ISA_ENGINE_VECTOR, g->sem.upd);
	k->upd = e->cnt[g->sem.upd];
	if (!k->last)
		return;
	/* out = o / max(l, tiny): a row with nothing to attend to gives zeros */
	isa_ap ot = isa_ap_sbuf(g->dt, 0, k->rows, g->ot[u], (uint32_t)at->d);
	nk_em_ts(e, ISA_ENGINE_VECTOR, l, l, ISA_ALU_max, FLT_MIN, NULL, ISA_ALU_bypass, 0, NULL);
	nk_em_wait(e, ISA_ENGINE_VECTOR, g->pipe.sem_stored, g->store_done[u]);
	nk_em_ts(e, ISA_ENGINE_VECTOR, ot, o, ISA_ALU_divide, 0, &l, ISA_ALU_bypass, 0, NULL);
	nk_pipe_computed(&g->pipe, ISA_ENGINE_VECTOR);
	uint64_t off = ((k->b * at->heads + k->h) * at->l + k->l0) * at->d;
	nk_pipe_store(&g->pipe, isa_ap_hbm(g->dt, (uint32_t)g->to, off * g->esz, k->rows, (int64_t)at->d,
					   (uint32_t)at->d), ot, 2);
	g->store_done[u] = g->pipe.stores;
}

/* the blocks in order: groups, their heads, query tiles, key blocks */
typedef struct walk {
	uint64_t g, hr, l0, j0;
	uint32_t tile;
} walk;

/* the block at w (false past the end); w advances */
static bool next_block(const ag *g, walk *w, blk *k)
{
	const nk_attention *at = g->at;
	uint64_t rep = at->heads / at->kv_heads;
	for (;;) {
		if (w->g >= at->batch * at->kv_heads)
			return false;
		uint32_t rows = umin32(at->l - w->l0, g->qrows);
		uint64_t last_row = w->l0 + rows - 1;
		bool above = at->causal && w->j0 > last_row;   /* every key hidden */
		if (w->j0 < at->s && !above) {
			/* causal: blocks of up to SB keys below the tile's first row
			 * (every key visible), then the diagonal block of the tile's
			 * own rows (128-aligned, as l0 is) */
			uint64_t n = at->s - w->j0 < SB ? at->s - w->j0 : SB;
			if (at->causal && w->j0 < w->l0 && w->l0 - w->j0 < n)
				n = w->l0 - w->j0;
			else if (at->causal && w->j0 >= w->l0 && last_row + 1 - w->j0 < n)
				n = last_row + 1 - w->j0;
			memset(k, 0, sizeof(*k));
			k->g = w->g;
			k->b = w->g / at->kv_heads;
			k->h = (w->g % at->kv_heads) * rep + w->hr;
			k->l0 = w->l0;
			k->j0 = w->j0;
			k->rows = rows;
			k->n = (uint32_t)n;
			k->tile = w->tile;
			k->first = w->j0 == 0;
			k->diag = at->causal && w->j0 + k->n - 1 > w->l0;
			k->masked = k->diag || at->mask_dtype;
			uint64_t nj = w->j0 + n;
			k->last = nj >= at->s || (at->causal && nj > last_row);
			w->j0 = nj;
			return true;
		}
		/* the next tile, head, group */
		w->j0 = 0;
		w->tile++;
		w->l0 += g->qrows;
		if (w->l0 >= at->l) {
			w->l0 = 0;
			if (++w->hr >= rep) {
				w->hr = 0;
				w->g++;
			}
		}
	}
}

/* block j was accumulated: when it ends its group, the group nreg ahead
 * may load K / V into its region (blocks up to nblocks - 1 exist; any
 * number while nblocks < 0) */
static void retire(ag *g, int64_t j, int64_t nblocks)
{
	const blk *d = block(g, j);
	uint64_t groups = g->at->batch * g->at->kv_heads;
	bool next = nblocks < 0 || j + 1 < nblocks;
	if (next && block(g, j + 1)->g == d->g)
		return;
	if (d->g + g->nreg < groups && g->kv_loaded <= d->g + g->nreg)
		load_kv(g, d->g + g->nreg);
}

static void emit(ag *g)
{
	const nk_attention *at = g->at;
	nk_em *e = &g->pipe.em;
	uint64_t groups = at->batch * at->kv_heads;
	/* -inf for the bool mask's hidden keys */
	if (!e->st)
		e->st = isa_builder_memset(e->p, ISA_ENGINE_GPSIMD, f32(P, g->ninf, 1), isa_imm_f32(-INFINITY));
	for (uint64_t grp = 0; grp < groups && grp < g->nreg; grp++)
		load_kv(g, grp);
	walk w = { 0, 0, 0, 0, 0 };
	int64_t cur_group = -1, cur_tile = -1, nblocks = -1;
	/* iteration i: block i's scores and softmax, block i-1's transposes,
	 * block i-2's P @ V and update -- each engine's stream then holds
	 * work of three neighbouring blocks and no step waits on the one
	 * issued just before it on another engine */
	for (int64_t i = 0; !e->st; i++) {
		blk *k = NULL;
		bool accumulated = false;
		if (nblocks < 0) {
			if (i >= MAX_BLOCKS) {
				e->st = ISA_E_LIMIT;
				nk_fail(e->diag, ISA_E_LIMIT, "attention kernel: more than %u blocks", MAX_BLOCKS);
				break;
			}
			k = block(g, i);
			if (!next_block(g, &w, k)) {
				nblocks = i;
				k = NULL;
			} else {
				k->i = (uint32_t)i;
			}
		}
		if (nblocks >= 0 && i >= nblocks + 2)
			break;
		/* a new group's K / V may go where the group nreg back was (with
		 * two regions, that group's last P @ V is block i - 2's): it first */
		if (k && (int64_t)k->g != cur_group && g->kv_loaded <= k->g && i >= 2) {
			accumulate(g, block(g, i - 2));
			accumulated = true;
			retire(g, i - 2, nblocks);
		}
		if (k) {
			if ((int64_t)k->g != cur_group) {
				group_start(g, k->g);
				cur_group = (int64_t)k->g;
			}
			if ((int64_t)k->tile != cur_tile) {
				tile_start(g, k);
				cur_tile = k->tile;
			}
			scores(g, k);
		}
		if (i >= 1 && (nblocks < 0 || i - 1 < nblocks))
			transposes(g, block(g, i - 1));
		if (i >= 2 && !accumulated) {
			accumulate(g, block(g, i - 2));
			retire(g, i - 2, nblocks);
		}
	}
}

/* a row of d elements in SBUF rounded up to 4 bytes: the fp32 regions after
 * a bf16 / fp16 row of odd d stay fp32-aligned */
static uint64_t row4(const ag *g)
{
	return ((uint64_t)g->at->d * g->esz + 3) & ~(uint64_t)3;
}

/* SBUF plan (bytes per partition); false when it does not fit */
static bool plan(ag *g, uint64_t sbuf)
{
	const nk_attention *at = g->at;
	uint64_t kv = (uint64_t)g->nkt * at->d * g->esz, region = 2 * kv + (uint64_t)g->nkt * P * g->esz, o = 0;
	region = (region + 3) & ~(uint64_t)3;
	/* the rest first; K / V regions, 2 to MAX_REGIONS, in what is left */
	uint64_t rest = 2 * (row4(g) + P * g->esz + SB * 8 + SB * g->esz + at->d * 4 + row4(g) + 16) +
			3 * 32 + PT_SLOTS * P * g->esz + 16;
	if (rest + 2 * region > sbuf)
		return false;
	g->nreg = (uint32_t)((sbuf - rest) / region);
	g->nreg = g->nreg > MAX_REGIONS ? MAX_REGIONS : g->nreg;
	for (uint32_t r = 0; r < g->nreg; r++) {
		g->kst[r] = o;
		g->v[r] = o + kv;
		g->kt[r] = o + 2 * kv;
		o += region;
	}
	for (int s = 0; s < 2; s++) {
		g->q[s] = o;
		g->qt[s] = o + row4(g);
		g->x[s] = g->qt[s] + P * g->esz;
		g->mk[s] = g->x[s] + SB * 4;
		g->pp[s] = g->mk[s] + SB * 4;
		g->o[s] = g->pp[s] + SB * g->esz;
		g->ot[s] = g->o[s] + at->d * 4;
		g->l[s] = g->ot[s] + row4(g);
		o = g->l[s] + 16;
	}
	for (int s = 0; s < 3; s++, o += 32)
		g->stat[s] = o;
	g->pt = o;
	g->ninf = o + PT_SLOTS * P * g->esz;
	return g->ninf + 16 <= sbuf;
}

static bool strides_ok(const int64_t s[3]) { return s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && s[2] <= INT32_MAX / P; }

/* the limits the generator takes, and g's plan; a status with diag filled */
static isa_status check(int target, const nk_attention *at, ag *g, isa_diag *diag)
{
	const isa_target_info *ti = isa_target_get(target);
	memset(g, 0, sizeof(*g));
	g->at = at;
	g->dt = at->dtype;
	g->esz = isa_dtype_size(at->dtype);
	if (!ti || (g->dt != ISA_DT_fp32 && g->dt != ISA_DT_bf16 && g->dt != ISA_DT_fp16) ||
	    (at->mask_dtype && at->mask_dtype != ISA_DT_bool && at->mask_dtype != ISA_DT_fp32 &&
	     at->mask_dtype != ISA_DT_bf16 && at->mask_dtype != ISA_DT_fp16)) {
		nk_fail(diag, ISA_E_BAD_DTYPE, "attention kernel: dtype %s, mask %s", isa_dtype_name(g->dt),
			at->mask_dtype ? isa_dtype_name(at->mask_dtype) : "none");
		return ISA_E_BAD_DTYPE;
	}
	if (!at->batch || !at->heads || !at->kv_heads || at->heads % at->kv_heads || !at->l || !at->s || !at->d ||
	    at->d > P || at->l > INT32_MAX || at->s > (1u << 20) || at->batch * at->heads > (1u << 20) ||
	    !strides_ok(at->q_stride) || !strides_ok(at->k_stride) || !strides_ok(at->v_stride) ||
	    (at->mask_dtype && !strides_ok(at->mask_stride)) || !(at->scale > 0.0f) || !isfinite(at->scale)) {
		nk_fail(diag, ISA_E_LIMIT, "attention kernel: unsupported shape, strides or scale");
		return ISA_E_LIMIT;
	}
	g->nkt = (uint32_t)((at->s + P - 1) / P);
	g->qrows = P;
	if (!plan(g, ti->sbuf_partition_bytes - 4096)) {
		nk_fail(diag, ISA_E_LIMIT, "attention kernel: %llu keys of %llu elements do not fit in SBUF",
			(unsigned long long)at->s, (unsigned long long)at->d);
		return ISA_E_LIMIT;
	}
	return ISA_OK;
}

bool nk_attention_covered(int target, const nk_attention *at)
{
	ag g;
	isa_diag d;
	return check(target, at, &g, &d) == ISA_OK;
}

isa_status nk_attention_program(int target, const nk_attention *at, uint8_t **bin, size_t *len,
				isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	ag g;
	isa_status st = check(target, at, &g, diag);
	if (st)
		return st;
	if (!nk_pipe_init(&g.pipe, target, 1, 0, diag))
		return nk_pipe_finish(&g.pipe, bin, len);
	uint32_t *sem = &g.sem.lkv;   /* every field of sems, in order */
	for (size_t i = 0; i < sizeof(g.sem) / sizeof(*sem); i++)
		sem[i] = nk_pipe_sem(&g.pipe);
	g.tq = nk_pipe_tensor(&g.pipe, "q", g.dt, ISA_TK_INPUT, at->q_elems);
	g.tk = nk_pipe_tensor(&g.pipe, "k", g.dt, ISA_TK_INPUT, at->k_elems);
	g.tv = nk_pipe_tensor(&g.pipe, "v", g.dt, ISA_TK_INPUT, at->v_elems);
	g.tm = at->mask_dtype ? nk_pipe_tensor(&g.pipe, "mask", at->mask_dtype, ISA_TK_INPUT, at->mask_elems) : 0;
	uint64_t so[4] = { at->batch, at->heads, at->l, at->d };
	g.to = g.pipe.em.st ? -1 : isa_builder_tensor(g.pipe.em.p, "out", g.dt, ISA_TK_OUTPUT, 4, so, diag);
	if (g.to < 0)
		nk_pipe_check(&g.pipe, diag->code ? diag->code : ISA_E_LIMIT);
	if (!g.pipe.em.st)
		emit(&g);
	return nk_pipe_finish(&g.pipe, bin, len);
}
