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

dm_fault_kind dm_op_rng(dm_core *c, const dm_binding *b, int engine, int64_t index,
			const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_DST], true, &dv, engine, index, "dst", f);
	if (k)
		return k;
	uint64_t n = dv.nfree, P = dv.nparts;
	int64_t *bits = (int64_t *)dm_tmp(c, 0, 2 * P * n);
	if (!bits)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "rng staging");
	unsigned gens = rng_gens(engine);
	c->rng_used = true;
	for (uint64_t p = 0; p < P; p++) {
		uint32_t *st = c->rng[rng_slot(engine)][dv.start + p];
		for (uint64_t e = 0; e < n; e++)
			bits[p * n + e] = xorwow(st + (e % gens) * RNG_WORDS);
	}
	/* integer stores keep the low bits of each draw */
	dm_view_write_i64(&dv, bits);
	dm_psum_mark(c, &dv);
	return DM_OK;
}

dm_fault_kind dm_op_rand_set_state(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view sv;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_SRC], false, &sv, engine, index, "src", f);
	if (k)
		return k;
	uint64_t n = sv.nfree, P = sv.nparts;
	int64_t *w = (int64_t *)dm_tmp(c, 0, 2 * P * n);
	if (!w)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "rand_set_state staging");
	dm_view_read_i64(&sv, w);
	c->rng_used = true;
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t e = 0; e < n && e < 24; e++)
			c->rng[rng_slot(engine)][sv.start + p][e] = (uint32_t)w[p * n + e];
	return DM_OK;
}

dm_fault_kind dm_op_rand_get_state(dm_core *c, const dm_binding *b, int engine, int64_t index,
				   const isa_instr *in, dm_fault *f)
{
	dm_view dv;
	dm_fault_kind k = dm_view_of(c, b, &in->ap[ISA_AP_DST], true, &dv, engine, index, "dst", f);
	if (k)
		return k;
	uint64_t n = dv.nfree, P = dv.nparts;
	int64_t *w = (int64_t *)dm_tmp(c, 0, 2 * P * n);
	if (!w)
		return dm_fault_set(f, DM_FAULT_NOMEM, engine, index, 0, "rand_get_state staging");
	for (uint64_t p = 0; p < P; p++)
		for (uint64_t e = 0; e < n; e++)
			w[p * n + e] = e < 24 ? c->rng[rng_slot(engine)][dv.start + p][e] : 0;
	dm_view_write_i64(&dv, w);
	dm_psum_mark(c, &dv);
	return DM_OK;
}
