// The check a validator negative test makes (test_validate.cc,
// test_validate_mx.cc): the mutated program is refused with the case's status,
// a message containing its text and a line number (or accepted, ISA_OK).
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

inline void PrintTo(const MutationCase &c, std::ostream *os) { *os << c.name; }

inline void expect_mutation_result(const std::string &base, const MutationCase &c)
{
	std::string text = mutate(base, c.from, c.to);
	ASSERT_FALSE(text.empty()) << "mutation source not found: " << c.from;
	isa_diag d{};
	Program p = assemble(text, &d);
	if (c.code == ISA_OK) {
		EXPECT_TRUE(p) << d.msg;
		return;
	}
	ASSERT_FALSE(p) << "accepted: " << c.name;
	EXPECT_EQ(d.code, c.code) << isa_status_name(d.code) << ": " << d.msg;
	EXPECT_NE(std::string(d.msg).find(c.expect), std::string::npos) << d.msg;
	EXPECT_GT(d.line, 0) << "no line number: " << d.msg;
}
