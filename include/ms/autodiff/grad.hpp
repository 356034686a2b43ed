// ms/autodiff/grad.hpp — ms::grad and ms::value_and_grad, as graph transformations.
//
// Stage: autodiff. Reverse mode over the traced graph: the function is traced
// (into the trace of an enclosing ms::jit when there is one, else into a
// trace of its own that is compiled and run at once, uncached), then each
// recorded op's gradient rule (its entry's vjp) is traced in reverse order.
// The gradients are therefore graph values too: under ms::jit they are fused,
// planned and cached with the rest, and grad(grad(f)) works.
//
// Options come as one struct, as MindSpore's keyword arguments
// (grad_position, weights, has_aux):
//
//   auto f = [](const auto& x) -> ms::Tensor { return ms::sum(x * x); };
//   ms::Tensor dx = ms::grad(f)(x);                              // 2x: argument 0, a Tensor
//   std::vector<ms::Tensor> g = ms::grad(loss, {.position = {0, 1}})(x, y);
//   auto [loss, grads] = ms::value_and_grad(loss_fn, {.position = std::nullopt,
//                                                     .weights = net.trainable_params()})(x, y);
//   auto step = ms::jit(ms::value_and_grad(loss_fn));            // compiled and cached
//
// Without options the gradient is a Tensor (argument 0's, MindSpore's
// default). With options it is a std::vector<Tensor> (the positions'
// gradients in the order given, then the weights'), whatever the values of
// the options, so the type of a call does not depend on run-time values.
// With has_aux the function returns several tensors: the first is
// differentiated, the others are returned as they are (aux); value_and_grad
// returns them all as the value, grad returns `{grads, aux}`.
//
// A non-scalar output needs a sensitivity (the gradient of the output, as
// MindSpore's GradOperation(sens_param=True)):
// `ms::grad(f, {.position = 0}, ms::sens_param)(x, sens)` takes it as the call's last argument.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ms/jit/jit.hpp"
#include "ms/ops/layout.hpp"  // ms::stop_gradient

namespace ms::compiler {
class TraceContext;
}  // namespace ms::compiler

namespace ms {

/// Which arguments to differentiate (MindSpore's grad_position): an index,
/// a list of indices, or std::nullopt (none: only the weights).
///   {.position = 1}   {.position = {0, 2}}   {.position = std::nullopt}
struct GradPosition {
  /// One argument index.
  GradPosition(int i) : idx{i} {}  // NOLINT: implicit, as MindSpore's int
  /// Several argument indices, in the order their gradients are returned.
  GradPosition(std::vector<int> v) : idx(std::move(v)) {}  // NOLINT
  /// Several argument indices: `{0, 2}`.
  GradPosition(std::initializer_list<int> v) : idx(v) {}  // NOLINT
  /// No argument: only the weights are differentiated.
  GradPosition(std::nullopt_t) {}  // NOLINT
  /// The argument indices (empty: none).
  std::vector<int> idx;
};

/// Options of grad / value_and_grad; every field may be left out:
///   ms::value_and_grad(f, {.position = {0, 1}, .weights = params, .has_aux = true})
struct GradOptions {
  /// The arguments to differentiate (argument 0 unless given).
  GradPosition position = 0;
  /// Tensors the function captures (a cell's `trainable_params()`, which
  /// converts): their gradients follow the positions'.
  std::vector<Tensor> weights = {};
  /// The function returns several tensors: differentiate the first, return
  /// the others (aux) unchanged and without gradient.
  bool has_aux = false;
  /// Report (ms::warn) every weight that gets no gradient, by name: the
  /// function does not use it, or only through non-differentiable ops.
  bool warn_unused = false;
};

/// Tag: the call's last argument is the sensitivity (see the header comment).
struct SensParam {};
/// The ms::SensParam tag value: `ms::grad(f, {}, ms::sens_param)`.
inline constexpr SensParam sens_param{};

/// What value_and_grad returns: `auto [value, grads] = ...`.
template <class V, class G>
struct ValueAndGrad {
  /// What the function returned.
  V value;
  /// The gradients, as grad returns them.
  G grads;
};

/// What grad of a function with several outputs returns (MindSpore's
/// `(grads, aux)` under has_aux): `auto [grads, aux] = ...`; `aux` holds the
/// outputs after the first, flattened.
template <class G>
struct GradAndAux {
  /// The gradients, as grad without has_aux returns them.
  G grads;
  /// The function's outputs after the first, flattened, without gradient.
  std::vector<Tensor> aux;
};

namespace autodiff {

/// The gradients of scalar `y` (recorded in `tc` from node `first_node` on)
/// with respect to each tensor of `wrt`, traced into `tc`. A tensor that `y`
/// does not depend on gets zeros.
/// With `sens`, the gradient of `y` is `sens` (same shape) instead of ones;
/// `reached[i]` (when given) tells whether any gradient reached wrt[i].
std::vector<Tensor> backward(compiler::TraceContext& tc, std::size_t first_node, const Tensor& y,
                             std::span<const Tensor> wrt, const Tensor* sens = nullptr,
                             std::vector<bool>* reached = nullptr);

/// Checks what is asked of a differentiated function; ms::Error otherwise.
void check_output(const Tensor& y, std::string_view api);
/// Checks a sensitivity against the output it stands for.
void check_sens(const Tensor& y, const Tensor& sens, std::string_view api);
/// Checks that `t` (named `what` in the message) can be differentiated against: a
/// defined floating-point tensor; ValueError or TypeError naming `api` otherwise.
void check_wrt(const Tensor& t, std::string_view what, std::string_view api);

namespace detail {

/// The trace one grad call records into, defined in libms so that this header
/// needs no IR or jit internals: the active trace of an enclosing ms::jit (or
/// grad) when there is one, else a fresh eager trace of its own (the active
/// tracer until `run` or destruction) that `run` compiles and runs at once,
/// uncached.
class GradTrace {
 public:
  GradTrace();
  ~GradTrace();
  GradTrace(const GradTrace&) = delete;
  GradTrace& operator=(const GradTrace&) = delete;

