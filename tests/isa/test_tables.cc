// The instruction-set table test, built from isa.def: every row has a unique
// opcode and name, an engine, an operand format the decoder, encoder,
// assembler and disassembler understand, and a validator rule.  The checker
// takes the tables as arguments, so it is also run on deliberately broken
// copies to prove it fails where it should.
#include "test_util.h"

#include <gtest/gtest.h>

#include <set>

extern "C" {
#include "validate.h"
}

namespace {

struct Tables {
	std::vector<isa_op_info> ops;
	std::vector<isa_op_rule> rules;
};

Tables real_tables()
{
	Tables t;
	t.ops.assign(isa_ops, isa_ops + ISA_NUM_OPS);
	t.rules.assign(isa_op_rules, isa_op_rules + ISA_NUM_OPS);
	return t;
}

bool known_field_kind(unsigned k)
{
	return k >= ISA_FK_AP && k <= ISA_FK_PMAP;
}

// Returns "" when the tables are consistent, else the first problem.
std::string check_tables(const Tables &t)
{
	std::set<unsigned> codes;
	std::set<std::string> names;
	for (size_t i = 0; i < t.ops.size(); i++) {
		const isa_op_info &op = t.ops[i];
		std::string where = "row " + std::to_string(i) + " (" + (op.name ? op.name : "?") + ")";
		if (!op.name || !*op.name)
			return where + ": no name";
		if (!codes.insert(op.code).second)
			return where + ": duplicate opcode " + std::to_string(op.code);
		if (!names.insert(op.name).second)
			return where + ": duplicate name";
		if (op.engines == 0 || (op.engines & ~ISA_EM_ALL))
			return where + ": bad engine mask";
		if (!op.synopsis || !*op.synopsis)
			return where + ": no synopsis";
		if (op.format >= ISA_NUM_FORMATS || !isa_formats[op.format])
			return where + ": no operand format (decoder/disassembler entry)";
		std::set<std::string> keys;
		for (const isa_field *f = isa_formats[op.format]; f->key; f++) {
			if (!known_field_kind(f->kind))
				return where + ": field " + f->key + " of unknown kind";
			if (!keys.insert(f->key).second)
				return where + ": field " + f->key + " twice";
		}
		if (i >= t.rules.size() || !t.rules[i])
			return where + ": no validator rule";
		if (op.cost >= ISA_NUM_COST_CLASSES || !isa_cost_class_formula(op.cost))
			return where + ": no cost class";
	}
	return "";
}

TEST(IsaTables, RealTablesAreConsistent)
{
	EXPECT_EQ(check_tables(real_tables()), "");
}

TEST(IsaTables, CheckerCatchesDuplicateOpcode)
{
	Tables t = real_tables();
	t.ops[3].code = t.ops[1].code;
	EXPECT_NE(check_tables(t).find("duplicate opcode"), std::string::npos);
}

TEST(IsaTables, CheckerCatchesMissingValidatorRule)
{
	Tables t = real_tables();
	t.rules[ISA_OP_select] = nullptr;
	EXPECT_NE(check_tables(t).find("no validator rule"), std::string::npos);
}

TEST(IsaTables, CheckerCatchesMissingFormat)
{
	Tables t = real_tables();
	t.ops[ISA_OP_iota].format = ISA_NUM_FORMATS;
	EXPECT_NE(check_tables(t).find("no operand format"), std::string::npos);
}

TEST(IsaTables, CheckerCatchesMissingCostClass)
{
	Tables t = real_tables();
	t.ops[ISA_OP_memset].cost = ISA_NUM_COST_CLASSES;
	EXPECT_NE(check_tables(t).find("no cost class"), std::string::npos);
}

TEST(IsaTables, EveryCostClassIsUsed)
{
	std::set<int> used;
	for (int op = 0; op < ISA_NUM_OPS; op++)
		used.insert(isa_ops[op].cost);
	for (int c = 0; c < ISA_NUM_COST_CLASSES; c++)
		EXPECT_TRUE(used.count(c)) << isa_cost_class_name(c) << " is used by no instruction";
}

TEST(IsaTables, CheckerCatchesDuplicateName)
{
	Tables t = real_tables();
	t.ops[ISA_OP_nop].name = "end";
	EXPECT_NE(check_tables(t).find("duplicate name"), std::string::npos);
}

// Every opcode decodes from its byte and name, and its default instruction
// goes through encoder -> decoder and disassembler -> name unchanged.
TEST(IsaTables, EveryOpcodeHasDecoderAndDisassemblerEntries)
{
	for (int op = 0; op < ISA_NUM_OPS; op++) {
		SCOPED_TRACE(isa_op_name(op));
		EXPECT_EQ(isa_op_from_code(isa_ops[op].code), op);
		EXPECT_EQ(isa_op_from_name(isa_ops[op].name), op);

		isa_instr in = isa_instr_init(op);
		for (const isa_field *f = isa_op_fields(op); f->key; f++) {
			if (f->kind == ISA_FK_AP) {
				in.ap[f->slot] = isa_ap_sbuf(ISA_DT_fp32, 0, 1, 0, 1);
				in.ap_mask |= 1u << f->slot;
			}
		}
		isa_writer w{};
		isa_encode_instr(&w, &in);
		ASSERT_FALSE(w.oom);
		isa_reader r{ w.buf, w.len, 0, false };
		isa_instr back;
		isa_diag d{};
		ASSERT_EQ(isa_decode_instr(&r, &back, 0, 0, &d), ISA_OK) << d.msg;
		EXPECT_EQ(r.pos, w.len);
		isa_writer w2{};
		isa_encode_instr(&w2, &back);
		ASSERT_EQ(w2.len, w.len);
		EXPECT_EQ(memcmp(w2.buf, w.buf, w.len), 0);
		free(w.buf);
		free(w2.buf);

		char text[2048];
		ASSERT_GT(isa_format_instr(nullptr, &in, text, sizeof(text)), 0);
		EXPECT_EQ(std::string(text).rfind(isa_op_name(op), 0), 0u) << text;
	}
}

TEST(IsaTables, DtypeActAluTargetTablesRoundTrip)
{
	for (int dt = 1; dt < ISA_NUM_DTYPES; dt++) {
		EXPECT_EQ(isa_dtype_from_name(isa_dtype_name(dt)), dt);
		EXPECT_EQ(isa_dtype_from_code(isa_dtype_code(dt)), dt);
		EXPECT_GT(isa_dtype_size(dt), 0u);
	}
	for (int d = 0; d < ISA_NUM_DOMAINS; d++) {
		std::set<unsigned> codes;
		for (unsigned i = 0; i < isa_enum_count(d); i++) {
			EXPECT_TRUE(codes.insert(isa_enum_code(d, i)).second)
				<< "duplicate code in domain " << d;
			EXPECT_EQ(isa_enum_from_name(d, isa_enum_name(d, i)), (int)i);
			EXPECT_EQ(isa_enum_from_code(d, isa_enum_code(d, i)), (int)i);
		}
	}
	for (int t = 1; t < ISA_NUM_TARGETS; t++)
		EXPECT_EQ(isa_target_from_name(isa_target_name(t)), t);
	for (int s = 1; s < ISA_NUM_STATUS; s++)
		EXPECT_STRNE(isa_status_summary(s), "unknown status");
	EXPECT_EQ(isa_dtype_size(ISA_DT_bf16), 2u);
	EXPECT_EQ(isa_dtype_size(ISA_DT_fp8_e5m2), 1u);
	EXPECT_EQ(isa_target_get(ISA_TARGET_trn2)->sbuf_partition_bytes, 224u * 1024u);
}

// Every format default (enum/u32/imm) is itself legal, so an instruction
// written with only its operands means what the table says.
TEST(IsaTables, FormatDefaultsAreLegalValues)
{
	for (int f = 0; f < ISA_NUM_FORMATS; f++) {
		for (const isa_field *fd = isa_formats[f]; fd->key; fd++) {
			SCOPED_TRACE(std::string(isa_format_names[f]) + "." + fd->key);
			if (fd->kind == ISA_FK_ENUM) {
				EXPECT_GE(isa_enum_from_code(fd->domain, fd->dflt), 0);
			}
			if (fd->kind == ISA_FK_U32) {
				EXPECT_LE(fd->dflt, fd->max);
			}
		}
	}
}

}  // namespace
