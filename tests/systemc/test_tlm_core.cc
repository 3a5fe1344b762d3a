// TlmCore under SystemC against the native runtime: every example program
// (examples/programs/*.nsasm) of the process's target (CTest runs this once
// per chip: NEURON_PLATFORM_TARGET_OVERRIDE) gives the same output bytes and the same
// simulated time, to the picosecond, run through the TLM target socket as
// run by nsim_execute directly; bad transactions get TLM error responses;
// a faulting program reports its status through the registers.
//
// SystemC elaborates once per process, so one simulation (built and run in
// the test environment's SetUp) drives every scenario and records what it
// saw; the tests then check the records.
#include "../example_programs.h"
#include "nsim_tlm_host.h"
#include "nsim_tlm_memory.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

namespace {

using namespace nsim_sc;

const uint64_t BASE = 0x100000000ull;

struct ProgramRun {
	std::string program;
	std::string error;                              // set up or run failed
	uint64_t native_ps = 0, tlm_ps = 0, reg_ps = 0, status = 0;
	std::map<std::string, std::vector<uint8_t>> native_out, tlm_out;
};

struct Bad {
	const char *what;
	tlm::tlm_response_status got, want;
};

struct Record {
	std::vector<ProgramRun> runs;
	std::vector<Bad> bad;
	uint64_t fault_status = 0, fault_code = 0, bad_load_status = 0, bad_load_code = 0;
	bool dmi_ok = false, dmi_same = false;
	uint64_t id = 0;
	// external memory: run time, transactions and values per latency
	struct Ext {
		uint64_t latency_ps, run_ps, reg_ps, reads, writes, status;
		bool values_ok;
		uint64_t quantum_ps;
		std::vector<uint64_t> when;   // the accesses' times from the doorbell
	};
	std::vector<Ext> ext, ext_at;   // loosely / approximately timed accesses
	uint64_t ext_bad_status = 0, ext_bad_code = 0;
} rec;

// inputs: floats from a fixed generator, integers 0 (valid as any index)
std::vector<uint8_t> input_bytes(const isa_tensor &t, std::mt19937 &g)
{
	std::vector<uint8_t> b(isa_tensor_bytes(&t));
	if (t.dtype == ISA_DT_fp32) {
		std::normal_distribution<float> d(0.0f, 1.0f);
		for (size_t i = 0; i + 4 <= b.size(); i += 4) {
			float f = d(g);
			std::memcpy(&b[i], &f, 4);
		}
	} else if (isa_dtype_is_float(t.dtype)) {
		for (size_t i = 0; i < b.size(); i++)   // small bf16 / fp16 / fp8 bit patterns
			b[i] = (i % isa_dtype_size(t.dtype) == isa_dtype_size(t.dtype) - 1) ? 0x3c : (uint8_t)g();
	}
	return b;
}

// the program run by the runtime directly (its own tensors)
void run_native(const ProgramFile &pf, const std::map<std::string, std::vector<uint8_t>> &ins, ProgramRun &r)
{
	nsim_model *m = nullptr;
	nsim_tensor_set *in = nullptr, *out = nullptr;
	std::vector<nsim_tensor *> ts;
	nsim_status st = nsim_load(pf.image.data(), pf.image.size(), 0, &m);
	if (st == NSIM_SUCCESS)
		st = nsim_tensor_set_create(&in);
	if (st == NSIM_SUCCESS)
		st = nsim_tensor_set_create(&out);
	for (const isa_tensor &t : pf.tensors) {
		if (st != NSIM_SUCCESS || (t.kind != ISA_TK_INPUT && t.kind != ISA_TK_OUTPUT))
			continue;
		nsim_tensor *x = nullptr;
		st = nsim_tensor_allocate(0, isa_tensor_bytes(&t), t.name, &x);
		if (st != NSIM_SUCCESS)
			break;
		ts.push_back(x);
		// device memory comes uninitialized: outputs start zeroed here and
		// in the TLM run, so a program writing part of one compares
		if (t.kind == ISA_TK_INPUT)
			st = nsim_tensor_write(x, ins.at(t.name).data(), 0, isa_tensor_bytes(&t));
		else
			st = nsim_tensor_write(x, std::vector<uint8_t>(isa_tensor_bytes(&t)).data(), 0,
					       isa_tensor_bytes(&t));
		if (st == NSIM_SUCCESS)
			st = nsim_tensor_set_add(t.kind == ISA_TK_INPUT ? in : out, t.name, x);
	}
	if (st == NSIM_SUCCESS)
		st = nsim_execute(m, in, out);
	nsim_exec_stats s{};
	if (st == NSIM_SUCCESS && nsim_model_stats(m, &s) == NSIM_SUCCESS)
		r.native_ps = s.total_ps;
	size_t k = 0;
	for (const isa_tensor &t : pf.tensors) {
		if (t.kind != ISA_TK_INPUT && t.kind != ISA_TK_OUTPUT)
			continue;
		if (st == NSIM_SUCCESS && t.kind == ISA_TK_OUTPUT && k < ts.size()) {
			std::vector<uint8_t> b(isa_tensor_bytes(&t));
			nsim_tensor_read(ts[k], b.data(), 0, b.size());
			r.native_out[t.name] = b;
		}
		k++;
	}
	if (st != NSIM_SUCCESS)
		r.error = std::string("native: ") + nsim_last_error();
	for (nsim_tensor *x : ts)
		nsim_tensor_free(x);
	nsim_tensor_set_free(in);
	nsim_tensor_set_free(out);
	if (m)
		nsim_unload(m);
}

struct Bench : sc_core::sc_module {
	TlmCore core{ "core", 0, BASE, 64ull << 20 };
	Host host{ "host" };
	Memory mem{ "mem", 1 << 20 };