  /// Whether this is a trace of its own (no enclosing trace).
  bool eager() const { return own_ != nullptr; }
  /// Eager trace: makes the concrete tensor `t` the next graph input.
  void bind_input(const Tensor& t);
  /// The number of nodes recorded so far (where the function's nodes start).
  std::size_t mark() const;
  /// The gradients of one call of the differentiated function, after checking
  /// it: `outputs` its flattened result (the first is differentiated; more
  /// only with `has_aux`), recorded from node `first_node` on; `args` its
  /// arguments (nullptr for a non-tensor); gradients for the arguments at
  /// `position`, then for `weights`. ms::Error naming `api` on bad input.
  std::vector<Tensor> gradients(std::size_t first_node, std::span<const Tensor> outputs,
                                std::span<const Tensor* const> args, std::span<const int> position,
                                std::span<const Tensor> weights, bool has_aux, bool warn_unused,
                                const Tensor* sens, std::string_view api);
  /// Eager trace: ends it with these outputs, optimizes the graph (default
  /// options) and runs it on the bound inputs; the outputs' concrete values.
  std::vector<Tensor> run(std::span<const Tensor> outputs);

 private:
  std::unique_ptr<compiler::TraceContext> own_;  ///< the eager trace, if any
  compiler::TraceContext* tc_;                   ///< the trace recorded into
  std::vector<Tensor> bound_;                    ///< the eager trace's inputs
};

}  // namespace detail

/// `&a` when `a` is a Tensor, null for any other argument.
template <class T>
const Tensor* tensor_ptr(const T& a) {
  if constexpr (std::is_same_v<std::remove_cvref_t<T>, Tensor>)
    return &a;
  else
    return nullptr;
}

/// The callable that ms::grad / ms::value_and_grad return. With `Sens`, the
/// last argument of a call is the sensitivity.
template <class F, bool WithValue, bool Single, bool Sens = false>
class GradFunction {
 public:
  /// Differentiates `fn` as `opts` says.
  GradFunction(F fn, GradOptions opts)
      : fn_(std::move(fn)),
        pos_(std::move(opts.position.idx)),
        weights_(std::move(opts.weights)),
        has_aux_(opts.has_aux),
        warn_unused_(opts.warn_unused) {}

  /// Calls the function on `args` under a trace and returns the gradients (and
  /// the value, the aux outputs) as ms::grad / ms::value_and_grad describe.
  template <class... A>
  auto operator()(const A&... args) const {
    if constexpr (Sens) {
      static_assert(sizeof...(A) >= 1, "ms::grad with sens_param: pass the sensitivity last");
      const auto all = std::forward_as_tuple(args...);
      using Last = std::remove_cvref_t<std::tuple_element_t<sizeof...(A) - 1, std::tuple<A...>>>;
      static_assert(std::is_same_v<Last, Tensor>,
                    "ms::grad with sens_param: the last argument must be the sensitivity tensor");
      const Tensor& sens = std::get<sizeof...(A) - 1>(all);
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        return dispatch(&sens, std::get<I>(all)...);
      }
      (std::make_index_sequence<sizeof...(A) - 1>{});
    } else {
      return dispatch(nullptr, args...);
    }
  }

