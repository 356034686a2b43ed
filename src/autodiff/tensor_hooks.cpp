// Gradient hooks on tensors: see ms/autodiff/tensor_hooks.hpp.
#include "ms/autodiff/tensor_hooks.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"
#include "ms/ops/host.hpp"

namespace ms::autodiff {
namespace {

// A hook and the tensor it is on: a storage seen with one dtype and shape.
struct Hook {
  std::uint64_t serial;
  DType dtype;
  Shape shape;
  std::uint64_t id;
  TensorGradHook fn;
  std::string label;
};

std::mutex g_hooks_mu;
std::vector<Hook> g_hooks;  // in registration order

std::vector<Hook> hooks_of(const Tensor& t) {
  std::vector<Hook> out;
  if (!views_whole_storage(t)) return out;
  const std::uint64_t serial = t.storage()->serial();
  std::lock_guard lock(g_hooks_mu);
  for (const Hook& h : g_hooks)
    if (h.serial == serial && h.dtype == t.dtype() && h.shape == t.shape()) out.push_back(h);
  return out;
}

}  // namespace

bool views_whole_storage(const Tensor& t) {
  return t.defined() && !t.is_symbolic() && t.storage() != nullptr && t.offset() == 0 &&
         t.is_contiguous() && t.nbytes() == t.storage()->nbytes();
}

void add_tensor_grad_hook(const Tensor& t, std::uint64_t id, TensorGradHook fn, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "register_hook: empty hook function for '", label,
           "'");
  std::lock_guard lock(g_hooks_mu);
  g_hooks.push_back(
      {t.storage()->serial(), t.dtype(), t.shape(), id, std::move(fn), std::move(label)});
}

bool remove_tensor_grad_hook(std::uint64_t id) {
  std::lock_guard lock(g_hooks_mu);
  auto it = std::find_if(g_hooks.begin(), g_hooks.end(), [&](const Hook& h) { return h.id == id; });
  if (it == g_hooks.end()) return false;
  g_hooks.erase(it);
  return true;
}

namespace {

// The hook's result as the gradient: `g` when the hook kept it, else the
// replacement, checked against the gradient it replaces.
Tensor hook_result(const Tensor& r, const Tensor& g, const std::string& who) {
  if (!r.defined()) return g;
  MS_CHECK(!r.is_symbolic(), ValueError, who, " returned a symbolic tensor");
  MS_CHECK(r.shape() == g.shape(), ShapeError, who, " returned a gradient of shape ", r.shape(),
           "; expected ", g.shape());
  MS_CHECK(r.dtype() == g.dtype(), TypeError, who, " returned a gradient of dtype ", r.dtype(),
           "; expected ", g.dtype());
  return r;
}

}  // namespace

Tensor apply_tensor_grad_hooks(const Tensor& t, const Tensor& grad) {
  std::vector<Hook> hooks = hooks_of(t);
  if (hooks.empty()) return grad;
  const std::string label = "gradient hook of '" + hooks.front().label + "'";
  auto run = [hooks = std::move(hooks)](std::vector<Tensor> g) {
    for (const Hook& h : hooks)
      g[0] = hook_result(h.fn(g[0]), g[0], "register_hook: the hook of '" + h.label + "'");
    return g;
  };
  return ops::host_call(std::move(run), {grad}, label)[0];
}

Tensor hook_grad_fn(const Tensor& y, TensorGradHook fn, std::string label) {
  MS_CHECK(y.defined(), ValueError, "hook_grad: '", label, "': the tensor is undefined");
  MS_CHECK(static_cast<bool>(fn), ValueError, "hook_grad: '", label, "': empty hook function");
  auto on_grads = [fn = std::move(fn), label](std::vector<Tensor> grads) {
    auto run = [fn, label](std::vector<Tensor> g) {
      g[0] = hook_result(fn(g[0]), g[0], "hook_grad: the hook '" + label + "'");
      return g;
    };
    return ops::host_call(std::move(run), std::move(grads), "hook_grad '" + label + "'");
  };
  return ops::grad_hook(std::move(on_grads), {y}, std::move(label))[0];
}

}  // namespace ms::autodiff
