// The runtime API: determinism in all three modes, simulated faults as
// status codes with messages (and the process keeps working), concurrent
// use from several threads, environment configuration.
#include "../example_programs.h"
#include "sim_util.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace {

std::string read_file(const std::string &path)
{
	std::ifstream f(path);
	std::stringstream ss;
	ss << f.rdbuf();
	return ss.str();
}

std::vector<std::string> examples()
{
	std::vector<std::string> v;
	for (const std::string &path : nsim_example_paths())
		v.push_back(read_file(path));
	return v;
}

std::string target_of(const std::string &text)
{
	size_t at = text.find(".target ");
	return text.substr(at + 8, 4);
}

// deterministic, non-trivial input bytes for every input tensor
std::map<std::string, std::vector<uint8_t>> inputs_for(const std::string &text)
{
	std::map<std::string, std::vector<uint8_t>> m;
	isa_program *p = nullptr;
	isa_diag d{};
	isa_asm(text.data(), text.size(), &p, &d);
	for (uint32_t i = 0; p && i < p->n_tensors; i++) {
		const isa_tensor *t = &p->tensors[i];
		if (t->kind != ISA_TK_INPUT)
			continue;
		std::vector<uint8_t> v(isa_tensor_bytes(t));
		uint32_t x = 12345 + i;
		for (auto &b : v) {
			x = x * 1103515245u + 12345u;
			b = (uint8_t)(x >> 24);
		}
		if (!isa_dtype_is_float(t->dtype))
			std::fill(v.begin(), v.end(), 0);   // integers: 0 is in range as any index or offset
		if (isa_dtype_is_float(t->dtype) && isa_dtype_size(t->dtype) >= 2) {
			// small finite values: clear the top exponent bits
			unsigned es = isa_dtype_size(t->dtype);
			for (size_t k = es - 1; k < v.size(); k += es)
				v[k] &= 0xbe;
		}
		m[t->name] = v;
	}
	isa_program_free(p);
	return m;
}

// a `branch` line with a register condition (a=)
bool has_register_branch(const std::string &text)
{
	for (size_t at = text.find("branch "); at != std::string::npos; at = text.find("branch ", at + 1)) {
		size_t eol = text.find('\n', at);
		if (text.substr(at, eol - at).find(" a=") != std::string::npos)
			return true;
	}
	return false;
}

class Runtime : public RuntimeTest {};

TEST_F(Runtime, RunsAreDeterministicInEveryModeAndTimingOnlyAgreesOnTime)
{
	for (const std::string &text : examples()) {
		std::string target = target_of(text);
		auto in = inputs_for(text);
		start(target.c_str(), NSIM_MODE_FULL);
		SimRun a = run_program(text, 0, in), b = run_program(text, 0, in);
		ASSERT_EQ(a.status, NSIM_SUCCESS) << a.error;
		EXPECT_EQ(a.out, b.out);
		EXPECT_EQ(a.stats.total_ps, b.stats.total_ps);
		EXPECT_EQ(memcmp(&a.stats, &b.stats, sizeof(a.stats)), 0);
		EXPECT_GT(a.stats.total_ps, 0u);

		start(target.c_str(), NSIM_MODE_TIMING);
		SimRun t1 = run_program(text, 0, in), t2 = run_program(text, 0, in);
		if (has_register_branch(text)) {
			// a loop on a register needs the data timing-only mode does not compute
			EXPECT_EQ(t1.status, NSIM_EXEC_ERR) << t1.error;
			continue;
		}
		ASSERT_EQ(t1.status, NSIM_SUCCESS) << t1.error;
		EXPECT_EQ(t1.stats.total_ps, a.stats.total_ps) << "timing-only and full disagree";
		EXPECT_EQ(memcmp(&t1.stats, &t2.stats, sizeof(t1.stats)), 0);

		start(target.c_str(), NSIM_MODE_FUNCTIONAL);
		SimRun f1 = run_program(text, 0, in), f2 = run_program(text, 0, in);
		ASSERT_EQ(f1.status, NSIM_SUCCESS) << f1.error;
		EXPECT_EQ(f1.out, a.out) << "functional and full values differ";
		EXPECT_EQ(f1.out, f2.out);
		EXPECT_EQ(f1.stats.total_ps, 0u);
	}
}

