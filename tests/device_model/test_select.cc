// select.c reproduces the GNU C++ library's partial_sort, nth_element and
// sort step for step, which is what makes topk's tie order CPU PyTorch's.
// Checked here against the library itself, run the way ATen's CPU topk and
// unstable sort run it, over rows full of ties (two or three distinct
// values), NaNs, and every size class: the insertion sorts (<= 16, <= 3),
// the introsort / introselect partitions, and the heap select (64k <= n).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

extern "C" {
#include "select.h"
}

namespace {

using Pair = std::pair<double, int64_t>;

bool ranks_before(const Pair &a, const Pair &b, bool largest)
{
	bool an = std::isnan(a.first), bn = std::isnan(b.first);
	return largest ? (an && !bn) || a.first > b.first : (!an && bn) || a.first < b.first;
}

// ATen's topk_impl_loop, as in the CPU kernel
std::vector<int64_t> reference_topk(const std::vector<double> &row, int64_t k, bool largest, bool sorted)
{
	std::vector<Pair> q;
	for (size_t j = 0; j < row.size(); j++)
		q.emplace_back(row[j], (int64_t)j);
	auto comp = [largest](const Pair &a, const Pair &b) { return ranks_before(a, b, largest); };
	if (k * 64 <= (int64_t)row.size()) {
		std::partial_sort(q.begin(), q.begin() + k, q.end(), comp);
	} else {
		std::nth_element(q.begin(), q.begin() + k - 1, q.end(), comp);
		if (sorted)
			std::sort(q.begin(), q.begin() + k - 1, comp);
	}
	std::vector<int64_t> r;
	for (int64_t j = 0; j < k; j++)
		r.push_back(q[j].second);
	return r;
}

std::vector<dm_sel_elem> pairs(const std::vector<double> &row)
{
	std::vector<dm_sel_elem> q(row.size());
	for (size_t j = 0; j < row.size(); j++)
		q[j] = { row[j], (int64_t)j };
	return q;
}

std::vector<double> tie_row(std::mt19937 &g, int64_t n, int levels, bool nan)
{
	std::uniform_int_distribution<int> d(0, levels - 1);
	std::vector<double> row(n);
	for (double &v : row)
		v = d(g) * 0.5;
	if (nan)
		row[g() % n] = NAN;
	return row;
}

TEST(Select, TopkPicksAndOrdersTiesAsTheCppLibrary)
{
	std::mt19937 g(19);
	const int64_t sizes[] = { 1, 2, 3, 4, 5, 16, 17, 33, 64, 65, 128, 200, 1000, 4096 };
	int heap = 0, quick = 0;
	for (int64_t n : sizes)
		for (int levels : { 1, 2, 3, 40 })
			for (int trial = 0; trial < 12; trial++) {
				int64_t k = 1 + (int64_t)(g() % (uint32_t)std::min<int64_t>(n, trial < 6 ? 4 : 100));
				bool largest = trial % 2, sorted = trial % 3 != 0, nan = trial % 5 == 0;
				std::vector<double> row = tie_row(g, n, levels, nan);
				std::vector<dm_sel_elem> q = pairs(row);
				dm_select_topk(q.data(), n, k, largest, sorted);
				std::vector<int64_t> got;
				for (int64_t j = 0; j < k; j++)
					got.push_back(q[j].pos);
				SCOPED_TRACE(testing::Message() << "n=" << n << " k=" << k << " levels=" << levels
								<< " largest=" << largest << " sorted=" << sorted);
				EXPECT_EQ(got, reference_topk(row, k, largest, sorted));
				(dm_select_uses_heap(n, k) ? heap : quick)++;
			}
	EXPECT_GT(heap, 20);   // both paths were exercised
	EXPECT_GT(quick, 20);
}

TEST(Select, SortLeavesTiesAsStdSort)
{
	std::mt19937 g(20);
	for (int64_t n : { 2, 3, 16, 17, 31, 100, 1000, 5000 })
		for (int levels : { 1, 2, 3, 1000 })
			for (bool desc : { false, true }) {
				std::vector<double> row = tie_row(g, n, levels, n % 2 == 0);
				std::vector<Pair> ref;
				for (int64_t j = 0; j < n; j++)
					ref.emplace_back(row[j], j);
				std::sort(ref.begin(), ref.end(),
					  [desc](const Pair &a, const Pair &b) { return ranks_before(a, b, desc); });
				std::vector<dm_sel_elem> q = pairs(row);
				dm_select_sort(q.data(), n, desc);
				SCOPED_TRACE(testing::Message() << "n=" << n << " levels=" << levels << " desc=" << desc);
				for (int64_t j = 0; j < n; j++)
					ASSERT_EQ(q[j].pos, ref[j].second) << "at " << j;
			}
}

// a deep tie-only row drives introselect / introsort to their depth limit
// (the heap fallbacks); those must match too
TEST(Select, DepthLimitFallbacksMatch)
{
	std::vector<double> row(3000, 1.0);
	for (int64_t k : { 1, 10, 46, 47, 2999, 3000 }) {
		std::vector<dm_sel_elem> q = pairs(row);
		dm_select_topk(q.data(), 3000, k, true, true);
		std::vector<int64_t> got;
		for (int64_t j = 0; j < k; j++)
			got.push_back(q[j].pos);
		EXPECT_EQ(got, reference_topk(row, k, true, true)) << "k=" << k;
	}
}

TEST(Select, KOutsideTheRowLeavesItAlone)
{
	std::vector<dm_sel_elem> q = pairs({ 3, 1, 2 });
	dm_select_topk(q.data(), 3, 0, true, true);
	dm_select_topk(q.data(), 3, 4, true, true);
	EXPECT_EQ(q[0].pos, 0);
	EXPECT_EQ(q[1].pos, 1);
	EXPECT_EQ(q[2].pos, 2);
}

}  // namespace
