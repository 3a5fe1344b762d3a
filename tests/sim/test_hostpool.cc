// The host thread pool that shares an instruction's rows (sim/hostpool.c):
// every row of a job runs exactly once, jobs back to back reuse the pool,
// and a job submitted while another thread's job runs is done by its caller.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

extern "C" {
#include "hostpool.h"
}

namespace {

struct Job {
	std::vector<std::atomic<int>> hits;
	explicit Job(size_t n) : hits(n) {}
};

void count_rows(void *arg, uint32_t lo, uint32_t hi)
{
	auto *j = static_cast<Job *>(arg);
	for (uint32_t r = lo; r < hi; r++)
		j->hits[r].fetch_add(1);
}

TEST(HostPool, EveryRowRunsExactlyOnce)
{
	ASSERT_GE(nsim_hostpool_threads(), 1);
	for (uint32_t n : { 1u, 2u, 3u, 17u, 128u, 1000u }) {
		for (int rep = 0; rep < 50; rep++) {
			Job j(n);
			nsim_hostpool_run(nullptr, count_rows, &j, n);
			for (uint32_t r = 0; r < n; r++)
				ASSERT_EQ(j.hits[r].load(), 1) << "row " << r << " of " << n;
		}
	}
}

TEST(HostPool, ConcurrentCallersEachFinishTheirJob)
{
	std::vector<std::thread> callers;
	std::atomic<int> bad{ 0 };
	for (int t = 0; t < 3; t++)
		callers.emplace_back([&bad] {
			for (int rep = 0; rep < 200; rep++) {
				Job j(64);
				nsim_hostpool_run(nullptr, count_rows, &j, 64);
				for (auto &h : j.hits)
					bad += h.load() != 1;
			}
		});
	for (auto &c : callers)
		c.join();
	EXPECT_EQ(bad.load(), 0);
}

}  // namespace