const char *kGood = ".target trn2\n.semaphores 2\n"
		    ".tensor x input fp32 [4,8]\n.tensor y output fp32 [4,8]\n"
		    ".dma l direct dst=sbuf:fp32[0:4]{1x8} src=hbm(x):fp32[8x4]{1x8}\n"
		    ".dma s direct dst=hbm(y):fp32[8x4]{1x8} src=sbuf:fp32[0:4]+64{1x8}\n"
		    ".engine sync\ndma_copy desc=l sem=0\nsem_wait sem=1 value=1\n"
		    "sem_signal sem=0 op=set value=0\nsem_wait sem=0 cond=is_equal value=0\n"
		    "dma_copy desc=s queue=1 sem=0\nsem_wait sem=0 value=1\nend\n"
		    ".engine scalar\nsem_wait sem=0 value=1\nnop cycles=100\n"
		    "activation dst=sbuf:fp32[0:4]+64{1x8} src=sbuf:fp32[0:4]{1x8} func=exp\n"
		    "sem_signal sem=1\nend\n";

// After a fault, the same process runs a correct program correctly.
void expect_recovers()
{
	std::vector<uint8_t> x(4 * 8 * 4);
	for (size_t i = 0; i < 32; i++) {
		float f = (float)i / 8.0f;
		memcpy(&x[i * 4], &f, 4);
	}
	SimRun r = run_program(kGood, 0, { { "x", x } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (size_t i = 0; i < 32; i++) {
		float got;
		memcpy(&got, &r.out["y"][i * 4], 4);
		EXPECT_FLOAT_EQ(got, std::exp((float)i / 8.0f));
	}
}

// An HBM access pattern starts `offset` bytes into its tensor, for reads and
// writes alike: y = concat(x[8:16], x[0:8]) through two tiles.
TEST_F(Runtime, HbmOffsetsAddressIntoTheTensor)
{
	start("trn1");
	const char *t = ".target trn1\n.semaphores 1\n"
			".tensor x input fp32 [16]\n.tensor y output fp32 [16]\n"
			".dma l0 direct dst=sbuf:fp32[0:2]{1x4} src=hbm(x):fp32[4x2]+32{1x4}\n"
			".dma l1 direct dst=sbuf:fp32[0:2]+16{1x4} src=hbm(x):fp32[4x2]{1x4}\n"
			".dma s0 direct dst=hbm(y):fp32[4x2]{1x4} src=sbuf:fp32[0:2]{1x4}\n"
			".dma s1 direct dst=hbm(y):fp32[4x2]+32{1x4} src=sbuf:fp32[0:2]+16{1x4}\n"
			".engine sync\ndma_copy desc=l0 sem=0\ndma_copy desc=l1 sem=0\n"
			"sem_wait sem=0 value=2\ndma_copy desc=s0 sem=0\ndma_copy desc=s1 sem=0\n"
			"sem_wait sem=0 value=4\nend\n";
	float x[16];
	for (int i = 0; i < 16; i++)
		x[i] = (float)(i + 1);
	std::vector<uint8_t> b((uint8_t *)x, (uint8_t *)x + sizeof(x));
	SimRun r = run_program(t, 0, { { "x", b } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (int i = 0; i < 16; i++) {
		float got;
		memcpy(&got, &r.out["y"][i * 4], 4);
		EXPECT_EQ(got, x[(i + 8) % 16]) << "y[" << i << "]";
	}
}

// A slice names bytes of its parent: reads/writes land in the parent, its
// bounds are checked, and freeing it leaves the parent's memory allocated.
TEST_F(Runtime, TensorSlicesShareTheParentsMemory)
{
	start("trn1");
	nsim_tensor *t = nullptr, *s = nullptr;
	ASSERT_EQ(nsim_tensor_allocate(0, 64, "parent", &t), NSIM_SUCCESS);
	uint64_t used = nsim_memory_allocated();
	EXPECT_EQ(nsim_tensor_slice(t, 60, 8, &s), NSIM_INVALID);
	EXPECT_EQ(s, nullptr);
	EXPECT_NE(std::string(nsim_last_error()).find("outside tensor 'parent'"), std::string::npos)
		<< nsim_last_error();
	ASSERT_EQ(nsim_tensor_slice(t, 16, 8, &s), NSIM_SUCCESS);
	EXPECT_EQ(nsim_tensor_size(s), 8u);
	EXPECT_EQ(nsim_tensor_device_address(s), nsim_tensor_device_address(t) + 16);
	EXPECT_EQ(nsim_tensor_write(s, "abcdefgh", 0, 8), NSIM_SUCCESS);
	EXPECT_EQ(nsim_tensor_write(s, "x", 8, 1), NSIM_INVALID);
	char buf[9] = {};
	EXPECT_EQ(nsim_tensor_read(t, buf, 16, 8), NSIM_SUCCESS);
	EXPECT_STREQ(buf, "abcdefgh");
	nsim_tensor_free(s);
	EXPECT_EQ(nsim_memory_allocated(), used);
	nsim_tensor_free(t);
	EXPECT_LT(nsim_memory_allocated(), used);
}

TEST_F(Runtime, FaultOutOfBoundsIndirectIndex)
{
	start("trn2");
	const char *t = ".target trn2\n.semaphores 1\n"
			".tensor table input fp32 [50,16]\n.tensor ids input int32 [2]\n"
			".dma li direct dst=sbuf:int32[0:2]{1x1} src=hbm(ids):int32[1x2]{1x1}\n"
			".dma g gather dst=sbuf:fp32[0:2]+64{1x16} src=hbm(table):fp32[16x50]{1x16} index=sbuf:int32[0:2]{1x1}\n"
			".engine sync\ndma_copy desc=li sem=0\nsem_wait sem=0 value=1\n"
			"dma_copy desc=g sem=0\nsem_wait sem=0 value=2\nend\n";
	int32_t ids[2] = { 3, 60 };
	std::vector<uint8_t> b((uint8_t *)ids, (uint8_t *)ids + 8);
	SimRun r = run_program(t, 0, { { "ids", b } });
	EXPECT_EQ(r.status, NSIM_EXEC_OOB);
	EXPECT_NE(r.error.find("sync engine, instruction 2 (dma_copy)"), std::string::npos) << r.error;
	EXPECT_NE(r.error.find("index[1] = 60 outside the 50 rows"), std::string::npos) << r.error;
	expect_recovers();
}

// oob=skip (NKI oob_mode.skip): the row whose index leaves the table is
// not moved -- its destination row keeps what it held -- and the others are
TEST_F(Runtime, IndirectRowsOutsideTheTableAreSkippedWhenAsked)
{
	start("trn2");
	const char *t = ".target trn2\n.semaphores 1\n"
			".tensor table input fp32 [50,16]\n.tensor ids input int32 [3]\n"
			".tensor fill input fp32 [3,16]\n.tensor out output fp32 [3,16]\n"
			".dma li direct dst=sbuf:int32[0:3]{1x1} src=hbm(ids):int32[1x3]{1x1}\n"
			".dma f direct dst=sbuf:fp32[0:3]+64{1x16} src=hbm(fill):fp32[16x3]{1x16}\n"
			".dma g gather dst=sbuf:fp32[0:3]+64{1x16} src=hbm(table):fp32[16x50]{1x16} "
			"index=sbuf:int32[0:3]{1x1} oob=skip\n"
			".dma o direct dst=hbm(out):fp32[16x3]{1x16} src=sbuf:fp32[0:3]+64{1x16}\n"
			".engine sync\ndma_copy desc=li sem=0\ndma_copy desc=f sem=0\nsem_wait sem=0 value=2\n"
			"dma_copy desc=g sem=0\nsem_wait sem=0 value=3\ndma_copy desc=o sem=0\n"
			"sem_wait sem=0 value=4\nend\n";
	int32_t ids[3] = { 3, 60, -1 };
	std::vector<float> table(50 * 16), fill(3 * 16, -7.0f);
	for (size_t i = 0; i < table.size(); i++)
		table[i] = (float)i;
	auto bytes = [](const void *p, size_t n) {
		return std::vector<uint8_t>((const uint8_t *)p, (const uint8_t *)p + n);
	};
	SimRun r = run_program(t, 0, { { "ids", bytes(ids, sizeof(ids)) },
				       { "table", bytes(table.data(), table.size() * 4) },
				       { "fill", bytes(fill.data(), fill.size() * 4) } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	const float *o = (const float *)r.out["out"].data();
	for (int j = 0; j < 16; j++) {
		EXPECT_EQ(o[j], table[3 * 16 + j]);         // row 3 gathered
		EXPECT_EQ(o[16 + j], -7.0f);                // 60 and -1: skipped
		EXPECT_EQ(o[32 + j], -7.0f);
	}
}

TEST_F(Runtime, FaultAccumulateIntoUninitializedPsum)
{
	start("trn2");
	const char *t = ".target trn2\n.engine tensor\n"
			"load_stationary stationary=sbuf:bf16[0:128]{1x128}\n"
			"multiply_moving dst=psum:fp32[0:128]+2048{1x512} moving=sbuf:bf16[0:128]+256{1x512} accumulate\n"
			"end\n";
	SimRun r = run_program(t);
	EXPECT_EQ(r.status, NSIM_EXEC_ERR);
	EXPECT_NE(r.error.find("tensor engine, instruction 1 (multiply_moving)"), std::string::npos) << r.error;
	EXPECT_NE(r.error.find("never written"), std::string::npos) << r.error;
	expect_recovers();
}

TEST_F(Runtime, FaultSemaphoreDeadlock)
{
	start("trn2");
	const char *t = ".target trn2\n.semaphores 2\n"
			".engine vector\nsem_wait sem=0 value=1\nsem_signal sem=1\nend\n"
			".engine gpsimd\nsem_wait sem=1 value=1\nsem_signal sem=0\nend\n";
	SimRun r = run_program(t);
	EXPECT_EQ(r.status, NSIM_TIMEOUT);
	EXPECT_NE(r.error.find("deadlock"), std::string::npos) << r.error;
	EXPECT_NE(r.error.find("vector at instruction 0 waits sem 0 is_ge 1 (now 0)"), std::string::npos)
		<< r.error;
	expect_recovers();
}

TEST_F(Runtime, FaultNaNWhenNumericCheckingIsOn)
{
	const char *t = ".target trn2\n.tensor x input fp32 [1,4]\n.tensor y output fp32 [1,4]\n"
			".engine scalar\n"
			"activation dst=sbuf:fp32[0:1]+64{1x4} src=sbuf:fp32[0:1]{1x4} func=log bias=-1.0\nend\n";
	start("trn2", NSIM_MODE_FULL, 1);
	SimRun r = run_program(t);                      // log(0 - 1) = NaN
	EXPECT_EQ(r.status, NSIM_EXEC_NUM_ERR);
	EXPECT_NE(r.error.find("scalar engine, instruction 0 (activation)"), std::string::npos) << r.error;
	EXPECT_NE(r.error.find("NaN"), std::string::npos) << r.error;
	expect_recovers();
	start("trn2", NSIM_MODE_FULL, 0);
	EXPECT_EQ(run_program(t).status, NSIM_SUCCESS);   // checking off: NaN is a value
}

TEST_F(Runtime, BadArgumentsAreStatusCodes)
{
	start("trn2");
	nsim_tensor *t = nullptr;
	EXPECT_EQ(nsim_tensor_allocate(99, 16, "x", &t), NSIM_INVALID);
	EXPECT_EQ(nsim_tensor_allocate(0, 1ull << 50, "huge", &t), NSIM_RESOURCE);
	EXPECT_NE(std::string(nsim_last_error()).find("out of device memory"), std::string::npos);
	ASSERT_EQ(nsim_tensor_allocate(0, 64, "x", &t), NSIM_SUCCESS);
	uint8_t buf[128] = {};
	EXPECT_EQ(nsim_tensor_write(t, buf, 32, 64), NSIM_INVALID);
	EXPECT_EQ(nsim_tensor_read(t, buf, 65, 0), NSIM_INVALID);
	nsim_tensor_free(t);
	nsim_model *m = nullptr;
	EXPECT_EQ(nsim_load("garbage", 7, 0, &m), NSIM_INVALID);
	EXPECT_NE(std::string(nsim_last_error()).find("bad program"), std::string::npos);
	// a trn1 program on a trn2 device
	std::vector<uint8_t> bin = to_binary(".target trn1\n");
	EXPECT_EQ(nsim_load(bin.data(), bin.size(), 0, &m), NSIM_INVALID);
	// missing input
	SimRun r = run_program(".target trn2\n.tensor x input fp32 [4]\n");
	EXPECT_EQ(r.status, NSIM_SUCCESS);
	bin = to_binary(".target trn2\n.tensor x input fp32 [4]\n");
	ASSERT_EQ(nsim_load(bin.data(), bin.size(), 0, &m), NSIM_SUCCESS);
	nsim_tensor_set *in = nullptr;
	nsim_tensor_set_create(&in);
	EXPECT_EQ(nsim_execute(m, in, nullptr), NSIM_EXEC_BAD_INPUT);
	EXPECT_NE(std::string(nsim_last_error()).find("input tensor 'x' not in the input set"),
		  std::string::npos);
	nsim_tensor *small = nullptr;
	nsim_tensor_allocate(0, 8, "small", &small);
	nsim_tensor_set_add(in, "x", small);
	EXPECT_EQ(nsim_execute(m, in, nullptr), NSIM_EXEC_BAD_INPUT);
	nsim_tensor_free(small);
	nsim_tensor_set_free(in);
	nsim_unload(m);
}

// A loaded program's host memory is its decoded tables: at least one
// isa_instr per instruction and one isa_dma_desc per descriptor, and more
// than its encoded image (the plugin's program cache counts it).
TEST_F(Runtime, ModelHostBytesCountTheDecodedProgram)
{
	start("trn2");
	std::string text = ".target trn2\n.engine vector\n";
	for (int i = 0; i < 200; i++)
		text += "    tensor_copy dst=sbuf:fp32[0:128]+0{1x64} src=sbuf:fp32[0:128]+256{1x64}\n";
	text += "    end\n";
	std::vector<uint8_t> bin = to_binary(text);
	nsim_model *m = nullptr;
	ASSERT_EQ(nsim_load(bin.data(), bin.size(), 0, &m), NSIM_SUCCESS) << nsim_last_error();
	EXPECT_GE(nsim_model_host_bytes(m), 200 * sizeof(isa_instr));
	EXPECT_GT(nsim_model_host_bytes(m), bin.size());
	EXPECT_EQ(nsim_model_host_bytes(nullptr), 0u);
	nsim_unload(m);
}

TEST_F(Runtime, FullTrn2HbmIsReservedNotCommitted)
{
	start("trn2");
	// 80 GiB of the 96 GiB device in one tensor: reserved address space only
	nsim_tensor *t = nullptr;
	ASSERT_EQ(nsim_tensor_allocate(0, 80ull << 30, "big", &t), NSIM_SUCCESS) << nsim_last_error();
	uint8_t v = 7;
	EXPECT_EQ(nsim_tensor_write(t, &v, (80ull << 30) - 1, 1), NSIM_SUCCESS);
	uint8_t back = 0;
	EXPECT_EQ(nsim_tensor_read(t, &back, (80ull << 30) - 1, 1), NSIM_SUCCESS);
	EXPECT_EQ(back, 7);
	EXPECT_EQ(nsim_memory_allocated(), 80ull << 30);
	nsim_tensor_free(t);
	EXPECT_EQ(nsim_memory_allocated(), 0u);
}

TEST_F(Runtime, ConcurrentExecutionOnDifferentCores)
{
	start("trn2");
	std::string text = read_file(std::string(NSIM_EXAMPLES_DIR) + "/matmul_gelu.nsasm");
	auto in = inputs_for(text);
	SimRun ref = run_program(text, 0, in);
	ASSERT_EQ(ref.status, NSIM_SUCCESS) << ref.error;
	std::vector<std::thread> threads;
	std::vector<int> ok(4, 0);
	for (int c = 0; c < 4; c++)
		threads.emplace_back([&, c] {
			for (int i = 0; i < 5; i++) {
				SimRun r = run_program(text, c, in);
				ok[c] += r.status == NSIM_SUCCESS && r.out == ref.out &&
					 r.stats.total_ps == ref.stats.total_ps;
			}
		});
	for (auto &t : threads)
		t.join();
	for (int c = 0; c < 4; c++)
		EXPECT_EQ(ok[c], 5) << "core " << c;
}

TEST(RuntimeEnv, VisibleCoresTargetAndMode)
{
	nsim_close();
	setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn1", 1);
	setenv("NEURON_RT_VISIBLE_CORES", "1", 1);
	ASSERT_EQ(nsim_init(), NSIM_SUCCESS) << nsim_last_error();
	EXPECT_STREQ(nsim_target_name(), "trn1");
	EXPECT_EQ(nsim_core_count(), 1);
	nsim_close();
	setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2", 1);
	setenv("NEURON_RT_VISIBLE_CORES", "0-5", 1);
	setenv("NEURON_RT_NUM_CORES", "3", 1);
	setenv("NEURON_SIM_MODE", "timing", 1);
	ASSERT_EQ(nsim_init(), NSIM_SUCCESS) << nsim_last_error();
	EXPECT_EQ(nsim_core_count(), 3);
	EXPECT_EQ(nsim_get_mode(), NSIM_MODE_TIMING);
	nsim_close();
	setenv("NEURON_RT_VISIBLE_CORES", "0-9", 1);
	unsetenv("NEURON_RT_NUM_CORES");
	EXPECT_EQ(nsim_init(), NSIM_INVALID);
	EXPECT_NE(std::string(nsim_last_error()).find("NEURON_RT_VISIBLE_CORES"), std::string::npos);
	setenv("NEURON_RT_VISIBLE_CORES", "0", 1);
	setenv("NEURON_SIM_MODE", "fast", 1);
	EXPECT_EQ(nsim_init(), NSIM_INVALID);
	setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn9", 1);
	unsetenv("NEURON_SIM_MODE");
	EXPECT_EQ(nsim_init(), NSIM_INVALID);
	EXPECT_NE(std::string(nsim_last_error()).find("trn9"), std::string::npos);
	unsetenv("NEURON_PLATFORM_TARGET_OVERRIDE");
	unsetenv("NEURON_RT_VISIBLE_CORES");
	EXPECT_EQ(nsim_execute(nullptr, nullptr, nullptr), NSIM_UNINITIALIZED);
}

// bn_stats / bn_aggr (published layout, nki.isa.bn_stats: count, mean,
// variance*count of the even then the odd elements; bn_aggr: mean and
// variance over the triples; the layout itself is checked through the NKI
// frontend, tests/python/test_nki_api.py): the example program's per-row
// results match a double-precision reference.
TEST_F(Runtime, BnStatsAndBnAggrGiveRowMeanAndVariance)
{
	std::string text = read_file(std::string(NSIM_EXAMPLES_DIR) + "/layer_stats.nsasm");
	std::vector<uint8_t> x(128 * 1024 * 4);
	std::vector<double> mean(128), var(128);
	for (int p = 0; p < 128; p++) {
		double s = 0, s2 = 0;
		for (int j = 0; j < 1024; j++) {
			float v = (float)(p % 7) + std::sin(0.37 * j + p) * (1.0f + 0.01f * j);
			memcpy(&x[(p * 1024 + j) * 4], &v, 4);
			s += v;
		}
		mean[p] = s / 1024;
		for (int j = 0; j < 1024; j++) {
			float v;
			memcpy(&v, &x[(p * 1024 + j) * 4], 4);
			s2 += (v - mean[p]) * (v - mean[p]);
		}
		var[p] = s2 / 1024;
	}
	start("trn2");
	SimRun r = run_program(text, 0, { { "x", x } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (int p = 0; p < 128; p++) {
		float m, v;
		memcpy(&m, &r.out["mv"][p * 8], 4);
		memcpy(&v, &r.out["mv"][p * 8 + 4], 4);
		EXPECT_NEAR(m, mean[p], 1e-5 * (1 + std::fabs(mean[p]))) << p;
		EXPECT_NEAR(v, var[p], 1e-5 * (1 + var[p])) << p;
	}
}

// nc_n_gather (nki.isa.nc_n_gather): each partition gathers from its own
// row at uint32 positions; an index past the row is a fault that names it,
// reported as a status, never a host crash.
TEST_F(Runtime, NcNGatherPicksElementsWithinEachPartition)
{
	std::string text = read_file(std::string(NSIM_EXAMPLES_DIR) + "/row_gather.nsasm");
	std::vector<uint8_t> x(128 * 256 * 4), idx(128 * 64 * 4);
	for (int p = 0; p < 128; p++) {
		for (int j = 0; j < 256; j++) {
			float v = (float)(p * 1000 + j);
			memcpy(&x[(p * 256 + j) * 4], &v, 4);
		}
		for (int j = 0; j < 64; j++) {
			uint32_t e = (uint32_t)((j * 37 + p * 11) % 256);
			memcpy(&idx[(p * 64 + j) * 4], &e, 4);
		}
	}
	start("trn2");
	SimRun r = run_program(text, 0, { { "x", x }, { "idx", idx } });
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (int p = 0; p < 128; p++)
		for (int j = 0; j < 64; j++) {
			float got;
			memcpy(&got, &r.out["out"][(p * 64 + j) * 4], 4);
			ASSERT_EQ(got, (float)(p * 1000 + (j * 37 + p * 11) % 256)) << p << "," << j;
		}
	EXPECT_GT(r.stats.engine_busy_ps[ISA_ENGINE_GPSIMD], 0u);

	uint32_t bad = 256;
	memcpy(&idx[(5 * 64 + 3) * 4], &bad, 4);
	SimRun f = run_program(text, 0, { { "x", x }, { "idx", idx } });
	EXPECT_EQ(f.status, NSIM_EXEC_OOB);
	EXPECT_NE(f.error.find("indices[5, 3] = 256 outside the 256 elements"), std::string::npos) << f.error;
}

}  // namespace

// An instruction reads all its operands before it writes (the device model
// stages a few rows at a time only where that cannot change the result):
// y[p] = x[p -/+ 1] + 1 through a destination one partition above / below
// its source, in place, and beside its source in the same partitions.
TEST_F(Runtime, ElementwiseReadsEveryOperandBeforeWriting)
{
	const int P = 64, F = 256;   // 64 rows of 1 KiB: staged in blocks when independent
	std::vector<uint8_t> x((size_t)P * F * 4);
	for (size_t i = 0; i < (size_t)P * F; i++) {
		float f = (float)i;
		memcpy(&x[i * 4], &f, 4);
	}
	auto text = [&](const std::string &dst, const std::string &src, const std::string &out) {
		std::string fs = std::to_string(F), ps = std::to_string(P);
		return ".target trn2\n.semaphores 2\n.tensor x input fp32 [" + ps + "," + fs +
		       "]\n.tensor y output fp32 [" + ps + "," + fs + "]\n"
		       ".dma l direct dst=sbuf:fp32[0:" + ps + "]{1x" + fs + "} src=hbm(x):fp32[" + fs + "x" + ps +
		       "]{1x" + fs + "}\n"
		       ".dma s direct dst=hbm(y):fp32[" + fs + "x" + ps + "]{1x" + fs + "} src=" + out + "\n"
		       ".engine sync\ndma_copy desc=l sem=0\nsem_wait sem=1 value=1\n"
		       "dma_copy desc=s queue=1 sem=0\nsem_wait sem=0 value=2\nend\n"
		       ".engine vector\nsem_wait sem=0 value=1\n"
		       "tensor_scalar dst=" + dst + " src=" + src + " op0=add scalar0=1.0\n"
		       "sem_signal sem=1\nend\n";
	};
	auto sb = [&](int p0, int p1, int off) {
		return "sbuf:fp32[" + std::to_string(p0) + ":" + std::to_string(p1) + "]" +
		       (off ? "+" + std::to_string(off) : "") + "{1x" + std::to_string(F) + "}";
	};
	auto at = [&](const SimRun &r, int p, int j) {
		float v;
		memcpy(&v, &r.out.at("y")[((size_t)p * F + j) * 4], 4);
		return v;
	};
	struct Case {
		const char *what;
		std::string dst, src;
		int shift;   // y[p] = x[p - shift] + 1 where defined
	} cases[] = {
		{ "dst one partition above src", sb(1, P, 0), sb(0, P - 1, 0), 1 },
		{ "dst one partition below src", sb(0, P - 1, 0), sb(1, P, 0), -1 },
		{ "in place", sb(0, P, 0), sb(0, P, 0), 0 },
		{ "beside src", sb(0, P, F * 4), sb(0, P, 0), 0 },
	};
	// with numerics checked every row is staged at once: the same results
	for (int check = 0; check < 2; check++) {
	start("trn2", NSIM_MODE_FULL, check);
	for (const Case &c : cases) {
		std::string out = c.dst.find("+") != std::string::npos ? sb(0, P, F * 4) : sb(0, P, 0);
		SimRun r = run_program(text(c.dst, c.src, out), 0, { { "x", x } });
		ASSERT_EQ(r.status, NSIM_SUCCESS) << c.what << ": " << r.error;
		for (int p = 0; p < P; p++) {
			int q = p - c.shift;
			if (q < 0 || q >= P)
				continue;
			for (int j = 0; j < F; j += 37)
				ASSERT_EQ(at(r, p, j), (float)(q * F + j) + 1.0f)
					<< c.what << ", row " << p << ", check " << check;
		}
	}
	}
}
