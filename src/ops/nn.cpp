// Neural-network ops: conv2d, max_pool2d, avg_pool2d, softmax_cross_entropy
// and the backward ops (conv2d_grad_input, conv2d_grad_weight,
// max_pool2d_grad, avg_pool2d_grad), each an entry with its gradient and
// samples. `infer` checks every attribute and size (with overflow-checked
// arithmetic, before anything is allocated); `eval` makes the inputs dense in
// their compute dtype and calls kernels/conv.cpp or kernels/pool.cpp. Output
// sizes and padding rules are PyTorch's. Unknown dims (kAnyDim) propagate as
// unknown.
#include "ms/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ms/expr/expr.hpp"
#include "ms/kernels/conv.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/kernels/pool.hpp"
#include "ms/kernels/reduce.hpp"
#include "ms/ops/detail/entry_impl.hpp"
#include "ms/ops/detail/nn_impl.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"
#include "ms/ops/reduce.hpp"

namespace ms {
namespace {

using ops::TensorType;
using Ints = std::vector<std::int64_t>;

std::int64_t mul_checked(std::int64_t a, std::int64_t b, std::string_view op,
                         std::string_view what) {
  std::int64_t r = 0;
  MS_CHECK(!__builtin_mul_overflow(a, b, &r), ValueError, op, ": ", what, " overflows int64 (", a,
           " * ", b, ")");
  return r;
}

std::int64_t add_checked(std::int64_t a, std::int64_t b, std::string_view op,
                         std::string_view what) {
  std::int64_t r = 0;
  MS_CHECK(!__builtin_add_overflow(a, b, &r), ValueError, op, ": ", what, " overflows int64 (", a,
           " + ", b, ")");
  return r;
}

// A spatial (height, width) pair from an attribute of 1 or 2 values.
struct Pair {
  std::int64_t h, w;
};

std::ostream& operator<<(std::ostream& os, const Pair& p) {
  return os << "[" << p.h << ", " << p.w << "]";
}

// `if_missing` (when given) stands in for an absent attribute, and also for an

// A spatial (height, width) pair from an option of 1 or 2 values.
Pair pair_of(const Ints& v, std::string_view name, std::string_view op) {
  MS_CHECK(v.size() == 1 || v.size() == 2, ValueError, op, ": ", name,
           " must hold 1 value (both axes) or 2 (height, width), got ", Shape(v));
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

void check_positive(const Pair& p, std::string_view op, std::string_view name) {
  MS_CHECK(p.h > 0 && p.w > 0, ValueError, op, ": ", name, " must be > 0, got ", p);
}

void check_dtypes_equal(std::span<const TensorType> in, std::string_view op) {
  constexpr std::string_view names[] = {"input", "weight", "bias"};
  for (std::size_t i = 1; i < in.size(); ++i)
    MS_CHECK(in[i].dtype == in[0].dtype, TypeError, op, ": ", names[i], " dtype ", in[i].dtype,
             " differs from input dtype ", in[0].dtype, "; cast with .to()");
}

DType half_to_float(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t;
}

// ---------------------------------------------------------------- conv2d

struct ConvAttrs {
  Pair stride, padding, dilation;
  std::int64_t groups;
};

ConvAttrs conv_attrs(const Conv2dOptions& o, std::string_view op) {
  ConvAttrs a{pair_of(o.stride, "stride", op), pair_of(o.padding, "padding", op),
              pair_of(o.dilation, "dilation", op), o.groups};
  check_positive(a.stride, op, "stride");
  check_positive(a.dilation, op, "dilation");
  MS_CHECK(a.padding.h >= 0 && a.padding.w >= 0, ValueError, op, ": padding must be >= 0, got ",
           a.padding);
  MS_CHECK(a.groups > 0, ValueError, op, ": groups must be > 0, got ", a.groups);
  return a;
}

// One spatial axis of the output (kAnyDim when the input or kernel is unknown).
std::int64_t conv_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                      std::int64_t d, std::string_view axis, const Shape& xs, const Shape& ws,
                      std::string_view op) {
  if (!is_known_dim(in) || !is_known_dim(k)) return kAnyDim;
  const std::int64_t extent = add_checked(mul_checked(d, k - 1, op, "dilated kernel extent"), 1, op,
                                          "dilated kernel extent");
  const std::int64_t padded =
      add_checked(in, mul_checked(2, p, op, "padded input size"), op, "padded input size");
  MS_CHECK(extent <= padded, ShapeError, op, ": kernel ", axis, " ", k, " (dilation ", d,
           ", extent ", extent, ") is larger than the padded input ", axis, " ", padded, " (input ",
           xs, ", weight ", ws, ", padding ", p, ")");
  return (padded - extent) / s + 1;
}

bool conv_dtype_ok(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 ||
         t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
}

// `op` names the op in messages (conv2d, or a gradient op checking its conv2d).
std::vector<TensorType> conv2d_infer(std::span<const TensorType> in, const Conv2dOptions& opts,
                                     std::string_view op) {
  check_dtypes_equal(in, op);
  MS_CHECK(conv_dtype_ok(in[0].dtype), TypeError, op, ": dtype ", in[0].dtype,
           " is not supported (float16, bfloat16, float32, float64, int32, int64)");
  const ConvAttrs a = conv_attrs(opts, op);
  const Shape xs =
      in[0].shape.is_any_rank() ? Shape{kAnyDim, kAnyDim, kAnyDim, kAnyDim} : in[0].shape;
  const Shape& ws = in[1].shape;
  MS_CHECK(xs.rank() == 4, ShapeError, op, ": input ", xs, " must be 4-D [N, C, H, W], got rank ",
           xs.rank(), xs.rank() == 3 ? " (use unsqueeze(0) for a single image)" : "");
  MS_CHECK(ws.rank() == 4, ShapeError, op, ": weight ", ws,
           " must be 4-D [O, C / groups, KH, KW], got rank ", ws.rank());
  if (ws.is_static()) shape_numel(ws, std::string(op) + ": weight");
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], w = xs[3];
  const std::int64_t o = ws[0], cg = ws[1], kh = ws[2], kw = ws[3];
  MS_CHECK((!is_known_dim(kh) || kh > 0) && (!is_known_dim(kw) || kw > 0), ShapeError, op,
           ": weight ", ws, " has an empty kernel (KH and KW must be > 0)");
  if (is_known_dim(c)) {
    MS_CHECK(c % a.groups == 0, ShapeError, op, ": groups ", a.groups,
             " does not divide the input channels ", c, " (input ", xs, ")");
    if (is_known_dim(cg))
      MS_CHECK(mul_checked(cg, a.groups, op, "weight channels * groups") == c, ShapeError, op,
               ": input ", xs, " has ", c, " channels but weight ", ws, " with groups ", a.groups,
               " expects ", cg, " * ", a.groups, " = ", cg * a.groups);
  }
  if (is_known_dim(o))
    MS_CHECK(o % a.groups == 0, ShapeError, op, ": groups ", a.groups,
             " does not divide the output channels ", o, " (weight ", ws, ")");
  if (in.size() > 2) {
    const Shape& bs = in[2].shape;
    MS_CHECK(bs.is_any_rank() ||
                 (bs.rank() == 1 && (!is_known_dim(bs[0]) || !is_known_dim(o) || bs[0] == o)),
             ShapeError, op, ": bias ", bs, " must be [", o, "] (the output channels of weight ",
             ws, ")");
  }
  const std::int64_t oh =
      conv_out(h, kh, a.stride.h, a.padding.h, a.dilation.h, "height", xs, ws, op);
  const std::int64_t ow =
      conv_out(w, kw, a.stride.w, a.padding.w, a.dilation.w, "width", xs, ws, op);
  Shape out{n, o, oh, ow};
  if (out.is_static()) {
    shape_numel(out, std::string(op) + ": output");
    if (is_known_dim(cg)) {  // the im2col buffer of one (image, group)
      const std::int64_t rows =
          mul_checked(mul_checked(cg, kh, op, "im2col rows"), kw, op, "im2col rows");
      mul_checked(rows, mul_checked(oh, ow, op, "im2col columns"), op, "im2col buffer size");
    }
  }
  return {{in[0].dtype, out}};
}

kernels::Conv2dGeometry conv_geometry(const Shape& xs, const Shape& ws, const Shape& ys,
                                      const ConvAttrs& a) {
  kernels::Conv2dGeometry g;
  g.n = xs[0], g.c = xs[1], g.h = xs[2], g.w = xs[3];
  g.o = ws[0], g.kh = ws[2], g.kw = ws[3];
  g.oh = ys[2], g.ow = ys[3];
  g.sh = a.stride.h, g.sw = a.stride.w, g.ph = a.padding.h, g.pw = a.padding.w;
  g.dh = a.dilation.h, g.dw = a.dilation.w, g.groups = a.groups;
  return g;
}

// bfloat16 on the bf16 kernels (pairs of products summed in float32, one
// rounding per output), without float32 copies of x and w; false when those
// kernels do not take the shape (then it converts to float32, as other halves).
bool conv2d_bf16_eval(std::span<const Tensor> in, const TensorType& out_t,
                      const Conv2dOptions& opts, Tensor& out) {
  const Tensor x = in[0].to(DType::BFloat16), w = in[1].to(DType::BFloat16);  // dense
  const Tensor b = in.size() > 2 ? in[2].to(DType::Float32) : Tensor();
  out = empty(out_t.shape, DType::BFloat16);
  if (out.numel() == 0) return true;
  const kernels::Conv2dGeometry g =
      conv_geometry(x.shape(), w.shape(), out_t.shape, conv_attrs(opts, "conv2d"));
  return kernels::conv2d_bf16(x.data<bfloat16_t>(), w.data<bfloat16_t>(),
                              b.defined() ? b.data<float>() : nullptr, out.data<bfloat16_t>(), g);
}

std::vector<Tensor> conv2d_eval(std::span<const Tensor> in, const Conv2dOptions& opts) {
  constexpr std::string_view op = "conv2d";
  const TensorType out_t = conv2d_infer(ops::types_of(in), opts, op)[0];
  if (out_t.dtype == DType::BFloat16) {
    Tensor out;
    if (conv2d_bf16_eval(in, out_t, opts, out)) return {out};
  }
  const DType ct = half_to_float(out_t.dtype);
  const Tensor x = in[0].to(ct), w = in[1].to(ct);  // dense (no copy when already so)
  const Tensor b = in.size() > 2 ? in[2].to(ct) : Tensor();
  Tensor out = empty(out_t.shape, ct);
  if (out.numel() > 0) {
    const kernels::Conv2dGeometry g =
        conv_geometry(x.shape(), w.shape(), out_t.shape, conv_attrs(opts, op));
    dtype_dispatch(ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>)
        kernels::conv2d<T>(x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr,
                           out.data<T>(), g);
    });
  }
  if (ct != out_t.dtype) out = out.to(out_t.dtype);
  return {out};
}

