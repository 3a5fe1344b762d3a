// The HBM model: one test per timing constraint (named after its JEDEC
// parameter) showing the controller issues exactly when allowed in the simple
// case and never earlier, then the formula checks every preset must pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <random>
#include <tuple>
#include <vector>

extern "C" {
#include "chip.h"
#include "hbm.h"
}

namespace {

struct Hbm {
	dm_hbm *h = nullptr;
	const dm_hbm_preset *p;
	std::vector<dm_hbm_issue> log = std::vector<dm_hbm_issue>(1 << 16);
	Hbm(const char *preset, bool refresh = false, int policy = -1, dm_hbm_page page = HBM_OPEN_PAGE)
	{
		p = dm_hbm_preset_get(preset);
		dm_hbm_config cfg{ p, page, policy, 0, refresh };
		h = dm_hbm_new(&cfg);
		dm_hbm_log(h, log.data(), (uint32_t)log.size());
	}
	~Hbm() { dm_hbm_free(h); }
	uint32_t t(int param) const { return p->t[param]; }
	uint64_t addr(uint32_t pc, uint32_t bg, uint32_t bank, uint32_t row, uint32_t col = 0) const
	{
		uint64_t npc = p->stacks * p->pcs_per_stack;
		uint64_t a = row;
		a = a * p->banks_per_group + bank;
		a = a * p->columns + col;
		a = a * p->bankgroups + bg;
		a = a * npc + pc;
		return a * p->burst_bytes;
	}
	// request arriving at cycle c
	uint64_t rd(uint64_t c, uint64_t a) { return dm_hbm_request(h, c * p->tck_ps, a, false); }
	uint64_t wr(uint64_t c, uint64_t a) { return dm_hbm_request(h, c * p->tck_ps, a, true); }
	// cycle of the n-th (0-based) logged command of kind cmd
	int64_t at(int cmd, int n = 0) const
	{
		for (uint32_t i = 0; i < dm_hbm_log_count(h); i++)
			if (log[i].cmd == cmd && n-- == 0)
				return (int64_t)log[i].cycle;
		return -1;
	}
};

// ---------------------------------------------------------------- constraints

TEST(HbmConstraint, tRCDRD)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 5));
	EXPECT_EQ(m.at(HBM_ACT), 0);
	EXPECT_EQ(m.at(HBM_RD), m.t(HBM_tRCDRD));
}

TEST(HbmConstraint, tRCDWR)
{
	Hbm m("HBM2-2.0");
	m.wr(0, m.addr(0, 0, 0, 5));
	EXPECT_EQ(m.at(HBM_WR), m.t(HBM_tRCDWR));
}

TEST(HbmConstraint, tRAS)
{
	Hbm m("HBM2-2.0");                      // a row conflict right away: PRE waits for tRAS
	m.rd(0, m.addr(0, 0, 0, 5));
	m.rd(0, m.addr(0, 0, 0, 6));
	EXPECT_EQ(m.at(HBM_PRE), m.t(HBM_tRAS));
}

TEST(HbmConstraint, tRP)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 5));
	m.rd(0, m.addr(0, 0, 0, 6));
	EXPECT_EQ(m.at(HBM_ACT, 1), m.at(HBM_PRE) + m.t(HBM_tRP));
}

TEST(HbmConstraint, tRC)
{
	Hbm m("HBM3-6.4");                      // tRAS + tRP = 71 < tRC = 72: tRC binds
	m.rd(0, m.addr(0, 0, 0, 5));
	m.rd(0, m.addr(0, 0, 0, 6));
	EXPECT_EQ(m.at(HBM_ACT, 1), m.t(HBM_tRC));
	EXPECT_GT(m.t(HBM_tRC), m.t(HBM_tRAS) + m.t(HBM_tRP) - 1);
}

TEST(HbmConstraint, tRTP)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 5));            // opens the row
	m.rd(200, m.addr(0, 0, 0, 5));          // long after tRAS: a plain hit
	m.rd(200, m.addr(0, 0, 0, 6));          // conflict: PRE after the read
	EXPECT_EQ(m.at(HBM_RD, 1), 200);
	EXPECT_EQ(m.at(HBM_PRE), 200 + m.t(HBM_tRTP));
}

TEST(HbmConstraint, tWR)
{
	Hbm m("HBM2-2.0");
	m.wr(0, m.addr(0, 0, 0, 5));
	m.wr(200, m.addr(0, 0, 0, 5));
	m.wr(200, m.addr(0, 0, 0, 6));
	EXPECT_EQ(m.at(HBM_WR, 1), 200);
	EXPECT_EQ(m.at(HBM_PRE), 200 + m.t(HBM_CWL) + m.t(HBM_nBL) + m.t(HBM_tWR));
}

