// Linear algebra ops: matmul. Shapes and dtypes are checked in `infer`; `eval`
// maps each operand's last two dims onto a BLAS layout (row-major, or
// transposed, with a leading dimension) so that transposed and row-sliced
// views reach GEMM without a copy, and walks the broadcast batch dims through
// per-entry offsets (a broadcast operand is never materialized).
#include "ms/ops/linalg.hpp"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ms/expr/expr.hpp"
#include "ms/kernels/gemm.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/detail/linalg_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {

using ops::TensorType;

bool matmul_dtype_ok(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64:
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8: return true;
    default: return false;
  }
}

// float16 computes in float32 (converted first), small integers in int32
// (wrapping on store, as PyTorch's int8 / uint8 matmul does). bfloat16 is
// multiplied as it is, with float32 sums (matmul_run_bf16), and rounded once.
DType matmul_compute_dtype(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    case DType::Int8:
    case DType::Int16:
    case DType::UInt8: return DType::Int32;
    default: return t;
  }
}

Shape leading(const Shape& s, std::int64_t drop) {
  return Shape(std::vector<std::int64_t>(s.begin(), s.end() - drop));
}

// Broadcast of the batch dims; unknown dims (kAnyDim) stay unknown unless the
// other side fixes them.
Shape matmul_batch(const Shape& a, const Shape& b, const Shape& ba, const Shape& bb) {
  const std::size_t r = std::max(ba.size(), bb.size());
  std::vector<std::int64_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t da = i < r - ba.size() ? 1 : ba[i - (r - ba.size())];
    const std::int64_t db = i < r - bb.size() ? 1 : bb[i - (r - bb.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (!is_known_dim(da) || !is_known_dim(db)) {
      out[i] = is_known_dim(da) ? da : db;
    } else {
      ::ms::detail::raise<ShapeError>(
          "matmul: lhs ", a, " and rhs ", b, ": batch dims ", ba, " and ", bb,
          " do not broadcast (", da, " vs ", db, " at batch axis ",
          static_cast<std::int64_t>(i) - static_cast<std::int64_t>(r), ", neither is 1)");
    }
  }
  return Shape(std::move(out));
}

std::vector<TensorType> matmul_infer(std::span<const TensorType> in) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  MS_CHECK(a.dtype == b.dtype, TypeError, "matmul: lhs dtype ", a.dtype, " and rhs dtype ", b.dtype,
           " differ; cast one of them with .to()");
  MS_CHECK(matmul_dtype_ok(a.dtype), TypeError, "matmul: dtype ", a.dtype,
           " is not supported (float16, bfloat16, float32, float64, int8, int16, int32, int64, "
           "uint8)");
  if (a.shape.is_any_rank() || b.shape.is_any_rank()) return {{a.dtype, Shape{kAnyRank}}};
  MS_CHECK(a.shape.rank() >= 1, ShapeError,
           "matmul: lhs is a rank-0 tensor (a scalar); matmul needs rank >= 1 on both sides "
           "(use mul to scale by a scalar)");
  MS_CHECK(b.shape.rank() >= 1, ShapeError,
           "matmul: rhs is a rank-0 tensor (a scalar); matmul needs rank >= 1 on both sides "
           "(use mul to scale by a scalar)");
  const std::int64_t ra = a.shape.rank(), rb = b.shape.rank();
  const std::int64_t ka = a.shape[static_cast<std::size_t>(ra - 1)];
  const std::int64_t kb = b.shape[static_cast<std::size_t>(rb == 1 ? 0 : rb - 2)];
  MS_CHECK(!is_known_dim(ka) || !is_known_dim(kb) || ka == kb, ShapeError, "matmul: lhs ", a.shape,
           " and rhs ", b.shape, ": inner dims ", ka, " and ", kb, " differ");
  Shape out = matmul_batch(a.shape, b.shape, leading(a.shape, std::min<std::int64_t>(ra, 2)),
                           leading(b.shape, std::min<std::int64_t>(rb, 2)));
  if (ra >= 2) out.push_back(a.shape[static_cast<std::size_t>(ra - 2)]);
  if (rb >= 2) out.push_back(b.shape[static_cast<std::size_t>(rb - 1)]);
  if (out.is_static()) shape_numel(out, "matmul");  // checks the product against int64
  return {{a.dtype, std::move(out)}};
}

