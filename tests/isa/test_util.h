// Helpers shared by the isa tests.
#pragma once

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

inline std::vector<std::string> example_files()
{
	static const char *names[] = { "matmul_gelu.nsasm", "softmax_rows.nsasm",
				       "masked_select.nsasm", "causal_mask.nsasm",
				       "embedding_gather.nsasm", "pipeline_fp8.nsasm",
				       "dropout_rng.nsasm", "selective_scan.nsasm",
				       "layer_stats.nsasm", "softmax_v4.nsasm", "row_gather.nsasm",
				       "dynamic_row.nsasm", "router_topk.nsasm" };
	std::vector<std::string> v;
	for (const char *n : names)
		v.push_back(std::string(NSIM_EXAMPLES_DIR) + "/" + n);
	return v;
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