// ---------------------------------------------------------------- conv2d gradients
//
// conv2d_grad_input(grad_out, weight) and conv2d_grad_weight(x, grad_out) take
// the forward's options plus the shape of what they compute (input_size,
// weight_size), validate the forward conv2d they differentiate with its own
// rules, and check that grad_out has that conv2d's output shape.

bool grad_dtype_ok(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}

// Every input is floating and of one dtype (gradients exist only for floats).
void check_grad_dtypes(std::span<const TensorType> in, std::string_view op,
                       std::initializer_list<std::string_view> names) {
  const auto* name = names.begin();
  MS_CHECK(grad_dtype_ok(in[0].dtype), TypeError, op, ": ", *name, " dtype ", in[0].dtype,
           " is not supported (float16, bfloat16, float32, float64: gradients are floating)");
  for (std::size_t i = 1; i < in.size(); ++i)
    MS_CHECK(in[i].dtype == in[0].dtype, TypeError, op, ": ", name[i], " dtype ", in[i].dtype,
             " differs from ", *name, " dtype ", in[0].dtype, "; cast with .to()");
}

// A shape attribute (input_size, weight_size) of rank `r0` or `r1`, sizes >= 0.
Shape size_attr(const Ints& v, std::string_view name, std::string_view op, std::size_t r0,
                std::size_t r1) {
  const Shape s(v);
  MS_CHECK(s.size() == r0 || s.size() == r1, ShapeError, op, ": ", name, " ", s, " must have ",
           r0 == r1 ? detail::str_cat("rank ", r0) : detail::str_cat("rank ", r0, " or ", r1),
           ", got rank ", s.size());
  for (std::int64_t d : s)
    MS_CHECK(d >= 0, ValueError, op, ": ", name, " ", s, " has a negative size ", d);
  shape_numel(s, std::string(op) + ": " + std::string(name));
  return s;
}

// grad_out must have the forward's output shape `want` (unknown dims match).
void check_grad_shape(const Shape& got, const Shape& want, std::string_view op,
                      std::string_view forward) {
  MS_CHECK(ops::detail::shapes_may_match(got, want), ShapeError, op, ": grad_out ", got,
           " must have the shape of the ", forward, " output ", want);
}

std::vector<TensorType> conv2d_grad_input_infer(std::span<const TensorType> in,
                                                const ops::Conv2dGradInput::Attrs& a) {
  constexpr std::string_view op = "conv2d_grad_input";
  check_grad_dtypes(in, op, {"grad_out", "weight"});
  const TensorType x{in[0].dtype, size_attr(a.input_size, "input_size", op, 4, 4)};
  const TensorType fwd[] = {x, in[1]};
  check_grad_shape(in[0].shape, conv2d_infer(fwd, a, op)[0].shape, op, "conv2d");
  return {x};
}

std::vector<TensorType> conv2d_grad_weight_infer(std::span<const TensorType> in,
                                                 const ops::Conv2dGradWeight::Attrs& a) {
  constexpr std::string_view op = "conv2d_grad_weight";
  check_grad_dtypes(in, op, {"input", "grad_out"});
  const TensorType w{in[0].dtype, size_attr(a.weight_size, "weight_size", op, 4, 4)};
  const TensorType fwd[] = {in[0], w};
  check_grad_shape(in[1].shape, conv2d_infer(fwd, a, op)[0].shape, op, "conv2d");
  return {w};
}