// An operand seen as a batch of rows x cols matrices with a BLAS layout.
struct MatOperand {
  Tensor t;  // the input, or a contiguous copy when its matrices are not BLAS-shaped
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> batch_shape, batch_strides;
  bool trans = false;
  std::int64_t ld = 1;
};

// Row-major with a row stride, or (trans) column-major with a column stride;
// strides of size-1 dims do not matter. False when neither fits.
bool blas_layout(MatOperand& op, std::int64_t sr, std::int64_t sc) {
  const std::int64_t r = op.rows, c = op.cols;
  if (r == 0 || c == 0) {  // never read
    op.trans = false;
    op.ld = std::max<std::int64_t>(c, 1);
    return true;
  }
  if (c == 1 || sc == 1) {
    const std::int64_t ld = r == 1 ? c : sr;
    if (ld >= c) {
      op.trans = false;
      op.ld = ld;
      return true;
    }
  }
  if (r == 1 || sr == 1) {
    const std::int64_t ld = c == 1 ? r : sc;
    if (ld >= r) {
      op.trans = true;
      op.ld = ld;
      return true;
    }
  }
  return false;
}

MatOperand make_operand(const Tensor& t, bool lhs) {
  MatOperand op;
  op.t = t;
  for (int attempt = 0;; ++attempt) {
    const Shape& s = op.t.shape();
    const auto& st = op.t.strides();
    const std::size_t r = s.size();
    std::int64_t sr = 0, sc = 0;
    if (r == 1) {  // [k] is [1, k] on the left, [k, 1] on the right
      op.rows = lhs ? 1 : s[0];
      op.cols = lhs ? s[0] : 1;
      (lhs ? sc : sr) = st[0];
      op.batch_shape.clear();
      op.batch_strides.clear();
    } else {
      op.rows = s[r - 2];
      op.cols = s[r - 1];
      sr = st[r - 2];
      sc = st[r - 1];
      op.batch_shape.assign(s.begin(), s.end() - 2);
      op.batch_strides.assign(st.begin(), st.end() - 2);
    }
    if (blas_layout(op, sr, sc)) return op;
    MS_ASSERT(attempt == 0);
    op.t = op.t.contiguous();
  }
}

// Element offset of every batch entry of `op` inside the broadcast batch `shape`.
std::vector<std::int64_t> batch_offsets(const MatOperand& op, const Shape& shape,
                                        std::int64_t batch) {
  const std::size_t r = shape.size();
  const std::size_t skip = r - op.batch_shape.size();
  std::vector<std::int64_t> step(r, 0);  // stride of each output batch dim in this operand
  for (std::size_t i = skip; i < r; ++i)
    if (op.batch_shape[i - skip] != 1) step[i] = op.batch_strides[i - skip];
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batch));
  std::vector<std::int64_t> idx(r, 0);
  std::int64_t off = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    offsets[static_cast<std::size_t>(b)] = off;
    for (std::size_t d = r; d-- > 0;) {  // odometer increment
      off += step[d];
      if (++idx[d] < shape[d]) break;
      off -= step[d] * shape[d];
      idx[d] = 0;
    }
  }
  return offsets;
}

template <class T>
void matmul_run(const MatOperand& a, const MatOperand& b, const Shape& batch_shape,
                std::int64_t batch, Tensor& out) {
  const std::int64_t m = a.rows, k = a.cols, n = b.cols;
  if (out.numel() == 0) return;
  T* c = out.data<T>();
  const std::vector<std::int64_t> ao = batch_offsets(a, batch_shape, batch);
  const std::vector<std::int64_t> bo = batch_offsets(b, batch_shape, batch);
  const T* ap = a.t.data<T>();
  const T* bp = b.t.data<T>();

  // One shared rhs and a lhs whose matrices follow each other: one GEMM over
  // all batch rows ([B, m, k] x [k, n] as [B*m, k] x [k, n]).
  bool fold = batch > 1 && !a.trans;
  for (std::int64_t i = 0; fold && i < batch; ++i) {
    const auto u = static_cast<std::size_t>(i);
    fold = bo[u] == bo[0] && ao[u] == ao[0] + i * m * a.ld;
  }
  if (fold || batch == 1) {
    kernels::gemm<T>(a.trans, b.trans, fold ? batch * m : m, n, k, T(1), ap + ao[0], a.ld,
                     bp + bo[0], b.ld, T(0), c, n);
    return;
  }
  std::vector<std::int64_t> co(static_cast<std::size_t>(batch));
  for (std::int64_t i = 0; i < batch; ++i) co[static_cast<std::size_t>(i)] = i * m * n;
  kernels::gemm_batched<T>(batch, m, n, k, {ap, ao, a.trans, a.ld}, {bp, bo, b.trans, b.ld}, c, co,
                           n);
}