// open one row in each of the given (bg, bank), then measure column spacing
TEST(HbmConstraint, tCCD_S)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 1));
	m.rd(0, m.addr(0, 1, 0, 1));
	dm_hbm_log(m.h, m.log.data(), (uint32_t)m.log.size());
	m.rd(300, m.addr(0, 0, 0, 1));
	m.rd(300, m.addr(0, 1, 0, 1));          // different bank group
	EXPECT_EQ(m.at(HBM_RD, 0), 300);
	EXPECT_EQ(m.at(HBM_RD, 1), 300 + m.t(HBM_tCCDS));
}

TEST(HbmConstraint, tCCD_L)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 1));
	m.rd(0, m.addr(0, 0, 1, 1));
	dm_hbm_log(m.h, m.log.data(), (uint32_t)m.log.size());
	m.rd(300, m.addr(0, 0, 0, 1));
	m.rd(300, m.addr(0, 0, 1, 1));          // same bank group, other bank
	EXPECT_EQ(m.at(HBM_RD, 1) - m.at(HBM_RD, 0), m.t(HBM_tCCDL));
}

TEST(HbmConstraint, tRRD_S)
{
	Hbm m("HBM2-2.0");
	dm_hbm_submit(m.h, 0, m.addr(0, 0, 0, 1), false);
	dm_hbm_submit(m.h, 0, m.addr(0, 1, 0, 1), false);   // arrive together
	dm_hbm_drain(m.h);
	EXPECT_EQ(m.at(HBM_ACT, 1) - m.at(HBM_ACT, 0), m.t(HBM_tRRDS));
}

TEST(HbmConstraint, tRRD_L)
{
	Hbm m("HBM3-6.4");                      // tRRD_L 5 > tRRD_S 4
	dm_hbm_submit(m.h, 0, m.addr(0, 0, 0, 1), false);
	dm_hbm_submit(m.h, 0, m.addr(0, 0, 1, 1), false);
	dm_hbm_drain(m.h);
	EXPECT_EQ(m.at(HBM_ACT, 1) - m.at(HBM_ACT, 0), m.t(HBM_tRRDL));
}

TEST(HbmConstraint, tFAW)
{
	Hbm m("HBM3-6.4");                      // 4 x tRRD_S = 16 < tFAW = 24
	for (uint32_t i = 0; i < 5; i++)
		dm_hbm_submit(m.h, 0, m.addr(0, i % 4, i / 4, 1), false);
	dm_hbm_drain(m.h);
	for (int k = 1; k < 4; k++)
		EXPECT_EQ(m.at(HBM_ACT, k) - m.at(HBM_ACT, k - 1), (int64_t)m.t(HBM_tRRDS));
	EXPECT_EQ(m.at(HBM_ACT, 4) - m.at(HBM_ACT, 0), (int64_t)m.t(HBM_tFAW));
}

TEST(HbmConstraint, tRTW)
{
	Hbm m("HBM2-2.0");
	m.rd(0, m.addr(0, 0, 0, 1));
	m.wr(0, m.addr(0, 1, 0, 1));
	dm_hbm_log(m.h, m.log.data(), (uint32_t)m.log.size());
	m.rd(300, m.addr(0, 0, 0, 1));
	m.wr(301, m.addr(0, 1, 0, 1));
	EXPECT_EQ(m.at(HBM_WR) - m.at(HBM_RD), m.t(HBM_CL) + m.t(HBM_nBL) + 2 - m.t(HBM_CWL));
}

TEST(HbmConstraint, tWTR_S)
{
	Hbm m("HBM2-2.0");
	m.wr(0, m.addr(0, 0, 0, 1));
	m.rd(0, m.addr(0, 1, 0, 1));
	dm_hbm_log(m.h, m.log.data(), (uint32_t)m.log.size());
	m.wr(300, m.addr(0, 0, 0, 1));
	m.rd(301, m.addr(0, 1, 0, 1));          // other bank group
	EXPECT_EQ(m.at(HBM_RD) - m.at(HBM_WR), m.t(HBM_CWL) + m.t(HBM_nBL) + m.t(HBM_tWTRS));
}

