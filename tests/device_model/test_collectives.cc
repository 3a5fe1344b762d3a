// The collective time model (device_model/collectives.c): each algorithm's
// formula for all-reduce, all-gather and reduce-scatter at several sizes and
// rank counts, the algorithm chosen by size, rings by the torus dimensions
// the ranks span, the link cap, and the 2-rank all-reduce curve against
// nccom-test's published sample (CALIBRATION.md C-12, within 15% from 1 MiB),
// and a group placed by its global ranks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

extern "C" {
#include "chip.h"
#include "collectives.h"
}

namespace {

const uint64_t US = 1000000;

// the formula, written again from collectives.c's header comment
uint64_t expect_ps(const dm_fabric *f, uint32_t steps, uint64_t step_ps, uint64_t wire, uint64_t rate)
{
	uint64_t move = steps * step_ps + (wire * US + rate - 1) / rate;
	return std::max(move, f->launch_ps);
}

dm_coll_cost cost(int target, dm_coll_op op, uint32_t n, uint64_t bytes)
{
	dm_coll_cost c{};
	EXPECT_EQ(dm_coll_estimate(dm_chip_get(target), op, n, bytes, &c), 0);
	return c;
}

}  // namespace

TEST(Collectives, RingRdhAndMeshFollowTheirFormulasOnOneChip)
{
	// trn2: 8 cores per chip, so up to 8 ranks never leave the chip
	const dm_fabric *f = &dm_chip_get(ISA_TARGET_trn2)->fabric;
	ASSERT_NE(f, nullptr);
	for (uint32_t n : { 2u, 4u, 6u, 8u })
		for (uint64_t s : { 1ull << 10, 1ull << 20, 3ull << 20, 64ull << 20, 1ull << 30 }) {
			dm_coll_cost ar = cost(ISA_TARGET_trn2, DM_COLL_ALL_REDUCE, n, s);
			uint64_t share = s / n * (n - 1);
			bool pow2 = (n & (n - 1)) == 0;
			uint32_t lg = (uint32_t)std::ceil(std::log2((double)n));
			dm_coll_algo want = s <= f->mesh_max ? DM_ALGO_MESH : s <= f->rdh_max && pow2 ? DM_ALGO_RDH : DM_ALGO_RING;
			EXPECT_EQ(ar.algo, want) << n << " ranks, " << s << " bytes";
			uint32_t steps = want == DM_ALGO_MESH ? 2 : want == DM_ALGO_RDH ? 2 * lg : 2 * (n - 1);
			EXPECT_EQ(ar.steps, steps);
			EXPECT_EQ(ar.wire_bytes, 2 * share);
			EXPECT_EQ(ar.rings, 1u);
			EXPECT_EQ(ar.ps, expect_ps(f, steps, f->step_ps, 2 * share, f->ring_rate)) << n << " " << s;
			// all-gather and reduce-scatter: half the steps and the bytes
			for (dm_coll_op op : { DM_COLL_ALL_GATHER, DM_COLL_REDUCE_SCATTER }) {
				dm_coll_cost c = cost(ISA_TARGET_trn2, op, n, s);
				EXPECT_EQ(c.algo, want);
				EXPECT_EQ(c.steps, steps / 2);
				EXPECT_EQ(c.wire_bytes, share);
				EXPECT_EQ(c.ps, expect_ps(f, steps / 2, f->step_ps, share, f->ring_rate));
			}
		}
}

TEST(Collectives, RanksAcrossChipsPayCrossChipStepsAndRunARingPerTorusDimension)
{
	// trn1: 2 cores a chip, a 4 x 4 torus: 8 ranks span 4 chips (one
	// dimension, one ring); 16 span 8 chips (two dimensions, two rings)
	const dm_fabric *f = &dm_chip_get(ISA_TARGET_trn1)->fabric;
	uint64_t s = 256ull << 20;
	dm_coll_cost one = cost(ISA_TARGET_trn1, DM_COLL_ALL_REDUCE, 8, s);
	dm_coll_cost two = cost(ISA_TARGET_trn1, DM_COLL_ALL_REDUCE, 16, s);
	EXPECT_EQ(one.rings, 1u);
	EXPECT_EQ(two.rings, 2u);
	uint64_t rate = std::min(f->ring_rate, f->link_rate);
	dm_coll_cost chip = cost(ISA_TARGET_trn1, DM_COLL_ALL_REDUCE, 2, s);
	uint64_t cross = (one.ps - (one.wire_bytes * US + rate - 1) / rate) / one.steps;
	EXPECT_GT(cross, f->step_ps);   // a handshake over NeuronLink costs more than on the chip
	EXPECT_EQ(two.ps, expect_ps(f, two.steps, cross, two.wire_bytes, 2 * rate));
	EXPECT_GT(chip.ps, 0u);
	// a link slower than the ring rate caps it: trn1's 96 GB/s is not, so
	// the per-ring rate is the ring rate there
	EXPECT_EQ(rate, f->ring_rate);
}

