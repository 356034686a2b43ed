// The jit's fused ops (ms/jit/detail/fused_ops.hpp): each checks what its
// unfused ops check (through their entries), then calls the same kernels
// with the fused steps switched on.
#include "ms/jit/detail/fused_ops.hpp"

#include <array>
#include <string>
#include <type_traits>

#include "ms/kernels/conv.hpp"
#include "ms/kernels/gemm.hpp"
#include "ms/kernels/pool.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/detail/linalg_impl.hpp"
#include "ms/ops/detail/nn_impl.hpp"
#include "ms/ops/linalg.hpp"

namespace ms::compiler::fused {
namespace {

using ops::TensorType;

bool fusable_dtype(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
}

DType half_to_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t;
}

}  // namespace

// ---------------------------------------------------------------- conv2d_fused

// relu only where the compute dtype is the output's: rounding to a half type
// after the relu would turn a tiny negative into -0 where relu of the rounded
// value keeps it.
std::vector<TensorType> Conv2dFused::infer(const Attrs& a, std::span<const TensorType> in) {
  std::vector<TensorType> result = ops::Conv2d::infer(a, in);
  const DType dt = in[0].dtype;
  MS_CHECK(fusable_dtype(dt), TypeError, name,
           ": the fused relu / max_pool2x2 needs a float32, float64, int32 or int64 input, got ",
           dt);
  if (a.max_pool2x2_index) {
    MS_CHECK(a.max_pool2x2, ValueError, name,
             ": max_pool2x2_index needs max_pool2x2 (the pooling it indexes)");
    MS_CHECK(dt == DType::Float32 || dt == DType::Float64, TypeError, name,
             ": max_pool2x2_index needs a float32 or float64 input, got ", dt);
  }
  if (a.max_pool2x2) {
    const Shape& out = result[0].shape;
    const std::int64_t n = out[0], o = out[1], oh = out[2], ow = out[3];
    MS_CHECK((!is_known_dim(oh) || oh >= 2) && (!is_known_dim(ow) || ow >= 2), ShapeError, name,
             ": the fused max_pool2x2 needs an output of at least 2x2, got ", out);
    const Shape pooled{n, o, is_known_dim(oh) ? oh / 2 : kAnyDim,
                       is_known_dim(ow) ? ow / 2 : kAnyDim};
    result.push_back({dt, pooled});
    if (a.max_pool2x2_index) result.push_back({DType::UInt8, pooled});
  }
  return result;
}

std::vector<Tensor> Conv2dFused::eval(const Attrs& a, std::span<const Tensor> in) {
  const std::vector<TensorType> types = infer(a, ops::types_of(in));
  const DType dt = types[0].dtype;
  const Tensor x = in[0].to(dt), w = in[1].to(dt);  // dense (no copy when already so)
  const Tensor b = in.size() > 2 ? in[2].to(dt) : Tensor();
  Tensor out = empty(types[0].shape, dt);
  Tensor pooled = types.size() > 1 ? empty(types[1].shape, dt) : Tensor();
  Tensor index = types.size() > 2 ? empty(types[2].shape, DType::UInt8) : Tensor();
  if (out.numel() > 0) {
    const kernels::Conv2dGeometry g =
        ops::detail::conv2d_geometry(a, x.shape(), w.shape(), types[0].shape);
    dtype_dispatch(dt, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>)
        kernels::conv2d<T>(x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr,
                           out.data<T>(), g, a.relu, pooled.defined() ? pooled.data<T>() : nullptr,
                           index.defined() ? index.data<std::uint8_t>() : nullptr);
    });
  }
  if (index.defined()) return {out, pooled, index};
  if (pooled.defined()) return {out, pooled};
  return {out};
}

// ---------------------------------------------------------------- max_pool2d_grad_relu

std::vector<TensorType> MaxPool2dGradRelu::infer(const Attrs& a, std::span<const TensorType> in) {
  return ops::MaxPool2dGrad::infer(a, in);
}

