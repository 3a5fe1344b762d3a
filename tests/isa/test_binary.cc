// The binary form (.nsp): structural rejections by the decoder -- truncation
// anywhere, bad magic/version/target, trailing data, unknown codes, counts
// that cannot fit -- each with a message naming the field.
#include "base_program.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace {

std::vector<uint8_t> base_binary()
{
	isa_diag d{};
	Program p = assemble(kBaseProgram, &d);
	EXPECT_TRUE(p) << d.msg;
	return encode(p.get());
}

// A program with one vector stream "memset; end" and no tables, so byte
// offsets are easy to name: header is 64 bytes, then the memset.
std::vector<uint8_t> tiny_binary()
{
	isa_diag d{};
	Program p = assemble(".engine vector\nmemset dst=sbuf:fp32[0:4]{1x8} value=1.5\nend\n", &d);
	EXPECT_TRUE(p) << d.msg;
	return encode(p.get());
}

enum {
	OFF_MAJOR = 8, OFF_MINOR = 10, OFF_TARGET = 12, OFF_RESERVED = 13, OFF_NSEM = 16,
	OFF_NTENSORS = 28, OFF_NDMA = 32, OFF_CONSTS = 36, OFF_NINSTR = 44, HEADER = 64,
	// tiny program: memset opcode, then its dst AP, then the immediate
	OFF_OPCODE = HEADER, OFF_AP_SPACE = HEADER + 1, OFF_AP_DTYPE = HEADER + 2,
	OFF_AP_NDIMS = HEADER + 3, OFF_IMM_KIND = HEADER + 1 + 3 + 3 + 8 + 8,
};

isa_status load(const std::vector<uint8_t> &b, isa_diag *d)
{
	isa_program *p = nullptr;
	isa_status st = isa_program_load(b.data(), b.size(), &p, d);
	isa_program_free(p);
	if (st != ISA_OK) {
		EXPECT_EQ(p, nullptr);
	}
	return st;
}

void put32(std::vector<uint8_t> &b, size_t off, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[off + i] = (uint8_t)(v >> (8 * i));
}

TEST(IsaBinary, TinyLayoutIsAsDocumented)
{
	std::vector<uint8_t> b = tiny_binary();
	ASSERT_EQ(b[OFF_OPCODE], isa_ops[ISA_OP_memset].code);
	EXPECT_EQ(b[OFF_AP_SPACE], ISA_SPACE_SBUF);
	EXPECT_EQ(b[OFF_IMM_KIND], ISA_IMM_F32);
	EXPECT_EQ(b.back(), isa_ops[ISA_OP_end].code);
	isa_diag d{};
	EXPECT_EQ(load(b, &d), ISA_OK) << d.msg;
}

TEST(IsaBinary, EveryTruncationIsRejected)
{
	std::vector<uint8_t> b = base_binary();
	ASSERT_GT(b.size(), 100u);
	for (size_t n = 0; n < b.size(); n++) {
		std::vector<uint8_t> cut(b.begin(), b.begin() + n);
		isa_diag d{};
		EXPECT_EQ(load(cut, &d), ISA_E_TRUNCATED) << "length " << n << ": " << d.msg;
	}
}

TEST(IsaBinary, TrailingDataIsRejected)
{
	std::vector<uint8_t> b = base_binary();
	b.push_back(0);
	isa_diag d{};
	EXPECT_EQ(load(b, &d), ISA_E_TRAILING_DATA);
	EXPECT_NE(std::string(d.msg).find("1 bytes after"), std::string::npos) << d.msg;
}

struct Patch {
	const char *name;
	size_t off;
	uint8_t value;
	isa_status code;
	const char *expect;
};

