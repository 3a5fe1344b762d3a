/*
 * copy.c -- kernel generator: dst[i] = src[i] over an N-d index space with
 * any element strides on both sides (stride 0 on src broadcasts), as
 * HBM-to-HBM DMA transfers, casting between float types on the way (DMA
 * casts through fp32).  Backs copy_, contiguous(), expand().contiguous(),
 * dtype conversion, cat and the operand preparation of other kernels.
 *
 * Dims of size 1 are dropped and dims that are contiguous with each other on
 * both sides merged; the largest remaining dim but the innermost becomes the
 * DMA's rows (spread over the engines) and up to four others its free dims;
 * dims beyond that are looped over, one transfer each.  A flat copy is cut into rows of 2048 elements so the
 * transfer spreads over the 16 DMA engines.  The transfers are the tile
 * pipeline's (nk_pipe_transfer: Sync and GpSimd issue them in turn).
 */
#include "programs.h"
#include "pipeline.h"

#include <string.h>

#define ROW 2048u
#define MAX_TRANSFERS 65536u

typedef struct dims {
	unsigned rank;
	uint64_t size[NK_MAX_RANK + 1];
	int64_t s[2][NK_MAX_RANK + 1];   /* src, dst strides */
} dims;

/* *tail: elements after the last whole ROW of a flat copy (copied apart) */
static void simplify(const nk_copy *c, dims *d, uint64_t *tail)
{
	memset(d, 0, sizeof(*d));
	*tail = 0;
	/* the dims in the destination's memory order (largest stride first;
	 * ties by the source's): a column-major result of .float() on a
	 * transposed view is contiguous along its first dim, and that dim must
	 * be the transfer's innermost, not its rows */
	unsigned order[NK_MAX_RANK], n = 0;
	for (unsigned i = 0; i < c->rank; i++) {
		if (c->shape[i] == 1)
			continue;
		unsigned j = n++;
		while (j && (c->dst_stride[order[j - 1]] < c->dst_stride[i] ||
			     (c->dst_stride[order[j - 1]] == c->dst_stride[i] &&
			      c->src_stride[order[j - 1]] < c->src_stride[i]))) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	for (unsigned k = 0; k < n; k++) {
		unsigned i = order[k], r = d->rank;
		/* merge into the previous dim when both sides continue it */
		if (r && d->s[0][r - 1] == c->src_stride[i] * (int64_t)c->shape[i] &&
		    d->s[1][r - 1] == c->dst_stride[i] * (int64_t)c->shape[i]) {
			d->size[r - 1] *= c->shape[i];
			d->s[0][r - 1] = c->src_stride[i];
			d->s[1][r - 1] = c->dst_stride[i];
			continue;
		}
		d->size[r] = c->shape[i];
		d->s[0][r] = c->src_stride[i];
		d->s[1][r] = c->dst_stride[i];
		d->rank++;
	}
	if (d->rank == 0) {
		d->rank = 1;
		d->size[0] = 1;
		d->s[0][0] = d->s[1][0] = 1;
	}
	/* a flat run: rows of ROW elements (and a tail transfer) */
	if (d->rank == 1 && d->size[0] > 2 * ROW && d->s[0][0] == 1 && d->s[1][0] == 1) {
		d->rank = 2;
		d->size[1] = ROW;
		*tail = d->size[0] % ROW;
		d->size[0] = d->size[0] / ROW;
		d->s[0][0] = d->s[1][0] = ROW;
		d->s[0][1] = d->s[1][1] = 1;
	}
}

/* The DMA's rows are what the engines share (consecutive rows in blocks of
 * 8 per engine): the largest dim but the innermost becomes the rows, the
 * others keep their order as free dims (loops outside).  An outermost dim of
 * 4 as the rows -- a [B, H, L, D] view copied to [B, L, H, D] -- put a whole
 * copy on one engine of 16. */
static void spread_rows(dims *d)
{
	if (d->rank < 3)
		return;
	unsigned best = 0;
	for (unsigned i = 1; i + 1 < d->rank; i++)
		if (d->size[i] > d->size[best])
			best = i;
	unsigned nfree = d->rank - 1 < ISA_MAX_DIMS ? d->rank - 1 : ISA_MAX_DIMS;
	unsigned row_at = d->rank - 1 - nfree;     /* where the rows dim must sit */
	if (best == row_at)
		return;
	dims o = *d;
	unsigned k = 0;
	for (unsigned i = 0; i < o.rank; i++) {
		if (i == best)
			continue;
		if (k == row_at)
			k++;                               /* the rows' slot */
		d->size[k] = o.size[i];
		d->s[0][k] = o.s[0][i];
		d->s[1][k] = o.s[1][i];
		k++;
	}
	d->size[row_at] = o.size[best];
	d->s[0][row_at] = o.s[0][best];
	d->s[1][row_at] = o.s[1][best];
}

static bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

/* The looped dims of a copy (bit i of `loop`: dim i is looped over, one
 * transfer or tile each): how many iterations, and iteration o's element
 * offsets on each side. */
static uint64_t loop_count(const dims *d, uint32_t loop)
{
	uint64_t n = 1;
	for (unsigned i = 0; i < d->rank; i++)
		if ((loop >> i) & 1u)
			n *= d->size[i];
	return n;
}

static void loop_offsets(const dims *d, uint32_t loop, uint64_t o, uint64_t *so, uint64_t *doff)
{
	*so = *doff = 0;
	for (int i = (int)d->rank - 1; i >= 0; i--) {
		if (!((loop >> i) & 1u))
			continue;
		uint64_t idx = o % d->size[i];
		o /= d->size[i];
		*so += idx * (uint64_t)d->s[0][i];
		*doff += idx * (uint64_t)d->s[1][i];
	}
}

typedef struct emitter {
	nk_pipe pp;
	int ts, td, sdt, ddt;
	unsigned ssz, dsz;
} emitter;

/* one transfer: rows x free dims `d` from element offsets so / do */
static void transfer(emitter *e, const dims *d, unsigned first, uint64_t so, uint64_t doff)
{
	unsigned nfree = d->rank - first - 1;
	int32_t fs[2][ISA_MAX_DIMS];
	uint32_t sz[ISA_MAX_DIMS];
	for (unsigned k = 0; k < nfree; k++) {
		sz[k] = (uint32_t)d->size[first + 1 + k];
		fs[0][k] = (int32_t)d->s[0][first + 1 + k];
		fs[1][k] = (int32_t)d->s[1][first + 1 + k];
	}
	uint32_t rows = (uint32_t)d->size[first];
	isa_ap src = isa_ap_hbm(e->sdt, (uint32_t)e->ts, so * e->ssz, rows, d->s[0][first], 1);
	isa_ap dst = isa_ap_hbm(e->ddt, (uint32_t)e->td, doff * e->dsz, rows, d->s[1][first], 1);
	if (nfree) {
		src = isa_ap_dims(src, nfree, fs[0], sz);
		dst = isa_ap_dims(dst, nfree, fs[1], sz);
	}
	nk_pipe_transfer(&e->pp, dst, src);
}

/* ------------------------------------------------- broadcasts via SBUF */

/* A source with stride-0 dims read straight into the destination costs a
 * DMA descriptor per element (a run is contiguous on both sides): what the
 * NKI compiler does instead, and this does, is load each distinct source
 * element once into SBUF, widen it on VectorE (stride-0 reads are free
 * there), and store whole destination rows.  A tile is up to 128 partitions
 * along dim `p` by the innermost `nf` dims (up to STAGE_F elements, the
 * innermost dim cut in chunks when longer); the other dims are looped. */
#define STAGE_F 4096u
#define STAGE_MIN_DESCS 4096u   /* direct descriptors below which staging is not worth a second DMA */
#define STAGE_MAX_TILES 65536u

typedef struct stage_plan {
	unsigned nf, p;
	uint64_t chunk;         /* elements of the innermost dim per tile */
} stage_plan;

static bool stage_plan_of(const dims *d, stage_plan *sp)
{
	unsigned r = d->rank;
	if (r < 2)
		return false;
	bool bcast = false;
	for (unsigned i = 0; i < r; i++)
		bcast |= d->s[0][i] == 0;
	uint64_t run = d->s[0][r - 1] == 1 && d->s[1][r - 1] == 1 ? d->size[r - 1] : 1, total = 1;
	for (unsigned i = 0; i < r; i++)
		total *= d->size[i];
	if (!bcast || total / run < STAGE_MIN_DESCS)
		return false;
	sp->nf = 1;
	uint64_t prod = d->size[r - 1];
	while (sp->nf + 1 < r && sp->nf < ISA_MAX_DIMS - 1 && prod * d->size[r - 1 - sp->nf] <= STAGE_F)
		prod *= d->size[r - 1 - sp->nf++];
	sp->chunk = sp->nf == 1 && prod > STAGE_F ? STAGE_F : d->size[r - 1];
	sp->p = 0;
	for (unsigned i = 1; i < r - sp->nf; i++)
		if (d->size[i] > d->size[sp->p])
			sp->p = i;
	uint64_t tiles = (d->size[sp->p] + ISA_NUM_PARTITIONS - 1) / ISA_NUM_PARTITIONS *
			 ((d->size[r - 1] + sp->chunk - 1) / sp->chunk);
	for (unsigned i = 0; i < r - sp->nf; i++)
		if (i != sp->p)
			tiles *= d->size[i];
	bool ok = tiles <= STAGE_MAX_TILES && d->size[sp->p] <= UINT32_MAX;
	for (unsigned i = r - sp->nf; i < r && ok; i++)
		ok = fits_i32(d->s[0][i]) && fits_i32(d->s[1][i]);
	return ok;
}

/* a flat broadcast (a scalar widened to n elements) as rows of up to
 * STAGE_F: the largest such divisor of n (no rows when none is wide enough
 * to be worth it) */
static void split_flat(dims *d)
{
	if (d->rank != 1 || d->s[0][0] != 0)
		return;
	uint64_t n = d->size[0], f = n < STAGE_F ? n : STAGE_F;
	while (n % f)
		f--;
	if (f < 256 || f == n)
		return;
	d->rank = 2;
	d->size[0] = n / f;
	d->size[1] = f;
	d->s[0][1] = 0;
	d->s[1][1] = d->s[1][0];
	d->s[1][0] *= (int64_t)f;
}

/* the free dims of one side (0 src, 1 dst) of a tile: the innermost nf dims,
 * the last `cols` long; the source's stride-0 dims dropped with `compact` */
static unsigned tile_dims(const dims *d, const stage_plan *sp, int side, uint64_t cols, bool compact,
			  int32_t *stride, uint32_t *size)
{
	unsigned k = 0;
	for (unsigned i = d->rank - sp->nf; i < d->rank; i++) {
		uint64_t n = i == d->rank - 1 ? cols : d->size[i];
		if (compact && d->s[0][i] == 0)
			continue;
		stride[k] = (int32_t)d->s[side][i];
		size[k++] = (uint32_t)n;
	}
	return k;
}

static isa_status staged_copy(int target, const nk_copy *c, const dims *d, const stage_plan *sp, uint8_t **bin,
			      size_t *len, isa_diag *diag)
{
	unsigned ssz = isa_dtype_size(c->src_dtype), dsz = isa_dtype_size(c->dst_dtype);
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, (uint64_t)STAGE_F * (ssz + dsz), diag))
		return nk_pipe_finish(&pp, bin, len);
	int ts = nk_pipe_tensor(&pp, "src", c->src_dtype, ISA_TK_INPUT, c->src_elems);
	int td = nk_pipe_tensor(&pp, "dst", c->dst_dtype, ISA_TK_OUTPUT, c->dst_elems);
	unsigned r = d->rank, inner = r - 1;
	/* the looped dims: all but p and the free ones */
	uint32_t loop = ((1u << (r - sp->nf)) - 1) & ~(1u << sp->p);
	uint64_t outer = loop_count(d, loop);
	for (uint64_t o = 0; o < outer && !pp.em.st; o++) {
		uint64_t so, doff;
		loop_offsets(d, loop, o, &so, &doff);
		for (uint64_t p0 = 0; p0 < d->size[sp->p] && !pp.em.st; p0 += ISA_NUM_PARTITIONS) {
			uint32_t np = (uint32_t)(d->size[sp->p] - p0 < ISA_NUM_PARTITIONS ? d->size[sp->p] - p0
											   : ISA_NUM_PARTITIONS);
			for (uint64_t c0 = 0; c0 < d->size[inner] && !pp.em.st; c0 += sp->chunk) {
				uint64_t cols = d->size[inner] - c0 < sp->chunk ? d->size[inner] - c0 : sp->chunk;
				uint64_t s_at = so + p0 * (uint64_t)d->s[0][sp->p] + c0 * (uint64_t)d->s[0][inner];
				uint64_t d_at = doff + p0 * (uint64_t)d->s[1][sp->p] + c0 * (uint64_t)d->s[1][inner];
				uint64_t base = nk_pipe_tile(&pp), wide = base + (uint64_t)STAGE_F * ssz;
				int32_t fs[ISA_MAX_DIMS], cs[ISA_MAX_DIMS];
				uint32_t sz[ISA_MAX_DIMS];
				/* the distinct source elements, compact in SBUF */
				unsigned nl = tile_dims(d, sp, 0, cols, true, fs, sz);
				isa_ap hs = isa_ap_hbm(c->src_dtype, (uint32_t)ts, s_at * ssz, np, d->s[0][sp->p], 1);
				uint64_t n = 1;
				for (unsigned k = 0; k < nl; k++)
					n *= sz[k];
				if (nl)
					hs = isa_ap_dims(hs, nl, fs, sz);
				nk_pipe_load(&pp, isa_ap_sbuf(c->src_dtype, 0, np, base, (uint32_t)n), hs, 0);
				/* widened on VectorE: stride 0 along the broadcast dims */
				unsigned nw = tile_dims(d, sp, 1, cols, false, fs, sz);
				uint64_t step = 1;
				for (int k = (int)nw - 1, j = (int)d->rank - 1; k >= 0; k--, j--) {
					cs[k] = d->s[0][j] == 0 ? 0 : (int32_t)step;
					step *= d->s[0][j] == 0 ? 1 : sz[k];
				}
				uint64_t wn = 1;
				for (unsigned k = 0; k < nw; k++)
					wn *= sz[k];
				nk_pipe_compute(&pp, ISA_ENGINE_VECTOR);
				nk_em_copy(&pp.em, ISA_ENGINE_VECTOR, isa_ap_sbuf(c->dst_dtype, 0, np, wide, (uint32_t)wn),
					   isa_ap_dims(isa_ap_sbuf(c->src_dtype, 0, np, base, 1), nw, cs, sz));
				nk_pipe_computed(&pp, ISA_ENGINE_VECTOR);
				isa_ap hd = isa_ap_hbm(c->dst_dtype, (uint32_t)td, d_at * dsz, np, d->s[1][sp->p], 1);
				nk_pipe_store(&pp, isa_ap_dims(hd, nw, fs, sz),
					      isa_ap_sbuf(c->dst_dtype, 0, np, wide, (uint32_t)wn), 1);
			}
		}
	}
	return nk_pipe_finish(&pp, bin, len);
}

