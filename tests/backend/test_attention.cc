// The flash-attention generator (backend/programs/attention.c) against a
// double-precision reference: every mask kind, grouped-query heads, broadcast
// and strided operands, query tiles and key blocks with tails; HBM traffic
// is the operands and the output only (the scores stay on chip); what it
// cannot take is refused by name.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "harness.h"

using namespace harness;

namespace {

enum class Mask { none, causal, additive, boolean };

struct Case {
	uint64_t B, H, KH, L, S, D;
	Mask mask;
};

// element strides of a contiguous [B, heads, rows, D] tensor
void contiguous(int64_t s[3], uint64_t heads, uint64_t rows, uint64_t d)
{
	s[2] = (int64_t)d;
	s[1] = (int64_t)(rows * d);
	s[0] = (int64_t)(heads * rows * d);
}

float val(uint64_t i, float a)   // deterministic, in [-1, 1)
{
	return std::sin(a * (float)(i % 1009) + 0.37f * (float)(i / 1009));
}

struct Result {
	std::vector<float> out;
	nsim_exec_stats st;
};

// q [B, H, L, D] is stored transposed in memory ([B, L, H, D], as attention
// after a head split); k, v contiguous [B, KH, S, D]; the additive mask is
// [L, S] broadcast over batch and heads; the bool mask [B, 1, L, S]
Result run_case(int tgt, const Case &c, nk_attention *prm_out = nullptr)
{
	nk_attention at{};
	at.dtype = ISA_DT_fp32;
	at.batch = c.B, at.heads = c.H, at.kv_heads = c.KH, at.l = c.L, at.s = c.S, at.d = c.D;
	at.q_stride[0] = (int64_t)(c.L * c.H * c.D);
	at.q_stride[1] = (int64_t)c.D;
	at.q_stride[2] = (int64_t)(c.H * c.D);
	contiguous(at.k_stride, c.KH, c.S, c.D);
	contiguous(at.v_stride, c.KH, c.S, c.D);
	at.q_elems = c.B * c.H * c.L * c.D;
	at.k_elems = at.v_elems = c.B * c.KH * c.S * c.D;
	at.scale = 1.0f / std::sqrt((float)c.D);
	at.causal = c.mask == Mask::causal;
	if (c.mask == Mask::additive) {
		at.mask_dtype = ISA_DT_fp32;
		at.mask_stride[2] = (int64_t)c.S;
		at.mask_elems = c.L * c.S;
	} else if (c.mask == Mask::boolean) {
		at.mask_dtype = ISA_DT_bool;
		at.mask_stride[0] = (int64_t)(c.L * c.S);
		at.mask_stride[2] = (int64_t)c.S;
		at.mask_elems = c.B * c.L * c.S;
	}
	if (prm_out)
		*prm_out = at;
	Bin bin;
	isa_diag d{};
	EXPECT_EQ(nk_attention_program(tgt, &at, &bin.p, &bin.n, &d), ISA_OK) << d.msg;
	std::vector<float> q(at.q_elems), k(at.k_elems), v(at.v_elems), m(at.mask_elems);
	std::vector<uint8_t> mb(at.mask_elems);
	for (uint64_t i = 0; i < q.size(); i++)
		q[i] = val(i, 0.71f);
	for (uint64_t i = 0; i < k.size(); i++) {
		k[i] = val(i, 1.13f);
		v[i] = val(i, 0.29f);
	}
	for (uint64_t i = 0; i < m.size(); i++) {
		m[i] = (i % 7 == 3) ? -std::numeric_limits<float>::infinity() : 0.5f * val(i, 0.05f);
		mb[i] = (i % 5) != 1;
	}
	if (c.mask == Mask::boolean && c.L > 1)   // batch 0's row 1 attends to nothing: zeros, as _safe_softmax
		std::memset(&mb[c.S], 0, c.S);
	Result r;
	r.out.assign(c.B * c.H * c.L * c.D, 0.f);
	Buf bq(q.size() * 4), bk(k.size() * 4), bv(v.size() * 4), bo(r.out.size() * 4), bm(m.size() * 4 + 4);
	nsim_tensor_write(bq.t, q.data(), 0, q.size() * 4);
	nsim_tensor_write(bk.t, k.data(), 0, k.size() * 4);
	nsim_tensor_write(bv.t, v.data(), 0, v.size() * 4);
	std::vector<std::pair<std::string, nsim_tensor *>> in{ { "q", bq.t }, { "k", bk.t }, { "v", bv.t } };
	if (c.mask == Mask::additive)
		nsim_tensor_write(bm.t, m.data(), 0, m.size() * 4);
	if (c.mask == Mask::boolean)
		nsim_tensor_write(bm.t, mb.data(), 0, mb.size());
	if (at.mask_dtype)
		in.emplace_back("mask", bm.t);
	r.st = run(bin, in, { { "out", bo.t } });
	nsim_tensor_read(bo.t, r.out.data(), 0, r.out.size() * 4);

	// the reference, in double
	uint64_t rep = c.H / c.KH;
	double worst = 0;
	for (uint64_t b = 0; b < c.B; b++)
		for (uint64_t h = 0; h < c.H; h++)
			for (uint64_t l = 0; l < c.L; l++) {
				std::vector<double> s(c.S);
				double mx = -INFINITY;
				for (uint64_t j = 0; j < c.S; j++) {
					double dot = 0;
					for (uint64_t e = 0; e < c.D; e++)
						dot += (double)q[((b * c.L + l) * c.H + h) * c.D + e] *
						       k[((b * c.KH + h / rep) * c.S + j) * c.D + e];
					s[j] = dot * at.scale;
					if (c.mask == Mask::causal && j > l)
						s[j] = -INFINITY;
					if (c.mask == Mask::additive)
						s[j] += m[l * c.S + j];
					if (c.mask == Mask::boolean && !mb[(b * c.L + l) * c.S + j])
						s[j] = -INFINITY;
					mx = std::max(mx, s[j]);
				}
				double sum = 0;
				for (uint64_t j = 0; j < c.S; j++)
					sum += s[j] = mx == -INFINITY ? 0 : std::exp(s[j] - mx);
				for (uint64_t e = 0; e < c.D; e++) {
					double o = 0;
					for (uint64_t j = 0; j < c.S; j++)
						o += s[j] * v[((b * c.KH + h / rep) * c.S + j) * c.D + e];
					o = sum > 0 ? o / sum : 0;
					double got = r.out[((b * c.H + h) * c.L + l) * c.D + e];
					worst = std::max(worst, std::fabs(got - o));
				}
			}
	EXPECT_LT(worst, 2e-5) << "B" << c.B << " H" << c.H << "/" << c.KH << " L" << c.L << " S" << c.S << " D" << c.D
			       << " mask " << (int)c.mask;
	return r;
}

}  // namespace