// bfloat16 operands and result: AMX or the CPU's BF16 dot-product kernels
// where libxsmm has them (kernels::gemm_bf16_rounded), float32 sums either
// way, each rounded to bfloat16 once.
void matmul_run_bf16(const MatOperand& a, const MatOperand& b, const Shape& batch_shape,
                     std::int64_t batch, Tensor& out) {
  const std::int64_t m = a.rows, k = a.cols, n = b.cols;
  if (out.numel() == 0) return;
  bfloat16_t* c = out.data<bfloat16_t>();
  const std::vector<std::int64_t> ao = batch_offsets(a, batch_shape, batch);
  const std::vector<std::int64_t> bo = batch_offsets(b, batch_shape, batch);
  const bfloat16_t* ap = a.t.data<bfloat16_t>();
  const bfloat16_t* bp = b.t.data<bfloat16_t>();
  bool fold = batch > 1 && !a.trans;
  for (std::int64_t i = 0; fold && i < batch; ++i) {
    const auto u = static_cast<std::size_t>(i);
    fold = bo[u] == bo[0] && ao[u] == ao[0] + i * m * a.ld;
  }
  if (fold || batch == 1) {
    kernels::gemm_bf16_rounded(a.trans, b.trans, fold ? batch * m : m, n, k, 1.f, ap + ao[0], a.ld,
                               bp + bo[0], b.ld, c, n);
    return;
  }
  for (std::int64_t i = 0; i < batch; ++i) {
    const auto u = static_cast<std::size_t>(i);
    kernels::gemm_bf16_rounded(a.trans, b.trans, m, n, k, 1.f, ap + ao[u], a.ld, bp + bo[u], b.ld,
                               c + i * m * n, n);
  }
}

Tensor matmul_compute(const Tensor& a_in, const Tensor& b_in, const Shape& out_shape) {
  const MatOperand a = make_operand(a_in, true);
  const MatOperand b = make_operand(b_in, false);
  // The broadcast batch dims are the leading dims of the output.
  const std::size_t mat_dims = (a_in.rank() >= 2 ? 1 : 0) + (b_in.rank() >= 2 ? 1 : 0);
  const Shape batch_shape = leading(out_shape, static_cast<std::int64_t>(mat_dims));
  const std::int64_t batch = shape_numel(batch_shape, "matmul");
  if (a_in.dtype() == DType::BFloat16) {
    Tensor out = empty(out_shape, bfloat16);
    matmul_run_bf16(a, b, batch_shape, batch, out);
    return out;
  }
  Tensor out = empty(out_shape, a_in.dtype());
  dtype_dispatch(a_in.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                  std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>)
      matmul_run<T>(a, b, batch_shape, batch, out);
    else
      MS_ASSERT(false);
  });
  return out;
}

std::vector<Tensor> matmul_eval(std::span<const Tensor> in) {
  const std::vector<TensorType> types = ops::types_of(in);
  const TensorType out = matmul_infer(types)[0];
  const DType ct = matmul_compute_dtype(out.dtype);
  if (ct == out.dtype || out.dtype == DType::BFloat16)
    return {matmul_compute(in[0], in[1], out.shape)};
  return {matmul_compute(in[0].to(ct), in[1].to(ct), out.shape).to(out.dtype)};
}

}  // namespace