/* ---------------------------------------------- transposes via TensorE */

/* dst[.., a, .., b] = src[.., b, .., a] with src contiguous along a and dst
 * along b shares no run: straight through, every element is a descriptor
 * (a 1000 x 128 fp32 transpose took 224 us on trn2).  As the NKI compiler
 * does: load [b rows, a columns] tiles (runs along a), turn each 128-column
 * block round on TensorE (nc_transpose into PSUM), copy it out on VectorE
 * casting to the destination's type, store [a rows, b columns] (runs along
 * b).  Float types only: the transpose carries values through fp32. */
#define TR_COLS 512u            /* a-columns per tile: 1-2 KiB runs per partition */
#define TR_SLOTS 8u             /* PSUM slots of [128, 128] (fp32: half a bank) */
#define TR_MIN 8u               /* both dims at least this long, or the direct copy */

static bool is_float(int dt)
{
	return dt == ISA_DT_fp32 || dt == ISA_DT_bf16 || dt == ISA_DT_fp16;
}

/* the dims a (src stride 1) and b (dst stride 1) of a transposing copy */
static bool transpose_dims(const nk_copy *c, const dims *d, unsigned *a, unsigned *b)
{
	if (!is_float(c->src_dtype) || !is_float(c->dst_dtype) || d->rank < 2)
		return false;
	int fa = -1, fb = -1;
	for (unsigned i = 0; i < d->rank; i++) {
		if (d->s[0][i] == 1)
			fa = (int)i;
		if (d->s[1][i] == 1)
			fb = (int)i;
	}
	if (fa < 0 || fb < 0 || fa == fb || d->size[fa] < TR_MIN || d->size[fb] < TR_MIN)
		return false;
	uint64_t total = 1, tiles = 1;
	for (unsigned i = 0; i < d->rank; i++) {
		total *= d->size[i];
		tiles *= i == (unsigned)fa   ? (d->size[i] + TR_COLS - 1) / TR_COLS
			 : i == (unsigned)fb ? (d->size[i] + 127) / 128
					     : d->size[i];
	}
	*a = (unsigned)fa;
	*b = (unsigned)fb;
	return total >= STAGE_MIN_DESCS && tiles <= STAGE_MAX_TILES && d->size[fa] <= UINT32_MAX &&
	       d->size[fb] <= UINT32_MAX;
}

