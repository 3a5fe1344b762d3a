/*
 * ops_rng.c -- the engines' pseudo random number generators: rng,
 * rand_set_state, rand_get_state.  Each lane (partition) of VectorE and
 * GpSimd holds XORWOW state (Marsaglia 2003: five xorshift words plus a
 * Weyl counter d, output x + d), 6 uint32 words per generator.  GpSimd has
 * one generator per lane; VectorE four, element k of a row drawing from
 * generator k mod 4 (the NKI ISA's 24-word VectorE state).  rng writes the
 * low bits of each 32-bit draw, elements in row order per lane, so a program
 * that seeds its engine gets the same numbers on every run.
 */
#include "ops.h"

#include <string.h>

enum { RNG_WORDS = 6 };

static int rng_slot(int engine)
{
	return engine == ISA_ENGINE_GPSIMD ? 1 : 0;
}

static unsigned rng_gens(int engine)
{
	return engine == ISA_ENGINE_GPSIMD ? 1 : 4;
}

static uint32_t xorwow(uint32_t *s)
{
	uint32_t t = s[4], x = s[0];
	s[4] = s[3];
	s[3] = s[2];
	s[2] = s[1];
	s[1] = x;
	t ^= t >> 2;
	t ^= t << 1;
	t ^= x ^ (x << 4);
	s[0] = t;
	s[5] += 362437u;
	return t + s[5];
}

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* fixed power-on seeds, different per engine, lane and generator; an
 * all-zero xorshift state would only ever produce the Weyl sequence */
void dm_rng_default_state(dm_core *c)
{
	uint64_t x = 0x6e73696d726e6700ull;   /* "nsimrng" */
	for (int e = 0; e < 2; e++)
		for (unsigned p = 0; p < ISA_NUM_PARTITIONS; p++)
			for (unsigned w = 0; w < 24; w++) {
				uint32_t v = (uint32_t)splitmix64(&x);
				c->rng[e][p][w] = v ? v : 1u;
			}
	c->rng_used = false;
}

/* the integer operand `slot` of `in` as a view and a staging row of int64
 * (P x n), shared by the three instructions */
static dm_fault_kind lanes(dm_core *c, const dm_binding *b, int engine, int64_t index, const isa_instr *in,
			   int slot, dm_view *v, int64_t **w, dm_fault *f)
{
	bool dst = slot == ISA_AP_DST;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[slot], dst, v, engine, index, dst ? "dst" : "src", f);
	if (k)
		return k;
	*w = (int64_t *)dm_tmp(c, 0, 2 * (uint64_t)v->nparts * v->nfree);
	if (!*w)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "%s staging", isa_op_name(in->opcode));
	c->rng_used = true;
	return DM_OK;
}

static dm_fault_kind store_lanes(dm_core *c, const dm_view *v, const int64_t *w)
{
	dm_view_write_i64(v, w);   /* integer stores keep the low bits */
	dm_psum_mark(c, v);
	return DM_OK;
}

dm_fault_kind dm_op_rng(dm_core *c, const dm_binding *b, int engine, int64_t index,
			const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	int64_t *w;
	dm_fault_kind k = lanes(c, b, engine, index, in, ISA_AP_DST, &dv, &w, f);
	if (k)
		return k;
	unsigned gens = rng_gens(engine);
	for (uint64_t p = 0; p < dv.nparts; p++) {
		uint32_t *st = c->rng[rng_slot(engine)][dv.start + p];
		for (uint64_t e = 0; e < dv.nfree; e++)
			w[p * dv.nfree + e] = xorwow(st + (e % gens) * RNG_WORDS);
	}
	return store_lanes(c, &dv, w);
}

dm_fault_kind dm_op_rand_set_state(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view sv;
	int64_t *w;
	dm_fault_kind k = lanes(c, b, engine, index, in, ISA_AP_SRC, &sv, &w, f);
	if (k)
		return k;
	dm_view_read_i64(&sv, w);
	for (uint64_t p = 0; p < sv.nparts; p++)
		for (uint64_t e = 0; e < sv.nfree && e < 24; e++)
			c->rng[rng_slot(engine)][sv.start + p][e] = (uint32_t)w[p * sv.nfree + e];
	return DM_OK;
}

dm_fault_kind dm_op_rand_get_state(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	int64_t *w;
	dm_fault_kind k = lanes(c, b, engine, index, in, ISA_AP_DST, &dv, &w, f);
	if (k)
		return k;
	for (uint64_t p = 0; p < dv.nparts; p++)
		for (uint64_t e = 0; e < dv.nfree; e++)
			w[p * dv.nfree + e] = e < 24 ? c->rng[rng_slot(engine)][dv.start + p][e] : 0;
	return store_lanes(c, &dv, w);
}
