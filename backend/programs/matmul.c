/*
 * matmul.c -- kernel generator: out[b] = a[b] @ b[b] (+ bias) on TensorE,
 * for mm, bmm, addmm, linear and matmul.
 *
 * TensorE multiplies a stationary [K, M] by a moving [K, N] tile, both with
 * the contraction dim K on the partitions, into fp32 PSUM [M, N].  A
 * row-major a[M, K] (and a linear weight b = W^T, W [N, K]) has K along the
 * free dim, so its tiles are loaded as rows and turned round on TensorE
 * (nc_transpose into PSUM, VectorE copies back to SBUF), as NKI kernels do;
 * operands already K-major are loaded directly.
 *
 * Loop nest (per batch): m in super-tiles of up to 8 x 128 rows whose
 * transposed a (a^T, [K, 128] per m-tile) stays in SBUF; n in blocks of up
 * to 512 columns, the block of b for all K double-buffered so the loads of
 * block j+1 overlap the matmuls of block j; per m-tile an accumulation over
 * K into one PSUM bank (6 banks rotate, 2 hold transposes), evacuated by
 * VectorE (cast, + bias) and stored by GpSimd's DMA queue.  With an
 * activation epilogue (the graph compiler's linear + gelu / silu / relu ...),
 * VectorE adds the bias in PSUM and ScalarE evacuates func(PSUM): the
 * activation costs no HBM round trip and no program of its own.  With a
 * residual epilogue (out = a @ b (+ bias) + res, a transformer's o_proj and
 * down_proj), GpSimd loads res's tile into SBUF and VectorE adds it as it
 * evacuates PSUM.  b is re-read once
 * per super-tile, a once.  Engines: Sync issues loads, TensorE transposes and
 * multiplies, VectorE copies out of PSUM, GpSimd issues stores.
 *
 * The tile pipeline (pipeline.h) holds the program, its semaphores and the
 * finish path: a's loads are its loads, an evacuation its "computed" and
 * the result tiles its stores; b's loads, the transposes, their copies, the
 * products, the bias and residual hand-offs each count on a semaphore it
 * gives out.
 */
#include "programs.h"
#include "pipeline.h"

#include <stdlib.h>
#include <string.h>

#define P 128u
#define NB_MAX 512u       /* one 2 KiB PSUM bank of fp32 */
#define CHUNK 512u        /* columns per transposing load: 1-2 KiB per partition */
#define MS_MAX 8u
#define NSTAGE_MAX 16u  /* a's loads run a whole n block of pieces ahead */
#define BANK 2048u
#define OUT_BANKS 5u      /* PSUM banks 0..4 hold results, 5..7 transposes */
#define PSUM_BYTES 16384u
#define OUT_SLOTS 3u      /* SBUF result tiles */

/* A stream of loads issued by one engine, counted on its own semaphore (a
 * count identifies loads only when one in-order issuer produces them), with
 * its own staging buffers for transposing loads.  a's loads come from Sync,
 * b's (and the bias) from ScalarE, so neither waits behind the other. */
typedef struct lane {
	int engine;
	unsigned queue;
	uint32_t sem, loads;
	uint32_t nstage;             /* staging slots (CHUNK columns each) */
	uint32_t stage_uses;         /* transposing loads so far */
	uint32_t trans_done[NSTAGE_MAX];   /* transposes that read each stage slot */
	uint64_t stage_off;
} lane;

typedef struct gen {
	nk_pipe pp;                  /* a's loads, evacuations ("computed"), stores */
	isa_program *p;              /* pp.em.p */
	uint32_t s_trans, s_copy, s_mm, s_biased, s_rload;   /* the other hand-offs */
	const nk_matmul *mm;
	int dt, odt, ta, tb, tbias, to, tres;
	unsigned esz;
	uint64_t kt_n, kpad;         /* K tiles; K rounded up to P */
	uint32_t ms, nb;             /* m-tiles per super-tile; columns per n block */
	/* SBUF byte offsets per partition */
	uint64_t at_off[2], b_off[2], out_off, bias_off[2], res_off;
	lane lane[2];                /* a, b */
	uint32_t tr_slots;           /* transposes that fit in PSUM banks 5..7 */
	/* how many of each event were issued so far (semaphore targets) */
	uint32_t trans, copies, mms;
} gen;