// Runs kernel(a, b, out, geometry) on float or double buffers, or on bfloat16
// ones (the bf16 kernels: float32 sums, one rounding on store); float16 inputs
// compute in float32 and round on store.
template <class K>
Tensor conv_grad_eval(std::string_view op, const TensorType& out_t, const Tensor& a_in,
                      const Tensor& b_in, const Shape& xs, const Shape& ws, const Shape& ys,
                      const Conv2dOptions& opts, K kernel) {
  if (out_t.dtype == DType::BFloat16) {
    const Tensor a = a_in.to(DType::BFloat16), b = b_in.to(DType::BFloat16);  // dense
    Tensor out = empty(out_t.shape, DType::BFloat16);
    if (out.numel() > 0)
      kernel(a.data<bfloat16_t>(), b.data<bfloat16_t>(), out.data<bfloat16_t>(),
             conv_geometry(xs, ws, ys, conv_attrs(opts, op)));
    return out;
  }
  const DType ct = half_to_float(out_t.dtype);
  const Tensor a = a_in.to(ct), b = b_in.to(ct);  // dense
  Tensor out = empty(out_t.shape, ct);
  if (out.numel() > 0) {
    const kernels::Conv2dGeometry g = conv_geometry(xs, ws, ys, conv_attrs(opts, op));
    if (ct == DType::Float64)
      kernel(a.data<double>(), b.data<double>(), out.data<double>(), g);
    else
      kernel(a.data<float>(), b.data<float>(), out.data<float>(), g);
  }
  if (ct != out_t.dtype) out = out.to(out_t.dtype);
  return out;
}

// ---------------------------------------------------------------- pooling

struct PoolAttrs {
  Pair kernel, stride, padding, dilation;
  bool ceil_mode;
};

PoolAttrs pool_attrs(const Ints& kernel, const Ints& stride, const Ints& padding,
                     const Ints& dilation, bool ceil_mode, std::string_view op) {
  PoolAttrs a{};
  a.kernel = pair_of(kernel, "kernel", op);
  check_positive(a.kernel, op, "kernel");
  a.stride = stride.empty() ? a.kernel : pair_of(stride, "stride", op);  // empty: the kernel
  a.padding = pair_of(padding, "padding", op);
  a.dilation = pair_of(dilation, "dilation", op);
  a.ceil_mode = ceil_mode;
  check_positive(a.stride, op, "stride");
  check_positive(a.dilation, op, "dilation");
  MS_CHECK(a.padding.h >= 0 && a.padding.w >= 0, ValueError, op, ": padding must be >= 0, got ",
           a.padding);
  MS_CHECK(a.padding.h <= a.kernel.h / 2 && a.padding.w <= a.kernel.w / 2, ValueError, op,
           ": padding ", a.padding, " must be at most half the kernel size ", a.kernel,
           " (PyTorch's rule)");
  return a;
}
PoolAttrs pool_attrs(const MaxPool2dOptions& o, std::string_view op) {
  return pool_attrs(o.kernel, o.stride, o.padding, o.dilation, o.ceil_mode, op);
}
PoolAttrs pool_attrs(const AvgPool2dOptions& o, std::string_view op) {
  return pool_attrs(o.kernel, o.stride, o.padding, {1, 1}, o.ceil_mode, op);
}

// PyTorch's pooling_output_shape: floor or ceil of (in + 2p - extent) / s, + 1;
// in ceil mode a last window starting in the right padding is dropped.
std::int64_t pool_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                      std::int64_t d, bool ceil_mode, std::string_view op, std::string_view axis,
                      const Shape& xs) {
  if (!is_known_dim(in)) return kAnyDim;
  const std::int64_t extent = add_checked(mul_checked(d, k - 1, op, "dilated kernel extent"), 1, op,
                                          "dilated kernel extent");
  const std::int64_t padded =
      add_checked(in, mul_checked(2, p, op, "padded input size"), op, "padded input size");
  // floor (or ceil) of num / s, without forming num + s - 1 (s may be near 2^63)
  const std::int64_t num = padded - extent;
  std::int64_t q = num / s;  // truncates toward zero
  const bool inexact = num % s != 0;
  if (inexact && num < 0 && !ceil_mode) --q;
  if (inexact && num > 0 && ceil_mode) ++q;
  std::int64_t out = q + 1;
  std::int64_t last_start = 0;  // of the last window, relative to the left padding
  if (ceil_mode && (__builtin_mul_overflow(q, s, &last_start) || last_start >= in + p)) --out;
  MS_CHECK(out > 0, ShapeError, op, ": input ", xs, " is too small: kernel ", axis, " ", k,
           " (dilation ", d, ", extent ", extent, ") over the padded input ", axis, " ", padded,
           " gives an output ", axis, " of ", out);
  return out;
}

bool pool_dtype_ok(DType t, bool is_max) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
    case DType::Float64: return true;
    case DType::Int8:
    case DType::Int16:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt8: return is_max;
    default: return false;
  }
}

DType pool_compute_dtype(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    case DType::Int8:
    case DType::Int16:
    case DType::UInt8: return DType::Int32;
    default: return t;
  }
}
std::vector<TensorType> pool_infer(std::string_view op, bool is_max, std::span<const TensorType> in,
                                   const PoolAttrs& a) {
  const DType dt = in[0].dtype;
  MS_CHECK(pool_dtype_ok(dt, is_max), TypeError, op, ": dtype ", dt, " is not supported (",
           is_max ? "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8"
                  : "float16, bfloat16, float32, float64; cast integers with .to(ms::float32)",
           ")");
  const Shape& xs = in[0].shape;
  if (xs.is_any_rank()) return {{dt, xs}};
  MS_CHECK(xs.rank() == 3 || xs.rank() == 4, ShapeError, op, ": input ", xs,
           " must be 3-D [C, H, W] or 4-D [N, C, H, W], got rank ", xs.rank());
  const std::size_t r = xs.size();
  const std::int64_t h = xs[r - 2], w = xs[r - 1];
  MS_CHECK(h != 0 && w != 0, ShapeError, op, ": input ", xs,
           " has an empty spatial dim (H and W must be > 0)");
  Shape out(std::vector<std::int64_t>(xs.begin(), xs.end() - 2));
  out.push_back(pool_out(h, a.kernel.h, a.stride.h, a.padding.h, a.dilation.h, a.ceil_mode, op,
                         "height", xs));
  out.push_back(
      pool_out(w, a.kernel.w, a.stride.w, a.padding.w, a.dilation.w, a.ceil_mode, op, "width", xs));
  if (out.is_static()) shape_numel(out, op);
  return {{dt, std::move(out)}};
}

kernels::Pool2dGeometry pool_geometry(const Shape& xs, const Shape& ys, const PoolAttrs& a) {
  const std::size_t r = xs.size();
  kernels::Pool2dGeometry g;
  g.h = xs[r - 2], g.w = xs[r - 1];
  g.planes = g.h * g.w == 0 ? 0 : shape_numel(xs) / (g.h * g.w);
  g.oh = ys[r - 2], g.ow = ys[r - 1];
  g.kh = a.kernel.h, g.kw = a.kernel.w, g.sh = a.stride.h, g.sw = a.stride.w;
  g.ph = a.padding.h, g.pw = a.padding.w, g.dh = a.dilation.h, g.dw = a.dilation.w;
  return g;
}

