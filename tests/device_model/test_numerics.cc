// Conversions: exhaustive round trips of every narrow encoding, and rounding
// of random fp32 values checked against a brute-force nearest-even search
// over all encodings of the target type (and gcc's _Float16 for fp16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <cstdint>
#include <random>

extern "C" {
#include "numerics.h"
}

namespace {

// brute force: the finite encoding nearest to x; ties go to the even mantissa
template <typename Dec>
uint32_t nearest(float x, unsigned nbits, Dec decode, bool (*is_even)(uint32_t))
{
	double best_err = INFINITY;
	uint32_t best = 0;
	for (uint32_t e = 0; e < (1u << nbits); e++) {
		float v = decode(e);
		if (!std::isfinite(v))
			continue;
		double err = std::fabs((double)v - (double)x);
		if (err < best_err || (err == best_err && is_even(e) && !is_even(best))) {
			best_err = err;
			best = e;
		}
	}
	return best;
}

bool lsb_even(uint32_t e) { return (e & 1u) == 0; }

TEST(Numerics, Bf16RoundTripsEveryEncoding)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = dm_bf16_to_f32((uint16_t)h);
		if (std::isnan(f)) {
			EXPECT_TRUE(std::isnan(dm_bf16_to_f32(dm_f32_to_bf16(f))));
		} else {
			EXPECT_EQ(dm_f32_to_bf16(f), h);
		}
	}
}

TEST(Numerics, Fp16MatchesCompilerConversion)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = dm_fp16_to_f32((uint16_t)h);
		if (!std::isnan(f)) {
			EXPECT_EQ(dm_f32_to_fp16(f), h) << h;
		}
	}
	std::mt19937 rng(7);
	for (int i = 0; i < 200000; i++) {
		uint32_t bits = rng();
		float f = dm_bits_f32(bits);
		if (std::isnan(f))
			continue;
		_Float16 ref = (_Float16)f;
		uint16_t rb;
		memcpy(&rb, &ref, 2);
		ASSERT_EQ(dm_f32_to_fp16(f), rb) << f;
		ASSERT_EQ(dm_fp16_to_f32(rb), (float)ref);
	}
}

TEST(Numerics, Fp8RoundTripsAndRoundsToNearestEven)
{
	for (uint32_t b = 0; b < 256; b++) {
		float a = dm_fp8e4m3fn_to_f32((uint8_t)b), c = dm_fp8e5m2_to_f32((uint8_t)b);
		if (!std::isnan(a)) {
			EXPECT_EQ(dm_f32_to_fp8e4m3fn(a), b) << b;
		}
		if (!std::isnan(c)) {
			EXPECT_EQ(dm_f32_to_fp8e5m2(c), b) << b;
		}
	}
	EXPECT_EQ(dm_fp8e4m3fn_to_f32(0x7e), 448.0f);
	EXPECT_TRUE(std::isnan(dm_fp8e4m3fn_to_f32(0x7f)));
	EXPECT_EQ(dm_fp8e5m2_to_f32(0x7b), 57344.0f);
	EXPECT_EQ(dm_f32_to_fp8e4m3fn(1e6f), 0x7e);          // saturates
	EXPECT_EQ(dm_f32_to_fp8e4m3fn(-1e6f), 0xfe);
	EXPECT_EQ(dm_f32_to_fp8e5m2(1e6f), 0x7c);          // overflows to inf
	EXPECT_EQ(dm_fp8e4m3fn_to_f32(0x01), std::ldexp(1.0f, -9));   // smallest subnormal

	// NKI's float8_e4m3: IEEE-like, 240 the largest finite, S.1111.000 infinity
	for (uint32_t b = 0; b < 256; b++) {
		float a = dm_fp8e4m3_to_f32((uint8_t)b);
		if (!std::isnan(a)) {
			EXPECT_EQ(dm_f32_to_fp8e4m3(a), b) << b;
		}
		if ((b & 0x7f) < 0x78) {       // below the top binade both formats agree
			EXPECT_EQ(a, dm_fp8e4m3fn_to_f32((uint8_t)b)) << b;
		}
	}
	EXPECT_EQ(dm_fp8e4m3_to_f32(0x77), 240.0f);
	EXPECT_TRUE(std::isinf(dm_fp8e4m3_to_f32(0x78)));
	EXPECT_TRUE(std::isnan(dm_fp8e4m3_to_f32(0x79)));
	EXPECT_EQ(dm_f32_to_fp8e4m3(NAN), 0x7c);              // the quiet NaN, as ml_dtypes encodes it
	EXPECT_EQ(dm_f32_to_fp8e4m3(247.0f), 0x77);          // rounds down to 240
	EXPECT_EQ(dm_f32_to_fp8e4m3(248.0f), 0x78);          // the tie rounds to even: infinity
	EXPECT_EQ(dm_f32_to_fp8e4m3(-1e6f), 0xf8);           // overflows to -inf
	EXPECT_EQ(dm_f32_to_fp8e4m3(300.0f), 0x78);          // where e4m3fn keeps 288

	auto e4 = [](uint32_t e) { return dm_fp8e4m3fn_to_f32((uint8_t)e); };
	auto e5 = [](uint32_t e) { return dm_fp8e5m2_to_f32((uint8_t)e); };
	std::mt19937 rng(11);
	std::uniform_real_distribution<float> mag(-20.0f, 10.0f);
	for (int i = 0; i < 20000; i++) {
		float x = std::ldexp(1.0f + (rng() % 4096) / 4096.0f, (int)mag(rng)) * ((rng() & 1) ? -1.0f : 1.0f);
		if (std::fabs(x) <= 448.0f) {
			uint32_t want = nearest(x, 8, e4, lsb_even);
			// +-0 both acceptable representations of a value rounding to zero
			if (dm_fp8e4m3fn_to_f32((uint8_t)want) == 0.0f)
				ASSERT_EQ(dm_fp8e4m3fn_to_f32(dm_f32_to_fp8e4m3fn(x)), 0.0f) << x;
			else
				ASSERT_EQ(dm_f32_to_fp8e4m3fn(x), want) << x;
		}
		if (std::fabs(x) <= 57344.0f) {
			uint32_t want = nearest(x, 8, e5, lsb_even);
			if (dm_fp8e5m2_to_f32((uint8_t)want) == 0.0f)
				ASSERT_EQ(dm_fp8e5m2_to_f32(dm_f32_to_fp8e5m2(x)), 0.0f) << x;
			else
				ASSERT_EQ(dm_f32_to_fp8e5m2(x), want) << x;
		}
	}
}