static uint32_t umin32(uint64_t a, uint64_t b) { return (uint32_t)(a < b ? a : b); }

/* One DMA from HBM into SBUF issued on lane `l`. */
static isa_status load(gen *g, lane *l, isa_ap dst, isa_ap src, isa_diag *diag)
{
	int d = isa_builder_dma(g->p, "", ISA_DMA_DIRECT, &dst, &src, NULL, diag);
	if (d < 0)
		return diag->code;
	l->loads++;
	return isa_builder_dma_copy(g->p, l->engine, (uint32_t)d, l->queue, l->sem, 1);
}

/*
 * Loads rows [rows, cols] (rows <= 128, cols <= CHUNK; row r, col c at
 * element `off + r*rstride + c` of HBM tensor `t`) and writes its transpose
 * into SBUF: block j of 128 columns becomes the [<=128, rows] tile at
 * `dst + (j * dst_step)` bytes.  Used for a's K-contiguous rows and for b
 * when it is W^T (N-major).
 */
static isa_status tload(gen *g, lane *l, int t, uint64_t off, uint32_t rows, int64_t rstride,
			uint32_t cols, uint64_t dst, uint64_t dst_step, isa_diag *diag)
{
	isa_status st;
	uint32_t slot = l->stage_uses % l->nstage;
	uint64_t stage = l->stage_off + (uint64_t)slot * CHUNK * g->esz;
	/* the slot's previous contents must have been transposed */
	if (l->stage_uses >= l->nstage &&
	    (st = isa_builder_sem_wait(g->p, l->engine, g->s_trans, ISA_ALU_is_ge, l->trans_done[slot])))
		return st;
	l->stage_uses++;
	isa_ap s = isa_ap_sbuf(g->dt, 0, rows, stage, cols);
	isa_ap h = isa_ap_hbm(g->dt, (uint32_t)t, off * g->esz, rows, rstride, cols);
	if ((st = load(g, l, s, h, diag)))
		return st;
	uint32_t need = l->loads;
	for (uint32_t c = 0, j = 0; c < cols; c += P, j++) {
		uint32_t w = umin32(cols - c, P);
		uint32_t tslot = g->trans % g->tr_slots;
		/* PSUM slot free once VectorE copied the transpose tr_slots ago */
		if (g->trans >= g->tr_slots &&
		    (st = isa_builder_sem_wait(g->p, ISA_ENGINE_TENSOR, g->s_copy, ISA_ALU_is_ge,
					       g->trans - g->tr_slots + 1)))
			return st;
		if ((st = isa_builder_sem_wait(g->p, ISA_ENGINE_TENSOR, l->sem, ISA_ALU_is_ge, need)))
			return st;
		isa_ap src = isa_ap_sbuf(g->dt, 0, rows, stage + (uint64_t)c * g->esz, w);
		isa_ap ps = isa_ap_psum(g->dt, 0, w, OUT_BANKS * BANK + tslot * P * g->esz, rows);
		isa_instr in = isa_instr_init(ISA_OP_nc_transpose);
		in.ap[ISA_AP_DST] = ps;
		in.ap[ISA_AP_SRC] = src;
		in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
		if ((st = isa_builder_emit(g->p, ISA_ENGINE_TENSOR, &in, diag)) ||
		    (st = isa_builder_sem_signal(g->p, ISA_ENGINE_TENSOR, g->s_trans, ISA_SEMOP_ADD, 1)))
			return st;
		g->trans++;
		isa_ap dsb = isa_ap_sbuf(g->dt, 0, w, dst + j * dst_step, rows);
		if ((st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->s_trans, ISA_ALU_is_ge, g->trans)) ||
		    (st = isa_builder_tensor_copy(g->p, ISA_ENGINE_VECTOR, dsb, ps)) ||
		    (st = isa_builder_sem_signal(g->p, ISA_ENGINE_VECTOR, g->s_copy, ISA_SEMOP_ADD, 1)))
			return st;
		g->copies++;
	}
	l->trans_done[slot] = g->trans;
	return ISA_OK;
}

