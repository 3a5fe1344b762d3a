// runtime/batch.cpp -- LaunchBatch (runtime/batch.h): a multi-tensor op's
// programs recorded, linked into one (programs/link.c) and run once; and
// the `_foreach_*` ops run inside one.
//
// The linked program's memory regions are the device bytes the recorded
// programs touch, overlapping ranges merged; each region is bound at run time
// to a byte view of the storage it lies in, so the linked program does not
// depend on where the tensors are.  It is cached by what it is made of: each
// part's program (held by the entry, so its identity cannot be reused) and
// which region and offset each of its tensors is bound to.
#include "runtime/batch.h"

extern "C" {
#include "link.h"
}

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace neuron {
namespace {

constexpr size_t kMaxParts = 256;        // programs per launch (a multi-tensor kernel's chunk)
constexpr size_t kLinkedEntries = 64;    // linked programs kept

struct Bound {
	std::string name;
	at::Tensor t;        // held: its memory stays the program's until it runs
	bool written;
	uint64_t lo, hi;     // device bytes [lo, hi)
};

struct Pending {
	Program prog;
	std::string op;
	std::vector<Bound> bound;
};

struct Batch {
	std::string op;
	int dev = -1;
	bool flushing = false;
	std::vector<Pending> parts;
};

thread_local Batch t_storage;
thread_local Batch *t_batch = nullptr;

struct Linked {
	bool failed = false;                   // the linker refused the parts: they run one by one
	Program prog;
	std::vector<Program> parts;            // keeps each part's identity (the key) unique
	std::vector<std::pair<std::string, uint32_t>> names;   // linked tensor -> region
};
std::mutex g_linked_lock;
std::map<std::string, std::shared_ptr<const Linked>> g_linked;
std::deque<std::string> g_linked_order;

void run_one(const Pending &p, int dev)
{
	std::vector<Binding> in, out;
	for (const Bound &b : p.bound)
		(b.written ? out : in).emplace_back(b.name.c_str(), &b.t);
	run_program(p.prog, dev, p.op.c_str(), in, out);
}

template <class T> void put(std::string &key, const T &v)
{
	key.append(reinterpret_cast<const char *>(&v), sizeof v);
}

std::shared_ptr<const Linked> link_parts(const std::string &key, const std::vector<Pending> &parts,
					 const std::vector<std::vector<nk_link_bind>> &binds,
					 const std::vector<nk_link_region> &regions, int dev, const std::string &op)
{
	{
		std::lock_guard<std::mutex> g(g_linked_lock);
		auto it = g_linked.find(key);
		if (it != g_linked.end())
			return it->second;
	}
	auto l = std::make_shared<Linked>();
	std::vector<nk_link_part> lparts(parts.size());
	for (size_t k = 0; k < parts.size(); k++) {
		lparts[k] = { nsim_model_program(parts[k].prog.get()), parts[k].op.c_str(), (uint32_t)binds[k].size(),
			      binds[k].data() };
		l->parts.push_back(parts[k].prog);
	}
	uint8_t *bin = nullptr;
	size_t len = 0;
	isa_diag d{};
	if (nk_link_program(isa_target_from_name(nsim_target_name()), lparts.data(), (uint32_t)lparts.size(),
			    regions.data(), (uint32_t)regions.size(), &bin, &len, &d) != ISA_OK) {
		l->failed = true;
		TORCH_WARN_ONCE("neuron: ", op, ": its ", parts.size(), " programs run one by one (not linked: ", d.msg,
				")");
	} else {
		std::unique_ptr<uint8_t, decltype(&std::free)> held(bin, &std::free);
		isa_program *p = nullptr;
		TORCH_CHECK(isa_program_decode(bin, len, &p, &d) == ISA_OK, "neuron: ", op, ": linked program: ", d.msg);
		for (uint32_t i = 0; i < p->n_tensors; i++) {
			const isa_tensor &t = p->tensors[i];
			uint32_t r = 0;
			if ((t.kind == ISA_TK_INPUT || t.kind == ISA_TK_OUTPUT) && nk_link_region_of(t.name, &r) &&
			    r < regions.size())
				l->names.emplace_back(t.name, r);
		}
		isa_program_free(p);
		l->prog = load_bytes(bin, len, dev);
	}
	std::lock_guard<std::mutex> g(g_linked_lock);
	if (g_linked.emplace(key, l).second) {
		g_linked_order.push_back(key);
		if (g_linked_order.size() > kLinkedEntries) {
			g_linked.erase(g_linked_order.front());
			g_linked_order.pop_front();
		}
	}
	return l;
}

void run_linked(std::vector<Pending> &parts, int dev, const std::string &op)
{
	// regions: the touched byte ranges, overlapping ones merged
	struct Reg {
		uint64_t lo, hi;
		const at::Tensor *any;
		bool written;
	};
	std::vector<const Bound *> all;
	for (const Pending &p : parts)
		for (const Bound &b : p.bound)
			if (b.hi > b.lo)
				all.push_back(&b);
	std::sort(all.begin(), all.end(), [](const Bound *a, const Bound *b) { return a->lo < b->lo; });
	std::vector<Reg> regs;
	for (const Bound *b : all) {
		if (!regs.empty() && b->lo < regs.back().hi) {
			regs.back().hi = std::max(regs.back().hi, b->hi);
			regs.back().written |= b->written;
		} else {
			regs.push_back({ b->lo, b->hi, &b->t, b->written });
		}
	}
	if (regs.empty()) {
		for (const Pending &p : parts)
			run_one(p, dev);
		return;
	}
	auto region_of = [&](uint64_t lo, uint64_t *off) {
		size_t r = (size_t)(std::upper_bound(regs.begin(), regs.end(), lo,
						     [](uint64_t v, const Reg &g) { return v < g.lo; }) -
				    regs.begin() - 1);
		*off = lo - regs[r].lo;
		return (uint32_t)r;
	};
	std::string key;
	std::vector<std::vector<nk_link_bind>> binds(parts.size());
	for (size_t k = 0; k < parts.size(); k++) {
		put(key, reinterpret_cast<uintptr_t>(parts[k].prog.get()));
		put(key, parts[k].bound.size());
		for (const Bound &b : parts[k].bound) {
			uint64_t off = 0;
			uint32_t r = b.hi > b.lo ? region_of(b.lo, &off) : 0;
			binds[k].push_back({ b.name.c_str(), r, off });
			key.append(b.name).push_back('\0');
			put(key, r);
			put(key, off);
		}
	}
	std::vector<nk_link_region> regions;
	for (const Reg &g : regs) {
		regions.push_back({ g.written ? ISA_TK_OUTPUT : ISA_TK_INPUT, g.hi - g.lo });
		put(key, g.hi - g.lo);
		put(key, g.written);
	}
	std::shared_ptr<const Linked> l = link_parts(key, parts, binds, regions, dev, op);
	if (l->failed) {
		for (const Pending &p : parts)
			run_one(p, dev);
		return;
	}
	// each region as a byte view of the storage it lies in
	std::vector<at::Tensor> view(regs.size());
	for (size_t r = 0; r < regs.size(); r++) {
		const at::Tensor &t = *regs[r].any;
		uint64_t start = device_address(t) - (uint64_t)t.storage_offset() * t.element_size();
		view[r] = at::empty({ 0 }, t.options().dtype(at::kByte))
				  .set_(t.storage(), (int64_t)(regs[r].lo - start), { (int64_t)(regs[r].hi - regs[r].lo) }, { 1 });
	}
	std::vector<Binding> in, out;
	for (const auto &[name, r] : l->names)
		(regs[r].written ? out : in).emplace_back(name.c_str(), &view[r]);
	run_program(l->prog, dev, op.c_str(), in, out);
}

void run_pending(Batch &b)
{
	if (b.parts.empty())
		return;
	std::vector<Pending> parts = std::move(b.parts);
	b.parts.clear();
	int dev = b.dev;
	b.dev = -1;
	b.flushing = true;
	struct Reset {
		Batch &b;
		~Reset() { b.flushing = false; }
	} reset{ b };
	if (parts.size() == 1)
		run_one(parts[0], dev);
	else
		run_linked(parts, dev, b.op);
}

}  // namespace

LaunchBatch::LaunchBatch(const char *op) : owner_(!t_batch && !capturing()), uncaught_(std::uncaught_exceptions())
{
	if (!owner_)
		return;
	t_batch = &t_storage;
	t_storage.op = op;
	t_storage.parts.clear();
	t_storage.dev = -1;
}

void LaunchBatch::flush()
{
	if (owner_ && t_batch)
		run_pending(*t_batch);
}

LaunchBatch::~LaunchBatch()
{
	if (!owner_)
		return;
	// normally flushed already; on an exception the work recorded before it
	// still runs, as the per-tensor path would have done it
	try {
		run_pending(*t_batch);
	} catch (const std::exception &e) {
		if (std::uncaught_exceptions() <= uncaught_)
			TORCH_WARN("neuron: ", t_storage.op, ": its pending programs failed: ", e.what());
	}
	t_storage.parts.clear();
	t_batch = nullptr;
}

bool batch_defer(const Program &prog, int dev, const char *op, const std::vector<Binding> &in,
		 const std::vector<Binding> &out)
{
	Batch *b = t_batch;
	if (!b || b->flushing || capturing())
		return false;
	if ((b->dev >= 0 && b->dev != dev) || b->parts.size() >= kMaxParts)
		run_pending(*b);
	Pending p{ prog, op, {} };
	for (int w = 0; w < 2; w++)
		for (const Binding &x : w ? out : in) {
			const at::Tensor &t = *x.second;
			uint64_t bytes = t.numel() ? (uint64_t)extent_of(t) * t.element_size() : 0;
			uint64_t lo = bytes ? device_address(t) : 0;
			p.bound.push_back({ x.first, t, w == 1, lo, lo + bytes });
			if (w == 1)
				note_write(t.storage().data());
		}
	b->parts.push_back(std::move(p));
	b->dev = dev;
	return true;
}

void batch_host_access()
{
	if (t_batch && !t_batch->flushing)
		run_pending(*t_batch);
}

namespace {

// A `_foreach_*` op: PyTorch's per-tensor kernel (CompositeExplicitAutograd,
// the one every backend without its own runs: it is the CPU key's too),
// its programs in one launch
void foreach_batched(const c10::OperatorHandle &op, c10::DispatchKeySet, torch::jit::Stack *stack)
{
	LaunchBatch batch(op.schema().name().c_str());
	op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
	batch.flush();
}

}  // namespace

}  // namespace neuron

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)
{
	static std::deque<std::string> names;   // the library keeps the names it is given
	for (const c10::OperatorName &n : c10::Dispatcher::singleton().getAllOpNames()) {
		if (n.name.rfind("aten::_foreach_", 0) != 0)
			continue;
		names.push_back(n.name.substr(6) + (n.overload_name.empty() ? "" : "." + n.overload_name));
		m.impl(names.back().c_str(), torch::CppFunction::makeFromBoxedFunction<&neuron::foreach_batched>());
	}
}
