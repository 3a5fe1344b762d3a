// Paired cores (LNC=2): peer semaphore updates and peer DMAs between the two
// runs of an nsim_execute_multi pair.  Source: nki.isa core_barrier ("each
// NeuronCore writes a semaphore to each other core ... then waits for the
// other cores' semaphores") and sendrecv ("sends its src tile to the dst
// location of the target NeuronCore"), SDK nki/api/nki/isa/__init__.py.
#include <cstring>

#include "sim_util.h"

namespace {

// Each core loads its own `a`, tells the peer it may write into its receive
// buffer, sends `a` into the peer's receive buffer once the peer said so,
// tells the peer its data landed, waits for the peer's data, stores it as `b`.
const char *kSwap = R"(
.target trn2
.semaphores 3
.scratch 0
.tensor a input fp32 [128,64]
.tensor b output fp32 [128,64]
.dma la direct dst=sbuf:fp32[0:128]{1x64} src=hbm(a):fp32[64x128]{1x64}
.dma sx direct dst=sbuf:fp32[0:128]+256{1x64} src=sbuf:fp32[0:128]{1x64}
.dma sb direct dst=hbm(b):fp32[64x128]{1x64} src=sbuf:fp32[0:128]+256{1x64}
.engine sync
    dma_copy desc=la queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=1
    sem_signal sem=1 op=add value=1 peer
    sem_wait sem=1 cond=is_ge value=1
    dma_copy desc=sx queue=1 sem=0 value=1 peer
    sem_wait sem=0 cond=is_ge value=2
    sem_signal sem=2 op=add value=1 peer
    sem_wait sem=2 cond=is_ge value=1
    dma_copy desc=sb queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=3
    end
)";

float core_plus_one(int c)
{
	return (float)(c + 1);
}

// the program on cores 0..n-1 (0 and 1 a pair), core c's `a` filled with c + 1
MultiRun run_pair(const std::string &text, int n = 2)
{
	return run_on_cores(to_binary(text), n, 128 * 64 * 4, core_plus_one);
}

class Lnc : public RuntimeTest {};

TEST_F(Lnc, PeerDmaWritesThePairedCoresSbuf)
{
	start("trn2");
	MultiRun r = run_pair(kSwap);
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (int c = 0; c < 2; c++)
		for (float x : r.out[c])
			ASSERT_EQ(x, (float)(2 - c)) << "core " << c << " holds the other core's data";
}

TEST_F(Lnc, PeerSemaphoreUpdatesTakeTheDmaFabricsLatency)
{
	// the handshake before the send is one peer update after each core's
	// load: the send cannot start before the load plus that latency
	start("trn2");
	nsim_chip_info ci{};
	ASSERT_EQ(nsim_chip_info_get("trn2", &ci), NSIM_SUCCESS);
	MultiRun r = run_pair(kSwap);
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	uint64_t peer = ci.peer_signal_ps;
	// the DMA issue latency (~1300 ns, HARDWARE.md "DMA") plus a descriptor
	EXPECT_GT(peer, 1300000u);
	EXPECT_LT(peer, 1500000u);
	// on the critical path: load, "ready" update, send, "landed" update,
	// store -- three DMAs (each at least the issue latency) and two updates
	EXPECT_GE(r.stats[0].total_ps, 3 * 1300000ull + 2 * peer);
	EXPECT_LT(r.stats[0].total_ps, 3 * 1300000ull + 2 * peer + 2000000ull) << "32 KiB moves take < 2 us";
	EXPECT_EQ(r.stats[0].total_ps, r.stats[1].total_ps) << "symmetric programs end together";
}

TEST_F(Lnc, PeerOperationsWithoutAPairedCoreFault)
{
	start("trn2");
	SimRun r = run_program(kSwap);
	EXPECT_EQ(r.status, NSIM_EXEC_ERR);
	EXPECT_NE(r.error.find("no paired core"), std::string::npos) << r.error;
	// an odd run out of three has no partner either
	MultiRun t = run_pair(kSwap, 3);
	EXPECT_EQ(t.status, NSIM_EXEC_ERR);
}

