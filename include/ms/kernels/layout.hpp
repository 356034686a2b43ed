// ms/kernels/layout.hpp — copy kernels of the shape and indexing ops.
//
// Stage: kernels (called by src/ops/layout.cpp). These kernels move bytes;
// they never convert dtypes (the op converts inputs first) and never raise:
// the op validates shapes, dtypes and index values before calling them, so
// that no exception can cross the OpenMP region of `parallel_for`. Outputs
// are dense (row-major, contiguous) tensors allocated by the op; inputs may
// be strided unless a kernel says otherwise. Int4 tensors are not accepted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ms/core/tensor.hpp"

namespace ms::kernels {

/// Row-wise concatenation of dense blocks: output row `r` (of `rows`) is the
/// bytes `srcs[i] + r * block_bytes[i]` (length `block_bytes[i]`) for each i
/// in order. Concat along an axis is this with rows = prod(shape[:axis]).
/// Parallel over the output bytes; any block may be empty.
void concat_rows(std::span<const std::byte* const> srcs, std::span<const std::int64_t> block_bytes,
                 std::byte* dst, std::int64_t rows);

/// The first row-major position of the dense Int32/Int64 tensor `index` whose
/// value is < 0 or >= `limit`, or -1 when every value is in [0, limit).
/// Deterministic (the smallest such position for any thread count).
std::int64_t index_find_out_of_range(const Tensor& index, std::int64_t limit);

/// The largest value of a dense, non-empty Int32/Int64 tensor.
std::int64_t index_max(const Tensor& index);

/// torch.gather: out[c] = x[c with c[axis] replaced by index[c]]. `index` is
/// dense Int32/Int64 with x's rank and values in [0, x.dim(axis)); `out` is
/// dense with index's shape and x's dtype; x may be strided. Rank 0 allowed.
void gather(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& out);

/// torch.scatter into `out` (dense): out[c with c[axis] replaced by index[c]]
/// = src[c] for every coordinate c of index, in row-major order. `index` is
/// dense Int32/Int64 with out's rank and values in [0, out.dim(axis)); `src`
/// is dense with index's shape and out's dtype. Returns -1, or the row-major
/// position in index of the first element whose target an earlier element
/// already wrote (out then holds a partial result). Rank 0 allowed.
std::int64_t scatter(const Tensor& out, std::int64_t axis, const Tensor& index, const Tensor& src);

/// out = x with axis `axis` replaced by x[..., index[k], ...] for each k.
/// `index` is dense 1-D Int32/Int64 with values in [0, x.dim(axis)); `out`
/// is dense; x may be strided (a copy is made when its inner axes are not dense).
void index_select(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& out);

/// out[..., c] = (c == indices[...]) ? 1 : 0 in out's dtype. `indices` is
/// dense Int32/Int64 with values in [0, C); out is dense, shape indices + [C].
void one_hot(const Tensor& indices, const Tensor& out);

/// Running sums of dense `x` along `axis` into dense `out` (x's shape and
/// dtype): out[.., i, ..] = sum of x[.., j, ..] for j <= i (j < i when
/// `exclusive`; j >= i, or j > i, when `reverse`). Floating dtypes sum in
/// double, integers in 64 bits with wrap-around; each sum is converted to the dtype.
/// Lines are independent, so the result does not depend on the thread count.
/// Bool, complex and Int4 are not supported (the op checks).
void cumsum(const Tensor& x, std::int64_t axis, bool exclusive, bool reverse, const Tensor& out);

/// The band of the matrices in x's last two axes: for row i and column j of
/// each x[..., :, :], out keeps x where j - i >= diagonal (`upper`: triu) or
/// j - i <= diagonal (lower: tril), else writes 0. x has rank >= 2 and may be
/// strided; out is dense with x's shape and dtype. Any diagonal (beyond the
/// matrix: all kept or all zeroed). Rows are independent: the result does not
/// depend on the thread count.
void triangle(const Tensor& x, std::int64_t diagonal, bool upper, const Tensor& out);

/// out = x where mask is false, else the one element of `fill` (out's dtype).
/// mask is Bool with x's shape (a broadcast, stride-0 view is fine); x and
/// mask may be strided; out is dense with x's shape and dtype.
void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& fill, const Tensor& out);

/// How `pad` fills positions outside the input.
enum class PadMode : std::uint8_t { Constant, Reflect, Replicate };

/// out[c] = x[map(c)] where, per axis d, the source coordinate is c - before[d]
/// when inside [0, x.dim(d)), else (Constant) `fill`, (Reflect) the mirror
/// image without repeating the edge, (Replicate) the nearest edge. `before`
/// has one entry per axis (negative crops); out's shape is already the padded
/// one and validated (Reflect: pads < size; Replicate: size > 0 where padded).
/// `fill` is a one-element tensor of out's dtype; x may be strided.
void pad(const Tensor& x, std::span<const std::int64_t> before, PadMode mode, const Tensor& fill,
         const Tensor& out);

/// out = x converted to out's dtype (as Tensor::to), in parallel; a strided x is first
/// gathered densely (a temporary) unless the dtypes match.
void cast(const Tensor& x, const Tensor& out);

}  // namespace ms::kernels