namespace ops {

std::vector<TensorType> Matmul::infer(const Attrs&, std::span<const TensorType> in) {
  return matmul_infer(in);
}
std::vector<Tensor> Matmul::eval(const Attrs&, std::span<const Tensor> in) {
  return matmul_eval(in);
}

// As 2-D (or batched) operands: a vector is a row (lhs) or a column (rhs);
// batch dims that broadcast are summed back.
std::vector<Tensor> Matmul::vjp(const Attrs&, const GradContext& c) {
  const Tensor &a = c.inputs[0], &b = c.inputs[1];
  const Tensor A = a.rank() == 1 ? unsqueeze(a, 0) : a;
  const Tensor B = b.rank() == 1 ? unsqueeze(b, -1) : b;
  Tensor G = c.out_grads[0];
  if (a.rank() == 1) G = unsqueeze(G, G.rank() == 0 ? 0 : -2);
  if (b.rank() == 1) G = unsqueeze(G, -1);
  const Tensor dA = detail::sum_to(matmul(G, transpose(B, -1, -2)), A.shape());
  if (B.rank() == 2 && A.rank() > 2 && B.dim(0) > 0 && B.dim(1) > 0) {  // known, non-empty
    // A matrix shared by a batch (a dense layer's weight): the batch is
    // summed inside one GEMM over all its rows, [k, B*m] x [B*m, n], instead
    // of B products summed afterwards (k, n > 0: reshape infers the rows).
    const Tensor A2 = reshape(A, {-1, B.dim(0)});
    const Tensor G2 = reshape(G, {-1, B.dim(1)});
    return {reshape(dA, a.shape()), reshape(matmul(transpose(A2, 0, 1), G2), b.shape())};
  }
  const Tensor dB = detail::sum_to(matmul(transpose(A, -1, -2), G), B.shape());
  return {reshape(dA, a.shape()), reshape(dB, b.shape())};
}

Samples Matmul::samples() {
  using detail::error_sample;
  using detail::sample;
  using detail::sample_tensor;
  const Attrs none;
  const auto pair = [](Shape a, Shape b, unsigned seed, DType dt = float32) {
    return std::vector<Tensor>{sample_tensor(a, seed, -2, 2, dt),
                               sample_tensor(b, seed + 9, -2, 2, dt)};
  };
  return {
      .cases =
          {sample("[[1, 2], [3, 4]] x [[5], [6]]",
                  {tensor({{1.0, 2.0}, {3.0, 4.0}}), from_vector(std::vector<float>{5, 6}, {2, 1})},
                  none, {from_vector(std::vector<float>{17, 39}, {2, 1})}),
           sample("dot product", {tensor({1.0, 2.0}), tensor({3.0, 4.0})}, none, {tensor(11.0)}),
           sample("[3,4] x [4,5]", pair({3, 4}, {4, 5}, 1), none),
           sample("batched [2,3,4] x [4,5], f64", pair({2, 3, 4}, {4, 5}, 2, float64), none),
           sample("vector x matrix, i32", pair({4}, {4, 3}, 3, int32), none),
           sample("f16", pair({3, 4}, {4, 2}, 4, float16), none),
           sample("empty [0,4] x [4,2]", pair({0, 4}, {4, 2}, 5), none),
           sample("gradient, 2-D", pair({3, 4}, {4, 2}, 6, float64), none, {}, {0, 1}),
           sample("gradient, vector x matrix", pair({4}, {4, 3}, 7, float64), none, {}, {0, 1}),
           sample("gradient, matrix x vector", pair({3, 4}, {4}, 8, float64), none, {}, {0, 1}),
           sample("gradient, batch x shared matrix [2,3,4] x [4,2]",
                  pair({2, 3, 4}, {4, 2}, 10, float64), none, {}, {0, 1}),
           sample("gradient, empty k: batch [2,3,0] x shared [0,4]",
                  pair({2, 3, 0}, {0, 4}, 11, float64), none, {}, {0, 1}),
           sample("gradient, empty n: batch [2,3,4] x shared [4,0]",
                  pair({2, 3, 4}, {4, 0}, 12, float64), none, {}, {0, 1}),
           sample("gradient, broadcast batch [2,1,3,4] x [3,4,2]",
                  pair({2, 1, 3, 4}, {3, 4, 2}, 9, float64), none, {}, {0, 1})},
      .errors = {
          error_sample("inner dims differ", {zeros({2, 3}), zeros({4, 5})}, none, "ms::ShapeError",
                       "matmul"),
          error_sample("mixed dtypes", {zeros({2, 3}), zeros({3, 2}, float64)}, none,
                       "ms::TypeError", "matmul"),
          error_sample("rank 0", {zeros({}), zeros({3})}, none, "ms::ShapeError", "matmul")}};
}

}  // namespace ops

namespace ops::detail {

void register_linalg_ops() { register_entries<Matmul>(); }

GemmOperand gemm_operand(const Tensor& m) {
  MS_ASSERT(m.rank() == 2);
  MatOperand op = make_operand(m, true);
  return {std::move(op.t), op.trans, op.ld};
}

}  // namespace ops::detail
}  // namespace ms
