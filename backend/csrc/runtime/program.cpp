// runtime/program.cpp -- the program cache and program execution behind the
// native kernels and NKI calls: generate once per key, load once, run under
// one lock.
//
// The cache is bounded: every loaded program holds simulated HBM (its image,
// scratch, constants: nsim_model_device_bytes) until it is unloaded, so a
// model with varying shapes would otherwise leak device memory.  Entries
// are charged those bytes plus their key's (at least 4 KiB each); past
// NEURON_SIM_PROGRAM_CACHE_MB (default 512) the least recently used are
// unloaded, and an allocation that finds the device full unloads them all
// before it gives up.  A Program is a shared handle: an evicted
// program still being run is unloaded when its last run ends.
#include "runtime/program.h"
#include "runtime/batch.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace neuron {

namespace {

constexpr uint64_t kDefaultCacheMB = 512;
constexpr uint64_t kMinEntryBytes = 4096;

uint64_t cache_limit_from_env()
{
	const char *e = std::getenv("NEURON_SIM_PROGRAM_CACHE_MB");
	if (!e || !*e)
		return kDefaultCacheMB << 20;
	char *end = nullptr;
	unsigned long long mb = std::strtoull(e, &end, 10);
	TORCH_CHECK(end && !*end && *e != '-' && mb < (1ull << 30),
		    "NEURON_SIM_PROGRAM_CACHE_MB='", e, "': expected a whole number of MiB (0: keep no program "
		    "loaded beyond its run)");
	return (uint64_t)mb << 20;
}

struct CacheEntry {
	std::string key;
	Program prog;
	uint64_t bytes;
};

class ProgramCache {
public:
	Program find(const std::string &key)
	{
		auto it = index_.find(key);
		if (it == index_.end())
			return nullptr;
		lru_.splice(lru_.begin(), lru_, it->second);   // most recent first
		return it->second->prog;
	}

	void insert(const std::string &key, Program prog, uint64_t bytes)
	{
		if (!limit_known_) {
			limit_ = cache_limit_from_env();
			limit_known_ = true;
		}
		lru_.push_front(CacheEntry{ key, std::move(prog), bytes });
		index_[key] = lru_.begin();
		bytes_ += bytes;
		while (bytes_ > limit_ && !lru_.empty()) {
			CacheEntry &old = lru_.back();
			bytes_ -= old.bytes;
			index_.erase(old.key);
			lru_.pop_back();               // unloads it unless a run still holds it
			evictions_++;
		}
	}

	void reset_counters() { evictions_ = 0; }

	void clear()
	{
		index_.clear();
		lru_.clear();
		bytes_ = 0;
	}

	ProgramCacheStats stats() const
	{
		// 0 until the first insert has read the limit (that read may fail
		// on a bad NEURON_SIM_PROGRAM_CACHE_MB; stats() must not throw)
		return { evictions_, bytes_, (uint64_t)index_.size(), limit_known_ ? limit_ : 0 };
	}

private:
	std::list<CacheEntry> lru_;
	std::unordered_map<std::string, std::list<CacheEntry>::iterator> index_;
	uint64_t bytes_ = 0, limit_ = 0, evictions_ = 0;
	bool limit_known_ = false;
};

std::mutex g_cache_lock;
ProgramCache g_cache;

// A loaded program held by the cache and the runs using it; the last
// holder unloads it.  Its one host form is the runtime's decoded program
// (nsim_model_program): the graph compiler links from that, no copy of
// its bytes is kept.
Program adopt(nsim_model *m)
{
	return Program(m, [](nsim_model *p) { nsim_unload(p); });
}

// One lock for executions: a cached model is shared by every thread, and
// its stats must be read for the run that produced them.
std::mutex g_exec_lock;

// the slice of device memory from a tensor's first element over `elems`
nsim_tensor *slice_of(const at::Tensor &t, int64_t elems)
{
	uint64_t off;
	nsim_tensor *base = lookup_allocation(t.storage().data(), &off);
	nsim_tensor *s = nullptr;
	check_status(nsim_tensor_slice(base, off + t.storage_offset() * t.element_size(),
				       (uint64_t)elems * t.element_size(), &s),
		     "tensor slice");
	return s;
}

struct SetDeleter {
	void operator()(nsim_tensor_set *s) const { nsim_tensor_set_free(s); }
};
struct TensorDeleter {
	void operator()(nsim_tensor *t) const { nsim_tensor_free(t); }
};

}  // namespace

int isa_dtype_of(at::ScalarType t)
{
	switch (t) {
	case at::kFloat: return ISA_DT_fp32;
	case at::kBFloat16: return ISA_DT_bf16;
	case at::kHalf: return ISA_DT_fp16;
	default: return ISA_DT_INVALID;
	}
}