TEST(HbmConstraint, tWTR_L)
{
	Hbm m("HBM2-2.0");
	m.wr(0, m.addr(0, 0, 0, 1));
	m.rd(0, m.addr(0, 0, 1, 1));
	dm_hbm_log(m.h, m.log.data(), (uint32_t)m.log.size());
	m.wr(300, m.addr(0, 0, 0, 1));
	m.rd(301, m.addr(0, 0, 1, 1));          // same bank group
	EXPECT_EQ(m.at(HBM_RD) - m.at(HBM_WR), m.t(HBM_CWL) + m.t(HBM_nBL) + m.t(HBM_tWTRL));
}

TEST(HbmConstraint, tRFC)
{
	Hbm m("HBM2-2.0", true, 0);             // all-bank refresh
	m.rd(0, m.addr(0, 0, 0, 1));
	m.rd(m.t(HBM_tREFI), m.addr(0, 0, 0, 2));   // arrives as the refresh falls due
	int64_t ref = m.at(HBM_REFAB);
	ASSERT_GE(ref, 0);
	EXPECT_EQ(ref, m.at(HBM_PREA) + m.t(HBM_tRP));
	EXPECT_EQ(m.at(HBM_ACT, 1), ref + m.t(HBM_tRFC));
}

TEST(HbmConstraint, tRFCpb)
{
	Hbm m("HBM2-2.0", true, 1);             // per-bank refresh
	// bank 0 of bank group 0 is refreshed first, at tREFI / 16
	uint64_t due = m.t(HBM_tREFI) / 16;
	m.rd(due, m.addr(0, 0, 0, 1));
	int64_t ref = m.at(HBM_REFPB);
	ASSERT_GE(ref, 0);
	EXPECT_EQ(m.at(HBM_ACT), ref + m.t(HBM_tRFCpb));
}

TEST(HbmConstraint, tRREFD)
{
	Hbm m("HBM2-2.0", true, 1);
	// two banks due back to back: the second refresh waits tRREFD
	uint64_t due = m.t(HBM_tREFI) * 2 / 16;
	m.rd(due, m.addr(0, 0, 2, 1));
	ASSERT_GE(m.at(HBM_REFPB, 1), 0);
	EXPECT_EQ(m.at(HBM_REFPB, 1) - m.at(HBM_REFPB, 0), m.t(HBM_tRREFD));
}

// ---------------------------------------------------------------- formulas

// the published base presets, then every target's derived part (so a new
// chip row is tested without naming it here)
std::vector<const char *> all_presets()
{
	std::vector<const char *> v;
	for (unsigned i = 0; dm_hbm_preset_base_name(i); i++)
		v.push_back(dm_hbm_preset_base_name(i));
	// each derived preset once: generations with the same HBM part share it
	for (int t = 1; t < ISA_NUM_TARGETS; t++)
		if (const dm_hbm_preset *p = dm_hbm_preset_for_target(t))
			if (std::none_of(v.begin(), v.end(), [&](const char *n) { return !std::strcmp(n, p->name); }))
				v.push_back(p->name);
	return v;
}

class Formula : public ::testing::TestWithParam<const char *> {};

TEST_P(Formula, UnloadedReadLatencyIsTrpPlusTrcdPlusCl)
{
	Hbm m(GetParam());
	m.rd(0, m.addr(3, 1, 2, 7));                   // some other row open
	uint64_t arrive = 1000;
	uint64_t first = m.rd(arrive, m.addr(3, 1, 2, 8));
	uint64_t want = (uint64_t)(m.t(HBM_tRP) + m.t(HBM_tRCDRD) + m.t(HBM_CL)) * m.p->tck_ps;
	EXPECT_EQ(first - arrive * m.p->tck_ps, want);
}

double stream_gbs(const char *preset, bool write, bool refresh, int policy, uint64_t bytes,
		  uint64_t stride = 0)
{
	Hbm m(preset, refresh, policy, HBM_CLOSED_PAGE);
	uint64_t end = dm_hbm_transfer(m.h, 0, 0, bytes, stride, write);
	return (double)bytes / (double)end * 1000.0;   // bytes per ps -> GB/s
}

TEST_P(Formula, StreamingReadsAndWritesReachNinetyPercentOfPeak)
{
	const dm_hbm_preset *p = dm_hbm_preset_get(GetParam());
	double peak = dm_hbm_peak_bytes_per_ps(p) * 1000.0;
	uint64_t bytes = 32ull << 20;
	double rd = stream_gbs(GetParam(), false, true, -1, bytes);
	double wr = stream_gbs(GetParam(), true, true, -1, bytes);
	EXPECT_GE(rd / peak, 0.90) << rd << " of " << peak;
	EXPECT_GE(wr / peak, 0.90) << wr << " of " << peak;
	EXPECT_LE(rd / peak, 1.0);
}

