// ms/ops/detail/linalg_impl.hpp — how matmul hands a matrix to the GEMM
// kernels, shared with the jit's fused products so they read their operands
// exactly as matmul does.
//
// Stage: ops, internal to libms (src/ops/linalg.cpp defines it).
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/ops/detail/linalg_impl.hpp is internal to libms; include <ms/ops/linalg.hpp> instead"
#endif

#include <cstdint>

#include "ms/core/tensor.hpp"

namespace ms::ops::detail {

/// A 2-D operand as matmul gives it to kernels::gemm: `t` itself when its
/// strides are row-major (`trans` false) or column-major (`trans` true, a
/// transposed view) with leading dimension `ld`, else a dense copy.
struct GemmOperand {
  Tensor t;
  bool trans = false;
  std::int64_t ld = 1;
};

/// `m` (2-D) as matmul reads it.
GemmOperand gemm_operand(const Tensor& m);

}  // namespace ms::ops::detail