Tensor pool_eval(std::string_view op, bool is_max, std::span<const Tensor> in, const PoolAttrs& a,
                 bool count_include_pad) {
  const TensorType out_t = pool_infer(op, is_max, ops::types_of(in), a)[0];
  const DType ct = pool_compute_dtype(out_t.dtype);
  const Tensor x = in[0].to(ct);  // dense
  Tensor out = empty(out_t.shape, ct);
  if (out.numel() > 0) {
    const kernels::Pool2dGeometry g = pool_geometry(x.shape(), out_t.shape, a);
    dtype_dispatch(ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        if (is_max)
          kernels::max_pool2d<T>(x.data<T>(), out.data<T>(), g);
        else
          kernels::avg_pool2d<T>(x.data<T>(), out.data<T>(), g, count_include_pad);
      } else if constexpr (std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>) {
        kernels::max_pool2d<T>(x.data<T>(), out.data<T>(), g);
      }
    });
  }
  if (ct != out_t.dtype) out = out.to(out_t.dtype);
  return out;
}

// ---------------------------------------------------------------- pooling gradients
//
// max_pool2d_grad(x, grad_out) recomputes each window's argmax from x (no index
// tensor kept); avg_pool2d_grad(grad_out) needs only x's shape (input_size).
// Both validate the forward pooling with its own rules.

std::vector<TensorType> max_pool2d_grad_infer(std::span<const TensorType> in,
                                              const MaxPool2dOptions& o) {
  constexpr std::string_view op = "max_pool2d_grad";
  check_grad_dtypes(in, op, {"input", "grad_out"});
  check_grad_shape(in[1].shape, pool_infer(op, true, in.first(1), pool_attrs(o, op))[0].shape, op,
                   "max_pool2d");
  return {in[0]};
}

std::vector<TensorType> avg_pool2d_grad_infer(std::span<const TensorType> in,
                                              const ops::AvgPool2dGrad::Attrs& o) {
  constexpr std::string_view op = "avg_pool2d_grad";
  check_grad_dtypes(in, op, {"grad_out"});
  const TensorType x{in[0].dtype, size_attr(o.input_size, "input_size", op, 3, 4)};
  check_grad_shape(in[0].shape, pool_infer(op, false, {&x, 1}, pool_attrs(o, op))[0].shape, op,
                   "avg_pool2d");
  return {x};
}

