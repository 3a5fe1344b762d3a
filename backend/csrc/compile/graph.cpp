// compile/graph.cpp -- the torch.compile graph compiler's device side:
// capture the programs a graph's nodes run, link a run of them into ONE
// program (programs/link.c) over the graph's memory regions, and run it.
//
// Capture: while the compiler runs a graph once through the native kernels,
// every program execution is recorded with the device bytes each of its
// tensors was bound to, under the graph node that launched it.  A node that
// touched device memory from the host (a CPU fallback, a transfer, a value
// the host looked at, a random seed drawn) is "host-bound": its work cannot
// be replayed from a program, so it splits the graph and runs eagerly.
//
// Link: the recorded bindings of a segment of nodes are resolved against
// its inputs' device bytes (bound again at every call) and its own
// allocations, merged into regions: those holding a segment output become
// OUTPUT tensors allocated per call, the rest are scratch inside the
// program.  Run: one execution, one launch, charged like any program.
#include "runtime/program.h"
#include "runtime/batch.h"
#include "compile/records.h"

extern "C" {
#include "link.h"
}

#include <c10/util/Exception.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace neuron {
namespace {

struct Bound {
	std::string name;
	uint64_t addr, bytes;
	bool written;
};

struct Part {
	int64_t node;
	std::string label;
	Program prog;   // held until linked: nsim_model_program is its decoded form
	std::vector<Bound> bound;
};

struct Capture {
	int64_t node = -1;
	std::string node_name;   // the FX node's, for the parts it runs
	std::vector<Part> parts;
	std::unordered_map<int64_t, std::string> why;       // host-bound node -> its first host access
	std::unordered_map<int64_t, int64_t> programs;     // node -> programs run
};

std::mutex g_capture_lock;
Capture g_capture;
std::atomic<bool> g_capturing{ false };   // a capture is in progress (the hooks' fast check)

void capture_begin()
{
	std::lock_guard<std::mutex> g(g_capture_lock);
	g_capture = Capture{};
	g_capturing = true;
}

void capture_node(int64_t node, c10::string_view name)
{
	std::lock_guard<std::mutex> g(g_capture_lock);
	g_capture.node = node;
	g_capture.node_name = std::string(name);
}

// (node, programs run) for every node that ran one
std::vector<int64_t> capture_end()
{
	std::lock_guard<std::mutex> g(g_capture_lock);
	g_capturing = false;
	std::vector<int64_t> out;
	for (auto &[n, c] : g_capture.programs)
		out.insert(out.end(), { n, c });
	return out;
}

// what made a node host-bound ("" if nothing did)
std::string capture_reason(int64_t node)
{
	std::lock_guard<std::mutex> g(g_capture_lock);
	auto it = g_capture.why.find(node);
	return it == g_capture.why.end() ? std::string() : it->second;
}

struct Range {
	uint64_t lo, hi;
};

// The region an access [lo, hi) falls in: an input's (index < ninputs) or
// an interval of the segment's own memory; -1 when it straddles.
struct Regions {
	std::vector<Range> inputs, intervals;

	int64_t find(uint64_t lo, uint64_t hi, uint64_t *offset) const
	{
		for (size_t i = 0; i < inputs.size(); i++) {
			if (lo >= inputs[i].lo && hi <= inputs[i].hi) {
				*offset = lo - inputs[i].lo;
				return (int64_t)i;
			}
		}
		for (size_t i = 0; i < intervals.size(); i++) {
			if (lo >= intervals[i].lo && hi <= intervals[i].hi) {
				*offset = lo - intervals[i].lo;
				return (int64_t)(inputs.size() + i);
			}
		}
		return -1;
	}