/* a super-tile: batch bi, rows ms0.., nmt m-tiles, a^T in region `reg` */
typedef struct super {
	uint64_t bi, ms0;
	uint32_t nmt, reg;
} super;

/* a's rows contiguous along K are loaded as rows and turned round; one
 * choice for the whole matrix (not per m-tile), so every m-tile of a
 * super-tile has the same number of pieces: a 1-row tail tile after full
 * ones (M = 129) is turned round like them */
static bool a_transposed_load(const gen *g)
{
	return g->mm->a_stride[1] != 1 && g->mm->m > 1;
}

/* pieces of a super-tile's a^T preparation: per m-tile, one per K chunk */
static uint32_t a_pieces(const gen *g, const super *sp)
{
	uint32_t step = a_transposed_load(g) ? CHUNK : P;
	return sp->nmt * (uint32_t)((g->mm->k + step - 1) / step);
}

/* piece `i` of a^T of super-tile sp: a[bi, m0 + mt*128.., k..] into SBUF */
static isa_status load_a(gen *g, const super *sp, uint32_t i, isa_diag *diag)
{
	const nk_matmul *mm = g->mm;
	uint32_t per_mt = a_pieces(g, sp) / sp->nmt, mt = i / per_mt;
	uint64_t m0 = sp->ms0 + (uint64_t)mt * P;
	uint32_t msz = umin32(mm->m - m0, P);
	uint64_t base = sp->bi * mm->a_stride[0] + m0 * mm->a_stride[1];
	uint64_t at = g->at_off[sp->reg] + (uint64_t)mt * g->kt_n * P * g->esz;  /* [kt][P] columns */
	if (a_transposed_load(g)) {
		uint64_t k = (uint64_t)(i % per_mt) * CHUNK;
		return tload(g, &g->lane[0], g->ta, base + k, msz, mm->a_stride[1], umin32(mm->k - k, CHUNK),
			     at + (k / P) * P * g->esz, (uint64_t)P * g->esz, diag);
	}
	/* K-major already (or one row): row k of a^T is a[m0.., k] */
	uint64_t kt = i % per_mt, k = kt * P;
	uint32_t ksz = umin32(mm->k - k, P);
	isa_ap s = isa_ap_sbuf(g->dt, 0, ksz, at + kt * P * g->esz, msz);
	isa_ap h = isa_ap_hbm(g->dt, (uint32_t)g->ta, (base + k * mm->a_stride[2]) * g->esz, ksz,
			      mm->a_stride[2], msz);
	return load(g, &g->lane[0], s, h, diag);
}

/* the [K, nsz] block of b at column n0 into buffer `buf` ([kt][nb] columns) */
static isa_status load_b(gen *g, uint64_t bi, uint64_t n0, uint32_t nsz, unsigned buf,
			 isa_diag *diag)
{
	const nk_matmul *mm = g->mm;
	uint64_t base = bi * mm->b_stride[0] + n0 * mm->b_stride[2];
	uint64_t tile_bytes = (uint64_t)g->nb * g->esz;
	isa_status st;
	if (mm->b_stride[2] == 1 || nsz == 1) {   /* rows contiguous along N */
		for (uint64_t k = 0, kt = 0; k < mm->k; k += P, kt++) {
			uint32_t ksz = umin32(mm->k - k, P);
			isa_ap s = isa_ap_sbuf(g->dt, 0, ksz, g->b_off[buf] + kt * tile_bytes, nsz);
			isa_ap h = isa_ap_hbm(g->dt, (uint32_t)g->tb, (base + k * mm->b_stride[1]) * g->esz,
					      ksz, mm->b_stride[1], nsz);
			if ((st = load(g, &g->lane[1], s, h, diag)))
				return st;
		}
		return ISA_OK;
	}
	/* N-major (b = W^T): rows of W, 128 at a time, turned round */
	for (uint32_t n = 0; n < nsz; n += P) {
		uint32_t rows = umin32(nsz - n, P);
		for (uint64_t k = 0; k < mm->k; k += CHUNK)
			if ((st = tload(g, &g->lane[1], g->tb, base + n * mm->b_stride[2] + k, rows, mm->b_stride[2],
					umin32(mm->k - k, CHUNK),
					g->b_off[buf] + (k / P) * tile_bytes + (uint64_t)n * g->esz,
					tile_bytes, diag)))
				return st;
	}
	return ISA_OK;
}