	SC_HAS_PROCESS(Bench);
	explicit Bench(sc_core::sc_module_name n) : sc_module(n)
	{
		host.socket.bind(core.target);
		core.initiator.bind(mem.target);
		SC_THREAD(drive);
	}

	// x and y in the external memory (x at 0, y at 64 KiB): one load, one
	// VectorE op, one store in a chain, so each of the run's two external
	// accesses adds its latency to the run exactly once
	void external_memory()
	{
		std::string text = std::string(".target ") + nsim_target_name() +
				   "\n.semaphores 2\n.scratch 0\n.tensor x input fp32 [128,64]\n.tensor y output fp32 [128,64]\n"
				   ".dma lx direct dst=sbuf:fp32[0:128]{1x64} src=hbm(x):fp32[64x128]{1x64}\n"
				   ".dma sy direct dst=hbm(y):fp32[64x128]{1x64} src=sbuf:fp32[0:128]+256{1x64}\n"
				   ".engine sync\n    dma_copy desc=lx queue=0 sem=0 value=1\n    sem_wait sem=1 cond=is_ge value=1\n"
				   "    dma_copy desc=sy queue=0 sem=0 value=1\n    sem_wait sem=0 cond=is_ge value=2\n    end\n"
				   ".engine vector\n    sem_wait sem=0 cond=is_ge value=1\n"
				   "    tensor_scalar dst=sbuf:fp32[0:128]+256{1x64} src=sbuf:fp32[0:128]{1x64} op0=multiply "
				   "scalar0=2.0 op1=add scalar1=1.0\n    sem_signal sem=1 op=add value=1\n    end\n";
		ProgramFile pf;
		std::string err;
		if (!assemble_text(text, pf, err))
			return;
		const std::vector<uint8_t> &img = pf.image;
		const uint64_t n = 128 * 64 * 4;
		std::vector<float> x(128 * 64);
		for (size_t i = 0; i < x.size(); i++)
			x[i] = (float)i * 0.25f - 100.0f;
		std::memcpy(mem.bytes.data(), x.data(), n);   // the platform's memory, filled behind the core
		if (!host.load(BASE, 0, img) || !host.write_reg(REG_T_BIND, 0))
			return;
		host.bind("x", 0, n, false, true);       // T_BIND 3 / 4: external input / output
		host.bind("y", 65536, n, true, true);
		// loosely timed with a zero quantum (sync at every access) and a
		// 1 ms one (the core runs ahead); approximately timed
		for (uint64_t mode : { 0, 0, 1 }) {
			uint64_t quantum = mode == 0 && !rec.ext.empty() ? 1000000000ull : 0;
			tlm::tlm_global_quantum::instance().set(sc_core::sc_time(static_cast<double>(quantum), sc_core::SC_PS));
			host.write_reg(REG_DMA_MODE, mode);
			for (uint64_t lat : { 0ull, 100000ull, 2500000ull }) {   // 0, 100 ns, 2.5 us
				mem.latency = sc_core::sc_time(static_cast<double>(lat), sc_core::SC_PS);
				mem.reads = mem.writes = 0;
				mem.when.clear();
				std::memset(mem.bytes.data() + 65536, 0, n);
				host.qk.sync();
				uint64_t t0 = sc_core::sc_time_stamp().value();
				uint64_t ps = host.run(core).value();
				std::vector<float> y(128 * 64);
				std::memcpy(y.data(), mem.bytes.data() + 65536, n);
				bool ok = true;
				for (size_t i = 0; i < y.size(); i++)
					ok = ok && y[i] == x[i] * 2.0f + 1.0f;
				std::vector<uint64_t> when;
				for (const auto &w : mem.when)
					when.push_back(w.value() - t0);
				(mode ? rec.ext_at : rec.ext)
					.push_back({ lat, ps, host.read_reg(REG_RUN_PS), mem.reads, mem.writes,
						     host.read_reg(REG_STATUS), ok, quantum, when });
			}
		}
		tlm::tlm_global_quantum::instance().set(sc_core::SC_ZERO_TIME);
		host.write_reg(REG_DMA_MODE, 0);
		// y bound past the memory's end: the store's write is refused, the run faults
		host.write_reg(REG_T_BIND, 0);
		host.bind("x", 4096, n, false);
		host.bind("y", (1 << 20) - 1024, n, true, true);
		host.run(core);
		rec.ext_bad_status = host.read_reg(REG_STATUS);
		rec.ext_bad_code = host.read_reg(REG_FAULT);
	}