std::vector<Tensor> MaxPool2dGradRelu::eval(const Attrs& a, std::span<const Tensor> in) {
  const TensorType t = infer(a, ops::types_of(in))[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor x = in[0].to(ct), gy = in[1].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const kernels::Pool2dGeometry g = ops::detail::max_pool2d_geometry(a, t.shape, gy.shape());
    if (ct == DType::Float64)
      kernels::max_pool2d_grad(x.data<double>(), gy.data<double>(), dx.data<double>(), g, true);
    else
      kernels::max_pool2d_grad(x.data<float>(), gy.data<float>(), dx.data<float>(), g, true);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

// ---------------------------------------------------------------- max_pool2x2_grad_index

// Every index byte is safe: only its tap bits and its not-positive bit are read.
std::vector<TensorType> MaxPool2x2GradIndex::infer(const Attrs& a, std::span<const TensorType> in) {
  MS_CHECK(in[0].dtype == DType::UInt8, TypeError, name, ": index dtype ", in[0].dtype,
           " must be uint8 (conv2d_fused's max_pool2x2_index output)");
  const DType gt = in[1].dtype;
  MS_CHECK(
      gt == DType::Float16 || gt == DType::BFloat16 || gt == DType::Float32 || gt == DType::Float64,
      TypeError, name, ": grad_out dtype ", in[1].dtype,
      " is not supported (float16, bfloat16, float32, float64: gradients are floating)");
  const Shape& is = in[0].shape;
  const Shape& gs = in[1].shape;
  const std::vector<std::int64_t>& hw = a.input_hw;
  MS_CHECK(hw.size() == 2, ShapeError, name, ": input_hw must be [H, W], got ", Shape(hw));
  MS_CHECK(hw[0] >= 2 && hw[1] >= 2, ValueError, name, ": input_hw ", Shape(hw),
           " must be at least [2, 2] (one 2x2 window)");
  MS_CHECK(gs.is_any_rank() || gs.rank() == 3 || gs.rank() == 4, ShapeError, name, ": grad_out ",
           gs, " must be 3-D or 4-D [(N,) C, H / 2, W / 2]");
  MS_CHECK(ops::detail::shapes_may_match(is, gs), ShapeError, name, ": index ", is,
           " and grad_out ", gs, " must have one shape (one tap per pooled element)");
  if (gs.is_any_rank()) return {{in[1].dtype, gs}};
  Shape out = gs;
  for (std::size_t k = 0; k < 2; ++k) {
    std::int64_t& d = out[out.size() - 2 + k];
    MS_CHECK(!is_known_dim(d) || d == hw[k] / 2, ShapeError, name, ": grad_out ", gs,
             " must end in [", hw[0] / 2, ", ", hw[1] / 2, "] for input_hw ", Shape(hw),
             " (2x2 windows, stride 2)");
    d = hw[k];
  }
  if (out.is_static()) shape_numel(out, std::string(name) + ": output");
  return {{in[1].dtype, out}};
}

std::vector<Tensor> MaxPool2x2GradIndex::eval(const Attrs& a, std::span<const Tensor> in) {
  const TensorType t = infer(a, ops::types_of(in))[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor index = in[0].contiguous(), gy = in[1].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const std::size_t r = t.shape.size();
    const std::int64_t h = t.shape[r - 2], w = t.shape[r - 1];
    const kernels::Pool2dGeometry g =
        kernels::pool2x2_geometry(shape_numel(t.shape) / (h * w), h, w);
    const std::uint8_t* k = index.data<std::uint8_t>();
    if (ct == DType::Float64)
      kernels::max_pool2x2_grad_index(k, gy.data<double>(), dx.data<double>(), g, a.relu);
    else
      kernels::max_pool2x2_grad_index(k, gy.data<float>(), dx.data<float>(), g, a.relu);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

// ---------------------------------------------------------------- matmul_bias

std::vector<TensorType> MatmulBias::infer(const Attrs&, std::span<const TensorType> in) {
  std::vector<TensorType> out = ops::Matmul::infer({}, in.first(2));
  MS_CHECK(in[0].dtype == DType::Float32, TypeError, name, ": lhs dtype ", in[0].dtype,
           " must be float32");
  MS_CHECK(in[1].shape.rank() == 2 && in[0].shape.rank() >= 2, ShapeError, name, ": lhs ",
           in[0].shape, " and rhs ", in[1].shape, ": rhs must be 2-D and lhs at least 2-D");
  MS_CHECK(in[2].dtype == DType::Float32, TypeError, name, ": bias dtype ", in[2].dtype,
           " must be float32");
  const std::int64_t n = in[1].shape[1];
  MS_CHECK(in[2].shape.rank() == 1 &&
               (!is_known_dim(n) || !is_known_dim(in[2].shape[0]) || in[2].shape[0] == n),
           ShapeError, name, ": bias ", in[2].shape, " must be [", n, "] (rhs's columns)");
  return out;
}

// As matmul: lhs rows one after another (a copy otherwise), so its batch is
// one product of all its rows with the shared rhs, read as stored or
// transposed (a copy when neither).
void MatmulBias::run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  const Tensor x = in[0].contiguous(), bias = in[2].contiguous();
  const ops::detail::GemmOperand w = ops::detail::gemm_operand(in[1]);
  const std::int64_t k = w.t.dim(0), n = w.t.dim(1), m = out.numel() / n;
  kernels::gemm_bias(false, w.trans, m, n, k, x.data<float>(), std::max<std::int64_t>(k, 1),
                     w.t.data<float>(), w.ld, bias.data<float>(), out.data<float>(), n, a.relu);
}

// ---------------------------------------------------------------- matmul_scale_add

// Inputs (c, a, b) or (c, d, a, b, t).
std::vector<TensorType> MatmulScaleAdd::infer(const Attrs&, std::span<const TensorType> in) {
  MS_CHECK(in.size() == 3 || in.size() == 5, ValueError, name,
           ": takes (c, a, b) or (c, d, a, b, t), got ", in.size(), " inputs");
  const bool with_d = in.size() == 5;
  const std::span<const TensorType> ab = in.subspan(with_d ? 2 : 1, 2);
  std::vector<TensorType> out = ops::Matmul::infer({}, ab);
  MS_CHECK(ab[0].dtype == DType::Float32 || ab[0].dtype == DType::BFloat16, TypeError, name,
           ": a's dtype ", ab[0].dtype, " must be float32 or bfloat16");
  // A bfloat16 product (rounded to bfloat16, as matmul rounds it) is added
  // to a float32 c.
  out[0].dtype = DType::Float32;
  MS_CHECK(ab[0].shape.rank() == 2 && ab[1].shape.rank() == 2, ShapeError, name, ": a ",
           ab[0].shape, " and b ", ab[1].shape, " must be 2-D");
  MS_CHECK(in[0] == out[0], ShapeError, name, ": c ", in[0].dtype, in[0].shape,
           " must have the product's type ", out[0].dtype, out[0].shape);
  if (!with_d) return out;
  MS_CHECK(in[1] == out[0], ShapeError, name, ": d ", in[1].dtype, in[1].shape,
           " must have the product's type ", out[0].dtype, out[0].shape);
  MS_CHECK(in[4].dtype == DType::Float32 && in[4].shape.rank() == 0, TypeError, name, ": t ",
           in[4].dtype, in[4].shape, " must be a 0-d float32 tensor");
  out.push_back(out[0]);
  return out;
}

namespace {
// c = c * scale + a b, then d = d - t * c when there is a d, on c and d
// (dense float32 [m, n]); `in` as the op's. A bfloat16 product is made
// (rounded to bfloat16) and then combined in one pass over c and d.
void scale_add_product(const MatmulScaleAdd::Attrs& attrs, const Tensor& c, const Tensor& d,
                       std::span<const Tensor> in, bfloat16_t* d16 = nullptr) {
  const std::int64_t m = c.dim(0), n = c.dim(1);
  if (m == 0 || n == 0) return;
  const bool with_d = in.size() == 5;
  const Tensor& a_in = in[with_d ? 2 : 1];
  const Tensor& b_in = in[with_d ? 3 : 2];
  const auto scale = static_cast<float>(attrs.scale);
  const float t = with_d ? in[4].item<float>() : 0.f;
  float* dp = with_d ? d.data<float>() : nullptr;
  if (a_in.dtype() == DType::BFloat16) {
    const Tensor p = ops::Matmul::eval({}, std::array<Tensor, 2>{a_in, b_in})[0];
    kernels::scale_add(m, n, scale, p.data<bfloat16_t>(), n, c.data<float>(), n, dp, n, t, d16);
    return;
  }
  const ops::detail::GemmOperand a = ops::detail::gemm_operand(a_in);
  const ops::detail::GemmOperand b = ops::detail::gemm_operand(b_in);
  if (kernels::gemm_scale_add(a.trans, b.trans, m, n, a_in.dim(1), a.t.data<float>(), a.ld,
                              b.t.data<float>(), b.ld, scale, c.data<float>(), n, dp, n, t))
    return;
  const Tensor p = ops::Matmul::eval({}, std::array<Tensor, 2>{a_in, b_in})[0];
  kernels::scale_add(m, n, scale, p.data<float>(), n, c.data<float>(), n, dp, n, t);
}
}  // namespace

std::vector<Tensor> MatmulScaleAdd::eval(const Attrs& a, std::span<const Tensor> in) {
  infer(a, ops::types_of(in));
  std::vector<Tensor> out{in[0].clone()};
  if (in.size() == 5) out.push_back(in[1].clone());
  scale_add_product(a, out[0], out.back(), in);
  return out;
}

void MatmulScaleAdd::update(const Attrs& a, std::span<const Tensor> in) {
  // A sixth input after (c, d, a, b, t) of a bfloat16 product: d's bfloat16
  // copy, written in the same pass.
  const bool copy = in.size() == 6;
  const std::span<const Tensor> op_in = in.first(copy ? 5 : in.size());
  const std::size_t outs = op_in.size() == 5 ? 2 : 1;  // with d: c and d
  for (std::size_t i = 0; i < outs; ++i)
    MS_CHECK(in[i].is_contiguous(), ValueError, name, ": ", i == 0 ? "c" : "d",
             " must be contiguous to be written in place");
  MS_CHECK(!copy || (in[2].dtype() == DType::BFloat16 && in[5].dtype() == DType::BFloat16 &&
                     in[5].shape() == in[1].shape() && in[5].is_contiguous()),
           ValueError, name, ": d's copy must be a contiguous bfloat16 tensor of d's shape ",
           in[1].shape(), " beside a bfloat16 product, got ", in[5].dtype(), in[5].shape());
  scale_add_product(a, in[0], in[outs - 1], op_in, copy ? in[5].data<bfloat16_t>() : nullptr);
}

int MatmulScaleAdd::update_bf16_copy(std::span<const ops::TensorType> in) {
  return in.size() == 5 && in[2].dtype == DType::BFloat16 ? 1 : -1;
}

// ---------------------------------------------------------------- rows

template <class E>
const ops::OpDef& def() {
  static const ops::OpDef d = ops::detail::entry_def<E>();
  return d;
}

template const ops::OpDef& def<Conv2dFused>();
template const ops::OpDef& def<MaxPool2dGradRelu>();
template const ops::OpDef& def<MaxPool2x2GradIndex>();
template const ops::OpDef& def<MatmulBias>();
template const ops::OpDef& def<MatmulScaleAdd>();

}  // namespace ms::compiler::fused
