#include "ms/core/dtype.hpp"

#include <algorithm>

namespace ms {
namespace {

int kind_rank(DType t) {
  if (t == DType::Bool) return 0;
  if (dtype_is_int(t)) return 1;
  if (dtype_is_float(t)) return 2;
  return 3;  // complex
}

int int_bits(DType t) { return t == DType::Int4 ? 8 : static_cast<int>(dtype_itemsize(t)) * 8; }

DType signed_int_of_bits(int bits) {
  switch (bits) {
    case 8: return DType::Int8;
    case 16: return DType::Int16;
    case 32: return DType::Int32;
    default: return DType::Int64;
  }
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == DType::Int4) a = DType::Int8;
  if (b == DType::Int4) b = DType::Int8;
  if (a == b) return a;
  const int ka = kind_rank(a), kb = kind_rank(b);
  if (ka != kb) {
    const DType hi = ka > kb ? a : b, lo = ka > kb ? b : a;
    // complex64 with float64 widens to complex128, as NumPy.
    if (hi == DType::Complex64 && lo == DType::Float64) return DType::Complex128;
    return hi;
  }
  switch (ka) {
    case 1: {
      const bool ua = dtype_is_unsigned_int(a), ub = dtype_is_unsigned_int(b);
      const int ba = int_bits(a), bb = int_bits(b);
      if (ua == ub) return ba >= bb ? a : b;
      const DType u = ua ? a : b, s = ua ? b : a;
      const int bu = int_bits(u), bs = int_bits(s);
      if (bs > bu) return s;
      return signed_int_of_bits(std::min(64, bu * 2));
    }
    case 2:
      if ((a == DType::Float16 && b == DType::BFloat16) ||
          (a == DType::BFloat16 && b == DType::Float16))
        return DType::Float32;
      return dtype_itemsize(a) >= dtype_itemsize(b) ? a : b;
    case 3: return DType::Complex128;  // complex64 vs complex128
    default: return a;
  }
}

DType promote_with_scalar(DType t, ScalarKind k) {
  const int kt = kind_rank(t), ks = static_cast<int>(k);
  if (ks <= kt) return t == DType::Int4 ? DType::Int8 : t;
  switch (k) {
    case ScalarKind::Int: return DType::Int64;
    case ScalarKind::Float: return DType::Float32;
    case ScalarKind::Complex: return t == DType::Float64 ? DType::Complex128 : DType::Complex64;
    default: return t;
  }
}

}  // namespace ms
