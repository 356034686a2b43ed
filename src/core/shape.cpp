#include "ms/core/shape.hpp"

#include <algorithm>
#include <limits>
#include <sstream>

namespace ms {

std::string Shape::to_string() const {
  std::string s = "[";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << s.to_string(); }

std::int64_t Shape::at(std::int64_t axis) const {
  return dims_[static_cast<std::size_t>(axis_normalize(axis, rank(), "Shape::at"))];
}

std::int64_t shape_numel(const Shape& s, std::string_view what) {
  std::int64_t nonzero_product = 1;
  bool has_zero = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const std::int64_t d = s[i];
    MS_CHECK(d >= 0, ValueError, what, ": shape ", s, " has a negative size ", d, " at axis ", i,
             " (sizes must be >= 0)");
    if (d == 0) {
      has_zero = true;
      continue;
    }
    // (A checked multiply, not a division: every tensor made counts its elements.)
    const bool overflow = __builtin_mul_overflow(nonzero_product, d, &nonzero_product);
    MS_CHECK(!overflow, ValueError, what, ": shape ", s,
             " has more than 2^63-1 elements (size overflow at axis ", i, ")");
  }
  return has_zero ? 0 : nonzero_product;
}

std::int64_t shape_nbytes(std::int64_t numel, std::int64_t itemsize, std::string_view what) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (itemsize == 0) return numel / 2 + numel % 2;  // packed int4
  MS_CHECK(numel <= kMax / itemsize, ValueError, what, ": ", numel, " elements of ", itemsize,
           " bytes overflow a 64-bit byte size");
  return numel * itemsize;
}

DimVector shape_contiguous_strides(const Shape& s, std::string_view what) {
  shape_numel(s, what);  // validates sizes and overflow (zeros included)
  DimVector strides(s.size());
  std::int64_t st = 1;
  for (std::size_t i = s.size(); i-- > 0;) {
    strides[i] = st;
    st *= std::max<std::int64_t>(s[i], 1);
  }
  return strides;
}

Shape shape_broadcast(const Shape& a, const Shape& b, std::string_view op) {
  const std::size_t n = std::max(a.size(), b.size());
  std::vector<std::int64_t> out(n);
  for (std::size_t i = n; i-- > 0;) {  // from the right, as broadcasting aligns
    const std::int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      detail::raise<ShapeError>(op, ": shapes do not broadcast\n  lhs: ", a, "\n  rhs: ", b,
                                "\n  axis ",
                                static_cast<std::int64_t>(i) - static_cast<std::int64_t>(n), ": ",
                                da, " vs ", db, " (neither is 1)");
    }
  }
  return Shape(std::move(out));
}

std::int64_t axis_normalize(std::int64_t axis, std::int64_t rank, std::string_view op) {
  const std::int64_t lo = rank == 0 ? -1 : -rank;
  const std::int64_t hi = rank == 0 ? 0 : rank - 1;
  MS_CHECK(axis >= lo && axis <= hi, IndexError, op, ": axis ", axis,
           " is out of range for a tensor of rank ", rank, " (expected ", lo, " <= axis <= ", hi,
           ")");
  return axis < 0 ? axis + std::max<std::int64_t>(rank, 1) : axis;
}

std::vector<std::int64_t> axes_normalize(std::span<const std::int64_t> axes, std::int64_t rank,
                                         std::string_view op) {
  std::vector<std::int64_t> out;
  if (axes.empty()) {
    for (std::int64_t i = 0; i < rank; ++i) out.push_back(i);
    return out;
  }
  for (std::int64_t a : axes) {
    const std::int64_t ax = axis_normalize(a, rank, op);
    if (rank > 0) out.push_back(ax);  // a rank-0 tensor has no axis to reduce
  }
  std::sort(out.begin(), out.end());
  for (std::size_t i = 1; i < out.size(); ++i)
    MS_CHECK(out[i] != out[i - 1], ValueError, op, ": axis ", out[i],
             " appears more than once in the axes list");
  return out;
}

}  // namespace ms