std::vector<Tensor> max_pool2d_grad_eval(std::span<const Tensor> in, const MaxPool2dOptions& o) {
  constexpr std::string_view op = "max_pool2d_grad";
  const TensorType t = max_pool2d_grad_infer(ops::types_of(in), o)[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor x = in[0].to(ct), gy = in[1].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const kernels::Pool2dGeometry g = pool_geometry(t.shape, gy.shape(), pool_attrs(o, op));
    if (ct == DType::Float64)
      kernels::max_pool2d_grad(x.data<double>(), gy.data<double>(), dx.data<double>(), g);
    else
      kernels::max_pool2d_grad(x.data<float>(), gy.data<float>(), dx.data<float>(), g);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

std::vector<Tensor> avg_pool2d_grad_eval(std::span<const Tensor> in,
                                         const ops::AvgPool2dGrad::Attrs& o) {
  constexpr std::string_view op = "avg_pool2d_grad";
  const TensorType t = avg_pool2d_grad_infer(ops::types_of(in), o)[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor gy = in[0].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const kernels::Pool2dGeometry g = pool_geometry(t.shape, gy.shape(), pool_attrs(o, op));
    if (ct == DType::Float64)
      kernels::avg_pool2d_grad(gy.data<double>(), dx.data<double>(), g, o.count_include_pad);
    else
      kernels::avg_pool2d_grad(gy.data<float>(), dx.data<float>(), g, o.count_include_pad);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

// ---------------------------------------------------------------- softmax_cross_entropy

std::vector<TensorType> sce_infer(std::span<const TensorType> in) {
  const TensorType& x = in[0];
  const TensorType& y = in[1];
  MS_CHECK(dtype_is_float(x.dtype), TypeError,
           "softmax_cross_entropy: logits must be floating, got ", x.dtype);
  MS_CHECK(y.dtype == int32 || y.dtype == int64, TypeError,
           "softmax_cross_entropy: labels must be int32 or int64, got ", y.dtype);
  MS_CHECK(x.shape.rank() == 2, ShapeError, "softmax_cross_entropy: logits must be [N, C], got ",
           x.shape);
  MS_CHECK(y.shape.rank() == 1, ShapeError, "softmax_cross_entropy: labels must be [N], got ",
           y.shape);
  const std::int64_t n = x.shape[0], ny = y.shape[0];
  MS_CHECK(n == ny || n == kAnyDim || ny == kAnyDim, ShapeError, "softmax_cross_entropy: labels ",
           y.shape, " must be [", n, "] for logits ", x.shape);
  MS_CHECK(x.shape[1] != 0, ShapeError,
           "softmax_cross_entropy: logits must have at least one class, got ", x.shape);
  return {{x.dtype, Shape{n == kAnyDim ? ny : n}}};
}

std::vector<Tensor> sce_eval(std::span<const Tensor> in) {
  const std::vector<TensorType> t = sce_infer(ops::types_of(in));
  const DType ct = in[0].dtype() == float64 ? float64 : float32;
  const Tensor x = in[0].to(ct).contiguous();
  const Tensor y = in[1].to(int64).contiguous();
  const std::int64_t n = x.dim(0), c = x.dim(1);
  const std::int64_t* yv = y.data<std::int64_t>();
  for (std::int64_t r = 0; r < n; ++r)  // checked before the parallel region
    MS_CHECK(yv[r] >= 0 && yv[r] < c, IndexError, "softmax_cross_entropy: label ", yv[r],
             " of row ", r, " is outside [0, ", c, ")");
  Tensor out = empty(Shape{n}, ct);
  kernels::softmax_cross_entropy(x, yv, out);
  return {out.dtype() == t[0].dtype ? out : out.to(t[0].dtype)};
}

}  // namespace

namespace ops {

using detail::error_sample;
using detail::sample;
using detail::sample_tensor;

namespace {

std::vector<float> floats(std::initializer_list<float> v) { return v; }

Tensor f64(const Shape& s, unsigned seed) { return sample_tensor(s, seed, -2, 2, float64); }

Conv2dGradInput::Attrs grad_input_attrs(const Conv2dOptions& o, const Shape& input_size) {
  Conv2dGradInput::Attrs a;
  static_cast<Conv2dOptions&>(a) = o;
  a.input_size = input_size.to_vector();
  return a;
}

Conv2dGradWeight::Attrs grad_weight_attrs(const Conv2dOptions& o, const Shape& weight_size) {
  Conv2dGradWeight::Attrs a;
  static_cast<Conv2dOptions&>(a) = o;
  a.weight_size = weight_size.to_vector();
  return a;
}

AvgPool2dGrad::Attrs avg_grad_attrs(const AvgPool2dOptions& o, const Shape& input_size) {
  AvgPool2dGrad::Attrs a;
  static_cast<AvgPool2dOptions&>(a) = o;
  a.input_size = input_size.to_vector();
  return a;
}

// (height, width) of an option of 1 or 2 values.
std::pair<std::int64_t, std::int64_t> pair_hw(const Ints& v) {
  return {v.at(0), v.size() > 1 ? v[1] : v[0]};
}

// Which windows have tap `t` inside the input along one axis (size n, out
// windows, stride s, padding p, dilation d): 1 or 0 per window.
std::vector<std::uint8_t> taps_inside(std::int64_t t, std::int64_t n, std::int64_t out,
                                      std::int64_t s, std::int64_t p, std::int64_t d) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(out));
  for (std::int64_t o = 0; o < out; ++o) {
    const std::int64_t at = o * s - p + t * d;
    v[static_cast<std::size_t>(o)] = at >= 0 && at < n ? 1 : 0;
  }
  return v;
}

// The adjoint of max_pool2d_grad(x, .), which is linear in its gradient input:
// for each window, G at the tap max_pool2d_grad routes to (the first maximum in
// row-major tap order, else the last NaN; the first tap inside the input for a
// window of -inf). Tap (i, j) of every window is a strided slice of the padded
// x (and of the padded G), so overlapping windows, padding, dilation and ceil
// mode need nothing special; taps in the padding are masked out.
Tensor max_pool2d_grad_adjoint(const MaxPool2dOptions& a, const GradContext& c) {
  const Tensor &x = c.inputs[0], &gy = c.inputs[1], &G = c.out_grads[0];
  const Ints stride = a.stride.empty() ? a.kernel : a.stride;
  const Tensor m = max_pool2d(x, a);
  // Plain variables, not structured bindings: clang 14 cannot capture those.
  const std::int64_t kh = pair_hw(a.kernel).first, kw = pair_hw(a.kernel).second;
  const std::int64_t sh = pair_hw(stride).first, sw = pair_hw(stride).second;
  const std::int64_t ph = pair_hw(a.padding).first, pw = pair_hw(a.padding).second;
  const std::int64_t dh = pair_hw(a.dilation).first, dw = pair_hw(a.dilation).second;
  const std::int64_t h = x.dim(-2), w = x.dim(-1), oh = gy.dim(-2), ow = gy.dim(-1);
  // Pad (bottom and right as far as ceil mode's last window reaches) so that
  // every tap's strided slice has oh x ow elements.
  const Ints pads{pw, std::max<std::int64_t>((ow - 1) * sw + dw * (kw - 1) + 1 - w - pw, 0), ph,
                  std::max<std::int64_t>((oh - 1) * sh + dh * (kh - 1) + 1 - h - ph, 0)};
  const Tensor xp = pad(x, pads), gp = pad(G, pads);
  struct Tap {
    Tensor is_max, is_nan, g;
  };
  std::vector<Tap> taps;
  for (std::int64_t i = 0; i < kh; ++i) {
    const std::vector<std::uint8_t> rows = taps_inside(i, h, oh, sh, ph, dh);
    const auto rows_in = std::count(rows.begin(), rows.end(), 1);
    if (rows_in == 0) continue;
    for (std::int64_t j = 0; j < kw; ++j) {
      const std::vector<std::uint8_t> cols = taps_inside(j, w, ow, sw, pw, dw);
      const auto cols_in = std::count(cols.begin(), cols.end(), 1);
      if (cols_in == 0) continue;
      const auto tap = [&](const Tensor& t) {
        return t.slice(-2, i * dh, i * dh + (oh - 1) * sh + 1, sh)
            .slice(-1, j * dw, j * dw + (ow - 1) * sw + 1, sw);
      };
      const Tensor xt = tap(xp);
      Tensor is_max = xt == m, is_nan = xt != xt;
      if (rows_in < oh || cols_in < ow) {  // some windows have this tap in the padding
        const Tensor inside = logical_and(cast(from_vector(rows, Shape{oh, 1}), bool_),
                                          cast(from_vector(cols, Shape{ow}), bool_));
        is_max = logical_and(is_max, inside);
        is_nan = logical_and(is_nan, inside);
      }
      taps.push_back({is_max, is_nan, tap(gp)});
    }
  }
  if (taps.empty()) return zeros(gy.shape(), G.dtype());
  Tensor first_max = where(taps.back().is_max, taps.back().g, 0);
  for (std::size_t k = taps.size() - 1; k-- > 0;)
    first_max = where(taps[k].is_max, taps[k].g, first_max);
  Tensor last_nan = where(taps.front().is_nan, taps.front().g, 0);
  for (std::size_t k = 1; k < taps.size(); ++k)
    last_nan = where(taps[k].is_nan, taps[k].g, last_nan);
  return where(m != m, last_nan, first_max);
}

}  // namespace

// ---------------------------------------------------------------- conv2d

std::vector<TensorType> Conv2d::infer(const Attrs& a, std::span<const TensorType> in) {
  return conv2d_infer(in, a, name);
}
std::vector<Tensor> Conv2d::eval(const Attrs& a, std::span<const Tensor> in) {
  return conv2d_eval(in, a);
}
std::vector<Tensor> Conv2d::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &x = c.inputs[0], &w = c.inputs[1], &g = c.out_grads[0];
  std::vector<Tensor> r{conv2d_grad_input(g, w, x.shape(), a),
                        conv2d_grad_weight(x, g, w.shape(), a)};
  if (c.inputs.size() > 2) r.push_back(sum(g, {0, 2, 3}));  // bias: over N, OH, OW
  return r;
}

Samples Conv2d::samples() {
  const Attrs strided{.stride = {2}, .padding = {1}, .groups = 2};
  const Attrs dilated{.padding = {1}, .dilation = {2}};
  return {
      .cases = {sample("[1..9] * ones 2x2",
                       {arange(1, 10).reshape({1, 1, 3, 3}).to(float32), ones({1, 1, 2, 2})},
                       Attrs{}, {from_vector(floats({12, 16, 24, 28}), {1, 1, 2, 2})}),
                sample("stride 2, padding 1, bias",
                       {sample_tensor({2, 3, 7, 7}, 1), sample_tensor({4, 3, 3, 3}, 2),
                        sample_tensor({4}, 3)},
                       Attrs{.stride = {2, 2}, .padding = {1, 1}}),
                sample("groups 2, dilation 2, f64", {f64({1, 4, 7, 7}, 4), f64({4, 2, 3, 3}, 5)},
                       Attrs{.dilation = {2, 2}, .groups = 2}),
                sample("bf16",
                       {sample_tensor({1, 2, 5, 5}, 6, -2, 2, bfloat16),
                        sample_tensor({3, 2, 3, 3}, 7, -2, 2, bfloat16)},
                       Attrs{}),
                sample("i32, 1x2 kernel",
                       {sample_tensor({1, 2, 4, 4}, 8, -3, 3, int32),
                        sample_tensor({2, 2, 1, 2}, 9, -3, 3, int32)},
                       Attrs{}),
                sample("gradient, stride 2, padding 1, groups 2, bias",
                       {f64({2, 4, 6, 5}, 10), f64({6, 2, 3, 3}, 11), f64({6}, 12)}, strided, {},
                       {0, 1, 2}),
                sample("gradient, dilation 2", {f64({1, 3, 6, 7}, 13), f64({2, 3, 2, 3}, 14)},
                       dilated, {}, {0, 1})},
      .errors = {error_sample("3-D input", {zeros({3, 5, 5}), zeros({2, 3, 3, 3})}, Attrs{},
                              "ms::ShapeError", "conv2d: input [3, 5, 5] must be 4-D"),
                 error_sample("mixed dtypes", {zeros({1, 3, 5, 5}), zeros({2, 3, 3, 3}, float64)},
                              Attrs{}, "ms::TypeError", "conv2d: weight dtype Float64 differs"),
                 error_sample("channels differ", {zeros({1, 4, 5, 5}), zeros({2, 3, 3, 3})},
                              Attrs{}, "ms::ShapeError", "has 4 channels but weight"),
                 error_sample("stride 0", {zeros({1, 3, 5, 5}), zeros({2, 3, 3, 3})},
                              Attrs{.stride = {0}}, "ms::ValueError", "conv2d: stride must be > 0"),
                 error_sample("stride of 3 values", {zeros({1, 3, 5, 5}), zeros({2, 3, 3, 3})},
                              Attrs{.stride = {1, 1, 1}}, "ms::ValueError",
                              "conv2d: stride must hold 1 value (both axes) or 2"),
                 error_sample("kernel over the input", {zeros({1, 3, 2, 2}), zeros({2, 3, 3, 3})},
                              Attrs{}, "ms::ShapeError", "is larger than the padded input")}};
}

// ---------------------------------------------------------------- pooling

std::vector<TensorType> MaxPool2d::infer(const Attrs& a, std::span<const TensorType> in) {
  return pool_infer(name, true, in, pool_attrs(a, name));
}
std::vector<Tensor> MaxPool2d::eval(const Attrs& a, std::span<const Tensor> in) {
  return {pool_eval(name, true, in, pool_attrs(a, name), true)};
}
std::vector<Tensor> MaxPool2d::vjp(const Attrs& a, const GradContext& c) {
  return {max_pool2d_grad(c.inputs[0], c.out_grads[0], a)};
}

Samples MaxPool2d::samples() {
  const Attrs two{.kernel = {2}};
  const Attrs overlap{.kernel = {3}, .stride = {2}, .padding = {1}, .ceil_mode = true};
  return {
      .cases = {sample("4x4 ramp, 2x2", {arange(0, 16).reshape({1, 1, 4, 4}).to(float32)}, two,
                       {from_vector(floats({5, 7, 13, 15}), {1, 1, 2, 2})}),
                sample("3x3 stride 2 pad 1 ceil, i32, 3-D",
                       {sample_tensor({3, 7, 7}, 20, -9, 9, int32)}, overlap),
                sample("f16", {sample_tensor({1, 2, 4, 4}, 21, -2, 2, float16)}, two),
                sample("2x3 dilation 2", {sample_tensor({2, 2, 6, 7}, 22)},
                       Attrs{.kernel = {2, 3}, .stride = {1}, .dilation = {2}}),
                sample("gradient, 2x2", {f64({2, 3, 4, 6}, 23)}, two, {}, {0}),
                sample("gradient, overlapping, ceil", {f64({1, 2, 7, 7}, 24)}, overlap, {}, {0})},
      .errors = {error_sample("kernel 0", {zeros({1, 1, 4, 4})}, Attrs{.kernel = {0}},
                              "ms::ValueError", "max_pool2d: kernel must be > 0"),
                 error_sample("no kernel", {zeros({1, 1, 4, 4})}, Attrs{}, "ms::ValueError",
                              "max_pool2d: kernel must hold 1 value (both axes) or 2"),
                 error_sample("padding over half the kernel", {zeros({1, 1, 4, 4})},
                              Attrs{.kernel = {2}, .padding = {2}}, "ms::ValueError",
                              "must be at most half the kernel size"),
                 error_sample("2-D input", {zeros({4, 4})}, two, "ms::ShapeError",
                              "max_pool2d: input [4, 4] must be 3-D"),
                 error_sample("bool input", {zeros({1, 1, 4, 4}, bool_)}, two, "ms::TypeError",
                              "max_pool2d: dtype Bool is not supported")}};
}

std::vector<TensorType> AvgPool2d::infer(const Attrs& a, std::span<const TensorType> in) {
  return pool_infer(name, false, in, pool_attrs(a, name));
}
std::vector<Tensor> AvgPool2d::eval(const Attrs& a, std::span<const Tensor> in) {
  return {pool_eval(name, false, in, pool_attrs(a, name), a.count_include_pad)};
}
std::vector<Tensor> AvgPool2d::vjp(const Attrs& a, const GradContext& c) {
  return {avg_pool2d_grad(c.out_grads[0], c.inputs[0].shape(), a)};
}

Samples AvgPool2d::samples() {
  const Attrs two{.kernel = {2}};
  const Attrs exclude{.kernel = {3}, .stride = {1}, .padding = {1}, .count_include_pad = false};
  const Attrs ceil{.kernel = {3}, .stride = {2}, .padding = {1}, .ceil_mode = true};
  return {.cases = {sample("[1..8] as 2x4, 2x2", {arange(1, 9).reshape({1, 1, 2, 4}).to(float32)},
                           two, {from_vector(floats({3.5, 5.5}), {1, 1, 1, 2})}),
                    sample("3x3 stride 1 pad 1 exclude pad, f64", {f64({1, 2, 5, 5}, 30)}, exclude),
                    sample("3x3 stride 2 pad 1 ceil", {sample_tensor({2, 2, 5, 5}, 31)}, ceil),
                    sample("bf16", {sample_tensor({1, 2, 4, 4}, 32, -2, 2, bfloat16)}, two),
                    sample("gradient, 2x2", {f64({2, 3, 4, 6}, 33)}, two, {}, {0}),
                    sample("gradient, 3x2 stride 1 pad 1", {f64({1, 2, 5, 4}, 34)},
                           Attrs{.kernel = {3, 2}, .stride = {1}, .padding = {1}}, {}, {0}),
                    sample("gradient, ceil, exclude pad", {f64({1, 2, 6, 7}, 35)},
                           Attrs{.kernel = {3},
                                 .stride = {2},
                                 .padding = {1},
                                 .ceil_mode = true,
                                 .count_include_pad = false},
                           {}, {0})},
          .errors = {
              error_sample("i32 input", {zeros({1, 2, 5, 5}, int32)}, two, "ms::TypeError",
                           "avg_pool2d: dtype Int32 is not supported"),
              error_sample("stride 0", {zeros({1, 2, 5, 5})}, Attrs{.kernel = {2}, .stride = {0}},
                           "ms::ValueError", "avg_pool2d: stride must be > 0")}};
}

// ---------------------------------------------------------------- softmax_cross_entropy

std::vector<TensorType> SoftmaxCrossEntropy::infer(const Attrs&, std::span<const TensorType> in) {
  return sce_infer(in);
}
std::vector<Tensor> SoftmaxCrossEntropy::eval(const Attrs&, std::span<const Tensor> in) {
  return sce_eval(in);
}
std::vector<Tensor> SoftmaxCrossEntropy::vjp(const Attrs&, const GradContext& c) {
  const Tensor& x = c.inputs[0];
  const Tensor target = one_hot(c.inputs[1], x.dim(1), x.dtype());
  return {Tensor((softmax(x, 1) - target) * unsqueeze(c.out_grads[0], 1)), Tensor()};
}

Samples SoftmaxCrossEntropy::samples() {
  const Attrs none;
  const auto labels = [](std::vector<std::int64_t> v, DType dt = int64) {
    const auto n = static_cast<std::int64_t>(v.size());
    return from_vector(v, {n}).to(dt);
  };
  Sample two_classes = sample("two equal logits: log 2", {zeros({1, 2}), labels({0})}, none,
                              {from_vector(floats({0.69314718f}), {1})});
  two_classes.tol = 1e-6;
  return {.cases = {two_classes,
                    sample("f32, int64 labels", {sample_tensor({4, 5}, 40), labels({0, 4, 2, 2})},
                           none),
                    sample("f64, int32 labels", {f64({3, 6}, 41), labels({5, 0, 3}, int32)}, none),
                    sample("gradient", {f64({4, 5}, 42), labels({1, 0, 4, 3})}, none, {}, {0})},
          .errors = {error_sample("label out of range", {zeros({2, 5}), labels({0, 5})}, none,
                                  "ms::IndexError",
                                  "softmax_cross_entropy: label 5 of row 1 is outside [0, 5)"),
                     error_sample("float labels", {zeros({2, 5}), zeros({2})}, none,
                                  "ms::TypeError", "labels must be int32 or int64"),
                     error_sample("1-D logits", {zeros({5}), labels({0})}, none, "ms::ShapeError",
                                  "logits must be [N, C]")}};
}

// ---------------------------------------------------------------- gradients
//
// The backward ops are linear in their gradient input (conv2d's bilinear), so
// their own gradients are the forward ops again (grad of grad). With G the
// gradient of their output:
//   conv2d_grad_input(gy, w) = A_w^T gy, where A_w x = conv2d(x, w):
//     <A_w^T gy, G> = <gy, conv2d(G, w)>, so d/d gy = conv2d(G, w) and
//     d/d w = conv2d_grad_weight(G, gy) (conv2d's weight gradient at input G);
//   conv2d_grad_weight(x, gy) = B_x^T gy, where B_x k = conv2d(x, k):
//     <B_x^T gy, G> = <gy, conv2d(x, G)>, so d/d gy = conv2d(x, G) and
//     d/d x = conv2d_grad_input(gy, G) (conv2d's input gradient at weight G).

std::vector<TensorType> Conv2dGradInput::infer(const Attrs& a, std::span<const TensorType> in) {
  return conv2d_grad_input_infer(in, a);
}
std::vector<Tensor> Conv2dGradInput::eval(const Attrs& a, std::span<const Tensor> in) {
  const TensorType t = conv2d_grad_input_infer(types_of(in), a)[0];
  return {
      conv_grad_eval(name, t, in[0], in[1], t.shape, in[1].shape(), in[0].shape(), a,
                     [](const auto* gy, const auto* w, auto* dx, const kernels::Conv2dGeometry& g) {
                       if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*dx)>, bfloat16_t>)
                         kernels::conv2d_grad_input_bf16(gy, w, dx, g);
                       else
                         kernels::conv2d_grad_input(gy, w, dx, g);
                     })};
}
std::vector<Tensor> Conv2dGradInput::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &gy = c.inputs[0], &w = c.inputs[1], &G = c.out_grads[0];
  return {conv2d(G, w, std::nullopt, a), conv2d_grad_weight(G, gy, w.shape(), a)};
}