	// an input [lo, hi) partly overlaps, or -1
	int64_t touching_input(uint64_t lo, uint64_t hi) const
	{
		for (size_t i = 0; i < inputs.size(); i++)
			if (lo < inputs[i].hi && inputs[i].lo < hi)
				return (int64_t)i;
		return -1;
	}
};

// [first byte, end) of a tensor's elements on the device
std::vector<int64_t> device_span(const at::Tensor &t)
{
	TORCH_CHECK(t.is_privateuseone() && extent_of(t) >= 0,
		    "neuronsim.device_span: a neuron tensor with non-negative strides");
	if (!t.numel())
		return { 0, 0 };
	uint64_t a = device_address(t);
	return { (int64_t)a, (int64_t)(a + (uint64_t)extent_of(t) * t.element_size()) };
}

// Links the parts of nodes [first, last] of the last capture.  The
// segment's inputs and outputs are given by the device bytes they had in
// the capture: an in_span record per input, an out_span record per output.  The plan: nregions, then per region (kind, bytes,
// input index or -1), then per output (region or -1 if empty, byte offset).
std::tuple<at::Tensor, std::vector<int64_t>> graph_link(int64_t first, int64_t last, at::IntArrayRef in_spans,
							 at::IntArrayRef out_spans, c10::string_view label)
{
	std::lock_guard<std::mutex> g(g_capture_lock);
	TORCH_CHECK(in_spans.size() % 2 == 0 && out_spans.size() % 3 == 0, "neuronsim.graph_link: bad spans");
	Regions R;
	for (size_t i = 0; i < in_spans.size(); i += 2) {
		TORCH_CHECK(in_spans[i] >= 0 && in_spans[i + 1] >= in_spans[i], "neuronsim.graph_link: bad input span");
		R.inputs.push_back({ (uint64_t)in_spans[i], (uint64_t)in_spans[i + 1] });
	}
	std::vector<const Part *> parts;
	for (const Part &p : g_capture.parts)
		if (p.node >= first && p.node <= last)
			parts.push_back(&p);
	TORCH_CHECK(!parts.empty(), "neuron graph: segment of nodes ", first, "..", last, " ran no program");

	// the segment's own memory: every access outside the inputs, and the outputs
	std::vector<Range> own;
	auto add_own = [&](uint64_t lo, uint64_t hi) {
		if (hi <= lo)
			return;
		uint64_t off;
		int64_t r = R.find(lo, hi, &off);
		if (r >= 0 && r < (int64_t)R.inputs.size())
			return;
		int64_t in = R.touching_input(lo, hi);
		TORCH_CHECK(in < 0, "neuron graph: bytes [", lo, ", ", hi, ") straddle segment input ", in, " [",
			    in < 0 ? 0 : R.inputs[in].lo, ", ", in < 0 ? 0 : R.inputs[in].hi, ")");
		own.push_back({ lo, hi });
	};
	// a read of the segment's own memory that no earlier part of it wrote
	// is a read of something a kernel kept from before (a cache): not
	// replayable from the inputs
	std::vector<Range> written;
	auto covered = [&](uint64_t lo, uint64_t hi) {
		for (bool grew = true; grew && lo < hi;) {
			grew = false;
			for (const Range &w : written)
				if (w.lo <= lo && lo < w.hi) {
					lo = std::min(hi, w.hi);
					grew = true;
				}
		}
		return lo >= hi;
	};
	for (const Part *p : parts) {
		for (const Bound &b : p->bound) {
			uint64_t off;
			int64_t r = b.bytes ? R.find(b.addr, b.addr + b.bytes, &off) : -1;
			bool input = r >= 0 && r < (int64_t)R.inputs.size();
			TORCH_CHECK(!b.bytes || input || b.written || covered(b.addr, b.addr + b.bytes),
				    "neuron graph: ", p->label, " reads device memory that is neither a segment input nor "
				    "written earlier in the segment");
		}
		for (const Bound &b : p->bound) {
			add_own(b.addr, b.addr + b.bytes);
			if (b.written && b.bytes)
				written.push_back({ b.addr, b.addr + b.bytes });
		}
	}
	for (size_t i = 0; i < out_spans.size(); i += 3) {
		TORCH_CHECK(out_spans[i] >= 0 && out_spans[i + 1] >= out_spans[i] && out_spans[i + 2] > 0,
			    "neuronsim.graph_link: bad output span");
		add_own((uint64_t)out_spans[i], (uint64_t)out_spans[i + 1]);
	}
	std::sort(own.begin(), own.end(), [](const Range &a, const Range &b) { return a.lo < b.lo; });
	for (const Range &r : own) {
		if (!R.intervals.empty() && r.lo < R.intervals.back().hi)
			R.intervals.back().hi = std::max(R.intervals.back().hi, r.hi);
		else
			R.intervals.push_back(r);
	}

	size_t nreg = R.inputs.size() + R.intervals.size();
	std::vector<nk_link_region> regions(nreg);
	for (size_t i = 0; i < R.inputs.size(); i++)
		regions[i] = { ISA_TK_INPUT, R.inputs[i].hi - R.inputs[i].lo };
	for (size_t i = 0; i < R.intervals.size(); i++)
		regions[R.inputs.size() + i] = { ISA_TK_INTERNAL, R.intervals[i].hi - R.intervals[i].lo };

	// outputs: their regions are allocated per call
	std::vector<int64_t> out_plan;
	TORCH_CHECK(out_spans.size() % rec::out_span::fields == 0 && in_spans.size() % rec::in_span::fields == 0,
		    "neuron graph: spans are not whole records (compile/records.h)");
	for (size_t i = 0; i < out_spans.size(); i += rec::out_span::fields) {
		uint64_t lo = (uint64_t)out_spans[i + rec::out_span::lo], hi = (uint64_t)out_spans[i + rec::out_span::hi],
			 off = 0;
		int64_t r = -1;
		if (hi > lo) {
			r = R.find(lo, hi, &off);
			TORCH_CHECK(r >= 0, "neuron graph: an output outside the segment's memory");
			TORCH_CHECK(off % (uint64_t)out_spans[i + rec::out_span::element_size] == 0,
				    "neuron graph: an output at a misaligned offset");
			if (r >= (int64_t)R.inputs.size())
				regions[r].kind = ISA_TK_OUTPUT;
		}
		int64_t o[rec::plan_output::fields];
		o[rec::plan_output::region] = r;
		o[rec::plan_output::offset] = (int64_t)off;
		out_plan.insert(out_plan.end(), o, o + rec::plan_output::fields);
	}

	// bindings; a written input becomes an OUTPUT region bound to that input
	std::vector<std::vector<nk_link_bind>> binds(parts.size());
	std::vector<nk_link_part> lparts(parts.size());
	for (size_t k = 0; k < parts.size(); k++) {
		for (const Bound &b : parts[k]->bound) {
			uint64_t off = 0;
			int64_t r = b.bytes ? R.find(b.addr, b.addr + b.bytes, &off) : 0;
			TORCH_CHECK(r >= 0, "neuron graph: a program tensor outside the segment's memory");
			if (b.written && r < (int64_t)R.inputs.size())
				regions[r].kind = ISA_TK_OUTPUT;
			binds[k].push_back({ b.name.c_str(), (uint32_t)r, off });
		}
		lparts[k] = { nsim_model_program(parts[k]->prog.get()), parts[k]->label.c_str(),
			      (uint32_t)binds[k].size(), binds[k].data() };
	}
	uint8_t *bin = nullptr;
	size_t len = 0;
	isa_diag d{};
	isa_status st = nk_link_program(isa_target_from_name(nsim_target_name()), lparts.data(), (uint32_t)lparts.size(),
					regions.data(), (uint32_t)regions.size(), &bin, &len, &d);
	TORCH_CHECK(st == ISA_OK, "neuron graph: linking ", std::string(label), " failed: ", d.msg);
	at::Tensor blob = at::empty({ (int64_t)len }, at::TensorOptions().dtype(at::kByte));
	std::memcpy(blob.data_ptr(), bin, len);
	std::free(bin);

	std::vector<int64_t> plan{ (int64_t)nreg };
	for (size_t r = 0; r < nreg; r++) {
		int64_t g[rec::plan_region::fields];
		g[rec::plan_region::kind] = regions[r].kind;
		g[rec::plan_region::bytes] = (int64_t)regions[r].bytes;
		g[rec::plan_region::input] = r < R.inputs.size() ? (int64_t)r : -1;
		plan.insert(plan.end(), g, g + rec::plan_region::fields);
	}
	plan.insert(plan.end(), out_plan.begin(), out_plan.end());
	return { blob, plan };
}

// loaded linked programs, by handle
struct Linked {
	Program prog;
	int dev;
	std::vector<std::pair<std::string, int64_t>> names;   // bound tensor -> region
};
std::mutex g_linked_lock;
std::unordered_map<int64_t, std::shared_ptr<const Linked>> g_linked;
int64_t g_next_handle = 1;

int64_t graph_load(const at::Tensor &program, int64_t dev)
{
	TORCH_CHECK(program.device().is_cpu() && program.scalar_type() == at::kByte && program.dim() == 1 &&
			    program.is_contiguous(),
		    "neuronsim.graph_load: the program is a contiguous 1-D uint8 CPU tensor of .nsp bytes");
	auto l = std::make_shared<Linked>(Linked{ load_bytes(program.data_ptr(), (size_t)program.numel(), (int)dev),
						  (int)dev, {} });
	isa_program *p = nullptr;
	isa_diag d{};
	TORCH_CHECK(isa_program_decode(program.data_ptr(), (size_t)program.numel(), &p, &d) == ISA_OK,
		    "neuronsim.graph_load: ", d.msg);
	for (uint32_t i = 0; i < p->n_tensors; i++) {
		const isa_tensor &t = p->tensors[i];
		uint32_t r = 0;
		if ((t.kind == ISA_TK_INPUT || t.kind == ISA_TK_OUTPUT) && nk_link_region_of(t.name, &r))
			l->names.emplace_back(t.name, (int64_t)r);
	}
	isa_program_free(p);
	std::lock_guard<std::mutex> g(g_linked_lock);
	int64_t h = g_next_handle++;
	g_linked.emplace(h, std::move(l));
	return h;
}

void graph_free(int64_t handle)
{
	std::lock_guard<std::mutex> g(g_linked_lock);
	g_linked.erase(handle);
}

// One call of a linked program: inputs bound, output regions allocated,
// outputs returned as views of them: out_dtypes[k] and an out_meta record
// (rank, sizes, strides) per output.
std::vector<at::Tensor> graph_run(int64_t handle, c10::string_view label, at::TensorList inputs,
				  at::IntArrayRef plan, std::vector<at::ScalarType> out_dtypes, at::IntArrayRef out_meta)
{
	std::shared_ptr<const Linked> held;   // a graph_free meanwhile leaves this run its program
	{
		std::lock_guard<std::mutex> g(g_linked_lock);
		auto it = g_linked.find(handle);
		TORCH_CHECK(it != g_linked.end(), "neuronsim.graph_run: no linked program ", handle);
		held = it->second;
	}
	const Linked &l = *held;
	TORCH_CHECK(!plan.empty(), "neuronsim.graph_run: empty plan");
	size_t nreg = (size_t)plan[0], at_ = 1;
	TORCH_CHECK(plan[0] >= 0 && (plan.size() - 1) / rec::plan_region::fields >= nreg, "neuronsim.graph_run: short plan");
	std::vector<at::Tensor> region(nreg);
	std::vector<int> kind(nreg);
	at::TensorOptions bytes_opt = at::TensorOptions().dtype(at::kByte).device(c10::DeviceType::PrivateUse1, l.dev);
	for (size_t r = 0; r < nreg; r++, at_ += rec::plan_region::fields) {
		kind[r] = (int)plan[at_ + rec::plan_region::kind];
		int64_t bytes = plan[at_ + rec::plan_region::bytes], input = plan[at_ + rec::plan_region::input];
		TORCH_CHECK((kind[r] == ISA_TK_INPUT || kind[r] == ISA_TK_OUTPUT || kind[r] == ISA_TK_INTERNAL) &&
				    bytes >= 0 && input >= -1 && (input >= 0 || kind[r] != ISA_TK_INPUT),
			    "neuronsim.graph_run: plan region ", r, " is malformed");
		if (input >= 0) {
			TORCH_CHECK((size_t)input < inputs.size(), "neuronsim.graph_run: plan names input ", input);
			const at::Tensor &t = inputs[input];
			TORCH_CHECK(t.is_privateuseone() && t.device().index() == l.dev,
				    "neuronsim.graph_run: input ", input, " is not on neuron:", l.dev);
			TORCH_CHECK(extent_of(t) * t.element_size() == bytes, "neuronsim.graph_run: input ", input,
				    " spans ", extent_of(t) * t.element_size(), " bytes, compiled for ", bytes);
			region[r] = t;
		} else if (kind[r] == ISA_TK_OUTPUT) {
			region[r] = at::empty({ bytes }, bytes_opt);
		}
	}
	std::vector<Binding> in, out;
	for (auto &[name, r] : l.names) {
		TORCH_CHECK(r >= 0 && (size_t)r < nreg && region[r].defined(), "neuronsim.graph_run: region ", r,
			    " unbound");
		(kind[r] == ISA_TK_INPUT ? in : out).emplace_back(name.c_str(), &region[r]);
	}
	std::string op(label);
	run_program(l.prog, l.dev, op.c_str(), in, out);

	std::vector<at::Tensor> results;
	size_t m = 0;
	while (at_ < plan.size()) {
		TORCH_CHECK(at_ + rec::plan_output::fields <= plan.size(), "neuronsim.graph_run: short plan");
		int64_t r = plan[at_ + rec::plan_output::region], off = plan[at_ + rec::plan_output::offset];
		at_ += rec::plan_output::fields;
		// out_meta: rank, then rank sizes and rank strides
		TORCH_CHECK(m + rec::out_meta::sizes <= out_meta.size(), "neuronsim.graph_run: short output meta");
		TORCH_CHECK(results.size() < out_dtypes.size(), "neuronsim.graph_run: ", out_dtypes.size(),
			    " output dtypes for more outputs");
		int64_t rank = out_meta[m + rec::out_meta::rank];
		at::ScalarType dtype = out_dtypes[results.size()];
		TORCH_CHECK(rank >= 0 && (size_t)rank <= out_meta.size() &&
				    m + rec::out_meta::sizes + 2 * (size_t)rank <= out_meta.size(),
			    "neuronsim.graph_run: bad rank");
		at::IntArrayRef sizes(out_meta.data() + m + rec::out_meta::sizes, (size_t)rank);
		at::IntArrayRef strides(out_meta.data() + m + rec::out_meta::sizes + rank, (size_t)rank);
		m += rec::out_meta::sizes + 2 * (size_t)rank;
		at::TensorOptions opt = at::TensorOptions().dtype(dtype).device(c10::DeviceType::PrivateUse1, l.dev);
		if (r < 0) {
			results.push_back(at::empty_strided(sizes, strides, opt));
			continue;
		}
		TORCH_CHECK(r < (int64_t)nreg && region[r].defined() && off >= 0,
			    "neuronsim.graph_run: output ", results.size(), " names region ", r, " at byte ", off,
			    ", which the plan does not allocate");
		const at::Tensor &base = region[r];
		int64_t es = (int64_t)c10::elementSize(dtype);
		TORCH_CHECK(off % es == 0, "neuronsim.graph_run: output ", results.size(), " at a misaligned byte ", off);
		int64_t elem_off = base.storage_offset() * base.element_size() / es + off / es;
		results.push_back(at::empty({ 0 }, opt).set_(base.storage(), elem_off, sizes, strides));
	}
	TORCH_CHECK(results.size() == out_dtypes.size() && m == out_meta.size(), "neuronsim.graph_run: ",
		    out_dtypes.size(), " output dtypes and ", out_meta.size(), " output meta values for ", results.size(),
		    " outputs");
	return results;
}

}  // namespace

