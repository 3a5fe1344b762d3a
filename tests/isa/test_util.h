// Helpers shared by the isa tests.
#pragma once

#include "../example_programs.h"
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

extern "C" {
#include "isa_internal.h"
}

struct ProgramDeleter {
	void operator()(isa_program *p) const { isa_program_free(p); }
};
using Program = std::unique_ptr<isa_program, ProgramDeleter>;

inline std::string read_text(const std::string &path)
{
	std::ifstream f(path, std::ios::binary);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

// Assembles text; on failure returns null and puts the message in *msg.
inline Program assemble(const std::string &text, isa_diag *diag)
{
	isa_program *p = nullptr;
	isa_asm(text.data(), text.size(), &p, diag);
	return Program(p);
}

inline std::vector<uint8_t> encode(const isa_program *p)
{
	uint8_t *buf = nullptr;
	size_t len = 0;
	isa_diag d{};
	if (isa_program_encode(p, &buf, &len, &d) != ISA_OK)
		return {};
	std::vector<uint8_t> v(buf, buf + len);
	free(buf);
	return v;
}

inline std::string disasm(const isa_program *p)
{
	char *text = nullptr;
	size_t len = 0;
	isa_diag d{};
	if (isa_disasm(p, &text, &len, &d) != ISA_OK)
		return {};
	std::string s(text, len);
	free(text);
	return s;
}

// A validator negative test: one change (`from` -> `to`) to a valid program,
// the status it must give (ISA_OK: accepted) and a substring of the message.
struct MutationCase {
	const char *name;
	const char *from;      // text to replace (must occur in the program)
	const char *to;
	isa_status  code;
	const char *expect;
};

// `base` with the first `from` replaced by `to` ("" when `from` is absent)
inline std::string mutate(const std::string &base, const char *from, const char *to)
{
	std::string s = base;
	size_t at = s.find(from);
	if (at == std::string::npos)
		return "";
	s.replace(at, std::string(from).size(), to);
	return s;
}