Samples Conv2dGradInput::samples() {
  const Conv2dOptions strided{.stride = {2}, .padding = {1}, .groups = 2};
  const Conv2dOptions dilated{.padding = {1}, .dilation = {2}};
  return {
      .cases = {sample("ones 2x2 over 3x3: tap counts", {ones({1, 1, 2, 2}), ones({1, 1, 2, 2})},
                       grad_input_attrs({}, {1, 1, 3, 3}),
                       {from_vector(floats({1, 2, 1, 2, 4, 2, 1, 2, 1}), {1, 1, 3, 3})}),
                sample("stride 2, padding 1, groups 2",
                       {sample_tensor({2, 4, 4, 4}, 50), sample_tensor({4, 2, 3, 3}, 51)},
                       grad_input_attrs(strided, {2, 4, 7, 7})),
                sample("gradient, strided", {f64({2, 6, 5, 3}, 52), f64({6, 2, 3, 3}, 53)},
                       grad_input_attrs(strided, {2, 4, 9, 6}), {}, {0, 1}),
                sample("gradient, dilated", {f64({1, 2, 6, 5}, 54), f64({2, 3, 2, 3}, 55)},
                       grad_input_attrs(dilated, {1, 3, 6, 7}), {}, {0, 1})},
      .errors = {
          error_sample("grad_out of another shape", {zeros({1, 1, 3, 3}), ones({1, 1, 2, 2})},
                       grad_input_attrs({}, {1, 1, 3, 3}), "ms::ShapeError",
                       "must have the shape of the conv2d output [1, 1, 2, 2]"),
          error_sample("negative input_size", {zeros({1, 1, 2, 2}), ones({1, 1, 2, 2})},
                       grad_input_attrs({}, {1, 1, -3, 3}), "ms::ValueError",
                       "conv2d_grad_input: input_size [1, 1, -3, 3] has a negative size"),
          error_sample("i32", {zeros({1, 1, 2, 2}, int32), zeros({1, 1, 2, 2}, int32)},
                       grad_input_attrs({}, {1, 1, 3, 3}), "ms::TypeError",
                       "conv2d_grad_input: grad_out dtype Int32 is not supported")}};
}

