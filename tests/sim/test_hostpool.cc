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
	// sizes change from job to job: a worker leaving one job may claim from the next
	const uint32_t sizes[] = { 1u, 1000u, 2u, 17u, 3u, 128u, 7u };
	for (int rep = 0; rep < 3000; rep++) {
		uint32_t n = sizes[rep % 7];
		Job j(n);
		nsim_hostpool_run(nullptr, count_rows, &j, n);
		for (uint32_t r = 0; r < n; r++)
			ASSERT_EQ(j.hits[r].load(), 1) << "row " << r << " of " << n << ", job " << rep;
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