/* VectorE: dst = PSUM + the bias row of buffer `buf`, once it landed */
static isa_status add_bias(gen *g, isa_ap dst, isa_ap ps, unsigned buf, uint32_t msz, uint32_t nsz,
			   uint32_t bias_ready)
{
	isa_ap sb = isa_ap_sbuf(g->dt, 0, msz, g->bias_off[buf], nsz);
	isa_status st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->lane[1].sem, ISA_ALU_is_ge, bias_ready);
	return st ? st : isa_builder_tensor_tensor(g->p, ISA_ENGINE_VECTOR, dst, ps, sb, ISA_ALU_add);
}

/* one product tile: out[m0.., n0..] of batch bi, its a^T at SBUF `at`,
 * b's block in buffer `buf`; the counts its operands need */
typedef struct prod {
	uint64_t bi, m0, n0, at;
	uint32_t msz, nsz;
	unsigned buf;
	uint32_t b_ready, copies_ready, bias_ready;
} prod;

/* TensorE: the K-accumulation of product t into PSUM bank t % OUT_BANKS,
 * once its operands are in SBUF and the bank was evacuated */
static isa_status multiply(gen *g, const prod *pr, uint32_t t, isa_ap ps)
{
	const nk_matmul *mm = g->mm;
	isa_status st;
	if ((st = isa_builder_sem_wait(g->p, ISA_ENGINE_TENSOR, g->lane[1].sem, ISA_ALU_is_ge, pr->b_ready)) ||
	    (st = isa_builder_sem_wait(g->p, ISA_ENGINE_TENSOR, g->s_copy, ISA_ALU_is_ge, pr->copies_ready)))
		return st;
	if (t >= OUT_BANKS && (st = isa_builder_sem_wait(g->p, ISA_ENGINE_TENSOR, g->pp.sem_computed, ISA_ALU_is_ge,
							  t - OUT_BANKS + 1)))
		return st;
	for (uint64_t k = 0, kt = 0; k < mm->k; k += P, kt++) {
		uint32_t ksz = umin32(mm->k - k, P);
		isa_ap sta = isa_ap_sbuf(g->dt, 0, ksz, pr->at + kt * P * g->esz, pr->msz);
		isa_ap mov = isa_ap_sbuf(g->dt, 0, ksz, g->b_off[pr->buf] + kt * g->nb * g->esz, pr->nsz);
		if ((st = isa_builder_load_stationary(g->p, sta, ISA_PERF_NONE)) ||
		    (st = isa_builder_multiply_moving(g->p, ps, mov, kt > 0, ISA_PERF_NONE)))
			return st;
	}
	g->mms++;
	return isa_builder_sem_signal(g->p, ISA_ENGINE_TENSOR, g->s_mm, ISA_SEMOP_ADD, 1);
}

/* `engine` may write result slot t % OUT_SLOTS once the store of product
 * t - OUT_SLOTS read it */
static isa_status slot_free(gen *g, int engine, uint32_t t)
{
	if (t < OUT_SLOTS)
		return ISA_OK;
	return isa_builder_sem_wait(g->p, engine, g->pp.sem_stored, ISA_ALU_is_ge, t - OUT_SLOTS + 1);
}

/* the activation epilogue: bias into PSUM on VectorE, then ScalarE writes
 * func(PSUM) into the slot */