TEST(Attention, MatchesTheReferenceForEveryMaskKind)
{
	int tgt = target();
	// two query tiles (the second partial), keys in two blocks and a partial
	// 128-key tile, grouped-query heads
	for (Mask m : { Mask::none, Mask::causal, Mask::additive, Mask::boolean })
		run_case(tgt, Case{ 2, 4, 2, 130, 600, 48, m });
	run_case(tgt, Case{ 1, 2, 2, 1, 64, 32, Mask::boolean });   // a decode step
	run_case(tgt, Case{ 1, 1, 1, 300, 300, 128, Mask::causal });
	run_case(tgt, Case{ 3, 5, 5, 7, 5, 8, Mask::none });         // more groups than K / V regions
}

TEST(Attention, ScoresNeverLeaveTheChip)
{
	int tgt = target();
	for (Mask m : { Mask::none, Mask::additive }) {
		Case c{ 1, 2, 1, 256, 1024, 64, m };
		nk_attention at{};
		Result r = run_case(tgt, c, &at);
		// HBM holds q, k, v (read once: one group), the mask (read once per
		// head: it is broadcast over them) and the output; nothing else
		EXPECT_EQ(r.st.hbm_read_bytes, (at.q_elems + at.k_elems + at.v_elems + at.mask_elems * at.heads) * 4);
		EXPECT_EQ(r.st.hbm_write_bytes, c.B * c.H * c.L * c.D * 4);
		// the scores alone, H x L x S fp32, would be 2 MiB each way
		if (m == Mask::none) {
			EXPECT_LT(r.st.hbm_read_bytes + r.st.hbm_write_bytes, c.H * c.L * c.S * 4 / 2);
		}
	}
}

TEST(Attention, IsDeterministic)
{
	int tgt = target();
	Case c{ 2, 4, 2, 130, 600, 48, Mask::causal };
	Result a = run_case(tgt, c), b = run_case(tgt, c);
	EXPECT_EQ(0, std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4));
	EXPECT_EQ(a.st.total_ps, b.st.total_ps);
	EXPECT_EQ(a.st.instructions, b.st.instructions);
}

TEST(Attention, RefusesWhatItCannotTake)
{
	int tgt = target();
	nk_attention ok{};
	ok.dtype = ISA_DT_bf16;
	ok.batch = ok.heads = ok.kv_heads = 1;
	ok.l = ok.s = 16;
	ok.d = 32;
	ok.q_stride[2] = ok.k_stride[2] = ok.v_stride[2] = 32;
	ok.q_elems = ok.k_elems = ok.v_elems = 16 * 32;
	ok.scale = 0.25f;
	EXPECT_TRUE(nk_attention_covered(tgt, &ok));
	struct Bad {
		const char *what;
		void (*edit)(nk_attention *);
		isa_status code;
		const char *msg;
	} bad[] = {
		{ "head dim over 128", [](nk_attention *a) { a->d = 129; }, ISA_E_LIMIT, "unsupported shape" },
		{ "heads not a multiple of kv heads", [](nk_attention *a) { a->heads = 3, a->kv_heads = 2; }, ISA_E_LIMIT,
		  "unsupported shape" },
		{ "zero scale", [](nk_attention *a) { a->scale = 0.f; }, ISA_E_LIMIT, "scale" },
		{ "nan scale", [](nk_attention *a) { a->scale = NAN; }, ISA_E_LIMIT, "scale" },
		{ "negative stride", [](nk_attention *a) { a->k_stride[2] = -32; }, ISA_E_LIMIT, "strides" },
		{ "int32 operands", [](nk_attention *a) { a->dtype = ISA_DT_int32; }, ISA_E_BAD_DTYPE, "dtype int32" },
		{ "int32 mask", [](nk_attention *a) { a->mask_dtype = ISA_DT_int32; }, ISA_E_BAD_DTYPE, "mask int32" },
		{ "keys beyond SBUF", [](nk_attention *a) { a->s = 1u << 19, a->d = 128; }, ISA_E_LIMIT, "do not fit" },
	};
	for (const Bad &b : bad) {
		nk_attention at = ok;
		b.edit(&at);
		EXPECT_FALSE(nk_attention_covered(tgt, &at)) << b.what;
		Bin bin;
		isa_diag d{};
		EXPECT_EQ(nk_attention_program(tgt, &at, &bin.p, &bin.n, &d), b.code) << b.what;
		EXPECT_NE(std::string(d.msg).find(b.msg), std::string::npos) << b.what << ": " << d.msg;
		EXPECT_EQ(bin.p, nullptr) << b.what;
	}
}
