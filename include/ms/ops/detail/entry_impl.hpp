// ms/ops/detail/entry_impl.hpp — how the registry derives a row from an entry.
//
// Stage: ops, internal to libms: src/ops/ lists each family's entries once
// with `register_entries<...>()`; users include <ms/ops/entry.hpp>.
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/ops/detail/entry_impl.hpp is internal to libms; include <ms/ops/entry.hpp> instead"
#endif

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/ops/entry.hpp"
#include "ms/ops/samples.hpp"

namespace ms::ops::detail {

/// An index or size known to be >= 0, as std::size_t (for std::vector's operator[]).
inline std::size_t u(std::int64_t i) { return static_cast<std::size_t>(i); }

/// A dense, uninitialised output of type `t`; an allocation over the cap is a
/// MemoryError naming `op`.
inline Tensor alloc_output(const TensorType& t, const char* op) {
  const std::int64_t bytes = shape_nbytes(shape_numel(t.shape, op), dtype_itemsize(t.dtype), op);
  return Tensor(Storage::allocate(bytes, op), t.dtype, t.shape,
                shape_contiguous_strides(t.shape, op), 0);
}

/// `t` itself when dense, else a dense copy (the fused kernels read dense inputs).
inline Tensor dense(const Tensor& t) { return ::ms::detail::to_dense(t, t.dtype()); }

/// a + b, or b when a is undefined (a gradient not yet accumulated).
Tensor add_defined(const Tensor& a, const Tensor& b);

/// `g` summed over the axes that broadcasting added or stretched, to `shape`:
/// a gradient always has its input's shape.
Tensor sum_to(const Tensor& g, const Shape& shape);

/// Whether entry E writes its outputs into tensors its caller allocates
/// (`static void run(const Attrs&, std::span<const Tensor> in,
/// std::span<const Tensor> out)`) instead of returning them from `eval`.
template <class E>
concept RunsInto = requires(const typename E::Attrs& a, std::span<const Tensor> in) {
  E::run(a, in, in);
};

/// E's evaluation: its `eval`; for an entry with `run`, its outputs allocated
/// dense with the types `infer` gives (all of them before `run` reads an
/// input: an allocation over the cap fails first), then written by `run`.
template <OpEntry E>
std::vector<Tensor> eval_entry(const typename E::Attrs& a, std::span<const Tensor> in) {
  if constexpr (RunsInto<E>) {
    static_assert(
        !requires { &E::eval; }, "an entry defines run or eval, not both");
    std::vector<Tensor> out;
    for (const TensorType& t : E::infer(a, types_of(in)))
      out.push_back(alloc_output(t, E::name.data()));
    E::run(a, in, out);
    return out;
  } else {
    return E::eval(a, in);
  }
}

/// The registry row of entry E: every function reads E's typed attributes.
template <OpEntry E>
OpDef entry_def() {
  using A = typename E::Attrs;
  OpDef d{.name = E::name,
          .kind = E::kind,
          .min_inputs = E::arity.min,
          .max_inputs = E::arity.max,
          .differentiable = E::props.differentiable,
          .no_grad_reason = E::props.no_grad_reason,
          .view = E::props.view,
          .may_alias = E::props.may_alias || E::props.view,
          .random = E::props.random,
          .infer = [](std::span<const TensorType> in,
                      const Attrs& a) { return E::infer(attrs_from<A>(a, E::name), in); },
          .eval = [](std::span<const Tensor> in,
                     const Attrs& a) { return eval_entry<E>(attrs_from<A>(a, E::name), in); }};
  if constexpr (requires(const A& a, const GradContext& c) { E::vjp(a, c); })
    d.grad = [](const GradContext& c) { return E::vjp(attrs_from<A>(c.attrs, E::name), c); };
  if constexpr (requires(const A& a, std::span<const Tensor> in) { E::update(a, in); }) {
    d.update = [](std::span<const Tensor> in, const Attrs& a) {
      E::update(attrs_from<A>(a, E::name), in);
    };
    d.bind_update = [](const Attrs& a) -> BoundUpdateFn {
      return [t = attrs_from<A>(a, E::name)](std::span<const Tensor> in) { E::update(t, in); };
    };
  }
  if constexpr (requires(std::span<const TensorType> in) {
                  { E::update_bf16_copy(in) } -> std::same_as<int>;
                })
    d.update_bf16_copy = &E::update_bf16_copy;
  if constexpr (requires { E::samples(); }) d.samples = &E::samples;
  if constexpr (requires { E::ir_name; }) d.ir_name = E::ir_name;
  d.algebra = E::props.algebra;
  d.attrs_of = [](const void* typed) { return attrs_to(*static_cast<const A*>(typed)); };
  d.eval_typed = [](const void* typed, std::span<const Tensor> in) {
    return eval_entry<E>(*static_cast<const A*>(typed), in);
  };
  d.bind = [](const Attrs& a) -> BoundEvalFn {
    return [t = attrs_from<A>(a, E::name)](std::span<const Tensor> in) {
      return eval_entry<E>(t, in);
    };
  };
  if constexpr (RunsInto<E>)
    d.bind_run = [](const Attrs& a) -> BoundRunFn {
      return [t = attrs_from<A>(a, E::name)](std::span<const Tensor> in,
                                             std::span<const Tensor> out) { E::run(t, in, out); };
    };
  if constexpr (requires(const A& a) { E::is_identity(a); })
    d.algebra.identity_when = [](const Attrs& a) {
      return E::is_identity(attrs_from<A>(a, E::name));
    };
  return d;
}

/// Adds the rows of a family's entries, in order.
template <OpEntry... Es>
void register_entries() {
  (registry_add(entry_def<Es>()), ...);
}

/// A sample of an entry with typed attributes `a`.
template <class A>
Sample sample(std::string label, std::vector<Tensor> inputs, const A& a,
              std::vector<Tensor> expected = {}, std::vector<int> grad_inputs = {}) {
  return {std::move(label),      std::move(inputs), attrs_to(a), std::move(expected), 0,
          std::move(grad_inputs)};
}

/// An error sample of an entry with typed attributes `a`.
template <class A>
ErrorSample error_sample(std::string label, std::vector<Tensor> inputs, const A& a,
                         std::string_view kind, std::string message) {
  return {std::move(label), std::move(inputs), attrs_to(a), kind, std::move(message)};
}

/// Values for samples: a fixed pseudo-random sequence in [lo, hi] (rounded to
/// integers for integer dtypes), the same on every machine.
inline Tensor sample_tensor(const Shape& s, unsigned seed, double lo = -2, double hi = 2,
                            DType dt = float32) {
  std::vector<double> v(static_cast<std::size_t>(shape_numel(s)));
  std::uint64_t state = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (double& x : v) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(state >> 11) * 0x1.0p-53;
    if (dtype_is_int(dt)) x = std::round(x);
  }
  return from_vector(v, s).to(dt);
}

/// A float64 sample matrix written out.
inline Tensor f64(std::initializer_list<std::initializer_list<Scalar>> v) {
  return tensor(v, float64);
}

/// Sample values in [-1.5, 1.5] (sample_tensor).
inline Tensor rnd(const Shape& s, unsigned seed, DType dt = float64) {
  return sample_tensor(s, seed, -1.5, 1.5, dt);
}

/// A [3, 4, 5] sample input: sample_tensor of that shape.
inline Tensor sample_345(unsigned seed, DType dtype = float32, double lo = -2, double hi = 2) {
  return sample_tensor({3, 4, 5}, seed, lo, hi, dtype);
}

}  // namespace ms::ops::detail