static isa_status evacuate_act(gen *g, const prod *pr, uint32_t t, isa_ap ps, isa_ap so)
{
	isa_status st;
	uint32_t ready_sem = g->mm->bias ? g->s_biased : g->s_mm;
	if (g->mm->bias && ((st = add_bias(g, ps, ps, pr->buf, pr->msz, pr->nsz, pr->bias_ready)) ||
			    (st = isa_builder_sem_signal(g->p, ISA_ENGINE_VECTOR, g->s_biased, ISA_SEMOP_ADD, 1))))
		return st;
	if ((st = slot_free(g, ISA_ENGINE_SCALAR, t)) ||
	    (st = isa_builder_sem_wait(g->p, ISA_ENGINE_SCALAR, ready_sem, ISA_ALU_is_ge, t + 1)) ||
	    (st = isa_builder_activation(g->p, so, ps, g->mm->act, 1.0f, 0.0f)))
		return st;
	nk_pipe_computed(&g->pp, ISA_ENGINE_SCALAR);
	return g->pp.em.st;
}

/* the residual epilogue: GpSimd loads res's tile into its slot, VectorE
 * writes PSUM (+ bias) + res */
static isa_status evacuate_res(gen *g, const prod *pr, uint32_t t, isa_ap ps, isa_ap so)
{
	const nk_matmul *mm = g->mm;
	isa_status st;
	uint32_t slot = t % OUT_SLOTS;
	uint64_t roff = ((pr->bi * mm->m + pr->m0) * mm->n + pr->n0) * isa_dtype_size(g->odt);
	isa_ap sr = isa_ap_sbuf(g->odt, 0, pr->msz, g->res_off + (uint64_t)slot * g->nb * 4, pr->nsz);
	isa_ap hr = isa_ap_hbm(g->odt, (uint32_t)g->tres, roff, pr->msz, (int64_t)mm->n, pr->nsz);
	int rd = isa_builder_dma(g->p, "", ISA_DMA_DIRECT, &sr, &hr, NULL, g->pp.em.diag);
	if (rd < 0)
		return g->pp.em.diag->code;
	if ((st = slot_free(g, ISA_ENGINE_GPSIMD, t)) ||
	    (st = isa_builder_dma_copy(g->p, ISA_ENGINE_GPSIMD, (uint32_t)rd, 3, g->s_rload, 1)) ||
	    (st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->s_rload, ISA_ALU_is_ge, t + 1)))
		return st;
	if ((mm->bias && (st = add_bias(g, ps, ps, pr->buf, pr->msz, pr->nsz, pr->bias_ready))) ||
	    (st = isa_builder_tensor_tensor(g->p, ISA_ENGINE_VECTOR, so, ps, sr, ISA_ALU_add)))
		return st;
	nk_pipe_computed(&g->pp, ISA_ENGINE_VECTOR);
	return g->pp.em.st;
}

/* product tile `pr`: K-accumulation, evacuation (PSUM -> SBUF result slot,
 * cast, epilogue), store by GpSimd */
static isa_status product(gen *g, const prod *pr)
{
	const nk_matmul *mm = g->mm;
	isa_status st;
	uint32_t t = g->mms;
	isa_ap ps = isa_ap_psum(ISA_DT_fp32, 0, pr->msz, (uint64_t)(t % OUT_BANKS) * BANK, pr->nsz);
	isa_ap so = isa_ap_sbuf(g->odt, 0, pr->msz, g->out_off + (uint64_t)(t % OUT_SLOTS) * g->nb * 4, pr->nsz);
	if ((st = multiply(g, pr, t, ps)) || (st = slot_free(g, ISA_ENGINE_VECTOR, t)) ||
	    (st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->s_mm, ISA_ALU_is_ge, t + 1)))
		return st;
	if (mm->act != ISA_ACT_identity)
		st = evacuate_act(g, pr, t, ps, so);
	else if (mm->residual)
		st = evacuate_res(g, pr, t, ps, so);
	else if ((st = mm->bias ? add_bias(g, so, ps, pr->buf, pr->msz, pr->nsz, pr->bias_ready)
				: isa_builder_tensor_copy(g->p, ISA_ENGINE_VECTOR, so, ps)) == ISA_OK) {
		nk_pipe_computed(&g->pp, ISA_ENGINE_VECTOR);
		st = g->pp.em.st;
	}
	if (st)
		return st;
	uint64_t off = ((pr->bi * mm->m + pr->m0) * mm->n + pr->n0) * isa_dtype_size(g->odt);
	nk_pipe_store(&g->pp, isa_ap_hbm(g->odt, (uint32_t)g->to, off, pr->msz, (int64_t)mm->n, pr->nsz), so, 2);
	return g->pp.em.st;
}

