// The trace writer (traces/writer.c) driven through its observer hooks, and
// the runtime's profiling API: overlapping instructions drawn without
// overlap, the per-program aggregate, the byte budget, and the API's errors.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

extern "C" {
#include "neuronsim/isa.h"
#include "neuronsim/runtime.h"
#include "writer.h"
}

namespace {

std::string slurp(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);
	std::stringstream s;
	s << f.rdbuf();
	return s.str();
}

std::string tmp_file(const char *name)
{
	return (testing::TempDir() + "/") + name;
}

trc_instr_event instr(int engine, int opcode, uint64_t start, uint64_t end)
{
	trc_instr_event e{};
	e.engine = engine;
	e.opcode = opcode;
	e.start_ps = start;
	e.end_ps = end;
	return e;
}

}  // namespace

TEST(TraceWriter, OverlappingInstructionsAreDrawnFromWhereThePreviousEnds)
{
	std::string path = tmp_file("overlap.json");
	trc_writer *w = nullptr;
	trc_options o{};
	ASSERT_EQ(trc_writer_open(&w, path.c_str(), &o), 0);
	trc_instr_event a = instr(0, ISA_OP_multiply_moving, 0, 1000000);
	trc_instr_event b = instr(0, ISA_OP_load_stationary, 500000, 2000000);
	trc_instr_event c = instr(0, ISA_OP_load_stationary, 600000, 900000);   // hidden under a
	w->obs.instr(w->obs.ctx, &a);
	w->obs.instr(w->obs.ctx, &b);
	w->obs.instr(w->obs.ctx, &c);
	ASSERT_EQ(trc_writer_close(w), 0);
	std::string t = slurp(path);
	EXPECT_NE(t.find("\"ts\":0.000000,\"dur\":1.000000"), std::string::npos) << t;
	EXPECT_NE(t.find("\"ts\":1.000000,\"dur\":1.000000"), std::string::npos) << t;
	// the hidden one is a zero-length slice at the end of the busy time so far
	EXPECT_NE(t.find("\"ts\":2.000000,\"dur\":0.000000"), std::string::npos) << t;
}

TEST(TraceWriter, ProgramDetailDrawsOneSlicePerEngine)
{
	std::string path = tmp_file("agg.json");
	trc_writer *w = nullptr;
	trc_options o{};
	o.detail = TRC_DETAIL_OP;
	ASSERT_EQ(trc_writer_open(&w, path.c_str(), &o), 0);
	for (int i = 0; i < 10; i++) {
		trc_instr_event e = instr(1, ISA_OP_tensor_tensor, i * 2000000ull, i * 2000000ull + 1000000);
		w->obs.instr(w->obs.ctx, &e);
	}
	trc_program_event p{ 0, "aten::add", "program 1", 0, 20000000, 0, 0 };
	w->obs.program(w->obs.ctx, &p);
	ASSERT_EQ(trc_writer_close(w), 0);
	std::string t = slurp(path);
	EXPECT_EQ(t.find("tensor_tensor"), std::string::npos);
	EXPECT_NE(t.find("\"instructions\":10,\"busy_ps\":10000000"), std::string::npos) << t;
	EXPECT_NE(t.find("\"name\":\"aten::add\",\"cat\":\"program\""), std::string::npos) << t;
}

TEST(TraceWriter, BudgetBoundsTheFileAndSaysWhatWasLeftOut)
{
	for (const char *name : { "budget.pftrace", "budget.json" }) {
		std::string path = tmp_file(name);
		trc_writer *w = nullptr;
		trc_options o{};
		o.max_bytes = 100u << 10;
		ASSERT_EQ(trc_writer_open(&w, path.c_str(), &o), 0);
		// 0.25 ms apart, varying lengths: per-instruction, then per-program
		// slices, then 1 ms utilization windows, until the budget is spent
		for (int i = 0; i < 40000; i++) {
			uint64_t t = i * 250000000ull;
			trc_instr_event e = instr(i % 5, ISA_OP_activation, t, t + 900 + (i % 97) * 1000);
			e.text = "activation dst=sbuf:fp32[0:128]{1x512} src=psum:fp32[0:128]{1x512} func=gelu";
			w->obs.instr(w->obs.ctx, &e);
			if (i % 10 == 9) {
				trc_program_event p{ 0, "aten::gelu", "program 7", t - 9 * 250000000ull, t + 200000, 0, 0 };
				w->obs.program(w->obs.ctx, &p);
			}
		}
		ASSERT_EQ(trc_writer_close(w), 0);
		std::string t = slurp(path);
		EXPECT_LE(t.size(), o.max_bytes) << name;
		EXPECT_GT(t.size(), o.max_bytes / 4 * 3) << name;
		EXPECT_NE(t.find("per-program slices from here on"), std::string::npos) << name;
		EXPECT_NE(t.find("engine utilization per 1 ms from here on"), std::string::npos) << name;
		EXPECT_NE(t.find("VectorE busy %"), std::string::npos) << name;
		EXPECT_NE(t.find("later events left out"), std::string::npos) << name;
	}
}

