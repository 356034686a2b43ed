// ms/nn/parameter.hpp — ms::Parameter: a named, trainable tensor held by a Cell.
//
// Stage: nn. A Parameter is a Tensor (it shares its storage, so copies of it
// see the same values) with a name and a `requires_grad` flag that all its
// copies share. Optimizers update it in place; under ms::jit a parameter that a
// function touches is a graph input bound by identity, never a baked constant.
//
//   ms::Parameter w(ms::initializer("he_uniform", {10, 784}), "fc.weight");
//   w.set_requires_grad(false);              // frozen: no gradient, not trainable
//   auto grads = ms::grad(loss, {.position = std::nullopt, .weights = net.trainable_params()})(x,
//   y);
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/autodiff/tensor_hooks.hpp"
#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/hooks/hook_handle.hpp"

namespace ms {

class InitSpec;  // ms/nn/initializer.hpp

/// A named, trainable tensor: `ms::Parameter w(ms::zeros({10, 784}), "fc.weight");`.
/// Copies share the storage, the name and the requires_grad flag.
class Parameter : public Tensor {
 public:
  /// An undefined parameter (no data).
  Parameter() = default;
  /// Wraps `data` (shared, not copied). An empty `name` gets a generated one
  /// (`Parameter$N`), as MindSpore names unnamed parameters.
  explicit Parameter(Tensor data, std::string name = {}, bool requires_grad = true);

  /// The parameter's name (a cell registering it may prefix its own).
  const std::string& name() const;
  /// Renames the parameter (every copy sees the new name).
  void set_name(std::string name);
  /// False for a frozen parameter: gradients skip it, trainable_params() leaves it out.
  bool requires_grad() const;
  /// Freezes (false) or unfreezes (true) the parameter, for every copy.
  void set_requires_grad(bool value);
  /// The tensor it holds (the same storage).
  const Tensor& data() const { return *this; }
  /// Copies `value` into the parameter in place (its copies see the change).
  /// ShapeError or TypeError naming the parameter when the shape or dtype differs.
  void set_data(const Tensor& value);
  /// True when both are (copies of) the same parameter.
  bool same_as(const Parameter& other) const { return info_ == other.info_; }
  /// Identity shared by all copies (nullptr for an undefined parameter).
  const void* identity() const { return info_.get(); }

  /// A hook on this parameter's gradient (MindSpore's Tensor.register_hook):
  /// whenever ms::grad / ms::value_and_grad computes it (eagerly, or each time
  /// a compiled graph runs), `fn(grad)` sees the concrete gradient and may
  /// return a replacement of the same dtype and shape (`ms::Tensor` or
  /// `std::optional<ms::Tensor>`; `void` or an empty result keeps it). Hooks
  /// run in registration order. The handle's `remove()` is idempotent and safe
  /// after the parameter is gone; registering or removing bumps the hook
  /// version, so compiled graphs pick the change up.
  ///   auto h = net.fc1.weight.register_hook([](const ms::Tensor& g) { return g * 0.5f; });
  template <class F>
  HookHandle register_hook(F fn) {
    static_assert(autodiff::GradHookForm<F>,
                  "Parameter::register_hook: the hook must be callable as fn(const ms::Tensor& "
                  "grad) returning void, a Tensor or a std::optional<ms::Tensor>");
    return add_grad_hook(autodiff::to_grad_hook(std::move(fn)));
  }
  /// Number of gradient hooks registered on this parameter.
  std::size_t hook_count() const;

