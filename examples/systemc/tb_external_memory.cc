// examples/systemc/tb_external_memory.cc -- a second top: the NeuronCore's
// initiator socket bound to an external TLM memory (nsim_sc::Memory) with a
// per-transaction latency.  The program's input and output tensors live in
// that memory (T_BIND 3 / 4), so the core's DMAs read and write them over
// TLM and the memory's latency lands in the run's simulated time.  Runs the
// same program with each latency given and prints the run times.
//
//   build/bin/nsim_systemc_external_memory [--at] [LATENCY_NS ...]   (default 0 100 1000)
// --at: the accesses travel approximately timed (nb_transport phases; the
// memory answers BEGIN_RESP on the backward path) instead of by b_transport.
#include "nsim_tlm_host.h"
#include "nsim_tlm_memory.h"

#include <cstdio>
#include <cstdlib>

using namespace nsim_sc;

static const uint64_t BASE = 0x100000000ull;
static const uint64_t N = 128 * 256;   // elements of x and y (softmax_rows: [128, 256])

struct Top : sc_core::sc_module {
	TlmCore core{ "core", 0, BASE, 16ull << 20 };
	Memory mem{ "mem", 4ull << 20 };
	Host host{ "host" };
	std::vector<double> latencies_ns;
	bool at = false;
	int rc = 1;

	SC_HAS_PROCESS(Top);
	Top(sc_core::sc_module_name n, std::vector<double> lat) : sc_module(n), latencies_ns(std::move(lat))
	{
		host.socket.bind(core.target);
		core.initiator.bind(mem.target);
		SC_THREAD(testbench);
	}

	void testbench()
	{
		ProgramFile pf;
		std::string err;
		if (!assemble_file(std::string(NSIM_EXAMPLES_DIR) + "/softmax_rows.nsasm", pf, err)) {
			std::fprintf(stderr, "%s\n", err.c_str());
			sc_core::sc_stop();
			return;
		}
		// x [128, 256] in the external memory at 0; y at 1 MiB; yt (the
		// transposed block) in the core's own HBM window
		std::vector<float> x(N);
		for (uint64_t i = 0; i < N; i++)
			x[i] = (float)((i * 2654435761u) % 1000) / 250.0f - 2.0f;
		std::memcpy(mem.bytes.data(), x.data(), N * 4);
		bool ok = host.load(BASE, 0, pf.image) && host.write_reg(REG_T_BIND, 0) &&
			  host.write_reg(REG_DMA_MODE, at ? 1 : 0) &&
			  host.bind("x", 0, N * 4, false, true) && host.bind("y", 1 << 20, N * 4, true, true) &&
			  host.bind("yt", 1 << 20, 32 * 32 * 4, true);
		if (!ok) {
			std::fprintf(stderr, "set-up failed\n");
			sc_core::sc_stop();
			return;
		}
		std::printf("external accesses by %s\n", at ? "nb_transport (approximately timed)" : "b_transport (loosely timed)");
		std::printf("%-14s %16s %10s %10s %s\n", "latency", "run (ps)", "reads", "writes", "row 0 sums to");
		double first = 0;
		for (double ns : latencies_ns) {
			mem.latency = sc_core::sc_time(ns, sc_core::SC_NS);
			mem.reads = mem.writes = 0;
			uint64_t ps = host.run(core).value();
			float sum = 0, y;
			for (int j = 0; j < 256; j++) {
				std::memcpy(&y, mem.bytes.data() + (1 << 20) + 4 * j, 4);
				sum += y;
			}
			if (first == 0)
				first = (double)ps;
			std::printf("%10.1f ns %16llu %10llu %10llu %.6f   (+%.0f ps over the first)\n", ns,
				    (unsigned long long)ps, (unsigned long long)mem.reads, (unsigned long long)mem.writes,
				    sum, (double)ps - first);
		}
		rc = host.read_reg(REG_STATUS) == ST_DONE ? 0 : 1;
		sc_core::sc_stop();
	}
};

int sc_main(int argc, char **argv)
{
	std::vector<double> lat;
	bool at = false;
	for (int i = 1; i < argc; i++) {
		if (std::string(argv[i]) == "--at")
			at = true;
		else
			lat.push_back(std::atof(argv[i]));
	}
	if (lat.empty())
		lat = { 0, 100, 1000 };
	setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2", 1);   // softmax_rows.nsasm's chip
	Top top("top", lat);
	top.at = at;
	sc_core::sc_start();
	return top.rc;
}
