// runtime/registration.h -- registering the `neuron` device's ATen kernels
// from their tables: each room of aten/ (and runtime/) has an ops.def with a
// list per file, and NEURON_REGISTER_OPS(NEURON_OPS_<FILE>) at the end of
// that file registers its list, each native kernel behind a generated
// wrapper that runs the counted CPU fallback when the kernel declines
// (returns neuron::declined).
//
// The rows of a list:
//
//   OP(name, overload, kernel)   native kernel; it may decline a call by
//   OP0(name, kernel)            returning neuron::declined, and the wrapper
//                                then runs the counted CPU fallback with the
//                                same arguments (OP0: the default overload)
//   DEV(name, overload, kernel)  registered as it is: device bookkeeping
//   DEV0(name, kernel)           (allocation, views, copies, set_) or a kernel
//                                that handles every call (its errors say why)
//
// Adding a native kernel = one row in its room's ops.def plus the kernel;
// every overload of an ATen op sits in one file (tests/python/
// test_backend_layout.py).  The schema name is "name.overload" and the
// operator at::_ops::name_overload, so a row that names an operator ATen
// does not have fails to compile.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>

#include "runtime/device.h"

namespace neuron {

// the undefined tensor a declining kernel returns by reference
at::Tensor &declined_tensor();

// What a native kernel returns to decline a call it does not cover: an
// undefined tensor (by value or, for in-place / out= kernels, the one
// declined_tensor()), or a tuple of undefined tensors; a kernel of a
// void op (the in-place foreach / fused optimizer ops) returns false, one
// of a bool op (equal) std::nullopt.
struct declined_t {
	operator at::Tensor &() const { return declined_tensor(); }
	template <class... T> operator std::tuple<T...>() const
	{
		if constexpr ((std::is_lvalue_reference_v<T> && ...))   // out= kernels' (out0, out1)
			return std::tuple<T...>(((void)sizeof(T), declined_tensor())...);
		else
			return {};
	}
};
inline constexpr declined_t declined{};

inline bool is_declined(const at::Tensor &t) { return !t.defined(); }
// a tuple declines when every tensor in it is undefined: a backward whose
// output mask leaves the first gradient out still returns the others
template <class... T> bool is_declined(const std::tuple<T...> &t)
{
	return std::apply([](const auto &...x) { return (!x.defined() && ...); }, t);
}

// The registered function of a native kernel: the kernel, else the CPU
// fallback with the same arguments (the schema's, SymInts as plain ints as
// at::native::call_fallback_fn takes them).
// The device of an op's `neuron` tensor arguments.  Generated backends run
// their kernels under a guard on it; registering through TORCH_LIBRARY_IMPL
// does not, so a kernel on neuron:1 would otherwise allocate its
// intermediates on the current device (device_map="auto" spreads a model
// over the cores with the current device left at 0).  Operands on two cores
// are an error, as on CUDA: each core has its own memory, and nothing may
// quietly compute them elsewhere.  The foreach / fused optimizer ops are
// exempt (Checked = false): like CUDA's per-tensor path they take lists whose
// tensors each stay on their own device.
[[noreturn]] void operands_on_two_devices(c10::Device a, c10::Device b);

// whether an op compares its operands' devices (see note_device): not the
// per-tensor list ops, nor those that read another device's tensor as a
// value (fill_ with a 0-dim value) or compare storages (is_set_to), which
// CUDA allows across devices.  Index lists are not compared either (CUDA
// moves indices to self's device).
constexpr bool compares_devices(std::string_view name)
{
	return !name.starts_with("aten::_foreach_") && !name.starts_with("aten::_fused_") &&
	       !name.starts_with("aten::fill_") && !name.starts_with("aten::is_set_to");
}

template <bool Checked, class T> void note_device(std::optional<c10::Device> &d, const T &x)
{
	using U = std::decay_t<T>;
	if constexpr (std::is_same_v<U, at::Tensor>) {
		if (!x.defined() || !x.is_privateuseone())
			return;
		if (!d)
			d = x.device();
		else if (Checked && *d != x.device())
			operands_on_two_devices(*d, x.device());
	} else if constexpr (std::is_same_v<U, std::optional<at::Tensor>>) {
		if (x)
			note_device<Checked>(d, *x);
	} else if constexpr (std::is_same_v<U, at::TensorList>) {
		for (const at::Tensor &t : x)
			note_device<Checked>(d, t);
	}
}

template <class Op, class Sig = typename Op::schema> struct native_or_fallback;
template <class Op, class R, class... A> struct native_or_fallback<Op, R(A...)> {
	template <auto Kernel> static R call(typename c10::maybe_keep_symint<false, A>::type... a)
	{
		std::optional<c10::Device> dev;
		(note_device<compares_devices(Op::name)>(dev, a), ...);
		c10::OptionalDeviceGuard guard(dev);
		if constexpr (std::is_void_v<R>) {   // void kernels return whether they ran
			if (Kernel(a...))
				return;
		} else if constexpr (std::is_same_v<R, bool>) {   // bool kernels: std::nullopt declines
			std::optional<bool> r = Kernel(a...);
			if (r)
				return *r;
		} else if constexpr (std::is_lvalue_reference_v<R>) {
			R r = Kernel(a...);
			if (&r != &declined_tensor())
				return r;
		} else {
			R r = Kernel(a...);
			if (!is_declined(r))
				return r;
		}
		if constexpr (std::is_void_v<R>)
			at::native::call_fallback_fn<&neuron_cpu_fallback, Op>::call(a...);
		else
			return at::native::call_fallback_fn<&neuron_cpu_fallback, Op>::call(a...);
	}
};

}  // namespace neuron

#define NEURON_OP_ROW(name, overload, kernel)                                                  \
	m.impl(#name "." #overload,                                                            \
	       &::neuron::native_or_fallback<at::_ops::name##_##overload>::template call<&kernel>);
#define NEURON_OP0_ROW(name, kernel) \
	m.impl(#name, &::neuron::native_or_fallback<at::_ops::name>::template call<&kernel>);
#define NEURON_DEV_ROW(name, overload, kernel) m.impl(#name "." #overload, kernel);
#define NEURON_DEV0_ROW(name, kernel) m.impl(#name, kernel);
// sub-tables: an activation op is one default-overload row, a comparison two
#define NEURON_UNARY_ROW(name, act, scale) NEURON_OP0_ROW(name, name)
#define NEURON_UNARY_OUT_ROW(name) NEURON_OP_ROW(name, out, name##_out)
#define NEURON_COMPARISON_ROWS(name, alu) \
	NEURON_OP_ROW(name, Tensor, name##_tensor) NEURON_OP_ROW(name, Scalar, name##_scalar)

#define NEURON_REGISTER_OPS(list)                                                          \
	TORCH_LIBRARY_IMPL(aten, PrivateUse1, m)                                           \
	{                                                                                  \
		list(NEURON_OP_ROW, NEURON_OP0_ROW, NEURON_DEV_ROW, NEURON_DEV0_ROW)       \
	}
