// ms/core/shape.hpp — shapes: dims, broadcasting, checked element counts.
//
// Stage: core (below the Tensor of core/tensor.hpp, which holds a Shape).
// A dim is a size >= 0, or `kAnyDim` (-1, unknown size) in a shape spec;
// `Shape{kAnyRank}` (-2) means unknown rank. Concrete tensors only hold sizes
// >= 0; symbolic dims (named symbols) extend this in the dynamic-shape stage.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/dim_vector.hpp"

#include "ms/core/error.hpp"

namespace ms {

/// A dim of unknown size in a shape spec.
inline constexpr std::int64_t kAnyDim = -1;
/// The single dim of a shape spec of unknown rank: `Shape{kAnyRank}`.
inline constexpr std::int64_t kAnyRank = -2;
/// Whether a dim of a shape spec is a known size (not kAnyDim or kAnyRank).
constexpr bool is_known_dim(std::int64_t d) noexcept { return d >= 0; }

/// An ordered list of dims. `Shape{2, 3}` is a 2x3 matrix; `Shape{}` a scalar.
class Shape {
 public:
  Shape() = default;
  /// `Shape{2, 3}`: the dims in order (`{}`: a scalar).
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  /// Copies the dims.
  explicit Shape(const std::vector<std::int64_t>& dims) : dims_(std::span(dims)) {}
  /// Copies the dims.
  explicit Shape(std::span<const std::int64_t> dims) : dims_(dims) {}
  /// Takes the dims.
  explicit Shape(DimVector dims) : dims_(std::move(dims)) {}

  /// The number of dims (as rank(), unsigned).
  std::size_t size() const { return dims_.size(); }
  /// The number of dims.
  std::int64_t rank() const { return static_cast<std::int64_t>(dims_.size()); }
  /// True for the shape of a scalar.
  bool empty() const { return dims_.empty(); }
  /// Dim `i` (unchecked; at() takes negative axes and checks).
  std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  /// Dim `i`, writable (unchecked).
  std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  /// Dim at a possibly negative axis (-1 is the last); IndexError when out of range.
  std::int64_t at(std::int64_t axis) const;
  /// Iterates over the dims.
  auto begin() const { return dims_.begin(); }
  /// The end of the dims.
  auto end() const { return dims_.end(); }
  /// The dims (a view valid while the shape lives and is not changed).
  std::span<const std::int64_t> dims() const { return dims_; }
  /// The dims, copied into a vector.
  std::vector<std::int64_t> to_vector() const { return {dims_.begin(), dims_.end()}; }
  /// Appends the dim `d`.
  void push_back(std::int64_t d) { dims_.push_back(d); }

  /// True when every dim is a known size (no kAnyDim / kAnyRank).
  bool is_static() const {
    for (const std::int64_t d : dims_)
      if (d < 0) return false;
    return true;
  }
  /// True for the unknown-rank spec `[-2]`.
  bool is_any_rank() const { return dims_.size() == 1 && dims_[0] == kAnyRank; }

  friend bool operator==(const Shape&, const Shape&) = default;

  /// "[2, 3]"; unknown dims print as -1, an unknown rank as [-2].
  std::string to_string() const;

 private:
  DimVector dims_;
};

/// Prints `s.to_string()`.
std::ostream& operator<<(std::ostream& os, const Shape& s);

/// Number of elements, checked: a negative dim is a ValueError, and so is a
/// product over INT64_MAX — also when another dim is 0 (a naive product would
/// hide that [0, 2^62, 2^62] cannot have valid strides). `what` names the API.
std::int64_t shape_numel(const Shape& s, std::string_view what = "shape");

/// Bytes for `numel` elements of `itemsize` bytes (int4: itemsize 0 means
/// half a byte, rounded up), checked against overflow.
std::int64_t shape_nbytes(std::int64_t numel, std::int64_t itemsize, std::string_view what);

/// Row-major (C order) strides in elements; shape_numel's checks apply.
DimVector shape_contiguous_strides(const Shape& s, std::string_view what = "shape");

/// NumPy broadcasting of two shapes. On failure a ShapeError such as
/// "add: shapes do not broadcast\n  lhs: [2, 3]\n  rhs: [4]\n  axis -1: 3 vs 4 (neither is 1)".
Shape shape_broadcast(const Shape& a, const Shape& b, std::string_view op);

/// Maps a possibly negative axis into [0, rank); IndexError naming `op` otherwise.
std::int64_t axis_normalize(std::int64_t axis, std::int64_t rank, std::string_view op);

/// Normalizes a list of axes (empty means all), sorted, rejecting duplicates.
std::vector<std::int64_t> axes_normalize(std::span<const std::int64_t> axes, std::int64_t rank,
                                         std::string_view op);

}  // namespace ms