int64_t extent_of(const at::Tensor &t)
{
	if (t.numel() == 0)
		return 0;
	int64_t e = 1;
	for (int64_t d = 0; d < t.dim(); d++) {
		if (t.stride(d) < 0)
			return -1;
		e += (t.size(d) - 1) * t.stride(d);
	}
	return e;
}

// what a cached program really holds: its device memory and its decoded
// form on the host (a big bmm's decoded streams were uncounted: the
// cache's 512 MiB bound let a process grow to 14 GB)
uint64_t entry_bytes(const nsim_model *m)
{
	return nsim_model_device_bytes(m) + nsim_model_host_bytes(m);
}

Program load_program(const std::string &key, int dev, const std::function<Program()> &load)
{
	std::string k = key;
	k.append(reinterpret_cast<const char *>(&dev), sizeof(dev));
	std::lock_guard<std::mutex> g(g_cache_lock);
	if (Program p = g_cache.find(k)) {
		count_program(true);
		return p;
	}
	count_program(false);
	Program p = load();
	g_cache.insert(k, p, std::max(kMinEntryBytes, entry_bytes(p.get()) + (uint64_t)k.size()));
	return p;
}

Program load_bytes(const void *bin, size_t len, int dev)
{
	nsim_model *m = nullptr;
	check_status(nsim_load(bin, len, dev, &m), "program load");
	return adopt(m);
}

Program generated_program(const ProgramKey &key, int dev, const char *what, const ProgramGen &gen)
{
	std::string k(1, 'g');   // generated kernels; NKI programs ('p') are keyed by their bytes
	k += key.str();
	return load_program(k, dev, [&]() {
		uint8_t *bin = nullptr;
		size_t len = 0;
		isa_diag d{};
		isa_status st = gen(isa_target_from_name(nsim_target_name()), &bin, &len, &d);
		TORCH_CHECK(st == ISA_OK, "neuron: generating the ", what, " kernel failed: ", d.msg);
		std::unique_ptr<uint8_t, decltype(&std::free)> held(bin, &std::free);
		return load_bytes(bin, len, dev);
	});
}

ProgramCacheStats program_cache_stats()
{
	std::lock_guard<std::mutex> g(g_cache_lock);
	return g_cache.stats();
}

void reset_program_cache_counters()
{
	std::lock_guard<std::mutex> g(g_cache_lock);
	g_cache.reset_counters();
}

void clear_program_cache()
{
	std::lock_guard<std::mutex> g(g_cache_lock);
	g_cache.clear();
}

void run_program(const Program &prog, int dev, const char *op, std::initializer_list<Binding> in,
		 std::initializer_list<Binding> out)
{
	run_program(prog, dev, op, std::vector<Binding>(in), std::vector<Binding>(out));
}

void run_program(const Program &prog, int dev, const char *op, const std::vector<Binding> &in,
		 const std::vector<Binding> &out)
{
	if (batch_defer(prog, dev, op, in, out))   // one launch with the rest of a multi-tensor op's
		return;
	nsim_model *m = prog.get();
	std::vector<std::unique_ptr<nsim_tensor, TensorDeleter>> held;
	std::unique_ptr<nsim_tensor_set, SetDeleter> sets[2];
	const std::vector<Binding> *lists[2] = { &in, &out };
	for (int i = 0; i < 2; i++) {
		nsim_tensor_set *s = nullptr;
		check_status(nsim_tensor_set_create(&s), "tensor set");
		sets[i].reset(s);
		for (const Binding &b : *lists[i]) {
			held.emplace_back(slice_of(*b.second, extent_of(*b.second)));
			check_status(nsim_tensor_set_add(s, b.first, held.back().get()), "tensor set");
		}
	}
	for (const Binding &b : out)
		note_write(b.second->storage().data());
	capture_program(prog, op, in, out);
	nsim_exec_stats stats;   // filled whole by nsim_model_stats (5 KiB: no zeroing first)
	{
		std::lock_guard<std::mutex> g(g_exec_lock);
		// the stream already charges the launch overhead (launch_overhead_ps)
		nsim_exec_options opt = { op, next_program_start_ps(dev), 0 };
		nsim_status st = nsim_execute_ex(m, sets[0].get(), sets[1].get(), &opt);
		if (st == NSIM_EXEC_OOB)
			throw OutOfBoundsFault({ __func__, __FILE__, __LINE__ },
					       std::string("neuron: ") + op + ": index out of range (" +
						       nsim_last_error() + ")");
		check_status(st, "program execution");
		nsim_model_stats(m, &stats);
	}
	charge_program(dev, stats, op);
}

}  // namespace neuron