	void run_program(const std::string &path, std::mt19937 &g)
	{
		ProgramRun r;
		r.program = std::filesystem::path(path).filename().string();
		ProgramFile pf;
		std::string err;
		if (!assemble_file(path, pf, err)) {
			r.error = err;
			rec.runs.push_back(r);
			return;
		}
		if (pf.target != isa_target_from_name(nsim_target_name()))
			return;   // another chip's program: its CTest run sets the target
		std::map<std::string, std::vector<uint8_t>> ins;
		for (const isa_tensor &t : pf.tensors)
			if (t.kind == ISA_TK_INPUT)
				ins[t.name] = input_bytes(t, g);
		run_native(pf, ins, r);
		// the image at the window's start, tensors after it, 4 KiB aligned
		uint64_t off = (pf.image.size() + 4095) & ~4095ull;
		bool ok = host.load(BASE, 0, pf.image) && host.write_reg(REG_T_BIND, 0);
		std::map<std::string, uint64_t> where;
		for (const isa_tensor &t : pf.tensors) {
			if (!ok || (t.kind != ISA_TK_INPUT && t.kind != ISA_TK_OUTPUT))
				continue;
			uint64_t n = isa_tensor_bytes(&t);
			where[t.name] = off;
			// outputs start zeroed, as in the native run: a program that
			// writes part of one (a scatter) must not see the bytes an
			// earlier example left in the window
			if (t.kind == ISA_TK_INPUT)
				ok = host.write_mem(BASE + off, ins[t.name].data(), n);
			else
				ok = host.write_mem(BASE + off, std::vector<uint8_t>(n).data(), n);
			ok = ok && host.bind(t.name, off, n, t.kind == ISA_TK_OUTPUT);
			off += (n + 4095) & ~4095ull;
		}
		if (!ok) {
			r.error += " tlm: set-up failed";
			rec.runs.push_back(r);
			return;
		}
		r.tlm_ps = host.run(core).value();   // resolution 1 ps
		r.status = host.read_reg(REG_STATUS);
		r.reg_ps = host.read_reg(REG_RUN_PS);
		for (const isa_tensor &t : pf.tensors)
			if (t.kind == ISA_TK_OUTPUT) {
				std::vector<uint8_t> b(isa_tensor_bytes(&t));
				host.read_mem(BASE + where[t.name], b.data(), b.size());
				r.tlm_out[t.name] = b;
			}
		rec.runs.push_back(r);
	}

