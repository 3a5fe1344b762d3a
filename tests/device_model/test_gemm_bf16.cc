// TensorE's bf16 product (gemm_bf16.c): every output is the fp32 sum of the
// exact bf16 products in k order, for tile shapes with row, column and k
// tails, with and without accumulation into the destination; both packers
// give the same pairs.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

extern "C" {
#include "gemm_bf16.h"
}

namespace {

struct Shape {
	uint32_t m, n, k;
};

std::vector<uint16_t> random_bf16(size_t n, std::mt19937 &g)
{
	// normal values in [-2, 2]: no subnormal inputs or sums (the instruction flushes those)
	std::uniform_real_distribution<float> d(-2.0f, 2.0f);
	std::vector<uint16_t> v(n);
	for (auto &x : v)
		x = dm_f32_to_bf16(d(g));
	return v;
}

class GemmBf16 : public ::testing::TestWithParam<Shape> {};

TEST_P(GemmBf16, SumsExactProductsInKOrder)
{
	const Shape s = GetParam();
	std::mt19937 g(s.m * 131 + s.n * 7 + s.k);
	const uint32_t lda_rows = s.m + 3, ldb_rows = s.n + 5;       // padded source rows
	std::vector<uint16_t> a = random_bf16((size_t)s.k * lda_rows, g);
	std::vector<uint16_t> b = random_bf16((size_t)s.k * ldb_rows, g);
	const uint32_t k2 = (s.k + 1) / 2, ld = (s.n + 15) & ~15u;
	std::vector<uint32_t> ap((size_t)k2 * s.m), bp((size_t)k2 * ld, 0xdeadbeef);
	dm_pack_bf16_pairs(a.data(), lda_rows, s.k, s.m, s.m, ap.data());
	dm_pack_bf16_pairs(b.data(), ldb_rows, s.k, s.n, ld, bp.data());

	for (bool acc : {false, true}) {
		const int64_t ldc = s.n + 2;
		std::vector<float> c((size_t)s.m * ldc), want(c.size());
		for (size_t i = 0; i < c.size(); i++)
			c[i] = want[i] = (float)(i % 13) - 6.0f;
		for (uint32_t i = 0; i < s.m; i++)
			for (uint32_t x = 0; x < s.n; x++) {
				float sum = 0.0f;
				for (uint32_t kk = 0; kk < s.k; kk++)
					sum += dm_bf16_to_f32(a[(size_t)kk * lda_rows + i]) *
					       dm_bf16_to_f32(b[(size_t)kk * ldb_rows + x]);
				float &w = want[i * ldc + x];
				w = acc ? w + sum : sum;
			}
		dm_gemm_bf16(s.m, s.n, s.k, ap.data(), s.m, bp.data(), ld, c.data(), ldc, acc);
		// any split of the rows gives the same bits (host threads split them)
		std::vector<float> c2((size_t)s.m * ldc);
		for (size_t i = 0; i < c2.size(); i++)
			c2[i] = (float)(i % 13) - 6.0f;
		for (uint32_t lo = 0; lo < s.m; lo += 3) {
			uint32_t hi = lo + 3 < s.m ? lo + 3 : s.m;
			dm_gemm_bf16(hi - lo, s.n, s.k, ap.data() + lo, s.m, bp.data(), ld,
				     c2.data() + lo * ldc, ldc, acc);
		}
		ASSERT_EQ(c, c2) << "rows split in threes, acc " << acc;
		for (size_t i = 0; i < c.size(); i++)
			ASSERT_EQ(c[i], want[i]) << "element " << i << " (row " << i / ldc << ", col "
						 << i % ldc << "), acc " << acc;
	}
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmBf16,
			 ::testing::Values(Shape{128, 512, 128}, Shape{128, 500, 127}, Shape{7, 33, 3},
					   Shape{64, 17, 1}, Shape{1, 1, 2}, Shape{9, 48, 128},
					   Shape{128, 96, 64}, Shape{15, 47, 5}));

TEST(GemmBf16Pack, RowsAndWidenedRowsGiveTheSamePairs)
{
	std::mt19937 g(3);
	const uint32_t k = 7, n = 21, ld = 32;
	std::vector<uint16_t> h = random_bf16((size_t)k * n, g);
	std::vector<float> f(h.size());
	for (size_t i = 0; i < h.size(); i++)
		f[i] = dm_bf16_to_f32(h[i]);
	std::vector<uint32_t> p1((k + 1) / 2 * ld, 1), p2((k + 1) / 2 * ld, 2);
	dm_pack_bf16_pairs(h.data(), n, k, n, ld, p1.data());
	dm_pack_bf16_pairs_f32(f.data(), k, n, ld, p2.data());
	EXPECT_EQ(p1, p2);
	// padding columns and the missing odd row are zero
	EXPECT_EQ(p1[ld - 1], 0u);
	EXPECT_EQ(p1[3 * ld] & 0xffffu, 0u);
}

}  // namespace