TEST(Numerics, Bf16RoundsToNearestEven)
{
	// 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0)
	EXPECT_EQ(dm_f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
	// 1 + 3*2^-8 is halfway between 1+2^-7 (odd) and 1+2^-6 (even): rounds up
	EXPECT_EQ(dm_f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
	EXPECT_EQ(dm_f32_to_bf16(3.4e38f), 0x7f80);   // rounds to +inf
	EXPECT_TRUE(std::isnan(dm_bf16_to_f32(dm_f32_to_bf16(NAN))));
	EXPECT_EQ(dm_round_tf32(1.0f + std::ldexp(1.0f, -11)), 1.0f);
	EXPECT_EQ(dm_round_tf32(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
}

TEST(Numerics, IntegerCastsTruncateAndSaturate)
{
	uint8_t buf[4];
	dm_store(ISA_DT_int8, buf, -3.7f);
	EXPECT_EQ((int8_t)buf[0], -3);
	dm_store(ISA_DT_int8, buf, 1000.0f);
	EXPECT_EQ((int8_t)buf[0], 127);
	dm_store(ISA_DT_uint8, buf, -5.0f);
	EXPECT_EQ(buf[0], 0);
	dm_store(ISA_DT_int32, buf, NAN);
	EXPECT_EQ(dm_load(ISA_DT_int32, buf), 0.0f);
	dm_store(ISA_DT_int32, buf, 3e9f);
	EXPECT_EQ(dm_load(ISA_DT_int32, buf), 2147483648.0f);   // INT32_MAX as fp32
	dm_store(ISA_DT_bool, buf, 0.5f);
	EXPECT_EQ(buf[0], 1);
	dm_store(ISA_DT_uint16, buf, 70000.0f);
	EXPECT_EQ(dm_load(ISA_DT_uint16, buf), 65535.0f);
}

}  // namespace

namespace {

int64_t ordered(float f)
{
	int32_t i;
	std::memcpy(&i, &f, 4);
	return i < 0 ? -(int64_t)(i & 0x7fffffff) : i;
}

}  // namespace

// dm_expf (the activations' e^x): within 1 ulp of e^x computed in double
// and rounded, over a sweep of every 997th fp32 encoding; saturation,
// subnormal results and NaN as libm's expf.
TEST(Numerics, ExpfWithinOneUlpOverAllRanges)
{
	uint64_t checked = 0;
	for (uint64_t u = 0; u <= 0xffffffffull; u += 997) {
		float x;
		uint32_t b = (uint32_t)u;
		std::memcpy(&x, &b, 4);
		float got = dm_expf(x), want = (float)std::exp((double)x);
		if (std::isnan(x)) {
			ASSERT_TRUE(std::isnan(got)) << x;
			continue;
		}
		int64_t d = ordered(got) - ordered(want);
		ASSERT_LE(d < 0 ? -d : d, 1) << "x = " << x << ": " << got << " vs " << want;
		checked++;
	}
	EXPECT_GT(checked, 4000000u);
	EXPECT_EQ(dm_expf(INFINITY), INFINITY);
	EXPECT_EQ(dm_expf(-INFINITY), 0.0f);
	EXPECT_EQ(dm_expf(0.0f), 1.0f);
	EXPECT_EQ(dm_expf(88.72f), std::exp(88.72f));
	EXPECT_EQ(dm_expf(88.73f), INFINITY);
	EXPECT_GT(dm_expf(-100.0f), 0.0f);             // a subnormal result
	EXPECT_EQ(dm_expf(-104.0f), 0.0f);
}
