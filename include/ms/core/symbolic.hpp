// ms/core/symbolic.hpp — dynamic dims: specs (Dim, TensorSpec) and symbolic expressions.
//
// Stage: core. A `Dim` in a spec is a size, `kAnyDim` (-1: any size, a fresh
// symbol) or a named symbol (`ms::Dim("batch")`: every dim with that name, in
// any argument, has the same size). A `TensorSpec` is a dtype and a list of
// dims, or any rank (`TensorSpec::any_rank(dtype)`, MindSpore's `(-2,)`).
//
//   ms::Dim batch("batch");
//   auto f = ms::jit(fn, {.input_signature = {ms::TensorSpec({batch, 784}, ms::float32),
//                                             ms::TensorSpec({batch}, ms::int64)}});
//
// A `SymExpr` is a dim (or a number derived from dims, such as 1/N of a mean)
// as a function of the symbols: affine `c + a0*s0 + a1*s1`, a product
// `c*s0*s1`, or its inverse `c/(s0*s1)`. These three cover what shape rules
// compute from sizes (flatten multiplies, concat adds, a mean divides).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ms/core/dtype.hpp"
#include "ms/core/shape.hpp"

namespace ms {

/// No upper bound on a dim's size (the default `max` of a ranged Dim).
inline constexpr std::int64_t kNoMaxDim = INT64_MAX;

/// One dim of a spec: a size >= 0, kAnyDim (-1), or a named symbol. A
/// symbolic dim (named or not) may constrain the sizes it takes (as
/// MindSpore's `Symbol(min, max, divisor)` and torch.export's `Dim(name,
/// min, max)`): a call whose size is below `min`, above `max` or not a
/// multiple of `divisor` is an ms::ShapeError naming the API, the argument,
/// the axis, the constraint and the size.
///   ms::Dim batch("batch", 8, 64, 8);    // 8, 16, ..., 64
///   ms::Dim len(1, 512);                  // unnamed: any size in [1, 512]
class Dim {
 public:
  /// A fixed size (>= 0), kAnyDim (-1, any size) or kAnyRank (-2, only alone in a spec).
  Dim(std::int64_t size = kAnyDim);  // NOLINT: implicit on purpose, `{-1, 784}` reads as dims
  /// As Dim(std::int64_t), so that `{-1, 784}` reads as dims.
  Dim(int size) : Dim(static_cast<std::int64_t>(size)) {}  // NOLINT
  /// A named symbol: dims with the same name have the same size.
  explicit Dim(std::string name);
  /// As Dim(std::string).
  explicit Dim(const char* name) : Dim(std::string(name)) {}
  /// A named symbol whose sizes lie in [min, max] and are multiples of
  /// `divisor`. ValueError unless 0 <= min <= max and divisor >= 1.
  Dim(std::string name, std::int64_t min, std::int64_t max = kNoMaxDim, std::int64_t divisor = 1);
  /// As Dim(std::string, min, max, divisor).
  Dim(const char* name, std::int64_t min, std::int64_t max = kNoMaxDim, std::int64_t divisor = 1)
      : Dim(std::string(name), min, max, divisor) {}
  /// An unnamed symbolic dim (any size, as -1) within [min, max], a multiple of `divisor`.
  explicit Dim(std::int64_t min, std::int64_t max, std::int64_t divisor = 1);

  /// A fixed size.
  bool is_static() const { return name_.empty() && size_ >= 0; }
  /// Any size (-1).
  bool is_any() const { return name_.empty() && size_ == kAnyDim; }
  /// Any rank (-2).
  bool is_any_rank() const { return name_.empty() && size_ == kAnyRank; }
  /// A named symbol.
  bool is_named() const { return !name_.empty(); }
  /// The size (>= 0), kAnyDim or kAnyRank; kAnyDim for a named symbol.
  std::int64_t size() const { return size_; }
  /// The symbol's name (empty unless is_named()).
  const std::string& name() const { return name_; }
  /// The smallest size a symbolic dim takes (0 when unconstrained).
  std::int64_t min() const { return min_; }
  /// The largest size a symbolic dim takes (kNoMaxDim when unbounded).
  std::int64_t max() const { return max_; }
  /// The sizes of a symbolic dim are multiples of this (1 when unconstrained).
  std::int64_t divisor() const { return divisor_; }
  /// Whether min, max or divisor restricts the sizes.
  bool constrained() const { return min_ != 0 || max_ != kNoMaxDim || divisor_ != 1; }
  /// Empty when `size` satisfies the constraints, else the one it breaks
  /// ("min = 8", "max = 64", "divisor = 8": the first of these that fails).
  std::string violated_by(std::int64_t size) const;
  /// "784", "-1" or "batch"; constraints follow in braces: "batch{min=8, max=64, divisor=8}".
  std::string to_string() const;
  friend bool operator==(const Dim&, const Dim&) = default;

 private:
  std::int64_t size_ = kAnyDim;
  std::string name_;
  std::int64_t min_ = 0, max_ = kNoMaxDim, divisor_ = 1;
};

/// The spec of a tensor argument: dtype and dims (`-1`, named symbols) or any rank.
struct TensorSpec {
  /// The dims (empty when any_rank).
  std::vector<Dim> shape;
  /// The dtype.
  DType dtype = float32;
  bool any_rank = false;  ///< MindSpore's `(-2,)`: any rank, any sizes

  TensorSpec() = default;
  /// `TensorSpec({-1, 784}, ms::float32)`; `{-2}` alone means any rank. ValueError
  /// for a size below -2, or -2 next to other dims.
  TensorSpec(std::vector<Dim> dims, DType dt);
  /// `{-2}` of dtype `dt`: any rank, any sizes.
  static TensorSpec any_rank_of(DType dt);
  /// "f32[-1,784]", "f32[batch,784]", "f32[-2]".
  std::string to_string() const;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

/// Prints `s.to_string()`.
std::ostream& operator<<(std::ostream& os, const TensorSpec& s);

/// A number as a function of the symbols s0, s1, ...
class SymExpr {
 public:
  /// How the terms combine with the constant.
  enum class Form : std::uint8_t {
    Affine,   ///< c + sum(a_i * s_i)
    Product,  ///< c * prod(s_i)
    Inverse,  ///< c / prod(s_i)
  };
  SymExpr() = default;
  /// The number `c`.
  static SymExpr constant(double c);
  /// The symbol `s` itself.
  static SymExpr symbol(int s);
  /// c + sum(a_i * s_i) over `terms` (symbol i, coefficient a_i).
  static SymExpr affine(double c, std::vector<std::pair<int, double>> terms);
  /// c * prod(s_i) over `symbols`.
  static SymExpr product(double c, std::vector<int> symbols);
  /// c / prod(s_i) over `symbols`.
  static SymExpr inverse(double c, std::vector<int> symbols);

  /// How the expression combines its terms.
  Form form() const { return form_; }
  /// True when it names no symbol.
  bool is_constant() const { return terms_.empty(); }
  /// The value for the symbol values `s` (indexed by symbol id).
  double eval(std::span<const std::int64_t> s) const;
  /// "s0", "784*s0", "s0+s1", "2*s0-1", "1/s0" with `names[i]` for symbol i.
  std::string to_string(std::span<const std::string> names) const;
  friend bool operator==(const SymExpr&, const SymExpr&) = default;

 private:
  Form form_ = Form::Affine;
  double c_ = 0;
  std::vector<std::pair<int, double>>
      terms_;  ///< (symbol, coefficient); coefficient 1 unless affine
};

}  // namespace ms
