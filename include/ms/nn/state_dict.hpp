// ms/nn/state_dict.hpp — ms::StateDict: (name, tensor) pairs in order, indexable by name.
//
// Stage: nn (on core only). What a cell's state_dict() returns and
// load_state_dict() takes: parameters and persistent buffers under their
// hierarchical names, in registration order. The io stage saves and loads the
// same type (ms::io::NamedTensors).
//
//   ms::StateDict sd = net.state_dict();
//   ms::Tensor w = sd["fc1.weight"];           // ms::KeyError naming close names when absent
//   if (sd.contains("fc1.bias")) sd.at("fc1.bias").fill_(0.0);
//   for (const auto& [name, t] : sd) std::cout << name << " " << t.shape() << "\n";
//
// It is a std::vector of pairs, so order, iteration, positions (`sd[0]`) and
// pushing entries work as for any vector. A name is looked up by a scan (a
// model's state dict holds hundreds of entries, not millions); the first
// entry of a name answers, and load_state_dict refuses a name given twice.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms {

/// An ordered list of (hierarchical name, tensor), indexable by name.
class StateDict : public std::vector<std::pair<std::string, Tensor>> {
 public:
  /// The underlying list of (name, tensor) entries in registration order.
  using Base = std::vector<std::pair<std::string, Tensor>>;
  using Base::at;
  using Base::Base;
  using Base::operator[];
  StateDict() = default;
  /// Takes over a plain list of (name, tensor) entries, in their order.
  StateDict(Base entries) : Base(std::move(entries)) {}  // NOLINT: implicit, from a plain list

  /// The tensor named `name`; ms::KeyError naming the key and the closest
  /// names when there is none. `sd.at("fc1.weight")`.
  Tensor& at(std::string_view name) { return entry(name).second; }
  /// As the non-const at(name).
  const Tensor& at(std::string_view name) const { return entry(name).second; }
  /// As at(name): `sd["fc1.weight"]` (a missing name is a KeyError, never inserted).
  Tensor& operator[](std::string_view name) { return at(name); }
  /// As the non-const operator[](name).
  const Tensor& operator[](std::string_view name) const { return at(name); }
  /// Whether an entry is named `name`.
  bool contains(std::string_view name) const { return find(name) != end(); }
  /// The first entry named `name`, or end().
  iterator find(std::string_view name);
  /// As the non-const find(name).
  const_iterator find(std::string_view name) const;
  /// Replaces the tensor of `name`, or appends (name, tensor) when there is none.
  void insert_or_assign(std::string name, Tensor tensor);
  /// The names, in order.
  std::vector<std::string> keys() const;

 private:
  value_type& entry(std::string_view name);
  const value_type& entry(std::string_view name) const;
};

}  // namespace ms
