// Sequencer registers: reg_load / reg_alu / reg_store and a dma_copy whose
// HBM offset moves by a register (dyn=).  Source: "each sequencer has 64 x
// 32-bit registers" (HARDWARE.md); NKI's NkiScalar: "A 32-bit scalar is never
// widened, so arithmetic that outgrows 32 bits wraps ... 100000 * 100000
// yields 1410065408" (SDK nki/deep-dives/nki-scalar.rst).
#include <cstring>
#include <fstream>
#include <iterator>

#include "sim_util.h"

namespace {

class Registers : public RuntimeTest {};

int32_t as_int(const std::vector<uint8_t> &b)
{
	int32_t v;
	memcpy(&v, b.data(), 4);
	return v;
}

const char *kArith = R"(
.target trn2
.semaphores 1
.scratch 0
.tensor a input int32 [1,1]
.tensor y output int32 [1,1]
.dma la direct dst=sbuf:int32[0:1]{1x1} src=hbm(a):int32[1x1]{1x1}
.dma sy direct dst=hbm(y):int32[1x1]{1x1} src=sbuf:int32[0:1]+4{1x1}
.engine sync
    dma_copy desc=la queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=1
    reg_load reg=0 src=sbuf:int32[0:1]{1x1}
    reg_alu reg=1 op=multiply a=0 b=0
    reg_alu reg=2 op=subtract a=1 imm=OFFSET
    reg_store dst=sbuf:int32[0:1]+4{1x1} reg=2
    dma_copy desc=sy queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=2
    end
)";

std::string arith(int32_t offset)
{
	std::string t = kArith;
	t.replace(t.find("OFFSET"), 6, std::to_string(offset));
	return t;
}

TEST_F(Registers, ArithmeticWrapsAt32Bits)
{
	start("trn2");
	SimRun r = run_program(arith(0), 0, { { "a", word(100000) } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	EXPECT_EQ(as_int(r.out["y"]), 1410065408);
	r = run_program(arith(5), 0, { { "a", word(-7) } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	EXPECT_EQ(as_int(r.out["y"]), 44);
}

TEST_F(Registers, RegistersStartAtZeroInEveryProgram)
{
	start("trn2");
	std::string t = arith(0);
	t.replace(t.find("reg_load reg=0"), 14, "reg_load reg=9");   // reg 0 never loaded
	SimRun r = run_program(t, 0, { { "a", word(12345) } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	EXPECT_EQ(as_int(r.out["y"]), 0);
}

TEST_F(Registers, DynamicDmaOutsideItsTensorFaults)
{
	start("trn2");
	std::ifstream f(std::string(NSIM_EXAMPLES_DIR) + "/dynamic_row.nsasm");
	std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
	ASSERT_FALSE(text.empty());
	SimRun ok = run_program(text, 0, { { "idx", word(3) } });
	ASSERT_EQ(ok.status, NSIM_SUCCESS) << ok.error;
	EXPECT_EQ(as_int(ok.out["r"]), 7);
	// row block 2*4+1 = 9 of 8 lies past x's 64 rows; -1 gives a negative offset
	for (int32_t idx : { 4, -1 }) {
		SimRun bad = run_program(text, 0, { { "idx", word(idx) } });
		EXPECT_EQ(bad.status, NSIM_EXEC_OOB) << idx << ": " << bad.error;
	}
}

TEST_F(Registers, ValidatorRules)
{
	auto fails = [](const std::string &line, const char *what) {
		std::string t = std::string(".target trn2\n.semaphores 1\n.scratch 0\n.engine sync\n    ") + line +
				"\n    end\n";
		isa_program *p = nullptr;
		isa_diag d{};
		EXPECT_NE(isa_asm(t.data(), t.size(), &p, &d), ISA_OK) << line;
		EXPECT_NE(std::string(d.msg).find(what), std::string::npos) << d.msg;
		isa_program_free(p);
	};
	fails("reg_load reg=0 src=sbuf:fp32[0:1]{1x1}", "int32");
	fails("reg_load reg=0 src=sbuf:int32[0:2]{1x1}", "one element");
	fails("reg_load reg=64 src=sbuf:int32[0:1]{1x1}", "at most 63");
	fails("reg_alu reg=1 op=divide a=0 imm=2", "not a sequencer operation");
	fails("reg_alu reg=1 op=add a=0 b=2 imm=3", "not both");
}

} // namespace