 private:
  template <class... A>
  auto dispatch(const Tensor* sens, const A&... args) const {
    detail::GradTrace trace;
    if (!trace.eager()) return run(trace, sens, args...);
    // Eager: a trace of its own, compiled and run at once (not cached).
    auto bind = [&](const auto& a) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, Tensor>) trace.bind_input(a);
    };
    (bind(args), ...);
    auto r = run(trace, sens, args...);
    using Out = ResultTraits<decltype(r)>;
    std::vector<Tensor> flat;
    std::vector<std::size_t> st;
    Out::flatten(r, flat, st);
    std::vector<Tensor> outs = trace.run(flat);
    std::size_t pos = 0, sp = 0;
    return Out::unflatten(outs, pos, st, sp);
  }

  template <class... A>
  auto run(detail::GradTrace& trace, const Tensor* sens, const A&... args) const {
    const std::size_t mark = trace.mark();
    const std::vector<const Tensor*> targs{tensor_ptr(args)...};
    using Raw = std::remove_cvref_t<std::invoke_result_t<const F&, const A&...>>;
    using Out = ResultTraits<Raw>;
    auto raw = fn_(args...);
    std::vector<Tensor> flat;
    std::vector<std::size_t> st;
    Out::flatten(raw, flat, st);
    std::vector<Tensor> grads =
        trace.gradients(mark, flat, targs, pos_, weights_, has_aux_, warn_unused_, sens,
                        WithValue ? "value_and_grad" : "grad");
    auto grads_out = [&] {
      if constexpr (Single)
        return grads.at(0);
      else
        return grads;
    };
    if constexpr (WithValue) {
      std::size_t pos = 0, sp = 0;
      using V = typename Out::type;
      return ValueAndGrad<V, decltype(grads_out())>{Out::unflatten(flat, pos, st, sp), grads_out()};
    } else if constexpr (std::is_same_v<typename Out::type, Tensor>) {
      return grads_out();
    } else {
      return GradAndAux<decltype(grads_out())>{grads_out(),
                                               std::vector<Tensor>(flat.begin() + 1, flat.end())};
    }
  }

  F fn_;
  std::vector<int> pos_;
  std::vector<Tensor> weights_;
  bool has_aux_;
  bool warn_unused_;
};

/// False for any `T...`: a static_assert in a template that must not be instantiated.
template <class...>
inline constexpr bool always_false_v = false;

}  // namespace autodiff

/// The gradient of `fn` (scalar output) with respect to its argument 0: a Tensor.
///   ms::Tensor dx = ms::grad(f)(x);
template <class F>
auto grad(F fn) {
  return autodiff::GradFunction<F, false, true>(std::move(fn), {});
}
/// The gradients of `fn` as `opts` asks: a std::vector<Tensor> (positions,
/// then weights), or `{grads, aux}` for a function with several outputs.
///   auto g = ms::grad(loss, {.position = std::nullopt, .weights = net.trainable_params()})(x, y);
template <class F>
auto grad(F fn, GradOptions opts) {
  return autodiff::GradFunction<F, false, false>(std::move(fn), std::move(opts));
}
/// As above; the call's last argument is the sensitivity:
///   ms::grad(f, {.position = 0}, ms::sens_param)(x, sens)
template <class F>
auto grad(F fn, GradOptions opts, SensParam) {
  return autodiff::GradFunction<F, false, false, true>(std::move(fn), std::move(opts));
}
/// The value of `fn` and its gradient with respect to argument 0 (a Tensor):
///   auto [loss, dx] = ms::value_and_grad(f)(x);
template <class F>
auto value_and_grad(F fn) {
  return autodiff::GradFunction<F, true, true>(std::move(fn), {});
}
/// The value of `fn` and its gradients as `opts` asks (a std::vector<Tensor>:
/// positions, then weights). With has_aux the value holds every output.
///   auto [loss, grads] = ms::value_and_grad(loss_fn, {.position = std::nullopt,
///                                                     .weights = opt.parameters()})(x, y);
template <class F>
auto value_and_grad(F fn, GradOptions opts) {
  return autodiff::GradFunction<F, true, false>(std::move(fn), std::move(opts));
}
/// As above; the call's last argument is the sensitivity.
template <class F>
auto value_and_grad(F fn, GradOptions opts, SensParam) {
  return autodiff::GradFunction<F, true, false, true>(std::move(fn), std::move(opts));
}

/// Any other form (positional options such as `grad(f, 0, weights)`, a bool,
/// a tag in the wrong place) stops the build with a sentence naming the
/// accepted forms.
template <class F, class A, class... Rest>
requires(!std::is_same_v<std::remove_cvref_t<A>, GradOptions>) void grad(F, A&&, Rest&&...) {
  static_assert(autodiff::always_false_v<F, A, Rest...>,
                "ms::grad and ms::value_and_grad take the function and one options struct: "
                "ms::grad(f), ms::grad(f, {.position = {0, 1}, .weights = params, .has_aux = "
                "true}) (every field may be left out; .position = std::nullopt differentiates "
                "only the weights), and ms::sens_param after the options for a sensitivity");
}
/// As for grad: any second argument but a GradOptions stops the build with a
/// sentence naming the accepted forms.
template <class F, class A, class... Rest>
requires(!std::is_same_v<std::remove_cvref_t<A>, GradOptions>) void value_and_grad(F, A&&,
                                                                                   Rest&&...) {
  static_assert(autodiff::always_false_v<F, A, Rest...>,
                "ms::grad and ms::value_and_grad take the function and one options struct: "
                "ms::value_and_grad(f), ms::value_and_grad(f, {.position = {0, 1}, .weights = "
                "params, .has_aux = true}) (every field may be left out; .position = "
                "std::nullopt differentiates only the weights), and ms::sens_param after the "
                "options for a sensitivity");
}

}  // namespace ms
