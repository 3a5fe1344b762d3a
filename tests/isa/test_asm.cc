// The text reader: syntax errors carry line numbers, hostile text is
// rejected without crashing, and validator errors point at the source line.
#include "test_util.h"

#include <gtest/gtest.h>

namespace {

isa_status asm_status(const std::string &text, isa_diag *d)
{
	Program p = assemble(text, d);
	return p ? ISA_OK : d->code;
}

TEST(IsaAsm, EmptyTextIsAnEmptyProgram)
{
	isa_diag d{};
	Program p = assemble("", &d);
	ASSERT_TRUE(p) << d.msg;
	EXPECT_EQ(p->target, ISA_TARGET_trn2);
	EXPECT_EQ(isa_program_instr_count(p.get()), 0u);
}

TEST(IsaAsm, SyntaxErrorsNameTheLine)
{
	isa_diag d{};
	EXPECT_EQ(asm_status("; ok\n.target trn1\n\n.bogus 1\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(d.line, 4);
	EXPECT_NE(std::string(d.msg).find("line 4: "), std::string::npos) << d.msg;
	EXPECT_NE(std::string(d.msg).find(".bogus"), std::string::npos) << d.msg;
}

TEST(IsaAsm, ValidatorErrorsNameTheInstructionLine)
{
	isa_diag d{};
	const char *text = ".engine vector\n"
			   "memset dst=sbuf:fp32[0:4]{1x8} value=1\n"
			   "memset dst=sbuf:fp32[0:4]+229372{1x8} value=1\n"
			   "end\n";
	EXPECT_EQ(asm_status(text, &d), ISA_E_OUT_OF_BOUNDS);
	EXPECT_EQ(d.line, 3);
	EXPECT_EQ(d.index, 1);
	EXPECT_EQ(d.engine, ISA_ENGINE_VECTOR);
}

TEST(IsaAsm, DirectiveErrors)
{
	isa_diag d{};
	EXPECT_EQ(asm_status(".target trn2\n.target trn1\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".semaphores -1\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".semaphores 99999999999\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".engine dma\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".tensor x\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".tensor x input fp32 4\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".tensor x input fp32 [1,2,3,4,5,6,7,8,9]\n", &d), ISA_E_BAD_TENSOR);
	EXPECT_EQ(asm_status(".tensor x input fp32 [4] offset=0\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".tensor x kind fp32 [4]\n", &d), ISA_E_BAD_TENSOR);
	EXPECT_EQ(asm_status(".dma d direct dst=sbuf:fp32[0:1]{1x1}\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".dma d sideways dst=sbuf:fp32[0:1]{1x1} src=sbuf:fp32[0:1]{1x1}\n", &d),
		  ISA_E_BAD_DESC);
	// oob=skip belongs to indexed (gather / scatter) transfers only
	EXPECT_EQ(asm_status(".dma d direct dst=sbuf:fp32[0:1]{1x1} src=sbuf:fp32[0:1]+4{1x1} oob=skip\n", &d),
		  ISA_E_SYNTAX);
}

TEST(IsaAsm, HostileInputIsRejectedCleanly)
{
	isa_diag d{};
	std::string nul("nop\0x\n", 6);
	EXPECT_EQ(asm_status(".engine sync\n" + nul, &d), ISA_E_SYNTAX);
	std::string many = ".engine sync\nnop";
	for (int i = 0; i < 40; i++)
		many += " x";
	EXPECT_EQ(asm_status(many, &d), ISA_E_SYNTAX);
	EXPECT_NE(std::string(d.msg).find("tokens"), std::string::npos);
	std::string long_name = ".tensor " + std::string(300, 'a') + " input fp32 [1]\n";
	EXPECT_EQ(asm_status(long_name, &d), ISA_E_BAD_TENSOR);
	const char *bad_aps[] = { "sbuf:", "sbuf:fp32", "sbuf:fp32[", "sbuf:fp32[0:1", "sbuf:fp32[0:1]",
				  "sbuf:fp32[0:1]{", "sbuf:fp32[0:1]{1x}", "sbuf:fp32[0:1]{x1}",
				  "sbuf:fp32[0:1]{1x1,}", "sbuf:fp32[0:1]{1x1}x", "sbuf:fp32[1:0]{1x1}",
				  "sbuf:fp32[0:1]+{1x1}", "sbuf:fp32[0:1]+-4{1x1}", "hbm(:fp32[1x1]{1x1}",
				  "hbm()", "psum:fp32[0:999999]{1x1}", "sbuf:fp32[0:1]{99999999999x1}",
				  "sbuf:xx[0:1]{1x1}" };
	for (const char *ap : bad_aps) {
		std::string t = ".engine vector\nmemset dst=" + std::string(ap) + "\nend\n";
		EXPECT_NE(asm_status(t, &d), ISA_OK) << ap;
		EXPECT_EQ(d.line, 2) << ap;
	}
	const char *bad_imms[] = { "nan", "1e999", "0x1ffffffff", "2147483648", "1.5.5", "", "--1",
				   "nan(0x1)", "nan(0x7fc00000", "nan(0xegelu_backward)",
				   "nan(0x0123456789abcdef01234)" };
	for (const char *v : bad_imms) {
		std::string t = ".engine vector\nmemset dst=sbuf:fp32[0:1]{1x1} value=" + std::string(v) + "\nend\n";
		EXPECT_EQ(asm_status(t, &d), ISA_E_SYNTAX) << v << ": " << d.msg;
	}
}

TEST(IsaAsm, FlagsAndLists)
{
	isa_diag d{};
	EXPECT_EQ(asm_status(".engine gpsimd\niota dst=sbuf:int32[0:1]{1x4} mul=1,\nend\n", &d), ISA_OK)
		<< d.msg;   // strtok_r skips the empty tail; one multiplier
	EXPECT_EQ(asm_status(".engine gpsimd\niota dst=sbuf:int32[0:1]{1x4} mul=a\nend\n", &d), ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".engine vector\ntensor_reduce dst=sbuf:fp32[0:1]{1x1} src=sbuf:fp32[0:1]{1x4} negate=1\nend\n", &d),
		  ISA_E_SYNTAX);
	EXPECT_EQ(asm_status(".engine vector\ntensor_reduce dst=sbuf:fp32[0:1]{1x1} src=sbuf:fp32[0:1]{1x4} op\nend\n", &d),
		  ISA_E_SYNTAX);
}

}  // namespace