const Patch kPatches[] = {
	{ "bad_magic", 0, 'X', ISA_E_BAD_MAGIC, "field magic" },
	{ "major_version", OFF_MAJOR, 3, ISA_E_BAD_VERSION, "version: 3." },
	{ "old_major_version", OFF_MAJOR, 1, ISA_E_BAD_VERSION, "version: 1." },
	{ "minor_version", OFF_MINOR, 9, ISA_E_BAD_VERSION, "2.9" },
	{ "target_code", OFF_TARGET, 0x44, ISA_E_BAD_TARGET, "code 68" },
	{ "reserved", OFF_RESERVED + 1, 1, ISA_E_BAD_VALUE, "reserved" },
	{ "unknown_opcode", OFF_OPCODE, 0xee, ISA_E_BAD_OPCODE, "0xee" },
	{ "unknown_space", OFF_AP_SPACE, 7, ISA_E_BAD_CODE, "memory space code 7" },
	{ "unknown_dtype", OFF_AP_DTYPE, 0x77, ISA_E_BAD_CODE, "dtype code 0x77" },
	{ "zero_dims", OFF_AP_NDIMS, 0, ISA_E_BAD_DIMS, "0 free dims" },
	{ "five_dims", OFF_AP_NDIMS, 5, ISA_E_BAD_DIMS, "5 free dims" },
	{ "imm_kind", OFF_IMM_KIND, 3, ISA_E_BAD_CODE, "immediate kind 3" },
};

void PrintTo(const Patch &c, std::ostream *os) { *os << c.name; }

class PatchTest : public ::testing::TestWithParam<Patch> {};

TEST_P(PatchTest, Rejected)
{
	const Patch &c = GetParam();
	std::vector<uint8_t> b = tiny_binary();
	b[c.off] = c.value;
	isa_diag d{};
	EXPECT_EQ(load(b, &d), c.code) << d.msg;
	EXPECT_NE(std::string(d.msg).find(c.expect), std::string::npos) << d.msg;
}

INSTANTIATE_TEST_SUITE_P(Decoder, PatchTest, ::testing::ValuesIn(kPatches),
			 [](const ::testing::TestParamInfo<Patch> &i) { return std::string(i.param.name); });

TEST(IsaBinary, HugeCountsAreRejectedBeforeAllocating)
{
	std::vector<uint8_t> b = tiny_binary();
	isa_diag d{};
	std::vector<uint8_t> t = b;
	put32(t, OFF_NTENSORS, 0xffffffffu);
	EXPECT_EQ(load(t, &d), ISA_E_LIMIT);
	EXPECT_NE(std::string(d.msg).find("n_tensors"), std::string::npos) << d.msg;
	t = b;
	put32(t, OFF_NTENSORS, 60000);   // under the limit, but cannot fit in the bytes left
	EXPECT_EQ(load(t, &d), ISA_E_TRUNCATED);
	EXPECT_NE(std::string(d.msg).find("cannot fit"), std::string::npos) << d.msg;
	t = b;
	put32(t, OFF_NDMA, 0x7fffffff);
	EXPECT_EQ(load(t, &d), ISA_E_LIMIT);
	t = b;
	put32(t, OFF_CONSTS + 4, 1);     // 4 GiB of constants
	EXPECT_EQ(load(t, &d), ISA_E_LIMIT);
	t = b;
	put32(t, OFF_NINSTR + 4 * ISA_ENGINE_VECTOR, 1u << 30);
	EXPECT_EQ(load(t, &d), ISA_E_LIMIT);
	t = b;
	put32(t, OFF_NINSTR + 4 * ISA_ENGINE_SCALAR, 3);   // claims instructions that are not there
	EXPECT_EQ(load(t, &d), ISA_E_TRUNCATED);
}

TEST(IsaBinary, DecodeKeepsSemanticChecksForTheValidator)
{
	// decode alone accepts a well-formed but invalid program; load rejects it
	std::vector<uint8_t> b = tiny_binary();
	put32(b, OFF_NSEM, 1000);
	isa_program *p = nullptr;
	isa_diag d{};
	ASSERT_EQ(isa_program_decode(b.data(), b.size(), &p, &d), ISA_OK) << d.msg;
	EXPECT_EQ(isa_validate(p, &d), ISA_E_LIMIT);
	isa_program_free(p);
	EXPECT_EQ(load(b, &d), ISA_E_LIMIT);
}

