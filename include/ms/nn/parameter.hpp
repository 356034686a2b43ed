// ms/nn/parameter.hpp — ms::Parameter: a named, trainable tensor held by a Cell.
//
// Stage: nn. A Parameter is a Tensor (it shares its storage, so copies of it
// see the same values) with a name and a `requires_grad` flag that all its
// copies share. Optimizers update it in place; under ms::jit a parameter that a
// function touches is a graph input bound by identity, never a baked constant.
//
//   ms::Parameter w(ms::initializer("he_uniform", {10, 784}), "fc.weight");
//   w.set_requires_grad(false);              // frozen: no gradient, not trainable
//   auto grads = ms::grad(loss, std::nullopt, net.trainable_params())(x, y);
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms {

class Parameter : public Tensor {
 public:
  /// An undefined parameter (no data).
  Parameter() = default;
  /// Wraps `data` (shared, not copied). An empty `name` gets a generated one
  /// (`Parameter$N`), as MindSpore names unnamed parameters.
  explicit Parameter(Tensor data, std::string name = {}, bool requires_grad = true);

  /// The parameter's name (a cell registering it may prefix its own).
  const std::string& name() const;
  void set_name(std::string name);
  /// False for a frozen parameter: gradients skip it, trainable_params() leaves it out.
  bool requires_grad() const;
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

 private:
  struct Info {
    std::string name;
    bool requires_grad = true;
  };
  std::shared_ptr<Info> info_;
};

/// A list of parameters that also converts to the `std::vector<Tensor>` that
/// ms::grad and ms::value_and_grad take as `weights`.
class ParameterList : public std::vector<Parameter> {
 public:
  using std::vector<Parameter>::vector;
  ParameterList(std::vector<Parameter> v) : std::vector<Parameter>(std::move(v)) {}  // NOLINT
  operator std::vector<Tensor>() const {                                             // NOLINT
    return std::vector<Tensor>(begin(), end());
  }
};

}  // namespace ms