TEST_P(Formula, RefreshLimitedThroughput)
{
	const dm_hbm_preset *p = dm_hbm_preset_get(GetParam());
	const uint32_t *t = p->t;
	double peak = dm_hbm_peak_bytes_per_ps(p) * 1000.0;
	double want = peak * (1.0 - (double)(t[HBM_tRTP] + t[HBM_tRP] + t[HBM_tRFC] + t[HBM_tRCDRD]) /
					 t[HBM_tREFI]);
	// 100 us of streaming: ~25 refresh intervals, so where the last one
	// falls changes the average by well under 1%
	uint64_t bytes = (uint64_t)(dm_hbm_peak_bytes_per_ps(p) * 100e6) & ~(uint64_t)4095;
	double got = stream_gbs(GetParam(), false, true, 0, bytes);
	EXPECT_NEAR(got / want, 1.0, 0.01) << got << " vs " << want;
}

TEST_P(Formula, RandomReadsMatchTheActivateBound)
{
	// 64-byte reads (two bursts of one row) at random rows: each needs an ACT.
	// Per pseudo-channel the ACT rate is bounded by tRRD_S, tFAW/4 and, with
	// B banks in turn, tRC/B; the data bus by 2 bursts per ACT.  Refresh
	// (all-bank) takes its share on top.
	const dm_hbm_preset *p = dm_hbm_preset_get(GetParam());
	const uint32_t *t = p->t;
	uint32_t banks = p->bankgroups * p->banks_per_group;
	double act = std::max({ (double)t[HBM_tRRDS], t[HBM_tFAW] / 4.0, (double)t[HBM_tRC] / banks,
				2.0 * t[HBM_nBL] });
	double refresh = 1.0 - (double)(t[HBM_tRTP] + t[HBM_tRP] + t[HBM_tRFC] + t[HBM_tRCDRD]) /
				       t[HBM_tREFI];
	double bound = 64.0 / (act * p->tck_ps) * refresh * 1000.0;   // GB/s per PC

	Hbm m(GetParam(), true, 0, HBM_CLOSED_PAGE);
	std::mt19937_64 rng(42);
	const int n = 20000;
	for (int i = 0; i < n; i++) {
		uint32_t bg = rng() % p->bankgroups, bank = rng() % p->banks_per_group;
		uint32_t row = rng() % p->rows;
		dm_hbm_submit(m.h, 0, m.addr(0, bg, bank, row, 0), false);
		dm_hbm_submit(m.h, 0, m.addr(0, bg, bank, row, 1), false);
	}
	uint64_t end = dm_hbm_drain(m.h);
	double got = 64.0 * n / (double)end * 1000.0;
	EXPECT_NEAR(got / bound, 1.0, 0.10) << got << " GB/s vs bound " << bound;
}

INSTANTIATE_TEST_SUITE_P(Presets, Formula, ::testing::ValuesIn(all_presets()),
			 [](const ::testing::TestParamInfo<const char *> &i) {
				 std::string s = i.param;
				 std::replace(s.begin(), s.end(), '-', '_');
				 std::replace(s.begin(), s.end(), '.', '_');
				 return s;
			 });

TEST(HbmStats, CountsAndLatencyPercentiles)
{
	Hbm m("HBM3-5.7", true, -1, HBM_CLOSED_PAGE);
	uint64_t bytes = 4ull << 20;
	dm_hbm_transfer(m.h, 0, 0, bytes, 0, false);
	const dm_hbm_stats *st = dm_hbm_get_stats(m.h);
	EXPECT_EQ(st->reads, bytes / 32);
	EXPECT_EQ(st->bytes, bytes);
	EXPECT_EQ(st->row_hits + st->row_misses + st->row_conflicts, st->reads);
	EXPECT_GT(st->row_hits, st->row_misses * 20);            // streaming: mostly hits
	EXPECT_EQ(st->row_misses, st->acts);                     // closed page: no conflicts
	uint64_t p50 = dm_hbm_latency_percentile(m.h, 0.5), p99 = dm_hbm_latency_percentile(m.h, 0.99);
	EXPECT_LE(p50, p99);
	EXPECT_LE(p99, st->latency_max);
	EXPECT_GE(p50, m.t(HBM_CL));                             // never faster than CAS latency
}