TEST(Collectives, BroadcastAllToAllAndPointToPoint)
{
	const dm_fabric *f = &dm_chip_get(ISA_TARGET_trn2)->fabric;
	uint64_t s = 32ull << 20;
	dm_coll_cost b = cost(ISA_TARGET_trn2, DM_COLL_BROADCAST, 4, s);
	EXPECT_EQ(b.steps, 3u);
	EXPECT_EQ(b.wire_bytes, s);
	EXPECT_EQ(b.ps, expect_ps(f, 3, f->step_ps, s, f->ring_rate));
	dm_coll_cost a = cost(ISA_TARGET_trn2, DM_COLL_ALL_TO_ALL, 4, s);
	EXPECT_EQ(a.algo, DM_ALGO_MESH);
	EXPECT_EQ(a.wire_bytes, s / 4 * 3);
	dm_coll_cost p = cost(ISA_TARGET_trn2, DM_COLL_SEND_RECV, 2, s);
	EXPECT_EQ(p.algo, DM_ALGO_P2P);
	EXPECT_EQ(p.ps, expect_ps(f, 1, f->step_ps, s, f->ring_rate));
	dm_coll_cost bar = cost(ISA_TARGET_trn2, DM_COLL_BARRIER, 8, 0);
	EXPECT_EQ(bar.ps, f->launch_ps);   // four bytes: the floor
}

TEST(Collectives, OneRankMovesNothingAndBadArgumentsAreRefused)
{
	const dm_chip *chip = dm_chip_get(ISA_TARGET_trn2);
	dm_coll_cost c{};
	EXPECT_EQ(dm_coll_estimate(chip, DM_COLL_ALL_REDUCE, 1, 1 << 20, &c), 0);
	EXPECT_EQ(c.ps, 0u);
	EXPECT_EQ(dm_coll_estimate(chip, DM_COLL_ALL_REDUCE, 0, 1, &c), -1);
	EXPECT_EQ(dm_coll_estimate(chip, DM_COLL_NUM_OPS, 2, 1, &c), -1);
	EXPECT_EQ(dm_coll_estimate(chip, DM_COLL_ALL_REDUCE, 2, 1ull << 51, &c), -1);
	EXPECT_EQ(dm_coll_estimate(nullptr, DM_COLL_ALL_REDUCE, 2, 1, &c), -1);
	EXPECT_EQ(dm_chip_get(-1), nullptr);
	EXPECT_STREQ(dm_coll_op_name(DM_COLL_REDUCE_SCATTER), "reduce_scatter");
	EXPECT_EQ(dm_coll_op_name(DM_COLL_NUM_OPS), nullptr);
}

TEST(Collectives, TimeGrowsWithSizeAndRanks)
{
	for (int t : { ISA_TARGET_trn1, ISA_TARGET_trn2 })
		for (dm_coll_op op : { DM_COLL_ALL_REDUCE, DM_COLL_ALL_GATHER, DM_COLL_REDUCE_SCATTER }) {
			uint64_t prev = 0;
			for (uint64_t s = 1; s <= (1ull << 32); s *= 4) {
				dm_coll_cost c = cost(t, op, 16, s);
				EXPECT_GE(c.ps, prev) << dm_coll_op_name(op) << " " << s;
				prev = c.ps;
			}
			EXPECT_LE(cost(t, op, 2, 1ull << 30).ps, cost(t, op, 16, 1ull << 30).ps);
		}
}

