// runtime/program_keys.h -- program-cache keys from the kernel generators'
// parameter structs (backend/programs/programs.h): the generator's name, then
// every field of its struct.  Each key_fields binds all of its struct's
// fields by a structured binding, so a field added to a struct fails to
// compile until it is part of the key -- two different programs can never
// share one.
#pragma once

#include <cstring>
#include <string>
#include <type_traits>

extern "C" {
#include "programs.h"
}

namespace neuron {

class ProgramKey {
public:
	explicit ProgramKey(const char *generator) : s_(generator) { s_.push_back('\0'); }
	template <class... T> void fields(const T &...v) { (put(v), ...); }
	const std::string &str() const { return s_; }

private:
	template <class T> void put(const T &v)
	{
		if constexpr (std::is_array_v<T>) {
			for (const auto &e : v)
				put(e);
		} else {
			static_assert(std::is_arithmetic_v<T> || std::is_enum_v<T>, "a key field is a number");
			s_.append(reinterpret_cast<const char *>(&v), sizeof v);
		}
	}
	std::string s_;
};

// one per parameter struct, every field in declaration order
#define NEURON_KEY(type, ...)                                      \
	inline void key_fields(ProgramKey &key, const type &p)     \
	{                                                          \
		const auto &[__VA_ARGS__] = p;                     \
		key.fields(__VA_ARGS__);                           \
	}
NEURON_KEY(nk_binary, alu, dtype, n)
NEURON_KEY(nk_broadcast, alu, dtype, rows, cols, b_per_row, b_one)
NEURON_KEY(nk_chain, dtype, n, nin, first, nsteps, alu, input, imm, input_first)
NEURON_KEY(nk_unary, func, scale, dtype, n)
NEURON_KEY(nk_scalar, alu, s, alu2, s2, dtype, n)
NEURON_KEY(nk_compare, alu, dtype, scalar, s, n)
NEURON_KEY(nk_cast, in_dtype, out_dtype, n)
NEURON_KEY(nk_select, dtype, n, b_one, c_one)
NEURON_KEY(nk_int64, op, out_dtype, n, c)
NEURON_KEY(nk_tri, dtype, batch, rows, cols, k, upper)
NEURON_KEY(nk_topk, dtype, rows, cols, k, largest, sorted, sort)
NEURON_KEY(nk_matmul, dtype, batch, m, k, n, a_stride, b_stride, a_elems, b_elems, bias, out_dtype, act, residual)
NEURON_KEY(nk_copy, src_dtype, dst_dtype, rank, shape, src_stride, dst_stride, src_elems, dst_elems)
NEURON_KEY(nk_rows, op, in_dtype, out_dtype, rows, cols, eps, affine, spread)
NEURON_KEY(nk_slabs, mean, in_dtype, out_dtype, a, m, n)
NEURON_KEY(nk_gather, dtype, outer, rows, inner, nidx, index_int64, scatter, accumulate)
NEURON_KEY(nk_fill, dtype, int64, n, iota, start, step, ivalue, fvalue)
NEURON_KEY(nk_random, kind, dtype, n, a, b)
NEURON_KEY(nk_sort, dtype, rows, cols, descending)
NEURON_KEY(nk_fused, dtype, n, cols, nin, nsteps, in_dtype, in_mode, in_period, kind, op, op2, imm, imm2, a, b, reverse, sdt)
NEURON_KEY(nk_attention, dtype, batch, heads, kv_heads, l, s, d, q_stride, k_stride, v_stride, q_elems, k_elems, v_elems, scale, causal, mask_dtype, mask_stride, mask_elems)
#undef NEURON_KEY

}  // namespace neuron