	void bad_transactions()
	{
		uint64_t v = 0;
		unsigned char buf[16] = {};
		auto add = [](const char *what, tlm::tlm_response_status got, tlm::tlm_response_status want) {
			rec.bad.push_back({ what, got, want });
		};
		add("address in no window", host.transact(tlm::TLM_READ_COMMAND, 0x5000, &v, 8),
		    tlm::TLM_ADDRESS_ERROR_RESPONSE);
		add("address past the HBM window", host.transact(tlm::TLM_READ_COMMAND, BASE + (64ull << 20), &v, 8),
		    tlm::TLM_ADDRESS_ERROR_RESPONSE);
		add("access running off the window's end",
		    host.transact(tlm::TLM_WRITE_COMMAND, BASE + (64ull << 20) - 8, buf, 16),
		    tlm::TLM_ADDRESS_ERROR_RESPONSE);
		add("unused register", host.transact(tlm::TLM_READ_COMMAND, 0x0f8, &v, 8),
		    tlm::TLM_ADDRESS_ERROR_RESPONSE);
		add("register read of 4 bytes", host.transact(tlm::TLM_READ_COMMAND, REG_STATUS, &v, 4),
		    tlm::TLM_BURST_ERROR_RESPONSE);
		add("misaligned register", host.transact(tlm::TLM_READ_COMMAND, REG_STATUS + 4, buf, 8),
		    tlm::TLM_BURST_ERROR_RESPONSE);
		v = 5;
		add("write to read-only STATUS", host.transact(tlm::TLM_WRITE_COMMAND, REG_STATUS, &v, 8),
		    tlm::TLM_COMMAND_ERROR_RESPONSE);
		add("write to read-only RUN_PS", host.transact(tlm::TLM_WRITE_COMMAND, REG_RUN_PS, &v, 8),
		    tlm::TLM_COMMAND_ERROR_RESPONSE);
		add("read of write-only DOORBELL", host.transact(tlm::TLM_READ_COMMAND, REG_DOORBELL, &v, 8),
		    tlm::TLM_COMMAND_ERROR_RESPONSE);
		add("bind outside the window", (host.write_reg(REG_T_ADDR, 64ull << 20), host.write_reg(REG_T_SIZE, 8),
						host.transact(tlm::TLM_WRITE_COMMAND, REG_T_BIND, &(v = 1), 8)),
		    tlm::TLM_GENERIC_ERROR_RESPONSE);
		tlm::tlm_generic_payload p;
		sc_core::sc_time t = sc_core::SC_ZERO_TIME;
		p.set_command(tlm::TLM_IGNORE_COMMAND);
		p.set_address(REG_STATUS);
		p.set_data_ptr(buf);
		p.set_data_length(8);
		p.set_streaming_width(8);
		host.socket->b_transport(p, t);
		add("ignore command", p.get_response_status(), tlm::TLM_COMMAND_ERROR_RESPONSE);
		unsigned char be[8] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0 };
		p.set_command(tlm::TLM_READ_COMMAND);
		p.set_byte_enable_ptr(be);
		p.set_byte_enable_length(8);
		host.socket->b_transport(p, t);
		add("byte enables", p.get_response_status(), tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
		p.set_byte_enable_ptr(nullptr);
		p.set_address(BASE);
		p.set_data_length(16);
		p.set_streaming_width(4);
		host.socket->b_transport(p, t);
		add("streaming width", p.get_response_status(), tlm::TLM_BURST_ERROR_RESPONSE);
	}