std::vector<TensorType> Conv2dGradWeight::infer(const Attrs& a, std::span<const TensorType> in) {
  return conv2d_grad_weight_infer(in, a);
}
std::vector<Tensor> Conv2dGradWeight::eval(const Attrs& a, std::span<const Tensor> in) {
  const TensorType t = conv2d_grad_weight_infer(types_of(in), a)[0];
  return {
      conv_grad_eval(name, t, in[0], in[1], in[0].shape(), t.shape, in[1].shape(), a,
                     [](const auto* x, const auto* gy, auto* dw, const kernels::Conv2dGeometry& g) {
                       if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*dw)>, bfloat16_t>)
                         kernels::conv2d_grad_weight_bf16(x, gy, dw, g);
                       else
                         kernels::conv2d_grad_weight(x, gy, dw, g);
                     })};
}
std::vector<Tensor> Conv2dGradWeight::vjp(const Attrs& a, const GradContext& c) {
  const Tensor &x = c.inputs[0], &gy = c.inputs[1], &G = c.out_grads[0];
  return {conv2d_grad_input(gy, G, x.shape(), a), conv2d(x, G, std::nullopt, a)};
}

Samples Conv2dGradWeight::samples() {
  const Conv2dOptions strided{.stride = {2}, .padding = {1}, .groups = 2};
  const Conv2dOptions dilated{.padding = {1}, .dilation = {2}};
  return {
      .cases = {sample("ones: 4 positions per tap", {ones({1, 1, 3, 3}), ones({1, 1, 2, 2})},
                       grad_weight_attrs({}, {1, 1, 2, 2}),
                       {from_vector(floats({4, 4, 4, 4}), {1, 1, 2, 2})}),
                sample("stride 2, padding 1, groups 2, f64",
                       {f64({2, 4, 7, 7}, 60), f64({2, 4, 4, 4}, 61)},
                       grad_weight_attrs(strided, {4, 2, 3, 3})),
                sample("gradient, strided", {f64({2, 4, 9, 6}, 62), f64({2, 6, 5, 3}, 63)},
                       grad_weight_attrs(strided, {6, 2, 3, 3}), {}, {0, 1}),
                sample("gradient, dilated", {f64({1, 3, 6, 7}, 64), f64({1, 2, 6, 5}, 65)},
                       grad_weight_attrs(dilated, {2, 3, 2, 3}), {}, {0, 1})},
      .errors = {error_sample("weight_size of rank 3", {zeros({1, 1, 3, 3}), zeros({1, 1, 2, 2})},
                              grad_weight_attrs({}, {1, 2, 2}), "ms::ShapeError",
                              "conv2d_grad_weight: weight_size [1, 2, 2] must have rank 4"),
                 error_sample("mixed dtypes", {zeros({1, 1, 3, 3}), zeros({1, 1, 2, 2}, float64)},
                              grad_weight_attrs({}, {1, 1, 2, 2}), "ms::TypeError",
                              "conv2d_grad_weight: grad_out dtype Float64 differs")}};
}

