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

#include <initializer_list>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ms/core/warning.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/jit.hpp"
#include "ms/jit/trace.hpp"
#include "ms/ops/layout.hpp"  // ms::stop_gradient

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
    auto* outer = dynamic_cast<compiler::TraceContext*>(ops::active_tracer());
    if (outer != nullptr) return run(*outer, sens, args...);
    // Eager: a trace of its own, compiled and run at once (not cached).
    compiler::TraceContext tc;
    std::vector<Tensor> bound;
    auto bind = [&](const auto& a) {
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(a)>, Tensor>) {
        tc.bind_input(a);
        bound.push_back(a);
      }
    };
    (bind(args), ...);
    auto r = run(tc, sens, args...);
    using Out = ResultTraits<decltype(r)>;
    std::vector<Tensor> flat;
    std::vector<std::size_t> st;
    Out::flatten(r, flat, st);
    ir::Graph g = tc.finish(flat);
    compiler::optimize(g, {});
    std::vector<Tensor> outs = compiler::Executable(std::move(g)).run(bound);
    std::size_t pos = 0, sp = 0;
    return Out::unflatten(outs, pos, st, sp);
  }

  template <class... A>
  auto run(compiler::TraceContext& tc, const Tensor* sens, const A&... args) const {
    const std::size_t mark = tc.graph().nodes.size();
    const std::vector<const Tensor*> targs{tensor_ptr(args)...};
    using Raw = std::remove_cvref_t<std::invoke_result_t<const F&, const A&...>>;
    using Out = ResultTraits<Raw>;
    auto raw = fn_(args...);
    std::vector<Tensor> flat;
    std::vector<std::size_t> st;
    Out::flatten(raw, flat, st);
    const std::string_view api = WithValue ? "value_and_grad" : "grad";
    MS_CHECK(!flat.empty(), ValueError, api, ": the function returns no tensor");
    MS_CHECK(has_aux_ || flat.size() == 1, ValueError, api, ": the function returns ", flat.size(),
             " tensors; differentiate one, or pass {.has_aux = true} to differentiate "
             "the first");
    if (sens != nullptr)
      check_sens(flat[0], *sens, api);
    else
      check_output(flat[0], api);
    std::vector<Tensor> wrt;
    for (int p : pos_) {
      MS_CHECK(p >= 0 && static_cast<std::size_t>(p) < targs.size(), IndexError, api,
               ": grad_position ", p, " is out of range for a function of ", targs.size(),
               " arguments");
      MS_CHECK(targs[static_cast<std::size_t>(p)] != nullptr, TypeError, api, ": argument ", p,
               " is not a tensor and cannot be differentiated");
      check_wrt(*targs[static_cast<std::size_t>(p)], "argument " + std::to_string(p), api);
      wrt.push_back(*targs[static_cast<std::size_t>(p)]);
    }
    for (std::size_t i = 0; i < weights_.size(); ++i) {
      check_wrt(weights_[i], "weight " + std::to_string(i), api);
      wrt.push_back(weights_[i]);
    }
    std::vector<bool> reached;
    std::vector<Tensor> grads = backward(tc, mark, flat[0], wrt, sens, &reached);
    if (warn_unused_)
      for (std::size_t i = 0; i < weights_.size(); ++i)
        if (!reached[pos_.size() + i]) {
          const std::string& label = weights_[i].storage()->label();
          warn(::ms::detail::str_cat(api, ": weight ", i,
                                     label.empty() ? std::string() : " '" + label + "'",
                                     " gets no gradient (the function does not use it, or only "
                                     "through non-differentiable ops); its gradient is zeros"));
        }
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
