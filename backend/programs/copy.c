/*
 * copy.c -- kernel generator: dst[i] = src[i] over an N-d index space with
 * any element strides on both sides (stride 0 on src broadcasts), as
 * HBM-to-HBM DMA transfers, casting between float types on the way (DMA
 * casts through fp32).  Backs copy_, contiguous(), expand().contiguous(),
 * dtype conversion, cat and the operand preparation of other kernels.
 *
 * Dims of size 1 are dropped and dims that are contiguous with each other on
 * both sides merged; the outermost remaining dim becomes the DMA's rows and
 * up to four more its free dims; dims beyond that are looped over, one
 * transfer each.  A flat copy is cut into rows of 2048 elements so the
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
	for (unsigned i = 0; i < c->rank; i++) {
		if (c->shape[i] == 1)
			continue;
		unsigned r = d->rank;
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

static bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

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
	/* transfers: product of the dims outside the DMA's rows + 4 free dims */
	unsigned first = d.rank > ISA_MAX_DIMS + 1 ? d.rank - ISA_MAX_DIMS - 1 : 0;
	uint64_t outer = 1;
	for (unsigned i = 0; i < first; i++)
		outer *= d.size[i];
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
		uint64_t so = 0, doff = 0, rem = o;
		for (int i = (int)first - 1; i >= 0; i--) {
			uint64_t idx = rem % d.size[i];
			rem /= d.size[i];
			so += idx * (uint64_t)d.s[0][i];
			doff += idx * (uint64_t)d.s[1][i];
		}
		transfer(&e, &d, first, so, doff);
	}
	if (tail) {
		dims t = { 1, { tail }, { { 1 }, { 1 } } };
		uint64_t at = total - tail;
		transfer(&e, &t, 0, at, at);
	}
	return nk_pipe_finish(&e.pp, bin, len);
}
