// bench/systemc/bench_systemc.cc -- host time of running the example
// programs through the SystemC module (TLM transactions: inputs written into
// the HBM window, doorbell, interrupt, outputs read back) against the same
// work through the runtime C API directly (tensor writes, nsim_execute,
// tensor reads).  Each program is loaded once; the median of REPS runs is
// reported.  Prints a table; the overhead goal is <= 1.5x.
//
//   build/bin/bench_systemc [REPS]      (programs of the runtime's chip,
//                                        NEURON_PLATFORM_TARGET_OVERRIDE)
#include "nsim_tlm_host.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

using namespace nsim_sc;
using clk = std::chrono::steady_clock;

static const uint64_t BASE = 0x100000000ull;

static double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

struct Row {
	std::string name;
	double native_us = 0, tlm_us = 0;
	uint64_t ps = 0;
	bool ok = false;
};

static std::vector<uint8_t> zeros(const isa_tensor &t) { return std::vector<uint8_t>(isa_tensor_bytes(&t), 0); }

// the runtime directly: inputs written, executed, outputs read, REPS times
static double native_us(const ProgramFile &pf, int reps, uint64_t &ps)
{
	nsim_model *m = nullptr;
	if (nsim_load(pf.image.data(), pf.image.size(), 0, &m) != NSIM_SUCCESS)
		return -1;
	nsim_tensor_set *in = nullptr, *out = nullptr;
	nsim_tensor_set_create(&in);
	nsim_tensor_set_create(&out);
	std::vector<std::pair<const isa_tensor *, nsim_tensor *>> ts;
	for (const isa_tensor &t : pf.tensors)
		if (t.kind == ISA_TK_INPUT || t.kind == ISA_TK_OUTPUT) {
			nsim_tensor *x = nullptr;
			nsim_tensor_allocate(0, isa_tensor_bytes(&t), t.name, &x);
			nsim_tensor_set_add(t.kind == ISA_TK_INPUT ? in : out, t.name, x);
			ts.push_back({ &t, x });
		}
	std::vector<double> times;
	for (int r = 0; r < reps; r++) {
		auto t0 = clk::now();
		for (auto &p : ts) {
			std::vector<uint8_t> b = zeros(*p.first);
			if (p.first->kind == ISA_TK_INPUT)
				nsim_tensor_write(p.second, b.data(), 0, b.size());
		}
		nsim_execute(m, in, out);
		for (auto &p : ts)
			if (p.first->kind == ISA_TK_OUTPUT) {
				std::vector<uint8_t> b(isa_tensor_bytes(p.first));
				nsim_tensor_read(p.second, b.data(), 0, b.size());
			}
		times.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
	}
	nsim_exec_stats s{};
	nsim_model_stats(m, &s);
	ps = s.total_ps;
	for (auto &p : ts)
		nsim_tensor_free(p.second);
	nsim_tensor_set_free(in);
	nsim_tensor_set_free(out);
	nsim_unload(m);
	return median(times);
}

struct Bench : sc_core::sc_module {
	TlmCore core{ "core", 0, BASE, 128ull << 20 };
	Host host{ "host" };
	std::vector<std::pair<std::string, ProgramFile>> progs;
	std::vector<Row> rows;
	int reps;

	SC_HAS_PROCESS(Bench);
	Bench(sc_core::sc_module_name n, int r) : sc_module(n), reps(r)
	{
		host.socket.bind(core.target);
		SC_THREAD(drive);
	}

	void drive()
	{
		for (auto &np : progs) {
			const ProgramFile &pf = np.second;
			Row row;
			row.name = np.first;
			row.native_us = native_us(pf, reps, row.ps);
			uint64_t off = (pf.image.size() + 4095) & ~4095ull;
			bool ok = host.load(BASE, 0, pf.image) && host.write_reg(REG_T_BIND, 0);
			std::vector<std::pair<const isa_tensor *, uint64_t>> where;
			for (const isa_tensor &t : pf.tensors)
				if (ok && (t.kind == ISA_TK_INPUT || t.kind == ISA_TK_OUTPUT)) {
					ok = host.bind(t.name, off, isa_tensor_bytes(&t), t.kind == ISA_TK_OUTPUT);
					where.push_back({ &t, off });
					off += (isa_tensor_bytes(&t) + 4095) & ~4095ull;
				}
			std::vector<double> times;
			for (int r = 0; ok && r < reps; r++) {
				auto t0 = clk::now();
				for (auto &w : where)
					if (w.first->kind == ISA_TK_INPUT) {
						std::vector<uint8_t> b = zeros(*w.first);
						host.write_mem(BASE + w.second, b.data(), b.size());
					}
				host.run(core);
				for (auto &w : where)
					if (w.first->kind == ISA_TK_OUTPUT) {
						std::vector<uint8_t> b(isa_tensor_bytes(w.first));
						host.read_mem(BASE + w.second, b.data(), b.size());
					}
				times.push_back(std::chrono::duration<double, std::micro>(clk::now() - t0).count());
			}
			row.tlm_us = median(times);
			row.ok = ok && host.read_reg(REG_STATUS) == ST_DONE && host.read_reg(REG_RUN_PS) == row.ps;
			rows.push_back(row);
		}
		sc_core::sc_stop();
	}
};

int sc_main(int argc, char **argv)
{
	int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
	if (nsim_init() != NSIM_SUCCESS) {
		std::fprintf(stderr, "nsim_init: %s\n", nsim_last_error());
		return 1;
	}
	Bench b("bench", reps);
	std::vector<std::string> paths;
	for (const auto &e : std::filesystem::directory_iterator(NSIM_EXAMPLES_DIR))
		if (e.path().extension() == ".nsasm")
			paths.push_back(e.path().string());
	std::sort(paths.begin(), paths.end());
	for (const std::string &p : paths) {
		ProgramFile pf;
		std::string err;
		if (assemble_file(p, pf, err) && pf.target == isa_target_from_name(nsim_target_name()))
			b.progs.push_back({ std::filesystem::path(p).stem().string(), pf });
	}
	sc_core::sc_start();
	std::printf("\n%s, median of %d runs per program (inputs written, run, outputs read)\n", nsim_target_name(), reps);
	std::printf("%-20s %14s %14s %14s %9s %s\n", "program", "simulated ps", "native us", "SystemC us", "ratio", "same time");
	double tn = 0, tt = 0;
	for (const Row &r : b.rows) {
		std::printf("%-20s %14llu %14.1f %14.1f %8.2fx %s\n", r.name.c_str(), (unsigned long long)r.ps, r.native_us,
			    r.tlm_us, r.native_us > 0 ? r.tlm_us / r.native_us : 0.0, r.ok ? "yes" : "NO");
		tn += r.native_us;
		tt += r.tlm_us;
	}
	std::printf("%-20s %14s %14.1f %14.1f %8.2fx\n", "total", "", tn, tt, tn > 0 ? tt / tn : 0.0);
	return 0;
}