	// a program that reads past its input (an out-of-bounds DMA at run time)
	// and a program image that is not one
	void faults()
	{
		std::string text = std::string(".target ") + nsim_target_name() +
				   "\n.semaphores 1\n.scratch 0\n.tensor x input fp32 [4,4]\n"
				   ".tensor y output fp32 [4,4]\n"
				   ".dma l gather dst=sbuf:fp32[0:4]{1x4} src=hbm(x):fp32[4x4]{1x4} index=sbuf:int32[0:4]+64{1x1}\n"
				   ".dma s direct dst=hbm(y):fp32[4x4]{1x4} src=sbuf:fp32[0:4]{1x4}\n"
				   ".engine gpsimd\n    iota dst=sbuf:int32[0:4]+64{1x1} base=100 pmul=1\n"
				   "    dma_copy desc=l queue=0 sem=0 value=1\n    sem_wait sem=0 cond=is_ge value=1\n"
				   "    dma_copy desc=s queue=0 sem=0 value=1\n    sem_wait sem=0 cond=is_ge value=2\n    end\n";
		ProgramFile pf;
		std::string err;
		if (assemble_text(text, pf, err)) {
			if (host.load(BASE, 0, pf.image) && host.write_reg(REG_T_BIND, 0) && host.bind("x", 4096, 64, false) &&
			    host.bind("y", 8192, 64, true)) {
				host.run(core);
				rec.fault_status = host.read_reg(REG_STATUS);
				rec.fault_code = host.read_reg(REG_FAULT);
			}
		}
		std::vector<uint8_t> junk(100, 0xab);
		host.write_mem(BASE, junk.data(), junk.size());
		host.write_reg(REG_PROG_ADDR, 0);
		host.write_reg(REG_PROG_SIZE, junk.size());
		host.write_reg(REG_LOAD, 1);
		rec.bad_load_status = host.read_reg(REG_STATUS);
		rec.bad_load_code = host.read_reg(REG_FAULT);
	}

	void dmi()
	{
		tlm::tlm_generic_payload p;
		tlm::tlm_dmi d;
		p.set_address(BASE + 64);
		p.set_command(tlm::TLM_READ_COMMAND);
		rec.dmi_ok = host.socket->get_direct_mem_ptr(p, d) && d.is_read_write_allowed() &&
			     d.get_start_address() == BASE;
		if (rec.dmi_ok) {
			uint64_t v = 0x1122334455667788ull, back = 0;
			std::memcpy(d.get_dmi_ptr() + 64, &v, 8);   // a DMI write, read back by b_transport
			host.read_mem(BASE + 64, &back, 8);
			rec.dmi_same = back == v;
		}
	}

