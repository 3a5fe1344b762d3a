// Example programs under examples/programs use every opcode, and each one
// round-trips asm -> disasm -> asm byte-exactly (and decode -> encode).
#include "test_util.h"

#include <gtest/gtest.h>

#include <set>

namespace {

TEST(IsaRoundTrip, ExamplesRoundTripByteExactly)
{
	for (const std::string &path : nsim_example_paths()) {
		SCOPED_TRACE(path);
		std::string text = read_text(path);
		ASSERT_FALSE(text.empty());
		isa_diag d{};
		Program p = assemble(text, &d);
		ASSERT_TRUE(p) << d.msg;
		std::vector<uint8_t> bin1 = encode(p.get());
		ASSERT_FALSE(bin1.empty());

		// binary -> program -> text -> program -> binary
		isa_program *raw = nullptr;
		ASSERT_EQ(isa_program_load(bin1.data(), bin1.size(), &raw, &d), ISA_OK) << d.msg;
		Program p2(raw);
		std::string text2 = disasm(p2.get());
		ASSERT_FALSE(text2.empty());
		Program p3 = assemble(text2, &d);
		ASSERT_TRUE(p3) << d.msg << "\n" << text2;
		std::vector<uint8_t> bin2 = encode(p3.get());
		EXPECT_EQ(bin1, bin2);
		// and the text form is a fixed point after one pass
		EXPECT_EQ(disasm(p3.get()), text2);
	}
}

TEST(IsaRoundTrip, ExamplesUseEveryOpcodeAndEveryEngine)
{
	std::set<int> ops;
	std::set<int> op_engine;  // opcode * 8 + engine for multi-engine opcodes
	for (const std::string &path : nsim_example_paths()) {
		isa_diag d{};
		Program p = assemble(read_text(path), &d);
		ASSERT_TRUE(p) << path << ": " << d.msg;
		for (int e = 0; e < ISA_NUM_ENGINES; e++)
			for (uint32_t i = 0; i < p->n_instr[e]; i++) {
				ops.insert(p->stream[e][i].opcode);
				op_engine.insert(p->stream[e][i].opcode * 8 + e);
			}
	}
	for (int op = 0; op < ISA_NUM_OPS; op++)
		EXPECT_TRUE(ops.count(op)) << "no example uses " << isa_op_name(op);
	// both forms of nc_transpose are exercised
	EXPECT_TRUE(op_engine.count(ISA_OP_nc_transpose * 8 + ISA_ENGINE_TENSOR));
	EXPECT_TRUE(op_engine.count(ISA_OP_nc_transpose * 8 + ISA_ENGINE_VECTOR));
}

// Immediates of every shape survive the text form bit-exactly.
TEST(IsaRoundTrip, ImmediatesKeepTheirBits)
{
	const char *vals[] = { "0", "-1", "2147483647", "-2147483648", "0xffffffff", "1.0",
			       "-0.0", "0.1", "3.40282347e+38", "1.40129846e-45", "inf", "-inf",
			       "nan(0x7fc00001)", "nan(0xffc00000)", "1e-3" };
	for (const char *v : vals) {
		SCOPED_TRACE(v);
		std::string text = ".engine vector\nmemset dst=sbuf:fp32[0:1]{1x1} value=" +
				   std::string(v) + "\nend\n";
		isa_diag d{};
		Program p = assemble(text, &d);
		ASSERT_TRUE(p) << d.msg;
		std::vector<uint8_t> b1 = encode(p.get());
		Program p2 = assemble(disasm(p.get()), &d);
		ASSERT_TRUE(p2) << d.msg;
		EXPECT_EQ(encode(p2.get()), b1);
	}
}

}  // namespace
