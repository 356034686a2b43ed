// ms/autodiff/tensor_hooks.hpp — gradient hooks on tensors (the registry
// behind ms::Parameter::register_hook).
//
// Stage: autodiff. A hook is registered on a whole storage (a parameter's):
// when ms::grad / ms::value_and_grad returns the gradient of a tensor that is
// that whole storage, the hooks run on it in registration order, each seeing
// the previous one's result and returning a replacement (or an undefined
// tensor: keep it). They run through a host callback, so they see concrete
// gradients eagerly and every time a compiled graph runs. A weight that gets
// no gradient (zeros) does not call its hooks. Registration and removal are
// done by the nn stage, which bumps the hook version (graphs recompile).
#pragma once

#include <cstdint>
#include <string>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms::autodiff {

/// A gradient hook: the gradient in, a replacement (same dtype and shape) or
/// an undefined tensor (keep the gradient) out.
using TensorGradHook = std::function<Tensor(const Tensor& grad)>;

/// Adds `fn` as hook `id` on the storage with serial `storage_serial`;
/// `label` names it in errors (the parameter's name).
void add_tensor_grad_hook(std::uint64_t storage_serial, std::uint64_t id, TensorGradHook fn,
                          std::string label);
/// Removes hook `id`; returns false when there is none.
bool remove_tensor_grad_hook(std::uint64_t id);
/// `grad` after the hooks of `t` (itself when there are none). While tracing,
/// records a host callback that runs them when the graph runs.
Tensor apply_tensor_grad_hooks(const Tensor& t, const Tensor& grad);

}  // namespace ms::autodiff