TEST_F(Lnc, PeerOperationsNeedNeuronCoreV3)
{
	std::string text = kSwap;
	text.replace(text.find("trn2"), 4, "trn1");
	isa_program *p = nullptr;
	isa_diag d{};
	EXPECT_NE(isa_asm(text.data(), text.size(), &p, &d), ISA_OK);
	EXPECT_NE(std::string(d.msg).find("NeuronCore-v3"), std::string::npos) << d.msg;
	isa_program_free(p);
}

TEST_F(Lnc, PeerDmaOnlyIntoSbuf)
{
	std::string text = kSwap;
	text.replace(text.find("desc=sb queue=0 sem=0 value=1"), 29, "desc=sb queue=0 sem=0 value=1 peer");
	isa_program *p = nullptr;
	isa_diag d{};
	EXPECT_NE(isa_asm(text.data(), text.size(), &p, &d), ISA_OK);
	EXPECT_NE(std::string(d.msg).find("direct transfer into SBUF"), std::string::npos) << d.msg;
	isa_program_free(p);
}

TEST_F(Lnc, PairedRunsAreDeterministic)
{
	start("trn2");
	MultiRun a = run_pair(kSwap), b = run_pair(kSwap);
	ASSERT_EQ(a.status, NSIM_SUCCESS) << a.error;
	EXPECT_EQ(a.stats[0].total_ps, b.stats[0].total_ps);
	EXPECT_EQ(a.stats[1].total_ps, b.stats[1].total_ps);
}

// Three cores meet: each tells the two others it arrived (remote updates by
// rank), waits for both, then stores its input.  A core whose program ends
// early still receives the others' updates.
TEST_F(Lnc, RemoteSemaphoreUpdatesReachTheNamedRank)
{
	start("trn2");
	std::string meet = R"(
.target trn2
.semaphores 2
.scratch 0
.tensor a input fp32 [128,64]
.tensor b output fp32 [128,64]
.dma la direct dst=sbuf:fp32[0:128]{1x64} src=hbm(a):fp32[64x128]{1x64}
.dma sb direct dst=hbm(b):fp32[64x128]{1x64} src=sbuf:fp32[0:128]{1x64}
.engine sync
    sem_signal sem=1 op=add value=1 remote rank=0
    sem_signal sem=1 op=add value=1 remote rank=1
    sem_signal sem=1 op=add value=1 remote rank=2
    sem_wait sem=1 cond=is_ge value=3
    dma_copy desc=la queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=1
    dma_copy desc=sb queue=0 sem=0 value=1
    sem_wait sem=0 cond=is_ge value=2
    end
)";
	MultiRun r = run_pair(meet, 3);
	ASSERT_EQ(r.status, NSIM_SUCCESS) << r.error;
	for (int c = 0; c < 2; c++)
		for (float x : r.out[c])
			ASSERT_EQ(x, (float)(c + 1));
	nsim_chip_info ci{};
	ASSERT_EQ(nsim_chip_info_get("trn2", &ci), NSIM_SUCCESS);
	EXPECT_GE(r.stats[0].total_ps, ci.peer_signal_ps + 2 * 1300000ull) << "the meeting costs a remote update";
	// a rank outside the execution is a fault, not a hang
	std::string lost = meet;
	lost.replace(lost.find("rank=2"), 6, "rank=5");
	MultiRun f = run_pair(lost, 3);
	EXPECT_EQ(f.status, NSIM_EXEC_ERR);
	EXPECT_NE(f.error.find("rank 5"), std::string::npos) << f.error;
}

TEST_F(Lnc, RankNeedsRemote)
{
	std::string text = ".target trn2\n.semaphores 2\n.scratch 0\n.engine sync\n"
			   "    sem_signal sem=1 op=add value=1 rank=1\n    end\n";
	isa_program *p = nullptr;
	isa_diag d{};
	EXPECT_NE(isa_asm(text.data(), text.size(), &p, &d), ISA_OK);
	EXPECT_NE(std::string(d.msg).find("without remote"), std::string::npos) << d.msg;
	isa_program_free(p);
}

} // namespace
