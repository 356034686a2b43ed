// ms/autodiff/tensor_hooks.hpp — gradient hooks on tensors: the registry
// behind ms::Parameter::register_hook and ms::register_hook, and ms::hook_grad
// for intermediate values.
//
// Stage: autodiff. A hook is registered on a tensor that views its whole
// storage (a parameter): when ms::grad / ms::value_and_grad returns the
// gradient of that tensor (a copy of it: the same storage, dtype and shape;
// not a reshape or another view of the same storage), the hooks run on it in
// registration order, each seeing
// the previous one's result and returning a replacement (or an undefined
// tensor: keep it). They run through a host callback, so they see concrete
// gradients eagerly and every time a compiled graph runs. A weight that gets
// no gradient (zeros) does not call its hooks. Registration and removal are
// done by the nn stage, which bumps the hook version (graphs recompile).
//
// An intermediate value has no storage of its own before the graph runs, so
// its hook is part of the traced function instead (MindSpore's HookBackward):
//
//   auto loss_fn = [&](const ms::Tensor& x) {
//     ms::Tensor h = ms::hook_grad(ms::relu(x * w), [](const ms::Tensor& g) { return g * 0.5f; });
//     return ms::sum(h * h);            // d loss / d h reaches the hook, halved, then flows on
//   };
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms::autodiff {

/// A gradient hook: the gradient in, a replacement (same dtype and shape) or
/// an undefined tensor (keep the gradient) out.
using TensorGradHook = std::function<Tensor(const Tensor& grad)>;

/// The accepted forms of a user's gradient hook: `fn(const ms::Tensor& grad)`
/// returning void (keep), a Tensor (replace) or a std::optional<ms::Tensor>.
template <class F>
concept GradHookForm = std::is_invocable_v<F&, const Tensor&> &&
    (std::is_void_v<std::invoke_result_t<F&, const Tensor&>> ||
     std::is_convertible_v<std::invoke_result_t<F&, const Tensor&>, Tensor> ||
     std::is_same_v<std::remove_cvref_t<std::invoke_result_t<F&, const Tensor&>>,
                    std::optional<Tensor>>);

/// `fn` (one of the GradHookForm forms) as a TensorGradHook.
/// Example: `auto h = ms::autodiff::to_grad_hook([](const ms::Tensor& g) { return g * 2.0f; });`
template <GradHookForm F>
TensorGradHook to_grad_hook(F fn) {
  using R = std::invoke_result_t<F&, const Tensor&>;
  return [f = std::move(fn)](const Tensor& g) mutable -> Tensor {
    if constexpr (std::is_void_v<R>) {
      f(g);
      return Tensor();
    } else if constexpr (std::is_same_v<std::remove_cvref_t<R>, std::optional<Tensor>>) {
      auto r = f(g);
      return r ? Tensor(*r) : Tensor();
    } else {
      return Tensor(f(g));
    }
  };
}

/// True when `t` is concrete and views its whole storage, densely: the
/// tensors whose storage can carry gradient hooks.
bool views_whole_storage(const Tensor& t);
/// Adds `fn` as hook `id` on the tensor `t` (its storage, dtype and shape:
/// its copies share it, its reshapes do not); `label` names it in errors (the
/// parameter's name).
void add_tensor_grad_hook(const Tensor& t, std::uint64_t id, TensorGradHook fn, std::string label);
/// Removes hook `id`; returns false when there is none.
bool remove_tensor_grad_hook(std::uint64_t id);
/// `grad` after the hooks of `t` (itself when there are none). While tracing,
/// records a host callback that runs them when the graph runs.
Tensor apply_tensor_grad_hooks(const Tensor& t, const Tensor& grad);

/// hook_grad with a TensorGradHook (see ms::hook_grad).
Tensor hook_grad_fn(const Tensor& y, TensorGradHook fn, std::string label);

}  // namespace ms::autodiff

namespace ms {

/// `y` itself, with `fn` on its gradient (MindSpore's HookBackward; PyTorch's
/// Tensor.register_hook on an intermediate): when ms::grad differentiates
/// through the returned tensor, `fn` sees the gradient flowing into it,
/// concrete (eagerly, and each time a compiled graph runs), and may return a
/// replacement of the same dtype and shape (Tensor or std::optional<Tensor>;
/// void or an empty result keeps it), which flows on to what computed `y`.
/// Only uses of the returned tensor are hooked; outside a trace (no gradient
/// can be taken) it returns `y`. `label` names the hook in errors and dumps.
/// ShapeError / TypeError naming `label` when the replacement does not match.
/// Example: `auto h = ms::hook_grad(x, [](const ms::Tensor& g) { return g * 0.5f; }, "h");`
template <class F>
Tensor hook_grad(const Tensor& y, F fn, std::string label = "hook_grad") {
  static_assert(autodiff::GradHookForm<F>,
                "ms::hook_grad: the hook must be callable as fn(const ms::Tensor& grad) "
                "returning void, a Tensor or a std::optional<ms::Tensor>");
  return autodiff::hook_grad_fn(y, autodiff::to_grad_hook(std::move(fn)), std::move(label));
}

}  // namespace ms
