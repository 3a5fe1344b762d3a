// examples/systemc/tb_run.cc -- a SystemC top with a testbench: one
// simulated NeuronCore (nsim_sc::TlmCore) on a host's TLM-2.0 socket.  The
// testbench assembles an example program, writes its image and inputs into
// the core's HBM window, binds the tensors, rings the doorbell, waits for the
// interrupt and reads the outputs back -- all as TLM transactions -- then
// prints the run's simulated time (the scheduler's, to the picosecond) and
// the registers' counters.
//
//   build/bin/nsim_systemc_run [PROGRAM.nsasm]   (default: matmul_gelu.nsasm)
// The runtime's chip is the program's (.target), set before the core starts.
#include "nsim_tlm_host.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

using namespace nsim_sc;

static const uint64_t BASE = 0x100000000ull;

struct Top : sc_core::sc_module {
	TlmCore core;
	Host host{ "host" };
	ProgramFile pf;
	int rc = 1;

	SC_HAS_PROCESS(Top);
	Top(sc_core::sc_module_name n, const ProgramFile &prog)
		: sc_module(n), core("core", 0, BASE, 256ull << 20), pf(prog)
	{
		host.socket.bind(core.target);
		SC_THREAD(testbench);
	}

	void testbench()
	{
		std::mt19937 g(1);
		std::normal_distribution<float> d(0.0f, 1.0f);
		if (!host.load(BASE, 0, pf.image)) {
			std::fprintf(stderr, "load failed: fault %llu\n", (unsigned long long)host.read_reg(REG_FAULT));
			sc_core::sc_stop();
			return;
		}
		uint64_t off = (pf.image.size() + 4095) & ~4095ull;
		std::vector<std::pair<const isa_tensor *, uint64_t>> outs;
		for (const isa_tensor &t : pf.tensors) {
			if (t.kind != ISA_TK_INPUT && t.kind != ISA_TK_OUTPUT)
				continue;
			uint64_t nb = isa_tensor_bytes(&t);
			if (t.kind == ISA_TK_INPUT) {
				std::vector<uint8_t> b(nb, 0);   // integers: 0, a valid index anywhere
				if (t.dtype == ISA_DT_fp32)
					for (uint64_t i = 0; i + 4 <= nb; i += 4) {
						float f = d(g);
						std::memcpy(&b[i], &f, 4);
					}
				host.write_mem(BASE + off, b.data(), nb);
			} else {
				outs.push_back({ &t, off });
			}
			host.bind(t.name, off, nb, t.kind == ISA_TK_OUTPUT);
			off += (nb + 4095) & ~4095ull;
		}
		sc_core::sc_time took = host.run(core);
		uint64_t status = host.read_reg(REG_STATUS);
		std::printf("status %s (fault code %llu)\n", status == ST_DONE ? "done" : "FAULT",
			    (unsigned long long)host.read_reg(REG_FAULT));
		std::printf("simulated run: %s (RUN_PS register %llu ps), interrupt at %s\n", took.to_string().c_str(),
			    (unsigned long long)host.read_reg(REG_RUN_PS), sc_core::sc_time_stamp().to_string().c_str());
		const char *eng[5] = { "tensor", "vector", "scalar", "gpsimd", "sync" };
		for (int e = 0; e < 5; e++)
			std::printf("  %-6s busy %llu ps\n", eng[e],
				    (unsigned long long)host.read_reg(REG_ENGINE_BUSY_PS + 8 * e));
		std::printf("  %llu instructions, %llu DMA bytes\n", (unsigned long long)host.read_reg(REG_INSTRS),
			    (unsigned long long)host.read_reg(REG_DMA_BYTES));
		for (auto &o : outs) {
			uint64_t nb = isa_tensor_bytes(o.first);
			std::vector<uint8_t> b(nb);
			host.read_mem(BASE + o.second, b.data(), nb);
			double sum = 0;
			if (o.first->dtype == ISA_DT_fp32)
				for (uint64_t i = 0; i + 4 <= nb; i += 4) {
					float f;
					std::memcpy(&f, &b[i], 4);
					sum += std::fabs(f);
				}
			std::printf("output %s: %llu bytes read back over TLM%s", o.first->name, (unsigned long long)nb,
				    o.first->dtype == ISA_DT_fp32 ? "" : "\n");
			if (o.first->dtype == ISA_DT_fp32)
				std::printf(", sum |x| = %.6g\n", sum);
		}
		rc = status == ST_DONE ? 0 : 1;
		sc_core::sc_stop();
	}
};

int sc_main(int argc, char **argv)
{
	std::string path = argc > 1 ? argv[1] : std::string(NSIM_EXAMPLES_DIR) + "/matmul_gelu.nsasm";
	ProgramFile pf;
	std::string err;
	if (!assemble_file(path, pf, err)) {
		std::fprintf(stderr, "%s\n", err.c_str());
		return 2;
	}
	// the runtime serves the program's chip
	setenv("NEURON_PLATFORM_TARGET_OVERRIDE", isa_target_name(pf.target), 1);
	std::printf("program %s (%s), %zu-byte image\n", path.c_str(), isa_target_name(pf.target), pf.image.size());
	Top top("top", pf);
	sc_core::sc_start();
	return top.rc;
}