std::vector<TensorType> MaxPool2dGrad::infer(const Attrs& a, std::span<const TensorType> in) {
  return max_pool2d_grad_infer(in, a);
}
std::vector<Tensor> MaxPool2dGrad::eval(const Attrs& a, std::span<const Tensor> in) {
  return max_pool2d_grad_eval(in, a);
}
// Piecewise constant in x (no gradient), linear in gy.
std::vector<Tensor> MaxPool2dGrad::vjp(const Attrs& a, const GradContext& c) {
  return {Tensor(), max_pool2d_grad_adjoint(a, c)};
}

Samples MaxPool2dGrad::samples() {
  const Attrs two{.kernel = {2}};
  const Attrs overlap{.kernel = {3}, .stride = {2}, .padding = {1}, .ceil_mode = true};
  return {
      .cases = {sample("to the maximum",
                       {from_vector(floats({1, 3, 2, 0}), {1, 1, 2, 2}),
                        from_vector(floats({5}), {1, 1, 1, 1})},
                       two, {from_vector(floats({0, 5, 0, 0}), {1, 1, 2, 2})}),
                sample("3x3 stride 2 pad 1 ceil",
                       {sample_tensor({2, 3, 7, 7}, 70), sample_tensor({2, 3, 4, 4}, 71)}, overlap),
                sample("gradient, 2x2", {f64({2, 3, 4, 6}, 72), f64({2, 3, 2, 3}, 73)}, two, {},
                       {1}),
                sample("gradient, overlapping, ceil",
                       {f64({1, 2, 7, 7}, 74), f64({1, 2, 4, 4}, 75)}, overlap, {}, {1}),
                sample("gradient, 2x3 dilation 2, 3-D", {f64({2, 6, 7}, 76), f64({2, 4, 3}, 77)},
                       Attrs{.kernel = {2, 3}, .stride = {1}, .dilation = {2}}, {}, {1})},
      .errors = {
          error_sample("grad_out of another shape", {zeros({1, 2, 4, 4}), zeros({1, 2, 3, 2})}, two,
                       "ms::ShapeError",
                       "max_pool2d_grad: grad_out [1, 2, 3, 2] must have the shape of the "
                       "max_pool2d output [1, 2, 2, 2]"),
          error_sample("i32", {zeros({1, 2, 4, 4}, int32), zeros({1, 2, 2, 2}, int32)}, two,
                       "ms::TypeError", "max_pool2d_grad: input dtype Int32 is not supported"),
          error_sample("kernel 0", {zeros({1, 2, 4, 4}), zeros({1, 2, 2, 2})}, Attrs{.kernel = {0}},
                       "ms::ValueError", "max_pool2d_grad: kernel must be > 0")}};
}

std::vector<TensorType> AvgPool2dGrad::infer(const Attrs& a, std::span<const TensorType> in) {
  return avg_pool2d_grad_infer(in, a);
}
std::vector<Tensor> AvgPool2dGrad::eval(const Attrs& a, std::span<const Tensor> in) {
  return avg_pool2d_grad_eval(in, a);
}
// avg_pool2d_grad is avg_pool2d's transpose: its adjoint is avg_pool2d.
std::vector<Tensor> AvgPool2dGrad::vjp(const Attrs& a, const GradContext& c) {
  return {avg_pool2d(c.out_grads[0], a)};
}

Samples AvgPool2dGrad::samples() {
  const AvgPool2dOptions two{.kernel = {2}};
  const AvgPool2dOptions exclude{
      .kernel = {3}, .stride = {1}, .padding = {1}, .count_include_pad = false};
  return {
      .cases = {sample("each window's mean share", {from_vector(floats({4, 8}), {1, 1, 1, 2})},
                       avg_grad_attrs(two, {1, 1, 2, 4}),
                       {from_vector(floats({1, 1, 2, 2, 1, 1, 2, 2}), {1, 1, 2, 4})}),
                sample("3x3 stride 1 pad 1 exclude pad, f64", {f64({1, 2, 5, 5}, 80)},
                       avg_grad_attrs(exclude, {1, 2, 5, 5})),
                sample("gradient, 2x2", {f64({2, 3, 2, 3}, 81)}, avg_grad_attrs(two, {2, 3, 4, 6}),
                       {}, {0}),
                sample("gradient, ceil, exclude pad", {f64({1, 2, 4, 4}, 82)},
                       avg_grad_attrs({.kernel = {3},
                                       .stride = {2},
                                       .padding = {1},
                                       .ceil_mode = true,
                                       .count_include_pad = false},
                                      {1, 2, 6, 7}),
                       {}, {0}),
                sample("gradient, 3x2 pad 1, 3-D", {f64({2, 5, 5}, 83)},
                       avg_grad_attrs({.kernel = {3, 2}, .stride = {1}, .padding = {1}}, {2, 5, 4}),
                       {}, {0})},
      .errors = {
          error_sample("input_size of rank 5", {zeros({1, 2, 2, 2})},
                       avg_grad_attrs(two, {2, 4, 4, 4, 4}), "ms::ShapeError",
                       "avg_pool2d_grad: input_size [2, 4, 4, 4, 4] must have rank 3 or 4"),
          error_sample("grad_out of another shape", {zeros({1, 2, 2, 2})},
                       avg_grad_attrs(two, {1, 2, 6, 6}), "ms::ShapeError",
                       "avg_pool2d output [1, 2, 3, 3]"),
          error_sample("i64", {zeros({1, 2, 2, 2}, int64)}, avg_grad_attrs(two, {1, 2, 4, 4}),
                       "ms::TypeError", "avg_pool2d_grad: grad_out dtype Int64")}};
}

}  // namespace ops

namespace ops::detail {

kernels::Conv2dGeometry conv2d_geometry(const Conv2dOptions& a, const Shape& xs, const Shape& ws,
                                        const Shape& ys) {
  return conv_geometry(xs, ws, ys, conv_attrs(a, Conv2d::name));
}

kernels::Pool2dGeometry max_pool2d_geometry(const MaxPool2dOptions& a, const Shape& xs,
                                            const Shape& ys) {
  return pool_geometry(xs, ys, pool_attrs(a, MaxPool2d::name));
}

bool shapes_may_match(const Shape& a, const Shape& b) {
  if (a.is_any_rank() || b.is_any_rank()) return true;
  if (a.rank() != b.rank()) return false;
  for (std::size_t d = 0; d < a.size(); ++d)
    if (is_known_dim(a[d]) && is_known_dim(b[d]) && a[d] != b[d]) return false;
  return true;
}

void register_nn_ops() {
  register_entries<SoftmaxCrossEntropy, Conv2d, MaxPool2d, AvgPool2d, Conv2dGradInput,
                   Conv2dGradWeight, MaxPool2dGrad, AvgPool2dGrad>();
}

}  // namespace ops::detail
}  // namespace ms
