// dm_fold_rows_f32 runs eight rows' folds side by side: each row's result
// must be bit-identical to folding it alone (dm_fold_row_f32), for sums,
// max and min, with NaNs, signed zeros and row counts that leave a tail.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" {
#include "ops.h"
}

namespace {

uint32_t bits(float f)
{
	uint32_t u;
	std::memcpy(&u, &f, 4);
	return u;
}

TEST(FoldRows, EachRowMatchesItsOwnFold)
{
	std::mt19937 g(7);
	std::uniform_real_distribution<float> d(-1e3f, 1e3f);
	std::uniform_int_distribution<int> pick(0, 40);
	for (int op : { ISA_ALU_add, ISA_ALU_max, ISA_ALU_min, ISA_ALU_multiply, ISA_ALU_absmax }) {
		for (uint64_t nrows : { 1u, 7u, 8u, 13u, 32u }) {
			for (uint64_t n : { 1u, 2u, 5u, 100u }) {
				const uint64_t stride = n + 3;
				std::vector<float> x(nrows * stride);
				for (float &v : x) {
					int k = pick(g);
					v = k == 0 ? NAN : k == 1 ? -0.0f : k == 2 ? 0.0f : d(g);
				}
				std::vector<float> got(nrows, 12345.0f);
				dm_fold_rows_f32(op, x.data(), stride, n, nrows, got.data());
				for (uint64_t r = 0; r < nrows; r++) {
					float want = dm_fold_row_f32(op, x.data() + r * stride, n);
					ASSERT_EQ(bits(got[r]), bits(want))
						<< "op " << op << " row " << r << " of " << nrows << ", n " << n;
				}
			}
		}
	}
}

}  // namespace