static isa_status transposed_copy(int target, const nk_copy *c, const dims *d, unsigned a, unsigned b,
				  uint8_t **bin, size_t *len, isa_diag *diag)
{
	unsigned ssz = isa_dtype_size(c->src_dtype), dsz = isa_dtype_size(c->dst_dtype);
	const uint64_t in_bytes = (uint64_t)TR_COLS * ssz;        /* [b rows, a cols] */
	const uint64_t out_step = 128u * dsz;                    /* per 128-column block: [a rows, b cols] */
	const uint64_t slot = 128u * ssz;                        /* PSUM bytes per partition of one slot */
	nk_pipe pp;
	if (!nk_pipe_init(&pp, target, 2, in_bytes + (TR_COLS / 128) * out_step, diag))
		return nk_pipe_finish(&pp, bin, len);
	uint32_t s_tr = nk_pipe_sem(&pp), s_out = nk_pipe_sem(&pp);
	int ts = nk_pipe_tensor(&pp, "src", c->src_dtype, ISA_TK_INPUT, c->src_elems);
	int td = nk_pipe_tensor(&pp, "dst", c->dst_dtype, ISA_TK_OUTPUT, c->dst_elems);
	uint32_t loop = ((1u << d->rank) - 1) & ~(1u << a) & ~(1u << b);
	uint64_t outer = loop_count(d, loop);
	uint32_t trans = 0;
	for (uint64_t o = 0; o < outer && !pp.em.st; o++) {
		uint64_t so, doff;
		loop_offsets(d, loop, o, &so, &doff);
		for (uint64_t b0 = 0; b0 < d->size[b] && !pp.em.st; b0 += 128)
			for (uint64_t a0 = 0; a0 < d->size[a] && !pp.em.st; a0 += TR_COLS) {
				uint32_t nb = (uint32_t)(d->size[b] - b0 < 128 ? d->size[b] - b0 : 128);
				uint32_t na = (uint32_t)(d->size[a] - a0 < TR_COLS ? d->size[a] - a0 : TR_COLS);
				uint64_t base = nk_pipe_tile(&pp), out = base + in_bytes;
				uint64_t s_at = so + b0 * (uint64_t)d->s[0][b] + a0;
				nk_pipe_load(&pp, isa_ap_sbuf(c->src_dtype, 0, nb, base, na),
					     isa_ap_hbm(c->src_dtype, (uint32_t)ts, s_at * ssz, nb, d->s[0][b], na), 0);
				nk_pipe_compute(&pp, ISA_ENGINE_TENSOR);
				for (uint32_t k = 0; k * 128 < na; k++) {
					uint32_t w = na - k * 128 < 128 ? na - k * 128 : 128;
					uint64_t ps = (uint64_t)(trans % TR_SLOTS) * slot;
					/* the slot free once VectorE copied its transpose out */
					if (trans >= TR_SLOTS)
						nk_em_wait(&pp.em, ISA_ENGINE_TENSOR, s_out, trans - TR_SLOTS + 1);
					isa_instr in = isa_instr_init(ISA_OP_nc_transpose);
					in.ap[ISA_AP_DST] = isa_ap_psum(c->src_dtype, 0, w, ps, nb);
					in.ap[ISA_AP_SRC] = isa_ap_sbuf(c->src_dtype, 0, nb, base + (uint64_t)k * 128 * ssz, w);
					in.ap_mask = 1u << ISA_AP_DST | 1u << ISA_AP_SRC;
					nk_em_emit(&pp.em, ISA_ENGINE_TENSOR, &in);
					nk_em_signal(&pp.em, ISA_ENGINE_TENSOR, s_tr);
					trans++;
					nk_em_wait(&pp.em, ISA_ENGINE_VECTOR, s_tr, trans);
					nk_em_copy(&pp.em, ISA_ENGINE_VECTOR, isa_ap_sbuf(c->dst_dtype, 0, w, out + k * out_step, nb),
						   isa_ap_psum(c->src_dtype, 0, w, ps, nb));
					nk_em_signal(&pp.em, ISA_ENGINE_VECTOR, s_out);
				}
				nk_pipe_computed(&pp, ISA_ENGINE_VECTOR);
				for (uint32_t k = 0; k * 128 < na; k++) {
					uint32_t w = na - k * 128 < 128 ? na - k * 128 : 128;
					uint64_t d_at = doff + (a0 + (uint64_t)k * 128) * (uint64_t)d->s[1][a] + b0;
					nk_pipe_store(&pp, isa_ap_hbm(c->dst_dtype, (uint32_t)td, d_at * dsz, w, d->s[1][a], nb),
						      isa_ap_sbuf(c->dst_dtype, 0, w, out + k * out_step, nb), 1);
				}
			}
	}
	return nk_pipe_finish(&pp, bin, len);
}

