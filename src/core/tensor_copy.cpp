// Strided copy with conversion, int4 packing, and MindSpore-style printing.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <sstream>

#include "ms/core/tensor.hpp"

namespace ms {
namespace detail {
namespace {

// Calls fn(src_offset, count, src_stride) for every innermost row of a
// strided view, in row-major order.
template <class F>
void for_each_row(const Shape& shape, std::span<const std::int64_t> strides, std::int64_t offset,
                  F&& fn) {
  const std::size_t r = shape.size();
  if (r == 0) {
    fn(offset, 1, 1);
    return;
  }
  for (std::size_t i = 0; i < r; ++i)
    if (shape[i] == 0) return;
  const std::int64_t inner = shape[r - 1], inner_stride = strides[r - 1];
  std::vector<std::int64_t> idx(r - 1, 0);
  std::int64_t off = offset;
  while (true) {
    fn(off, inner, inner_stride);
    std::size_t d = r - 1;
    while (d > 0) {
      --d;
      if (++idx[d] < shape[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (shape[d] - 1);
      idx[d] = 0;
      if (d == 0) return;
    }
    if (r == 1) return;
  }
}

// Calls fn(TypeTag<E>{}) with an unsigned (or two-word) type E of `size` bytes.
template <class F>
void with_elem_size(std::int64_t size, F&& fn) {
  struct Word16 {
    std::uint64_t lo, hi;
  };
  switch (size) {
    case 1: return fn(TypeTag<std::uint8_t>{});
    case 2: return fn(TypeTag<std::uint16_t>{});
    case 4: return fn(TypeTag<std::uint32_t>{});
    case 8: return fn(TypeTag<std::uint64_t>{});
    default: MS_ASSERT(size == 16); return fn(TypeTag<Word16>{});
  }
}

Tensor unpack_int4(const Tensor& src) {
  // Int4 tensors are always dense (views that would split bytes are refused).
  Tensor out = empty(src.shape(), int8);
  const auto* p = reinterpret_cast<const std::uint8_t*>(src.storage()->data());
  std::int8_t* q = out.data<std::int8_t>();
  for (std::int64_t i = 0; i < src.numel(); ++i) {
    const std::int64_t e = src.offset() + i;
    const std::uint8_t nib = (p[e / 2] >> ((e % 2) * 4)) & 0xF;
    q[i] = static_cast<std::int8_t>(nib >= 8 ? nib - 16 : nib);  // sign-extend
  }
  return out;
}

// Gathers the elements of a strided view densely into `out`, moving them as raw
// elements of their size (one instantiation per element size, not per dtype).
void gather_dense(const Tensor& src, void* out) {
  with_elem_size(src.itemsize(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* base = reinterpret_cast<const E*>(src.storage()->data());
    E* q = static_cast<E*>(out);
    for_each_row(src.shape(), src.strides(), src.offset(),
                 [&](std::int64_t off, std::int64_t n, std::int64_t st) {
                   const E* p = base + off;
                   for (std::int64_t i = 0; i < n; ++i) q[i] = p[i * st];
                   q += n;
                 });
  });
}

// Scatters the dense elements `in` into the strided view `dst` (same element type).
void scatter_dense(const void* in, const Tensor& dst) {
  with_elem_size(dst.itemsize(), [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* p = static_cast<const E*>(in);
    E* base = reinterpret_cast<E*>(dst.storage()->data());
    for_each_row(dst.shape(), dst.strides(), dst.offset(),
                 [&](std::int64_t off, std::int64_t n, std::int64_t st) {
                   for (std::int64_t i = 0; i < n; ++i) base[off + i * st] = p[i];
                   p += n;
                 });
  });
}

}  // namespace

void copy_convert(const Tensor& src, const Tensor& dst) {
  MS_CHECK(dst.dtype() != DType::Int4 || dst.is_contiguous(), TypeError,
           "copy_: cannot write into a strided Int4 view");
  MS_CHECK(src.shape() == dst.shape(), ShapeError, "copy: source shape ", src.shape(),
           " differs from destination shape ", dst.shape());
  if (src.numel() == 0) return;
  if (!dst.is_contiguous()) {
    // Convert densely first, then scatter into the strided destination.
    const Tensor dense = to_dense(src, dst.dtype());
    scatter_dense(dense.raw_data(), dst);
    return;
  }
  if (src.dtype() == DType::Int4) {
    copy_convert(unpack_int4(src), dst);
    return;
  }
  if (dst.dtype() == DType::Int4) {
    const Tensor i8 = to_dense(src, int8);
    const std::int8_t* p = i8.data<std::int8_t>();
    auto* q = reinterpret_cast<std::uint8_t*>(dst.storage()->data());
    for (std::int64_t i = 0; i < src.numel(); ++i) {
      const std::int64_t e = dst.offset() + i;
      const auto nib = static_cast<std::uint8_t>(p[i] & 0xF);
      const int sh = static_cast<int>(e % 2) * 4;
      q[e / 2] = static_cast<std::uint8_t>((q[e / 2] & ~(0xF << sh)) | (nib << sh));
    }
    return;
  }
  if (src.dtype() == dst.dtype()) {
    if (src.is_contiguous())
      std::memcpy(dst.raw_data(), src.raw_data(), static_cast<std::size_t>(src.nbytes()));
    else
      gather_dense(src, dst.raw_data());
    return;
  }
  // A strided source is first gathered densely (per element size), so that the
  // 15 x 15 dtype-pair conversion loops below are only the dense ones.
  Tensor dense = src;
  if (!src.is_contiguous()) {
    dense = empty(src.shape(), src.dtype());
    gather_dense(src, dense.raw_data());
  }
  const std::int64_t n = src.numel();
  dtype_dispatch(src.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    dtype_dispatch(dst.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* p = dense.data<S>();
      D* out = dst.data<D>();
      for (std::int64_t i = 0; i < n; ++i) out[i] = scalar_cast<D>(p[i]);
    });
  });
}

}  // namespace detail

// ---------------------------------------------------------------- printing

namespace {

constexpr std::int64_t kSummarizeAbove = 1000;
constexpr std::int64_t kEdgeItems = 3;

std::string format_value(const Tensor& flat, std::int64_t i, int precision, bool sci) {
  std::ostringstream os;
  switch (flat.dtype()) {
    case DType::Bool: return flat.data<bool>()[i] ? "True" : "False";
    case DType::Float64: {
      const double v = flat.data<double>()[i];
      if (std::isnan(v)) return "nan";
      if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
      if (sci)
        os << std::scientific << std::setprecision(precision) << v;
      else
        os << std::fixed << std::setprecision(precision) << v;
      return os.str();
    }
    case DType::Complex128: {
      const auto v = flat.data<complex128_t>()[i];
      os << std::setprecision(precision) << v.real() << (v.imag() < 0 ? "-" : "+")
         << std::abs(v.imag()) << "j";
      return os.str();
    }
    default: os << flat.data<std::int64_t>()[i]; return os.str();
  }
}

void print_rec(std::ostream& os, const Tensor& flat, const Shape& shape, std::size_t dim,
               std::int64_t base, bool summarize, int width, int precision, bool sci,
               std::size_t indent) {
  if (shape.size() == 0) {
    os << format_value(flat, 0, precision, sci);
    return;
  }
  const std::int64_t n = shape[dim];
  std::int64_t stride = 1;
  for (std::size_t k = dim + 1; k < shape.size(); ++k) stride *= shape[k];
  os << "[";
  for (std::int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << (dim + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - kEdgeItems - 1;
      continue;
    }
    if (dim + 1 == shape.size()) {
      os << std::setw(width) << format_value(flat, base + i, precision, sci);
    } else {
      print_rec(os, flat, shape, dim + 1, base + i * stride, summarize, width, precision, sci,
                indent + 1);
    }
    if (i + 1 < n) {
      if (dim + 1 == shape.size())
        os << ", ";
      else
        os << "," << std::string(shape.size() - dim - 1, '\n') << std::string(indent + 1, ' ');
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::to_string() const {
  if (!defined()) return "Tensor(undefined)";
  if (sym_ >= 0)
    return detail::str_cat("Tensor(shape=", shape_, ", dtype=", dtype_, ", symbolic %", sym_, ")");
  std::ostringstream os;
  os << "Tensor(shape=" << shape_ << ", dtype=" << dtype_ << ", value=";
  const DType pd = dtype_ == DType::Bool      ? bool_
                   : dtype_is_complex(dtype_) ? complex128
                   : dtype_is_float(dtype_)   ? float64
                                              : int64;
  const Tensor flat = detail::to_dense(*this, pd);
  const bool summarize = numel_ > kSummarizeAbove;
  // Float formatting: fixed with 4 decimals, or scientific when magnitudes
  // span many orders (as NumPy and MindSpore do).
  bool sci = false;
  int precision = 4;
  int width = 0;
  if (pd == float64) {
    double mx = 0, mn = INFINITY;
    for (std::int64_t i = 0; i < numel_; ++i) {
      const double v = std::abs(flat.data<double>()[i]);
      if (!std::isfinite(v) || v == 0) continue;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    sci = mx >= 1e8 || (mn < 1e-4 && mx > 0) || (mx > 0 && mx / mn > 1e3);
  }
  for (std::int64_t i = 0; i < std::min<std::int64_t>(numel_, 4096); ++i)
    width = std::max(width, static_cast<int>(format_value(flat, i, precision, sci).size()));
  if (rank() > 0) os << "\n";
  print_rec(os, flat, shape_, 0, 0, summarize, width, precision, sci, 0);
  os << ")";
  return os.str();
}

}  // namespace ms
