// ms/nn/any_cell.hpp — ms::AnyCell: a cell of any type, for containers.
//
// Stage: nn. Holds a std::shared_ptr to a cell and a type-erased call of its
// one-tensor forward (`Tensor -> Tensor`), so SequentialCell, CellList and
// user containers can hold different cells; `as<T>()` gets the cell back.
//
//   ms::AnyCell c = std::make_shared<ms::nn::Dense>(4, 8);
//   ms::Tensor y = c(x);
//   c.as<ms::nn::Dense>()->weight;
#pragma once

#include <concepts>
#include <memory>

#include "ms/core/std_parts.hpp"
#include "ms/nn/cell.hpp"

namespace ms {

/// A cell of any type behind a std::shared_ptr, callable on one tensor, for
/// containers: `ms::AnyCell c = std::make_shared<ms::nn::Dense>(4, 8); ms::Tensor y = c(x);`
class AnyCell {
 public:
  AnyCell() = default;
  /// Holds `cell` (shared); implicit, so containers take cells of any type.
  template <class C>
  requires std::derived_from<C, CellBase> AnyCell(std::shared_ptr<C> cell)  // NOLINT: implicit
      : cell_(cell) {
    if constexpr (std::is_invocable_v<C&, const Tensor&>)
      fn_ = [c = cell.get()](const Tensor& x) -> Tensor { return Tensor((*c)(x)); };
  }

  /// Calls the cell (with its hooks) on one tensor. TypeError when the cell
  /// does not take exactly one tensor.
  Tensor operator()(const Tensor& x) const {
    MS_CHECK(static_cast<bool>(fn_), TypeError, "AnyCell: ", cell_ ? cell_->cls_name() : "(empty)",
             " is not callable with one tensor");
    return fn_(x);
  }
  /// The cell held; ValueError when empty.
  CellBase& cell() const {
    MS_CHECK(cell_ != nullptr, ValueError, "AnyCell: empty");
    return *cell_;
  }
  /// The pointer held (null when empty).
  const std::shared_ptr<CellBase>& ptr() const { return cell_; }
  /// The cell as a C, or nullptr when it is another type.
  template <class C>
  C* as() const {
    return dynamic_cast<C*>(cell_.get());
  }

 private:
  std::shared_ptr<CellBase> cell_;
  std::function<Tensor(const Tensor&)> fn_;
};

}  // namespace ms