/* SBUF plan: m-tiles per super-tile and the n block width that fit */
static bool plan(gen *g, uint64_t sbuf)
{
	const nk_matmul *mm = g->mm;
	uint64_t mtiles = (mm->m + P - 1) / P;
	uint64_t nb_want = mm->n < NB_MAX ? mm->n : NB_MAX;
	for (uint64_t nb = nb_want; nb > 0; nb = nb > 64 ? nb / 2 : 0) {
		uint64_t fixed = (uint64_t)(g->lane[0].nstage + g->lane[1].nstage) * CHUNK * g->esz
			       + 2 * g->kpad / P * nb * g->esz     /* b blocks */
			       + OUT_SLOTS * nb * 4 * (mm->residual ? 2 : 1)   /* results (and residual tiles) */
			       + 2 * nb * g->esz;                  /* bias */
		uint64_t per_mt = 2 * g->kpad * g->esz;   /* two a^T regions */
		if (fixed + per_mt > sbuf)
			continue;
		uint64_t ms = (sbuf - fixed) / per_mt;
		ms = ms > MS_MAX ? MS_MAX : ms;
		g->ms = (uint32_t)(ms < mtiles ? ms : mtiles);
		g->nb = (uint32_t)nb;
		g->at_off[0] = 0;
		g->at_off[1] = (uint64_t)g->ms * g->kpad * g->esz;
		uint64_t o = (uint64_t)g->ms * per_mt;
		for (int i = 0; i < 2; i++) {
			g->lane[i].stage_off = o;
			o += (uint64_t)g->lane[i].nstage * CHUNK * g->esz;
		}
		for (int i = 0; i < 2; i++, o += g->kpad / P * nb * g->esz)
			g->b_off[i] = o;
		for (int i = 0; i < 2; i++, o += nb * g->esz)
			g->bias_off[i] = o;
		g->out_off = o;
		g->res_off = o + (uint64_t)OUT_SLOTS * nb * 4;
		return true;
	}
	return false;
}

static bool next_super(const gen *g, super *sp)
{
	sp->ms0 += (uint64_t)g->ms * P;
	if (sp->ms0 >= g->mm->m) {
		sp->ms0 = 0;
		if (++sp->bi >= g->mm->batch)
			return false;
	}
	sp->nmt = umin32((g->mm->m - sp->ms0 + P - 1) / P, g->ms);
	sp->reg ^= 1;
	return true;
}

/* Software-pipelined: the next super-tile's a^T (loads, transposes, copies
 * into the other region) is prepared in pieces between the current one's n
 * blocks, so TensorE never waits for a whole super-tile's preparation. */