isa_status nk_copy_program(int target, const nk_copy *c, uint8_t **bin, size_t *len, isa_diag *diag)
{
	*bin = NULL;
	*len = 0;
	if (c->rank > NK_MAX_RANK) {
		nk_fail(diag, ISA_E_LIMIT, "copy kernel: rank %u", c->rank);
		return ISA_E_LIMIT;
	}
	uint64_t total = 1;
	for (unsigned i = 0; i < c->rank; i++) {
		if (c->src_stride[i] < 0 || c->dst_stride[i] < 0 ||
		    __builtin_mul_overflow(total, c->shape[i], &total)) {
			nk_fail(diag, ISA_E_LIMIT, "copy kernel: negative stride or size overflow");
			return ISA_E_LIMIT;
		}
	}
	if (total == 0) {
		nk_fail(diag, ISA_E_LIMIT, "copy kernel: empty");
		return ISA_E_LIMIT;
	}
	dims d;
	uint64_t tail;
	simplify(c, &d, &tail);
	stage_plan sp;
	dims staged = d;
	split_flat(&staged);
	if (!tail && stage_plan_of(&staged, &sp))
		return staged_copy(target, c, &staged, &sp, bin, len, diag);
	unsigned ta, tb;
	if (!tail && transpose_dims(c, &d, &ta, &tb))
		return transposed_copy(target, c, &d, ta, tb, bin, len, diag);
	spread_rows(&d);
	/* transfers: product of the dims outside the DMA's rows + 4 free dims */
	unsigned first = d.rank > ISA_MAX_DIMS + 1 ? d.rank - ISA_MAX_DIMS - 1 : 0;
	uint32_t loop = (1u << first) - 1;
	uint64_t outer = loop_count(&d, loop);
	bool ok = outer + 1 <= MAX_TRANSFERS && d.size[first] <= UINT32_MAX;
	for (unsigned i = first + 1; i < d.rank && ok; i++)
		ok = d.size[i] <= UINT32_MAX && fits_i32(d.s[0][i]) && fits_i32(d.s[1][i]);
	if (!ok) {
		nk_fail(diag, ISA_E_LIMIT, "copy kernel: strides or transfer count out of range");
		return ISA_E_LIMIT;
	}
	emitter e = { .sdt = c->src_dtype, .ddt = c->dst_dtype, .ssz = isa_dtype_size(c->src_dtype),
		      .dsz = isa_dtype_size(c->dst_dtype) };
	if (!nk_pipe_init(&e.pp, target, 1, 0, diag))
		return nk_pipe_finish(&e.pp, bin, len);
	e.ts = nk_pipe_tensor(&e.pp, "src", c->src_dtype, ISA_TK_INPUT, c->src_elems);
	e.td = nk_pipe_tensor(&e.pp, "dst", c->dst_dtype, ISA_TK_OUTPUT, c->dst_elems);
	for (uint64_t o = 0; o < outer && !e.pp.em.st; o++) {
		uint64_t so, doff;
		loop_offsets(&d, loop, o, &so, &doff);
		transfer(&e, &d, first, so, doff);
	}
	if (tail) {
		dims t = { 1, { tail }, { { 1 }, { 1 } } };
		uint64_t at = total - tail;
		transfer(&e, &t, 0, at, at);
	}
	return nk_pipe_finish(&e.pp, bin, len);
}