	void drive()
	{
		rec.id = host.read_reg(REG_ID);
		std::mt19937 g(20);
		for (const std::string &path : nsim_example_paths())
			run_program(path, g);
		bad_transactions();
		faults();
		dmi();
		external_memory();
		sc_core::sc_stop();
	}
};

class SystemCRun : public ::testing::Environment {
public:
	void SetUp() override
	{
		static Bench bench("bench");
		sc_core::sc_start();
	}
};

TEST(TlmCore, EveryExampleGivesTheNativeValuesAndTimeToThePicosecond)
{
	ASSERT_GE(rec.runs.size(), 1u);
	for (const ProgramRun &r : rec.runs) {
		SCOPED_TRACE(r.program);
		ASSERT_TRUE(r.error.empty()) << r.error;
		EXPECT_EQ(r.status, ST_DONE);
		EXPECT_GT(r.native_ps, 0u);
		EXPECT_EQ(r.tlm_ps, r.native_ps);   // doorbell to interrupt, in SystemC time
		EXPECT_EQ(r.reg_ps, r.native_ps);   // and the RUN_PS register
		ASSERT_EQ(r.tlm_out.size(), r.native_out.size());
		for (const auto &kv : r.native_out) {
			const auto &a = r.tlm_out.at(kv.first);
			size_t i = 0;
			while (i < a.size() && i < kv.second.size() && a[i] == kv.second[i])
				i++;
			EXPECT_TRUE(a == kv.second) << "output " << kv.first << " differs at byte " << i << " of "
						    << a.size() << " (tlm " << (i < a.size() ? (int)a[i] : -1) << ", native "
						    << (i < kv.second.size() ? (int)kv.second[i] : -1) << ")";
		}
	}
}

TEST(TlmCore, BadTransactionsGetErrorResponses)
{
	ASSERT_EQ(rec.bad.size(), 13u);
	for (const Bad &b : rec.bad)
		EXPECT_EQ(b.got, b.want) << b.what;
}

TEST(TlmCore, FaultsReportThroughTheRegisters)
{
	EXPECT_EQ(rec.fault_status, ST_FAULT);
	EXPECT_EQ(rec.fault_code, (uint64_t)NSIM_EXEC_OOB);
	EXPECT_EQ(rec.bad_load_status, ST_FAULT);
	EXPECT_EQ(rec.bad_load_code, (uint64_t)NSIM_INVALID);
}

TEST(TlmCore, ExternalMemoryAddsExactlyItsLatencyPerTransaction)
{
	ASSERT_EQ(rec.ext.size(), 6u);
	ASSERT_EQ(rec.ext_at.size(), 3u);
	const auto &base = rec.ext[0];
	for (const auto *v : { &rec.ext, &rec.ext_at })
		for (const auto &e : *v) {
			SCOPED_TRACE(testing::Message() << (v == &rec.ext ? "b_transport" : "nb_transport") << " latency "
							<< e.latency_ps << " ps");
			EXPECT_EQ(e.status, ST_DONE);
			EXPECT_TRUE(e.values_ok);               // x read and y written over the initiator socket
			EXPECT_EQ(e.reads, 1u);
			EXPECT_EQ(e.writes, 1u);
			EXPECT_EQ(e.run_ps, base.run_ps + 2 * e.latency_ps);   // two accesses, one after the other
			EXPECT_EQ(e.reg_ps, e.run_ps);
		}
	// temporal decoupling keeps times: the memory sees each access at the
	// same SystemC time (+ annotation) whatever the quantum, and AT issues
	// at that time too; the store comes after the load by the load's latency
	for (size_t i = 0; i < 3; i++) {
		const auto &q0 = rec.ext[i], &q1 = rec.ext[3 + i], &at = rec.ext_at[i];
		SCOPED_TRACE(q0.latency_ps);
		ASSERT_EQ(q0.when.size(), 2u);
		EXPECT_EQ(q1.quantum_ps, 1000000000u);
		EXPECT_EQ(q1.when, q0.when);
		EXPECT_EQ(at.when, q0.when);
		EXPECT_GT(q0.when[1], q0.when[0] + q0.latency_ps);
		EXPECT_EQ(q0.when[1] - rec.ext[0].when[1], q0.latency_ps);   // the store waits for the load's latency
	}
	EXPECT_EQ(rec.ext_bad_status, ST_FAULT);
	EXPECT_EQ(rec.ext_bad_code, (uint64_t)NSIM_EXEC_OOB);
}

TEST(TlmCore, IdRegisterAndDmiWindow)
{
	EXPECT_EQ(rec.id >> 32, 0x4e53494du);
	EXPECT_TRUE(rec.dmi_ok);
	EXPECT_TRUE(rec.dmi_same);
}

}  // namespace

int sc_main(int argc, char **argv)
{
	::testing::InitGoogleTest(&argc, argv);
	::testing::AddGlobalTestEnvironment(new SystemCRun);
	return RUN_ALL_TESTS();
}
