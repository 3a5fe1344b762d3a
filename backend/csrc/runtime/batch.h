// runtime/batch.h -- one launch for the programs of a multi-tensor op.
//
// A `_foreach_*` op (clip_grad_norm_'s norms, the optimizers' step counts
// and scalings) or a fused optimizer step runs the same small kernels once
// per tensor of its lists: on CUDA one multi-tensor-apply kernel launch per
// chunk of tensors.  Here, while a LaunchBatch is open on a thread, the
// programs its kernels run are recorded instead of executed; at the end
// they are linked (programs/link.c, as a compiled graph's nodes are) into
// one program over the tensors they touch and run once: one launch, one
// slice in traces, the same instructions.
//
// Anything that looks at device memory from the host (a transfer, a peek,
// a CPU fallback, a seed drawn) first runs what is pending, so no one ever
// sees memory a recorded program has not written yet.  Batches do not
// nest (an inner scope joins the outer) and are off while a graph capture
// records programs itself.
#pragma once

#include "runtime/program.h"

namespace neuron {

class LaunchBatch {
public:
	explicit LaunchBatch(const char *op);
	~LaunchBatch();
	// runs what is pending now (errors thrown here, not in the destructor)
	void flush();
	LaunchBatch(const LaunchBatch &) = delete;
	LaunchBatch &operator=(const LaunchBatch &) = delete;

private:
	bool owner_;
	int uncaught_;
};

// run_program's question: the program was recorded by this thread's open
// batch (true) rather than to be run now
bool batch_defer(const Program &prog, int dev, const char *op, const std::vector<Binding> &in,
		 const std::vector<Binding> &out);
// the host is about to read or write device memory: this thread's pending
// programs run first
void batch_host_access();

}  // namespace neuron
