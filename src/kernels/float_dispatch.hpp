// src/kernels/float_dispatch.hpp — private to src/kernels: the compute and
// storage types of a floating dtype, for kernels that compute 16-bit inputs
// in float32 (attention.cpp, norm.cpp).
#pragma once

#include "ms/core/dtype.hpp"
#include "ms/core/half.hpp"

namespace ms::kernels::detail {

/// Calls f with a null T* and S*: T the compute type (double for float64,
/// else float), S the storage type of dtype dt (float64, float32, bfloat16,
/// else float16).
template <class F>
void dispatch_float(DType dt, F&& f) {
  if (dt == float64)
    f(static_cast<double*>(nullptr), static_cast<double*>(nullptr));
  else if (dt == float32)
    f(static_cast<float*>(nullptr), static_cast<float*>(nullptr));
  else if (dt == bfloat16)
    f(static_cast<float*>(nullptr), static_cast<bfloat16_t*>(nullptr));
  else
    f(static_cast<float*>(nullptr), static_cast<float16_t*>(nullptr));
}

}  // namespace ms::kernels::detail
