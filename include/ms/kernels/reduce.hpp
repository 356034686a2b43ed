// ms/kernels/reduce.hpp — CPU kernels of the reductions and of softmax (private to ms's ops).
//
// Stage: kernels. Called by src/ops/reduce.cpp after the op's `infer` has validated
// everything; these functions do no user-facing checks and never throw inside a parallel
// region. Layout: the input may have any strides; the kernels coalesce its axes in memory
// order and run one of two loops — "row" (the reduced elements of each output are
// contiguous: 16 interleaved accumulators) or "column" (the kept innermost axis is
// contiguous: vectorized across outputs). Any other layout is first copied to
// [kept..., reduced...] order. The reduced range is cut into chunks that depend only on
// the shapes; partial results are combined in chunk order, so the result is the same for
// every thread count.
#pragma once

#include <cstdint>
#include <span>

#include "ms/core/tensor.hpp"

namespace ms::kernels {

/// What a reduction kernel computes, and the dtypes it takes and returns.
enum class ReduceKind : std::uint8_t {
  Sum,        ///< any real dtype -> float: same dtype; bool/integers: int64
  Prod,       ///< as Sum
  Max,        ///< any real dtype, kept; NaN-propagating; needs a non-empty reduction
  Min,        ///< as Max
  All,        ///< any real dtype -> bool
  Any,        ///< any real dtype -> bool
  Mean,       ///< float32/float64, same dtype out
  Var,        ///< float32/float64, same dtype out (uses `ddof`)
  Std,        ///< as Var
  LogSumExp,  ///< float32/float64, same dtype out
  ArgMax,     ///< any real dtype -> int64 (one axis or all axes); non-empty reduction
  ArgMin,     ///< as ArgMax
};

/// Reduces `x` over `axes` (normalized: sorted, unique, in [0, rank)) into `out`, a dense
/// tensor holding x's shape without the reduced axes (or with them as 1: same memory) and
/// the dtype given above. `x` is any real dtype but float16/bfloat16/int4 (ops convert
/// those first). For ArgMax/ArgMin over several axes the index is into the row-major
/// flattening of those axes.
void reduce(ReduceKind kind, const Tensor& x, std::span<const std::int64_t> axes, const Tensor& out,
            std::int64_t ddof = 0);

/// Softmax (log_softmax when `log`) of a float32/float64 `x` along `axis` (normalized,
/// 0 for a rank-0 tensor) into the dense `out` of x's shape and dtype.
void softmax(const Tensor& x, std::int64_t axis, const Tensor& out, bool log);

/// out[r] = -log_softmax(x)[r, labels[r]] for a dense float32/float64 `x` [N, C] (C > 0)
/// and labels in [0, C) (checked by the op), into the dense `out` [N] of x's dtype: the
/// row's max, then its exps summed by SIMD packets in an order fixed by C (bitwise the same
/// for any thread count and address).
void softmax_cross_entropy(const Tensor& x, const std::int64_t* labels, const Tensor& out);

}  // namespace ms::kernels
