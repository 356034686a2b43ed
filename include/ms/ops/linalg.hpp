// ms/ops/linalg.hpp — linear algebra ops (group `linalg`): matmul.
//
// Stage: ops. One entry per op (ms/ops/entry.hpp), defined in src/ops/linalg.cpp
// with its gradient and samples, evaluated by the GEMM kernel of ms/kernels/gemm.hpp.
//
//   ms::Tensor y = ms::matmul(x, w);   // [64, 784] x [784, 512] -> [64, 512]
#pragma once

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms::ops {

/// Matrix product with NumPy / PyTorch `matmul` semantics:
/// - 1-D x 1-D: the dot product, a rank-0 tensor;
/// - 2-D x 2-D: the matrix product [m, k] x [k, n] -> [m, n];
/// - a 1-D lhs [k] acts as [1, k] and a 1-D rhs [k] as [k, 1]; the added dim
///   is removed from the result;
/// - N-D: batched products over the leading dims, which broadcast
///   ([2, 1, m, k] x [3, k, n] -> [2, 3, m, n]).
///
/// Both inputs must have the same dtype: float32, float64 (ms::kernels::gemm_backend()),
/// int8, int16, uint8 (computed in int32 and wrapped on store), int32, int64
/// (Eigen's GEMM), float16, bfloat16 (computed in float32, rounded on store).
/// Errors: TypeError for mixed or other dtypes; ShapeError for rank-0 inputs,
/// inner dims that differ and batch dims that do not broadcast.
/// Example: `ms::matmul(ms::ones({2, 3}), ms::ones({3, 4}))` is a [2, 4] tensor of 3s.
struct Matmul {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "matmul";
  static constexpr std::string_view ir_name = "MatMul";
  static constexpr OpKind kind = OpKind::Linalg;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  using Attrs = NoAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

/// Matrix product with NumPy / PyTorch `matmul` semantics (ms::ops::Matmul).
/// Example: `ms::matmul(ms::ones({2, 3}), ms::ones({3, 4}))` is a [2, 4] tensor of 3s.
inline Tensor matmul(const Tensor& a, const Tensor& b) {
  return ops::invoke1<ops::Matmul>({a, b}, {});
}

}  // namespace ms