TEST(IsaBinary, NullAndEmptyInput)
{
	isa_program *p = nullptr;
	isa_diag d{};
	EXPECT_EQ(isa_program_load(nullptr, 0, &p, &d), ISA_E_TRUNCATED);
	EXPECT_EQ(isa_program_load("", 0, &p, &d), ISA_E_TRUNCATED);
	EXPECT_EQ(p, nullptr);
	EXPECT_EQ(isa_validate(nullptr, &d), ISA_E_BAD_VALUE);
}

// Tensor-name bytes: a zero length or an embedded NUL is a bad entry.
TEST(IsaBinary, BadTensorNames)
{
	isa_diag d{};
	Program p = assemble(".tensor abc input fp32 [4]\n", &d);
	ASSERT_TRUE(p) << d.msg;
	std::vector<uint8_t> b = encode(p.get());
	ASSERT_EQ(b[HEADER], 3);       // name length
	std::vector<uint8_t> t = b;
	t[HEADER] = 0;
	EXPECT_NE(load(t, &d), ISA_OK);
	EXPECT_NE(std::string(d.msg).find("name length 0"), std::string::npos) << d.msg;
	t = b;
	t[HEADER + 2] = 0;
	EXPECT_EQ(load(t, &d), ISA_E_BAD_TENSOR);
	EXPECT_NE(std::string(d.msg).find("NUL"), std::string::npos) << d.msg;
	t = b;
	t[HEADER + 4] = 0x99;          // dtype code
	EXPECT_EQ(load(t, &d), ISA_E_BAD_CODE);
	t = b;
	t[HEADER + 5] = 9;             // kind
	EXPECT_EQ(load(t, &d), ISA_E_BAD_CODE);
	t = b;
	t[HEADER + 6] = 9;             // rank
	EXPECT_EQ(load(t, &d), ISA_E_BAD_TENSOR);
}

}  // namespace

// An indexed DMA's oob_skip (NKI oob_mode.skip) travels in bit 7 of its mode
// byte (format 2.1); on a direct transfer the bit is refused.
TEST(IsaBinary, DmaOobSkipIsBitSevenOfAnIndexedMode)
{
	isa_diag d{};
	Program p = assemble(".tensor x input fp32 [64,16]\n"
			     ".dma dd direct dst=sbuf:fp32[0:8]{1x16} src=hbm(x):fp32[16x8]{1x16}\n"
			     ".dma gg gather dst=sbuf:fp32[0:8]{1x16} src=hbm(x):fp32[16x64]{1x16} "
			     "index=sbuf:int32[0:8]+64{1x1} oob=skip\n", &d);
	ASSERT_TRUE(p) << d.msg;
	ASSERT_EQ(p->n_dma, 2u);
	EXPECT_EQ(p->dma[0].oob_skip, 0);
	EXPECT_EQ(p->dma[1].oob_skip, 1);
	std::string text = disasm(p.get());
	EXPECT_NE(text.find("index=sbuf:int32[0:8]+64{1x1} oob=skip\n"), std::string::npos) << text;
	EXPECT_EQ(text.find("oob=skip"), text.rfind("oob=skip")) << text;
	std::vector<uint8_t> b = encode(p.get());
	auto mode_byte = [&](const char *name) {
		const uint8_t key[3] = { 2, (uint8_t)name[0], (uint8_t)name[1] };
		auto it = std::search(b.begin(), b.end(), key, key + 3);
		EXPECT_NE(it, b.end());
		return (size_t)(it - b.begin()) + 3;
	};
	size_t dd = mode_byte("dd"), gg = mode_byte("gg");
	EXPECT_EQ(b[dd], ISA_DMA_DIRECT);
	EXPECT_EQ(b[gg], 0x80 | ISA_DMA_GATHER);
	isa_program *q = nullptr;
	ASSERT_EQ(isa_program_load(b.data(), b.size(), &q, &d), ISA_OK) << d.msg;
	EXPECT_EQ(q->dma[1].oob_skip, 1);
	EXPECT_EQ(q->dma[1].mode, ISA_DMA_GATHER);
	isa_program_free(q);
	b[dd] |= 0x80;
	EXPECT_EQ(load(b, &d), ISA_E_BAD_CODE);
	EXPECT_NE(std::string(d.msg).find("oob_skip (indexed modes only)"), std::string::npos) << d.msg;
}