TEST(TraceWriter, UtilizationWindowsReadBusyPercentAndZeroWhenIdle)
{
	std::string path = tmp_file("util.json");
	trc_writer *w = nullptr;
	trc_options o{};
	o.detail = TRC_DETAIL_UTIL;
	ASSERT_EQ(trc_writer_open(&w, path.c_str(), &o), 0);
	const uint64_t ms = 1000000000ull;
	trc_instr_event a = instr(2, ISA_OP_activation, 100, 100 + ms / 4);           // window 0: 25%
	trc_instr_event b = instr(2, ISA_OP_activation, ms / 2, ms / 2 + ms / 4);      // window 0: 50% in all
	trc_instr_event c = instr(2, ISA_OP_activation, 3 * ms + ms / 2, 4 * ms + ms / 10);  // 50% + 10%
	for (auto *e : { &a, &b, &c })
		w->obs.instr(w->obs.ctx, e);
	ASSERT_EQ(trc_writer_close(w), 0);
	std::string t = slurp(path);
	auto sample = [&](const char *ts, const char *value) {
		std::string want = std::string("\"ts\":") + ts + ",\"args\":{\"value\":" + value + "}";
		return t.find(want) != std::string::npos;
	};
	EXPECT_EQ(t.find("activation"), std::string::npos) << "no slices at this detail";
	EXPECT_TRUE(sample("0.000000", "50")) << t;
	EXPECT_TRUE(sample("1000.000000", "0")) << t;      // idle windows 1-2
	EXPECT_TRUE(sample("3000.000000", "50")) << t;
	EXPECT_TRUE(sample("4000.000000", "10")) << t;
	EXPECT_TRUE(sample("5000.000000", "0")) << t;      // closed at the end
	EXPECT_EQ(t.find("\"ts\":2000.000000"), std::string::npos) << "a repeated 0 is left out";
}

TEST(TraceWriter, RejectsUnknownDetailAndUnwritablePaths)
{
	trc_writer *w = nullptr;
	trc_options o{};
	o.detail = 7;
	EXPECT_EQ(trc_writer_open(&w, tmp_file("x.pftrace").c_str(), &o), -1);
	o.detail = 0;
	EXPECT_EQ(trc_writer_open(&w, "/nonexistent-dir/x.pftrace", &o), -1);
	EXPECT_EQ(trc_format_of("a.json"), TRC_FORMAT_CHROME);
	EXPECT_EQ(trc_format_of("a.pftrace"), TRC_FORMAT_PERFETTO);
}

TEST(Profile, ApiErrors)
{
	ASSERT_EQ(nsim_init(), NSIM_SUCCESS);
	nsim_profile_options none{};
	EXPECT_EQ(nsim_profile_start_opts(&none), NSIM_INVALID);
	EXPECT_NE(std::string(nsim_last_error()).find("neither a trace nor a summary"), std::string::npos);
	std::string trace = tmp_file("api.pftrace");
	nsim_profile_options bad{ trace.c_str(), nullptr, 5, 0 };
	EXPECT_EQ(nsim_profile_start_opts(&bad), NSIM_INVALID);
	nsim_profile_options ok{ trace.c_str(), nullptr, 0, 0 };
	ASSERT_EQ(nsim_profile_start_opts(&ok), NSIM_SUCCESS);
	EXPECT_TRUE(nsim_profile_active());
	EXPECT_EQ(nsim_profile_start_opts(&ok), NSIM_INVALID);
	EXPECT_EQ(nsim_profile_range(0, "r", 10, 5, 0), NSIM_INVALID);
	EXPECT_EQ(nsim_profile_range(0, "r", 0, 5, 4), NSIM_INVALID);
	EXPECT_EQ(nsim_profile_range(0, "r", 0, 5, 0), NSIM_SUCCESS);
	EXPECT_EQ(nsim_profile_stop(), NSIM_SUCCESS);
	EXPECT_FALSE(nsim_profile_active());
	EXPECT_EQ(nsim_profile_stop(), NSIM_SUCCESS);   // stopping twice is harmless
	EXPECT_NE(slurp(trace).find("Ranges (depth 0)"), std::string::npos);
	nsim_close();
}

TEST(TraceWriter, JsonEscapeQuotesControlBytesAndNeverOverflows)
{
	char buf[16];
	EXPECT_EQ(trc_json_escape(buf, sizeof(buf), "a\"b\\c\n"), 13u);
	EXPECT_STREQ(buf, "a\\\"b\\\\c\\u000a");
	// cut at a whole escape, always terminated
	EXPECT_EQ(trc_json_escape(buf, 4, "\"\"\""), 2u);
	EXPECT_STREQ(buf, "\\\"");
	EXPECT_EQ(trc_json_escape(buf, 1, "abc"), 0u);
	EXPECT_STREQ(buf, "");
}
