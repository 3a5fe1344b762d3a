// Run-time control flow: `branch` on a sequencer register and `fence`, a
// barrier that zeroes semaphores on release.  NKI's nl.dynamic_range and
// loops on a register loaded from memory: "The NKI compiler compiles such
// dynamic looping constructs to branching instructions executed by engine
// sequencers" (SDK nki.isa.register_alloc).  Each engine runs the same loop
// skeleton; the fence between iterations lets one body, with its semaphore
// counts, serve every iteration.
#include <cstring>
#include <fstream>
#include <iterator>

#include "sim_util.h"

namespace {

class ControlFlow : public RuntimeTest {};

std::vector<uint8_t> floats(std::initializer_list<float> v)
{
	std::vector<uint8_t> b(v.size() * 4);
	memcpy(b.data(), v.begin(), b.size());
	return b;
}

float as_float(const std::vector<uint8_t> &b, size_t i)
{
	float v;
	memcpy(&v, b.data() + 4 * i, 4);
	return v;
}

// y = n * x (examples/programs/dynamic_loop.nsasm): SyncE loads n, then
// loops n times loading x (a DMA on semaphore 2, drained before each fence);
// VectorE adds each load into y.  After the loop, semaphores 0 and 1 count
// again from 0 (their waits say value=1).
std::string loop_program()
{
	std::ifstream f(std::string(NSIM_EXAMPLES_DIR) + "/dynamic_loop.nsasm");
	return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST_F(ControlFlow, LoopRunsItsRegistersCount)
{
	start("trn2");
	ASSERT_FALSE(loop_program().empty());
	uint64_t prev_ps = 0;
	for (int32_t n : { 0, 1, 5 }) {
		SimRun r = run_program(loop_program(), 0, { { "n", word(n) }, { "x", floats({ 1, 2, 3, 4 }) } });
		ASSERT_EQ(r.status, NSIM_SUCCESS) << n << ": " << r.error;
		for (size_t i = 0; i < 4; i++)
			EXPECT_EQ(as_float(r.out["y"], i), (float)n * (float)(i + 1)) << n << " " << i;
		// every iteration costs time: a load, an add and a fence
		EXPECT_GT(r.stats.total_ps, prev_ps) << n;
		prev_ps = r.stats.total_ps;
		// the body's add ran once per iteration
		EXPECT_EQ(r.stats.op_instructions[ISA_ENGINE_VECTOR][ISA_OP_tensor_tensor], (uint64_t)n);
	}
}

TEST_F(ControlFlow, SameInputsSameCycles)
{
	start("trn2");
	SimRun a = run_program(loop_program(), 0, { { "n", word(7) }, { "x", floats({ 1, 2, 3, 4 }) } });
	SimRun b = run_program(loop_program(), 0, { { "n", word(7) }, { "x", floats({ 1, 2, 3, 4 }) } });
	ASSERT_EQ(a.status, NSIM_SUCCESS) << a.error;
	EXPECT_EQ(a.stats.total_ps, b.stats.total_ps);
	EXPECT_EQ(a.out["y"], b.out["y"]);
}

TEST_F(ControlFlow, TimingOnlyModeRefusesARegisterBranch)
{
	start("trn2", NSIM_MODE_TIMING);
	SimRun r = run_program(loop_program(), 0, { { "n", word(2) } });
	EXPECT_EQ(r.status, NSIM_EXEC_ERR);
	EXPECT_NE(r.error.find("timing-only mode"), std::string::npos) << r.error;
}

// the caller vouches that its inputs hold values: the loop runs as in full
// mode, and timing-only mode times it the same
TEST_F(ControlFlow, TimingOnlyModeComputesWhenTheInputsHoldData)
{
	start("trn2");
	SimRun full = run_program(loop_program(), 0, { { "n", word(4) }, { "x", floats({ 1, 2, 3, 4 }) } });
	ASSERT_EQ(full.status, NSIM_SUCCESS) << full.error;
	start("trn2", NSIM_MODE_TIMING);
	SimRun t = run_program(loop_program(), 0, { { "n", word(4) }, { "x", floats({ 1, 2, 3, 4 }) } },
			       NSIM_EXEC_DATA_CONTROL);
	ASSERT_EQ(t.status, NSIM_SUCCESS) << t.error;
	EXPECT_EQ(t.stats.total_ps, full.stats.total_ps);
	EXPECT_EQ(t.stats.op_instructions[ISA_ENGINE_VECTOR][ISA_OP_tensor_tensor], 4u);
}

TEST_F(ControlFlow, RunawayLoopFaults)
{
	start("trn2");
	SimRun r = run_program(".target trn2\n.semaphores 1\n.scratch 0\n.engine sync\n"
			       "    nop cycles=1\n    branch to=0\n    end\n");
	EXPECT_EQ(r.status, NSIM_EXEC_ERR);
	EXPECT_NE(r.error.find("backward branches"), std::string::npos) << r.error;
}

TEST_F(ControlFlow, ValidatorRules)
{
	auto fails = [](const std::string &line, const char *what) {
		std::string t = std::string(".target trn2\n.semaphores 2\n.scratch 0\n.engine sync\n    ") + line +
				"\n    end\n";
		isa_program *p = nullptr;
		isa_diag d{};
		EXPECT_NE(isa_asm(t.data(), t.size(), &p, &d), ISA_OK) << line;
		EXPECT_NE(std::string(d.msg).find(what), std::string::npos) << line << ": " << d.msg;
		isa_program_free(p);
	};
	fails("branch to=2", "the stream has 2");
	fails("branch to=0 a=1 cond=is_lt b=2 imm=3", "not both");
	fails("branch to=0 a=1 cond=add imm=3", "cannot be used here");
	fails("branch to=0 b=2", "compare with register a=");
	fails("fence sems=3", "program declares 2");
}

} // namespace