static isa_status emit(gen *g, isa_diag *diag)
{
	const nk_matmul *mm = g->mm;
	isa_status st;
	uint32_t blocks = 0;                 /* n blocks issued: b buffer = blocks % 2 */
	uint32_t mms_before[2] = { 0, 0 };   /* matmul count when a b buffer's use ended */
	uint32_t nblk = (uint32_t)((mm->n + g->nb - 1) / g->nb);
	super cur = { 0, 0, umin32((mm->m + P - 1) / P, g->ms), 0 };
	for (uint32_t i = 0, np = a_pieces(g, &cur); i < np; i++)
		if ((st = load_a(g, &cur, i, diag)))
			return st;
	uint32_t at_ready = g->copies;       /* copies the current a^T needs */
	for (bool more = true; more;) {
		super nxt = cur;
		bool has_next = next_super(g, &nxt);
		uint32_t np = has_next ? a_pieces(g, &nxt) : 0, done = 0;
		/* the next region was last read by the previous super-tile's matmuls */
		uint32_t region_free = g->mms;
		for (uint32_t j = 0; j < nblk; j++) {
			uint64_t n0 = (uint64_t)j * g->nb;
			uint32_t nsz = umin32(mm->n - n0, g->nb);
			unsigned buf = blocks % 2;
			/* the buffer's previous block must be multiplied and evacuated (bias) */
			if (blocks >= 2 &&
			    ((st = isa_builder_sem_wait(g->p, g->lane[1].engine, g->pp.sem_computed, ISA_ALU_is_ge,
							mms_before[buf])) ||
			     (st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->s_mm, ISA_ALU_is_ge,
							mms_before[buf]))))
				return st;
			uint32_t copies_before = g->copies;
			if ((st = load_b(g, cur.bi, n0, nsz, buf, diag)))
				return st;
			uint32_t b_ready = g->lane[1].loads, bias_ready = 0;
			/* TensorE needs a^T's copies and b's (if it was turned round), not
			 * those of the next super-tile's pieces */
			uint32_t copies_ready = g->copies > copies_before ? g->copies : at_ready;
			if (mm->bias) {
				isa_ap s = isa_ap_sbuf(g->dt, 0, P, g->bias_off[buf], nsz);
				isa_ap h = isa_ap_hbm(g->dt, (uint32_t)g->tbias, n0 * g->esz, P, 0, nsz);
				if ((st = load(g, &g->lane[1], s, h, diag)))
					return st;
				bias_ready = g->lane[1].loads;
			}
			for (uint32_t mt = 0; mt < cur.nmt; mt++) {
				uint64_t m0 = cur.ms0 + (uint64_t)mt * P;
				uint64_t at = g->at_off[cur.reg] + (uint64_t)mt * g->kt_n * P * g->esz;
				prod pr = { cur.bi, m0, n0, at, umin32(mm->m - m0, P), nsz, buf,
					    b_ready, copies_ready, bias_ready };
				if ((st = product(g, &pr)))
					return st;
			}
			mms_before[buf] = g->mms;
			blocks++;
			/* this block's share of the next super-tile's preparation */
			uint32_t want = (uint32_t)((uint64_t)np * (j + 1) / nblk);
			if (done == 0 && want > 0 && region_free &&
			    ((st = isa_builder_sem_wait(g->p, ISA_ENGINE_VECTOR, g->s_mm, ISA_ALU_is_ge, region_free)) ||
			     (st = isa_builder_sem_wait(g->p, g->lane[0].engine, g->s_mm, ISA_ALU_is_ge, region_free))))
				return st;
			for (; done < want; done++)
				if ((st = load_a(g, &nxt, done, diag)))
					return st;
		}
		at_ready = g->copies;
		cur = nxt;
		more = has_next;
	}
	return ISA_OK;   /* the pipeline's finish waits for the stores */
}

static bool strides_ok(const int64_t s[3])
{
	return s[0] >= 0 && s[1] >= 0 && s[2] >= 0 && (s[1] == 1 || s[2] == 1);
}

/* The generator's state for mm on target, its operands checked and its
 * SBUF planned; an error (diag set) when the kernel cannot take mm. */