TEST(HbmPresets, EveryChipHasOneAndItFindsByName)
{
	for (int t = 1; t < ISA_NUM_TARGETS; t++) {
		const dm_hbm_preset *p = dm_hbm_preset_for_target(t);
		ASSERT_NE(p, nullptr) << isa_target_name(t);
		// by name: this part's timing (generations that share a part share
		// its name; the first one's preset answers)
		const dm_hbm_preset *q = dm_hbm_preset_get(p->name);
		ASSERT_NE(q, nullptr) << p->name;
		EXPECT_EQ(q->tck_ps, p->tck_ps) << p->name;
		EXPECT_EQ(std::memcmp(q->t, p->t, sizeof(p->t)), 0) << p->name;
		const dm_chip *c = dm_chip_get(t);
		ASSERT_NE(c, nullptr);
		EXPECT_EQ(p->stacks, c->hbm_stacks);
		uint64_t cap = (uint64_t)p->stacks * p->pcs_per_stack * p->bankgroups * p->banks_per_group *
			       p->rows * p->columns * p->burst_bytes;
		EXPECT_EQ(cap, c->hbm_bytes) << p->name;
	}
	EXPECT_EQ(dm_hbm_preset_for_target(ISA_TARGET_INVALID), nullptr);
	EXPECT_EQ(dm_hbm_preset_get("HBM9-1.0"), nullptr);
}

TEST(HbmPresets, MatchTheChips)
{
	EXPECT_NEAR(dm_hbm_peak_bytes_per_ps(dm_hbm_preset_get("HBM2E-3.2")) * 1000, 819.2, 0.1);
	EXPECT_NEAR(dm_hbm_peak_bytes_per_ps(dm_hbm_preset_get("HBM3-5.7")) * 1000, 2900, 10);
	EXPECT_NEAR(dm_hbm_peak_bytes_per_ps(dm_hbm_preset_get("HBM3E-9.6")) * 1000, 4900, 10);
	EXPECT_NEAR(dm_hbm_peak_bytes_per_ps(dm_hbm_preset_get("HBM2-2.0")) * 1000, 256, 0.1);
	EXPECT_NEAR(dm_hbm_peak_bytes_per_ps(dm_hbm_preset_get("HBM3-6.4")) * 1000, 819.2, 0.1);
}

}  // namespace

// ---------------------------------------------------------- bulk vs request

struct Pattern {
	const char *name;
	uint64_t stride;
	int mode;
};

void PrintTo(const Pattern &p, std::ostream *os) { *os << p.name; }

class BulkAgreement : public ::testing::TestWithParam<std::tuple<Pattern, uint64_t>> {};

TEST_P(BulkAgreement, WithinThreePercentOfRequestLevel)
{
	const Pattern &pat = std::get<0>(GetParam());
	uint64_t bytes = std::get<1>(GetParam());
	const dm_hbm_preset *p = dm_hbm_preset_get("HBM3-5.7");      // trn2
	dm_hbm_config cfg{ p, HBM_CLOSED_PAGE, 0, 0, true };
	dm_hbm *h = dm_hbm_new(&cfg);
	uint64_t start = 1000000;                                    // 1 us in
	uint64_t req = dm_hbm_stream(h, start, 0, bytes, pat.stride, pat.mode);
	dm_hbm_free(h);
	dm_hbm_bulk *b = dm_hbm_bulk_new(p, true);
	uint64_t bulk = dm_hbm_bulk_stream(b, start, 0, bytes, pat.stride, pat.mode);
	dm_hbm_bulk_free(b);
	double r = (double)(req - start), k = (double)(bulk - start);
	EXPECT_NEAR(k / r, 1.0, 0.03) << pat.name << " " << bytes << ": request-level " << r
				      << " ps, bulk " << k << " ps";
}

const Pattern kPatterns[] = {
	{ "sequential", 32, HBM_READS },
	{ "sequential_writes", 32, HBM_WRITES },
	{ "strided_64B", 64, HBM_READS },            // every other pseudo-channel
	{ "strided_8KiB", 8192, HBM_READS },         // rows of few pseudo-channels
	{ "mixed", 32, HBM_MIXED },
};

INSTANTIATE_TEST_SUITE_P(
	Streams, BulkAgreement,
	::testing::Combine(::testing::ValuesIn(kPatterns),
			   ::testing::Values(1ull << 20, 16ull << 20, 256ull << 20)),
	[](const ::testing::TestParamInfo<std::tuple<Pattern, uint64_t>> &i) {
		return std::string(std::get<0>(i.param).name) + "_" +
		       std::to_string(std::get<1>(i.param) >> 20) + "MiB";
	});