void capture_program(const Program &prog, const char *op, const std::vector<Binding> &in,
		     const std::vector<Binding> &out)
{
	if (!g_capturing)
		return;
	std::lock_guard<std::mutex> g(g_capture_lock);
	if (!g_capturing)   // ended while this thread waited
		return;
	// named after the FX node: the linked program's DMA descriptors carry it
	Part p{ g_capture.node, g_capture.node_name.empty() ? std::string(op) : g_capture.node_name, prog, {} };
	g_capture.programs[g_capture.node]++;
	for (int w = 0; w < 2; w++)
		for (const Binding &b : w ? out : in) {
			const at::Tensor &t = *b.second;
			uint64_t bytes = t.numel() ? (uint64_t)extent_of(t) * t.element_size() : 0;
			p.bound.push_back({ b.first, bytes ? device_address(t) : 0, bytes, w == 1 });
		}
	g_capture.parts.push_back(std::move(p));
}

bool capturing()
{
	return g_capturing;
}

void capture_host_access(const char *why)
{
	batch_host_access();   // programs a launch batch still holds write what the host is about to see
	if (!g_capturing)
		return;
	std::lock_guard<std::mutex> g(g_capture_lock);
	if (g_capturing)
		g_capture.why.emplace(g_capture.node, why);
}

}  // namespace neuron

TORCH_LIBRARY_FRAGMENT(neuronsim, m)
{
	m.def("capture_begin() -> ()", &neuron::capture_begin);
	m.def("capture_node(int node, str name) -> ()", &neuron::capture_node);
	m.def("capture_end() -> int[]", &neuron::capture_end);
	m.def("capture_reason(int node) -> str", &neuron::capture_reason);
	m.def("device_span(Tensor t) -> int[]", &neuron::device_span);
	m.def("graph_link(int first, int last, int[] in_spans, int[] out_spans, str label) -> (Tensor, int[])",
	      &neuron::graph_link);
	m.def("graph_load(Tensor program, int device) -> int", &neuron::graph_load);
	m.def("graph_free(int handle) -> ()", &neuron::graph_free);
	m.def("graph_run(int handle, str label, Tensor[] inputs, int[] plan, ScalarType[] out_dtypes, int[] out_meta) -> "
	      "Tensor[]",
	      &neuron::graph_run);
}