static isa_status setup(gen *g, int target, const nk_matmul *mm, isa_diag *diag)
{
	const isa_target_info *ti = isa_target_get(target);
	memset(g, 0, sizeof(*g));
	g->mm = mm;
	g->dt = mm->dtype;
	g->odt = mm->out_dtype ? mm->out_dtype : mm->dtype;
	g->esz = isa_dtype_size(mm->dtype);
	if (!ti || (g->dt != ISA_DT_fp32 && g->dt != ISA_DT_bf16 && g->dt != ISA_DT_fp16)) {
		nk_fail(diag, ISA_E_BAD_DTYPE, "matmul kernel: dtype %s", isa_dtype_name(g->dt));
		return ISA_E_BAD_DTYPE;
	}
	if (!mm->batch || !mm->m || !mm->k || !mm->n || mm->k > (1u << 20) || mm->m > INT32_MAX ||
	    mm->n > INT32_MAX || mm->batch > (1u << 20) || !strides_ok(mm->a_stride) ||
	    !strides_ok(mm->b_stride) || (mm->residual && mm->act != ISA_ACT_identity) ||
	    mm->act < 0 || mm->act >= ISA_NUM_ACTS) {
		nk_fail(diag, ISA_E_LIMIT, "matmul kernel: unsupported shape or strides");
		return ISA_E_LIMIT;
	}
	g->kt_n = (mm->k + P - 1) / P;
	g->tr_slots = (PSUM_BYTES - OUT_BANKS * BANK) / (P * g->esz);
	g->lane[0] = (lane){ .engine = ISA_ENGINE_SYNC, .queue = 0, .nstage = NSTAGE_MAX };
	/* with an activation epilogue ScalarE waits for each product: b's loads
	 * go from Sync then, so the next block's still overlap this one's */
	int b_engine = mm->act != ISA_ACT_identity ? ISA_ENGINE_SYNC : ISA_ENGINE_SCALAR;
	g->lane[1] = (lane){ .engine = b_engine, .queue = 1, .nstage = 8 };
	g->kpad = g->kt_n * P;
	/* program size: instructions grow with batch x (M/128) x (N/nb) x K/128;
	 * SBUF holds two a^T regions of the whole K per row tile */
	double work = (double)mm->batch * ((mm->m + P - 1) / P) * (double)g->kt_n *
		      ((mm->n + 63) / 64);
	if (work > 4e6 || !plan(g, ti->sbuf_partition_bytes - 4096)) {
		nk_fail(diag, ISA_E_LIMIT, "matmul kernel: [%llu x %llu] @ [%llu x %llu] x %llu does not fit",
			(unsigned long long)mm->m, (unsigned long long)mm->k, (unsigned long long)mm->k,
			(unsigned long long)mm->n, (unsigned long long)mm->batch);
		return ISA_E_LIMIT;
	}
	return ISA_OK;
}

bool nk_matmul_fits(int target, const nk_matmul *mm)
{
	gen g;
	isa_diag diag;
	memset(&diag, 0, sizeof(diag));
	return setup(&g, target, mm, &diag) == ISA_OK;
}

isa_status nk_matmul_program(int target, const nk_matmul *mm, uint8_t **bin, size_t *len,
			     isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	gen g;
	isa_status st = setup(&g, target, mm, diag);
	if (st)
		return st;
	if (!nk_pipe_init(&g.pp, target, 1, 0, diag))
		return nk_pipe_finish(&g.pp, bin, len);
	g.p = g.pp.em.p;
	g.lane[0].sem = g.pp.sem_loaded;
	g.lane[1].sem = nk_pipe_sem(&g.pp);
	g.s_trans = nk_pipe_sem(&g.pp);
	g.s_copy = nk_pipe_sem(&g.pp);
	g.s_mm = nk_pipe_sem(&g.pp);
	g.s_biased = nk_pipe_sem(&g.pp);
	g.s_rload = nk_pipe_sem(&g.pp);
	uint64_t so[3] = { mm->batch, mm->m, mm->n };
	g.ta = nk_pipe_tensor(&g.pp, "a", g.dt, ISA_TK_INPUT, mm->a_elems);
	g.tb = nk_pipe_tensor(&g.pp, "b", g.dt, ISA_TK_INPUT, mm->b_elems);
	g.tbias = mm->bias ? nk_pipe_tensor(&g.pp, "bias", g.dt, ISA_TK_INPUT, mm->n) : 0;
	g.to = g.pp.em.st ? -1 : isa_builder_tensor(g.p, "out", g.odt, ISA_TK_OUTPUT, 3, so, diag);
	g.tres = mm->residual && g.to >= 0 ? isa_builder_tensor(g.p, "res", g.odt, ISA_TK_INPUT, 3, so, diag) : 0;
	if (g.to < 0 || g.tres < 0)
		nk_pipe_check(&g.pp, diag->code ? diag->code : ISA_E_LIMIT);
	if (!g.pp.em.st)
		nk_pipe_check(&g.pp, emit(&g, diag));
	return nk_pipe_finish(&g.pp, bin, len);
}