// CALIBRATION.md C-12: nccom-test -r 2 all-reduce fp32 (us); within 15%
// from 1 MiB up, as issue 18 asks (read as trn1: collectives.c says why)
TEST(Collectives, TwoRankAllReduceMatchesThePublishedCurve)
{
	const struct { uint64_t bytes; double us; } pub[] = {
		{ 1 << 20, 68 }, { 4 << 20, 107 }, { 16 << 20, 332 }, { 64 << 20, 1214 },
		{ 256 << 20, 4750 }, { 1ull << 30, 18930 },
	};
	for (auto &p : pub) {
		double us = (double)cost(ISA_TARGET_trn1, DM_COLL_ALL_REDUCE, 2, p.bytes).ps / 1e6;
		EXPECT_NEAR(us / p.us, 1.0, 0.15) << p.bytes << " bytes: " << us << " us vs " << p.us;
	}
}

TEST(Collectives, AGroupIsPlacedByItsGlobalRanks)
{
	// trn2: 8 cores a chip, chips row-major on a 4x4 torus
	const dm_chip *chip = dm_chip_get(ISA_TARGET_trn2);
	const dm_fabric *f = &chip->fabric;
	dm_coll_place p{};
	// a TP group (one chip's cores) stays on the chip
	uint32_t tp[8] = { 8, 9, 10, 11, 12, 13, 14, 15 };
	ASSERT_EQ(dm_coll_place_ranks(chip, tp, 8, &p), 0);
	EXPECT_EQ(p.chips, 1u);
	EXPECT_EQ(p.dims, 0u);
	// a strided FSDP group over TP = 8: one rank on each of the 16 chips
	uint32_t fsdp[16];
	for (uint32_t i = 0; i < 16; i++)
		fsdp[i] = i * 8;
	ASSERT_EQ(dm_coll_place_ranks(chip, fsdp, 16, &p), 0);
	EXPECT_EQ(p.chips, 16u);
	EXPECT_EQ(p.dims, 2u);
	// one torus column (chips 0, 4, 8, 12): one dimension
	uint32_t column[4] = { 0, 32, 64, 96 };
	ASSERT_EQ(dm_coll_place_ranks(chip, column, 4, &p), 0);
	EXPECT_EQ(p.chips, 4u);
	EXPECT_EQ(p.dims, 1u);
	// two instances: charged as both dimensions
	uint32_t two[2] = { 0, 128 };
	ASSERT_EQ(dm_coll_place_ranks(chip, two, 2, &p), 0);
	EXPECT_EQ(p.dims, 2u);

	// the same size, placed: the strided group pays cross-chip steps and
	// runs two rings; the contiguous one (ranks 0..15: two chips in a row)
	// one ring
	dm_coll_cost strided{}, contiguous{};
	ASSERT_EQ(dm_coll_place_ranks(chip, fsdp, 16, &p), 0);
	ASSERT_EQ(dm_coll_estimate_placed(chip, DM_COLL_ALL_GATHER, 16, &p, 64u << 20, &strided), 0);
	ASSERT_EQ(dm_coll_estimate(chip, DM_COLL_ALL_GATHER, 16, 64u << 20, &contiguous), 0);
	EXPECT_EQ(strided.rings, 2u);
	EXPECT_EQ(contiguous.rings, 1u);
	uint64_t wire = (64ull << 20) / 16 * 15;
	EXPECT_EQ(strided.ps, expect_ps(f, 15, 72 * US, wire, 2 * f->ring_rate));
	EXPECT_EQ(contiguous.ps, expect_ps(f, 15, 72 * US, wire, f->ring_rate));
	// a group of the first n ranks, placed, costs what the count does
	uint32_t first[16];
	for (uint32_t i = 0; i < 16; i++)
		first[i] = i;
	for (uint32_t n : { 2u, 8u, 9u, 16u }) {
		dm_coll_cost a{}, b{};
		ASSERT_EQ(dm_coll_place_ranks(chip, first, n, &p), 0);
		ASSERT_EQ(dm_coll_estimate_placed(chip, DM_COLL_ALL_REDUCE, n, &p, 8u << 20, &a), 0);
		ASSERT_EQ(dm_coll_estimate(chip, DM_COLL_ALL_REDUCE, n, 8u << 20, &b), 0);
		EXPECT_EQ(a.ps, b.ps) << n;
		EXPECT_EQ(a.rings, b.rings) << n;
	}
	// bounds: no ranks, a rank past the table
	uint32_t far[1] = { DM_COLL_MAX_RANK + 1 };
	EXPECT_EQ(dm_coll_place_ranks(chip, far, 1, &p), -1);
	EXPECT_EQ(dm_coll_place_ranks(chip, first, 0, &p), -1);
	EXPECT_EQ(dm_coll_place_ranks(chip, nullptr, 1, &p), -1);
}