 private:
  class GradHooks;  // the HookOwner of this parameter's gradient hooks
  HookHandle add_grad_hook(std::function<Tensor(const Tensor&)> fn);
  struct Info {
    std::string name;
    bool requires_grad = true;
    std::shared_ptr<GradHooks> hooks;  // lazy: made by the first register_hook
  };
  std::shared_ptr<Info> info_;
};

/// A list of parameters that also converts to the `std::vector<Tensor>` that
/// ms::grad and ms::value_and_grad take as `weights`.
class ParameterList : public std::vector<Parameter> {
 public:
  using std::vector<Parameter>::vector;
  /// The parameters `v`, in order.
  ParameterList(std::vector<Parameter> v) : std::vector<Parameter>(std::move(v)) {}  // NOLINT
  /// The parameters as tensors (sharing their storage), for APIs taking tensors.
  operator std::vector<Tensor>() const {  // NOLINT
    return std::vector<Tensor>(begin(), end());
  }
};

namespace detail {
/// register_hook with a TensorGradHook (see ms::register_hook).
HookHandle register_tensor_grad_hook(const Tensor& t, autodiff::TensorGradHook fn);
}  // namespace detail

/// A hook on the gradient of the concrete tensor `t` (an input of a function
/// ms::grad differentiates, held outside it; MindSpore's and PyTorch's
/// Tensor.register_hook): as Parameter::register_hook, for any tensor that
/// views its whole storage. The hook belongs to `t` and its copies (the same
/// storage, dtype and shape); a reshape of `t` or a view of its storage with
/// another shape, which may also view the whole storage, has hooks of its own. The hook goes away
/// with the handle's `remove()` or with the tensor's storage. It applies where
/// ms::grad is called eagerly on `t`; a compiled graph (ms::jit) is keyed on
/// its arguments' shapes, not on which tensor is passed, so a hook on a jitted
/// function's argument is not run there: hook the value inside the function
/// with ms::hook_grad, which works eagerly and in graphs, for intermediates too.
/// ValueError when `t` is undefined, symbolic (traced) or a view of part of
/// its storage.
/// Example: `auto h = ms::register_hook(x, [](const ms::Tensor& g) { return g * 0.5f; });`
template <class F>
HookHandle register_hook(const Tensor& t, F fn) {
  static_assert(autodiff::GradHookForm<F>,
                "ms::register_hook: the hook must be callable as fn(const ms::Tensor& grad) "
                "returning void, a Tensor or a std::optional<ms::Tensor>");
  return detail::register_tensor_grad_hook(t, autodiff::to_grad_hook(std::move(fn)));
}

/// A fixed sequence of distinct parameters (MindSpore's ParameterTuple), for
/// a cell to register as one unit (CellBase::register_parameter_tuple) and
/// for optimizers to keep their per-parameter state in:
///   ms::ParameterTuple weights{w1, w2};
///   ms::ParameterTuple moments = weights.clone("moments", "zeros");  // moments.w1, ...
///   ms::optim::SGD opt(weights);
/// Copies share the parameters (not their data); the sequence itself cannot
/// change after construction.
class ParameterTuple {
 public:
  /// An empty tuple.
  ParameterTuple() = default;
  /// The parameters `params`, in order. ValueError for an undefined parameter
  /// or two different parameters with the same name (MindSpore: "its name ...
  /// already exists"); a parameter given twice is kept once.
  explicit ParameterTuple(std::vector<Parameter> params);
  /// `ms::ParameterTuple{w1, w2}`, as the vector form.
  ParameterTuple(std::initializer_list<Parameter> params)
      : ParameterTuple(std::vector<Parameter>(params)) {}

  /// The number of parameters.
  std::size_t size() const { return params_.size(); }
  /// True when it holds no parameter.
  bool empty() const { return params_.empty(); }
  /// Parameter `i`; IndexError naming the size when out of range.
  const Parameter& operator[](std::size_t i) const;
  /// The first parameter, for range-for.
  std::vector<Parameter>::const_iterator begin() const { return params_.begin(); }
  /// One past the last parameter.
  std::vector<Parameter>::const_iterator end() const { return params_.end(); }

  /// New parameters of the same shapes, dtypes and requires_grad, named
  /// `prefix + "." + name` (MindSpore's ParameterTuple.clone(prefix, init)):
  /// `init` "same" copies each one's values, any other initializer fills them
  /// (`"zeros"`, `"ones"`, a number, an ms::init object). `prefix` holds
  /// letters, digits, '_', '-', '/' and '.' and is not empty (ValueError).
  ///   ms::ParameterTuple m = ms::ParameterTuple(net.trainable_params()).clone("moments", "zeros");
  ParameterTuple clone(const std::string& prefix, const InitSpec& init) const;
  /// clone(prefix, "same"): copies of the values under the new names.
  ParameterTuple clone(const std::string& prefix) const;

  /// The parameters as a list (what optimizers and ms::grad take).
  operator ParameterList() const { return ParameterList(params_); }  // NOLINT
  /// The parameters as tensors (sharing their storage).
  operator std::vector<Tensor>() const {  // NOLINT
    return std::vector<Tensor>(params_.begin(), params_.end());
  }

 private:
  std::vector<Parameter> params_;
};

}  // namespace ms
