// Neural-network ops: conv2d, max_pool2d, avg_pool2d, and their gradients
// (conv2d_grad_input, conv2d_grad_weight, max_pool2d_grad, avg_pool2d_grad). `infer` checks every
// attribute and size (with overflow-checked arithmetic, before anything is
// allocated); `eval` makes the inputs dense in their compute dtype and calls
// kernels/conv.cpp or kernels/pool.cpp. Output sizes and padding rules are
// PyTorch's. Unknown dims (kAnyDim) propagate as unknown.
#include "ms/ops/nn.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ms/kernels/conv.hpp"
#include "ms/kernels/parallel.hpp"
#include "ms/kernels/pool.hpp"
#include "ms/ops/op.hpp"

namespace ms {
namespace {

using ops::TensorType;

bool known(std::int64_t d) { return d >= 0; }

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
// empty list when `empty_is_missing` (pooling's stride: empty means the kernel).
Pair pair_attr(const ops::Attrs& attrs, std::string_view name, std::string_view op,
               const Pair* if_missing, bool empty_is_missing = false) {
  if (if_missing != nullptr && !attrs.has(name)) return *if_missing;
  const auto v = attrs.get<std::vector<std::int64_t>>(name, op);
  if (v.empty() && empty_is_missing) return *if_missing;
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

ConvAttrs conv_attrs(const ops::Attrs& attrs, std::string_view op = "conv2d") {
  const Pair ones{1, 1}, zeros{0, 0};
  ConvAttrs a{pair_attr(attrs, "stride", op, &ones), pair_attr(attrs, "padding", op, &zeros),
              pair_attr(attrs, "dilation", op, &ones), attrs.get_or<std::int64_t>("groups", 1, op)};
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
  if (!known(in) || !known(k)) return kAnyDim;
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
std::vector<TensorType> conv2d_infer(std::span<const TensorType> in, const ops::Attrs& attrs,
                                     std::string_view op = "conv2d") {
  check_dtypes_equal(in, op);
  MS_CHECK(conv_dtype_ok(in[0].dtype), TypeError, op, ": dtype ", in[0].dtype,
           " is not supported (float16, bfloat16, float32, float64, int32, int64)");
  const ConvAttrs a = conv_attrs(attrs, op);
  // relu: set by the jit's activation fusion (relu(conv2d(...)) in one pass),
  // only where the compute dtype is the output's: rounding to a half type after
  // the relu would turn a tiny negative into -0 where relu of the rounded value
  // keeps it.
  // max_pool2x2: likewise, a second output max_pool2d(y, 2) (2x2 windows at
  // stride 2, floor), pooled while the planes are in cache.
  // max_pool2x2_index: a third output, uint8 [n, o, oh / 2, ow / 2], the tap
  // each pooling window chose (kernels::max_pool2x2_index), from which
  // max_pool2x2_grad_index computes the pooling's gradient without the conv
  // output. Set by the jit with max_pool2x2, for float32 and float64.
  const bool pool2x2 = attrs.get_or<bool>("max_pool2x2", false, op);
  const bool pool_index = attrs.get_or<bool>("max_pool2x2_index", false, op);
  if (pool_index) {
    MS_CHECK(pool2x2, ValueError, op,
             ": max_pool2x2_index needs max_pool2x2 (the pooling it indexes)");
    MS_CHECK(in[0].dtype == DType::Float32 || in[0].dtype == DType::Float64, TypeError, op,
             ": max_pool2x2_index needs a float32 or float64 input, got ", in[0].dtype);
  }
  if (attrs.get_or<bool>("relu", false, op) || pool2x2)
    MS_CHECK(half_to_float(in[0].dtype) == in[0].dtype, TypeError, op,
             ": the fused relu / max_pool2x2 needs a float32, float64, int32 or int64 input, got ",
             in[0].dtype);
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
  MS_CHECK((!known(kh) || kh > 0) && (!known(kw) || kw > 0), ShapeError, op, ": weight ", ws,
           " has an empty kernel (KH and KW must be > 0)");
  if (known(c)) {
    MS_CHECK(c % a.groups == 0, ShapeError, op, ": groups ", a.groups,
             " does not divide the input channels ", c, " (input ", xs, ")");
    if (known(cg))
      MS_CHECK(mul_checked(cg, a.groups, op, "weight channels * groups") == c, ShapeError, op,
               ": input ", xs, " has ", c, " channels but weight ", ws, " with groups ", a.groups,
               " expects ", cg, " * ", a.groups, " = ", cg * a.groups);
  }
  if (known(o))
    MS_CHECK(o % a.groups == 0, ShapeError, op, ": groups ", a.groups,
             " does not divide the output channels ", o, " (weight ", ws, ")");
  if (in.size() > 2) {
    const Shape& bs = in[2].shape;
    MS_CHECK(bs.is_any_rank() || (bs.rank() == 1 && (!known(bs[0]) || !known(o) || bs[0] == o)),
             ShapeError, op, ": bias ", bs, " must be [", o, "] (the output channels of weight ",
             ws, ")");
  }
  const std::int64_t oh =
      conv_out(h, kh, a.stride.h, a.padding.h, a.dilation.h, "height", xs, ws, op);
  const std::int64_t ow =
      conv_out(w, kw, a.stride.w, a.padding.w, a.dilation.w, "width", xs, ws, op);
  Shape out{n, o, oh, ow};
  std::vector<TensorType> result{{in[0].dtype, out}};
  if (pool2x2) {
    MS_CHECK((!known(oh) || oh >= 2) && (!known(ow) || ow >= 2), ShapeError, op,
             ": the fused max_pool2x2 needs an output of at least 2x2, got ", out);
    const Shape pooled{n, o, known(oh) ? oh / 2 : kAnyDim, known(ow) ? ow / 2 : kAnyDim};
    result.push_back({in[0].dtype, pooled});
    if (pool_index) result.push_back({DType::UInt8, pooled});
  }
  if (out.is_static()) {
    shape_numel(out, std::string(op) + ": output");
    if (known(cg)) {  // the im2col buffer of one (image, group)
      const std::int64_t rows =
          mul_checked(mul_checked(cg, kh, op, "im2col rows"), kw, op, "im2col rows");
      mul_checked(rows, mul_checked(oh, ow, op, "im2col columns"), op, "im2col buffer size");
    }
  }
  return result;
}

std::vector<Tensor> conv2d_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  const std::vector<TensorType> types = conv2d_infer(ops::types_of(in), attrs);
  const TensorType& out_t = types[0];
  const ConvAttrs a = conv_attrs(attrs);
  const DType ct = half_to_float(out_t.dtype);
  // relu: the jit's activation fusion (dtype checked by conv2d_infer)
  const bool relu = attrs.get_or<bool>("relu", false, "conv2d");
  const Tensor x = in[0].to(ct), w = in[1].to(ct);  // dense (no copy when already so)
  const Tensor b = in.size() > 2 ? in[2].to(ct) : Tensor();
  Tensor out = empty(out_t.shape, ct);
  Tensor pooled = types.size() > 1 ? empty(types[1].shape, ct) : Tensor();
  Tensor index = types.size() > 2 ? empty(types[2].shape, DType::UInt8) : Tensor();
  if (out.numel() > 0) {
    kernels::Conv2dGeometry g;
    g.n = x.dim(0), g.c = x.dim(1), g.h = x.dim(2), g.w = x.dim(3);
    g.o = w.dim(0), g.kh = w.dim(2), g.kw = w.dim(3);
    g.oh = out_t.shape[2], g.ow = out_t.shape[3];
    g.sh = a.stride.h, g.sw = a.stride.w, g.ph = a.padding.h, g.pw = a.padding.w;
    g.dh = a.dilation.h, g.dw = a.dilation.w, g.groups = a.groups;
    dtype_dispatch(ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> ||
                    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>)
        kernels::conv2d<T>(x.data<T>(), w.data<T>(), b.defined() ? b.data<T>() : nullptr,
                           out.data<T>(), g, relu, pooled.defined() ? pooled.data<T>() : nullptr,
                           index.defined() ? index.data<std::uint8_t>() : nullptr);
    });
  }
  if (ct != out_t.dtype) out = out.to(out_t.dtype);  // (never with relu or max_pool2x2)
  if (index.defined()) return {out, pooled, index};
  if (pooled.defined()) return {out, pooled};
  return {out};
}

// ---------------------------------------------------------------- conv2d gradients
//
// conv2d_grad_input(grad_out, weight) and conv2d_grad_weight(x, grad_out) take
// the forward's attributes plus the shape of what they compute (input_size,
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
Shape size_attr(const ops::Attrs& attrs, std::string_view name, std::string_view op, std::size_t r0,
                std::size_t r1) {
  const Shape s(attrs.get<std::vector<std::int64_t>>(name, op));
  MS_CHECK(s.size() == r0 || s.size() == r1, ShapeError, op, ": ", name, " ", s, " must have ",
           r0 == r1 ? detail::str_cat("rank ", r0) : detail::str_cat("rank ", r0, " or ", r1),
           ", got rank ", s.size());
  for (std::int64_t d : s)
    MS_CHECK(d >= 0, ValueError, op, ": ", name, " ", s, " has a negative size ", d);
  shape_numel(s, std::string(op) + ": " + std::string(name));
  return s;
}

// grad_out must have the forward's output shape `want` (unknown dims match).
// a and b can be one shape: an unknown rank or dim matches anything.
bool shapes_may_match(const Shape& a, const Shape& b) {
  if (a.is_any_rank() || b.is_any_rank()) return true;
  if (a.rank() != b.rank()) return false;
  for (std::size_t d = 0; d < a.size(); ++d)
    if (known(a[d]) && known(b[d]) && a[d] != b[d]) return false;
  return true;
}

void check_grad_shape(const Shape& got, const Shape& want, std::string_view op,
                      std::string_view forward) {
  MS_CHECK(shapes_may_match(got, want), ShapeError, op, ": grad_out ", got,
           " must have the shape of the ", forward, " output ", want);
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

std::vector<TensorType> conv2d_grad_input_infer(std::span<const TensorType> in,
                                                const ops::Attrs& attrs) {
  constexpr std::string_view op = "conv2d_grad_input";
  check_grad_dtypes(in, op, {"grad_out", "weight"});
  const TensorType x{in[0].dtype, size_attr(attrs, "input_size", op, 4, 4)};
  const TensorType fwd[] = {x, in[1]};
  check_grad_shape(in[0].shape, conv2d_infer(fwd, attrs, op)[0].shape, op, "conv2d");
  return {x};
}

std::vector<TensorType> conv2d_grad_weight_infer(std::span<const TensorType> in,
                                                 const ops::Attrs& attrs) {
  constexpr std::string_view op = "conv2d_grad_weight";
  check_grad_dtypes(in, op, {"input", "grad_out"});
  const TensorType w{in[0].dtype, size_attr(attrs, "weight_size", op, 4, 4)};
  const TensorType fwd[] = {in[0], w};
  check_grad_shape(in[1].shape, conv2d_infer(fwd, attrs, op)[0].shape, op, "conv2d");
  return {w};
}

// Runs kernel(a, b, out, geometry) on float or double buffers: half inputs
// compute in float32 and round on store.
template <class K>
Tensor conv_grad_eval(std::string_view op, const TensorType& out_t, const Tensor& a_in,
                      const Tensor& b_in, const Shape& xs, const Shape& ws, const Shape& ys,
                      const ops::Attrs& attrs, K kernel) {
  const DType ct = half_to_float(out_t.dtype);
  const Tensor a = a_in.to(ct), b = b_in.to(ct);  // dense
  Tensor out = empty(out_t.shape, ct);
  if (out.numel() > 0) {
    const kernels::Conv2dGeometry g = conv_geometry(xs, ws, ys, conv_attrs(attrs, op));
    if (ct == DType::Float64)
      kernel(a.data<double>(), b.data<double>(), out.data<double>(), g);
    else
      kernel(a.data<float>(), b.data<float>(), out.data<float>(), g);
  }
  if (ct != out_t.dtype) out = out.to(out_t.dtype);
  return out;
}

std::vector<Tensor> conv2d_grad_input_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  const TensorType t = conv2d_grad_input_infer(ops::types_of(in), attrs)[0];
  return {conv_grad_eval(
      "conv2d_grad_input", t, in[0], in[1], t.shape, in[1].shape(), in[0].shape(), attrs,
      [](const auto* gy, const auto* w, auto* dx, const kernels::Conv2dGeometry& g) {
        kernels::conv2d_grad_input(gy, w, dx, g);
      })};
}

std::vector<Tensor> conv2d_grad_weight_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  const TensorType t = conv2d_grad_weight_infer(ops::types_of(in), attrs)[0];
  return {conv_grad_eval(
      "conv2d_grad_weight", t, in[0], in[1], in[0].shape(), t.shape, in[1].shape(), attrs,
      [](const auto* x, const auto* gy, auto* dw, const kernels::Conv2dGeometry& g) {
        kernels::conv2d_grad_weight(x, gy, dw, g);
      })};
}

// ---------------------------------------------------------------- pooling

struct PoolAttrs {
  Pair kernel, stride, padding, dilation;
  bool ceil_mode;
};

PoolAttrs pool_attrs(const ops::Attrs& attrs, std::string_view op, bool with_dilation) {
  const Pair ones{1, 1}, zeros{0, 0};
  PoolAttrs a{};
  a.kernel = pair_attr(attrs, "kernel_size", op, nullptr);
  check_positive(a.kernel, op, "kernel_size");
  a.stride = pair_attr(attrs, "stride", op, &a.kernel, true);  // empty: the kernel size
  a.padding = pair_attr(attrs, "padding", op, &zeros);
  a.dilation = with_dilation ? pair_attr(attrs, "dilation", op, &ones) : ones;
  a.ceil_mode = attrs.get_or<bool>("ceil_mode", false, op);
  check_positive(a.stride, op, "stride");
  check_positive(a.dilation, op, "dilation");
  MS_CHECK(a.padding.h >= 0 && a.padding.w >= 0, ValueError, op, ": padding must be >= 0, got ",
           a.padding);
  MS_CHECK(a.padding.h <= a.kernel.h / 2 && a.padding.w <= a.kernel.w / 2, ValueError, op,
           ": padding ", a.padding, " must be at most half the kernel size ", a.kernel,
           " (PyTorch's rule)");
  return a;
}

// PyTorch's pooling_output_shape: floor or ceil of (in + 2p - extent) / s, + 1;
// in ceil mode a last window starting in the right padding is dropped.
std::int64_t pool_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p,
                      std::int64_t d, bool ceil_mode, std::string_view op, std::string_view axis,
                      const Shape& xs) {
  if (!known(in)) return kAnyDim;
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
                                   const ops::Attrs& attrs) {
  const DType dt = in[0].dtype;
  MS_CHECK(pool_dtype_ok(dt, is_max), TypeError, op, ": dtype ", dt, " is not supported (",
           is_max ? "float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8"
                  : "float16, bfloat16, float32, float64; cast integers with .to(ms::float32)",
           ")");
  const PoolAttrs a = pool_attrs(attrs, op, is_max);
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

Tensor pool_eval(std::string_view op, bool is_max, std::span<const Tensor> in,
                 const ops::Attrs& attrs) {
  const TensorType out_t = pool_infer(op, is_max, ops::types_of(in), attrs)[0];
  const PoolAttrs a = pool_attrs(attrs, op, is_max);
  const DType ct = pool_compute_dtype(out_t.dtype);
  const Tensor x = in[0].to(ct);  // dense
  Tensor out = empty(out_t.shape, ct);
  if (out.numel() > 0) {
    const std::size_t r = x.shape().size();
    kernels::Pool2dGeometry g;
    g.h = x.shape()[r - 2], g.w = x.shape()[r - 1];
    g.planes = x.numel() / (g.h * g.w);
    g.oh = out_t.shape[r - 2], g.ow = out_t.shape[r - 1];
    g.kh = a.kernel.h, g.kw = a.kernel.w, g.sh = a.stride.h, g.sw = a.stride.w;
    g.ph = a.padding.h, g.pw = a.padding.w, g.dh = a.dilation.h, g.dw = a.dilation.w;
    const bool include_pad = attrs.get_or<bool>("count_include_pad", true, op);
    dtype_dispatch(ct, [&](auto tag) {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        if (is_max)
          kernels::max_pool2d<T>(x.data<T>(), out.data<T>(), g);
        else
          kernels::avg_pool2d<T>(x.data<T>(), out.data<T>(), g, include_pad);
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

std::vector<TensorType> max_pool2d_grad_infer(std::span<const TensorType> in,
                                              const ops::Attrs& attrs) {
  constexpr std::string_view op = "max_pool2d_grad";
  check_grad_dtypes(in, op, {"input", "grad_out"});
  check_grad_shape(in[1].shape, pool_infer(op, true, in.first(1), attrs)[0].shape, op,
                   "max_pool2d");
  return {in[0]};
}

std::vector<TensorType> avg_pool2d_grad_infer(std::span<const TensorType> in,
                                              const ops::Attrs& attrs) {
  constexpr std::string_view op = "avg_pool2d_grad";
  check_grad_dtypes(in, op, {"grad_out"});
  const TensorType x{in[0].dtype, size_attr(attrs, "input_size", op, 3, 4)};
  check_grad_shape(in[0].shape, pool_infer(op, false, {&x, 1}, attrs)[0].shape, op, "avg_pool2d");
  return {x};
}

std::vector<Tensor> max_pool2d_grad_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  constexpr std::string_view op = "max_pool2d_grad";
  const TensorType t = max_pool2d_grad_infer(ops::types_of(in), attrs)[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor x = in[0].to(ct), gy = in[1].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const kernels::Pool2dGeometry g =
        pool_geometry(t.shape, gy.shape(), pool_attrs(attrs, op, true));
    // relu: set by the jit's activation fusion, x being relu(y), for
    // relu_grad(max_pool2d_grad(relu(y), gy), y) in one pass.
    const bool relu = attrs.get_or<bool>("relu", false, op);
    if (ct == DType::Float64)
      kernels::max_pool2d_grad(x.data<double>(), gy.data<double>(), dx.data<double>(), g, relu);
    else
      kernels::max_pool2d_grad(x.data<float>(), gy.data<float>(), dx.data<float>(), g, relu);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

std::vector<Tensor> avg_pool2d_grad_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  constexpr std::string_view op = "avg_pool2d_grad";
  const TensorType t = avg_pool2d_grad_infer(ops::types_of(in), attrs)[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor gy = in[0].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const kernels::Pool2dGeometry g =
        pool_geometry(t.shape, gy.shape(), pool_attrs(attrs, op, false));
    const bool include_pad = attrs.get_or<bool>("count_include_pad", true, op);
    if (ct == DType::Float64)
      kernels::avg_pool2d_grad(gy.data<double>(), dx.data<double>(), g, include_pad);
    else
      kernels::avg_pool2d_grad(gy.data<float>(), dx.data<float>(), g, include_pad);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

// max_pool2x2_grad_index(index, grad_out){input_hw, relu}: max_pool2d_grad of
// a 2x2, stride-2 pooling from the taps conv2d{max_pool2x2_index} noted (the
// jit's rewrite of max_pool2d_grad(conv output, grad_out) in the CNN pattern:
// the conv output is then never read back). input_hw: the pooled input's
// [H, W] (H / 2 and W / 2 are grad_out's last two dims); relu: drop the
// elements whose tap held a value that is not > 0 (max_pool2d_grad{relu}).
// Every index byte is safe: only its tap bits and its not-positive bit are read.
std::vector<TensorType> max_pool2x2_grad_index_infer(std::span<const TensorType> in,
                                                     const ops::Attrs& attrs) {
  constexpr std::string_view op = "max_pool2x2_grad_index";
  MS_CHECK(in[0].dtype == DType::UInt8, TypeError, op, ": index dtype ", in[0].dtype,
           " must be uint8 (conv2d's max_pool2x2_index output)");
  MS_CHECK(grad_dtype_ok(in[1].dtype), TypeError, op, ": grad_out dtype ", in[1].dtype,
           " is not supported (float16, bfloat16, float32, float64: gradients are floating)");
  const Shape& is = in[0].shape;
  const Shape& gs = in[1].shape;
  const std::vector<std::int64_t> hw = attrs.get<std::vector<std::int64_t>>("input_hw", op);
  MS_CHECK(hw.size() == 2, ShapeError, op, ": input_hw must be [H, W], got ", Shape(hw));
  MS_CHECK(hw[0] >= 2 && hw[1] >= 2, ValueError, op, ": input_hw ", Shape(hw),
           " must be at least [2, 2] (one 2x2 window)");
  MS_CHECK(gs.is_any_rank() || gs.rank() == 3 || gs.rank() == 4, ShapeError, op, ": grad_out ", gs,
           " must be 3-D or 4-D [(N,) C, H / 2, W / 2]");
  MS_CHECK(shapes_may_match(is, gs), ShapeError, op, ": index ", is, " and grad_out ", gs,
           " must have one shape (one tap per pooled element)");
  if (gs.is_any_rank()) return {{in[1].dtype, gs}};
  Shape out = gs;
  for (std::size_t a = 0; a < 2; ++a) {
    std::int64_t& d = out[out.size() - 2 + a];
    MS_CHECK(!known(d) || d == hw[a] / 2, ShapeError, op, ": grad_out ", gs, " must end in [",
             hw[0] / 2, ", ", hw[1] / 2, "] for input_hw ", Shape(hw), " (2x2 windows, stride 2)");
    d = hw[a];
  }
  if (out.is_static()) shape_numel(out, std::string(op) + ": output");
  return {{in[1].dtype, out}};
}

std::vector<Tensor> max_pool2x2_grad_index_eval(std::span<const Tensor> in,
                                                const ops::Attrs& attrs) {
  constexpr std::string_view op = "max_pool2x2_grad_index";
  const TensorType t = max_pool2x2_grad_index_infer(ops::types_of(in), attrs)[0];
  const DType ct = half_to_float(t.dtype);
  const Tensor index = in[0].contiguous(), gy = in[1].to(ct);  // dense
  Tensor dx = empty(t.shape, ct);
  if (dx.numel() > 0) {
    const std::size_t r = t.shape.size();
    const std::int64_t h = t.shape[r - 2], w = t.shape[r - 1];
    const kernels::Pool2dGeometry g =
        kernels::pool2x2_geometry(shape_numel(t.shape) / (h * w), h, w);
    const bool relu = attrs.get_or<bool>("relu", false, op);
    const std::uint8_t* k = index.data<std::uint8_t>();
    if (ct == DType::Float64)
      kernels::max_pool2x2_grad_index(k, gy.data<double>(), dx.data<double>(), g, relu);
    else
      kernels::max_pool2x2_grad_index(k, gy.data<float>(), dx.data<float>(), g, relu);
  }
  if (ct != t.dtype) dx = dx.to(t.dtype);
  return {dx};
}

// ---------------------------------------------------------------- softmax_cross_entropy

std::vector<TensorType> sce_infer(std::span<const TensorType> in, const ops::Attrs&) {
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

template <class T>
void sce_rows(const T* x, const std::int64_t* y, T* out, std::int64_t n, std::int64_t c) {
  kernels::parallel_for(n, std::max<std::int64_t>(1, 4096 / c),
                        [&](std::int64_t r0, std::int64_t r1) {
                          for (std::int64_t r = r0; r < r1; ++r) {
                            const T* row = x + r * c;
                            T m = row[0];
                            for (std::int64_t j = 1; j < c; ++j) m = std::max(m, row[j]);
                            T s = 0;
                            for (std::int64_t j = 0; j < c; ++j) s += std::exp(row[j] - m);
                            out[r] = std::log(s) + m - row[y[r]];
                          }
                        });
}

std::vector<Tensor> sce_eval(std::span<const Tensor> in, const ops::Attrs& attrs) {
  const std::vector<TensorType> t = sce_infer(ops::types_of(in), attrs);
  const DType ct = in[0].dtype() == float64 ? float64 : float32;
  const Tensor x = in[0].to(ct).contiguous();
  const Tensor y = in[1].to(int64).contiguous();
  const std::int64_t n = x.dim(0), c = x.dim(1);
  const std::int64_t* yv = y.data<std::int64_t>();
  for (std::int64_t r = 0; r < n; ++r)  // checked before the parallel region
    MS_CHECK(yv[r] >= 0 && yv[r] < c, IndexError, "softmax_cross_entropy: label ", yv[r],
             " of row ", r, " is outside [0, ", c, ")");
  Tensor out = empty(Shape{n}, ct);
  if (ct == float64)
    sce_rows(x.data<double>(), yv, out.data<double>(), n, c);
  else
    sce_rows(x.data<float>(), yv, out.data<float>(), n, c);
  return {out.dtype() == t[0].dtype ? out : out.to(t[0].dtype)};
}

}  // namespace

Tensor softmax_cross_entropy(const Tensor& logits, const Tensor& labels) {
  static const ops::OpDef& def = ops::op("softmax_cross_entropy");
  return ops::call1(def, {logits, labels});
}

Tensor conv2d(const Tensor& x, const Tensor& weight, std::optional<Tensor> bias,
              Conv2dOptions opts) {
  static const ops::OpDef& def = ops::op("conv2d");
  const ops::Attrs attrs{{"stride", std::move(opts.stride)},
                         {"padding", std::move(opts.padding)},
                         {"dilation", std::move(opts.dilation)},
                         {"groups", opts.groups}};
  if (bias && bias->defined()) return ops::call1(def, {x, weight, *bias}, attrs);
  return ops::call1(def, {x, weight}, attrs);
}

Tensor max_pool2d(const Tensor& x, std::vector<std::int64_t> kernel,
                  std::vector<std::int64_t> stride, std::vector<std::int64_t> padding,
                  std::vector<std::int64_t> dilation, bool ceil_mode) {
  static const ops::OpDef& def = ops::op("max_pool2d");
  return ops::call1(def, {x},
                    {{"kernel_size", std::move(kernel)},
                     {"stride", std::move(stride)},
                     {"padding", std::move(padding)},
                     {"dilation", std::move(dilation)},
                     {"ceil_mode", ceil_mode}});
}

Tensor avg_pool2d(const Tensor& x, std::vector<std::int64_t> kernel,
                  std::vector<std::int64_t> stride, std::vector<std::int64_t> padding,
                  bool ceil_mode, bool count_include_pad) {
  static const ops::OpDef& def = ops::op("avg_pool2d");
  return ops::call1(def, {x},
                    {{"kernel_size", std::move(kernel)},
                     {"stride", std::move(stride)},
                     {"padding", std::move(padding)},
                     {"ceil_mode", ceil_mode},
                     {"count_include_pad", count_include_pad}});
}

Tensor conv2d_grad_input(const Tensor& grad_out, const Tensor& weight, const Shape& input_size,
                         Conv2dOptions opts) {
  static const ops::OpDef& def = ops::op("conv2d_grad_input");
  return ops::call1(def, {grad_out, weight},
                    {{"input_size", input_size.dims()},
                     {"stride", std::move(opts.stride)},
                     {"padding", std::move(opts.padding)},
                     {"dilation", std::move(opts.dilation)},
                     {"groups", opts.groups}});
}

Tensor conv2d_grad_weight(const Tensor& x, const Tensor& grad_out, const Shape& weight_size,
                          Conv2dOptions opts) {
  static const ops::OpDef& def = ops::op("conv2d_grad_weight");
  return ops::call1(def, {x, grad_out},
                    {{"weight_size", weight_size.dims()},
                     {"stride", std::move(opts.stride)},
                     {"padding", std::move(opts.padding)},
                     {"dilation", std::move(opts.dilation)},
                     {"groups", opts.groups}});
}

Tensor max_pool2d_grad(const Tensor& x, const Tensor& grad_out, std::vector<std::int64_t> kernel,
                       std::vector<std::int64_t> stride, std::vector<std::int64_t> padding,
                       std::vector<std::int64_t> dilation, bool ceil_mode) {
  static const ops::OpDef& def = ops::op("max_pool2d_grad");
  return ops::call1(def, {x, grad_out},
                    {{"kernel_size", std::move(kernel)},
                     {"stride", std::move(stride)},
                     {"padding", std::move(padding)},
                     {"dilation", std::move(dilation)},
                     {"ceil_mode", ceil_mode}});
}

Tensor avg_pool2d_grad(const Tensor& grad_out, const Shape& input_size,
                       std::vector<std::int64_t> kernel, std::vector<std::int64_t> stride,
                       std::vector<std::int64_t> padding, bool ceil_mode, bool count_include_pad) {
  static const ops::OpDef& def = ops::op("avg_pool2d_grad");
  return ops::call1(def, {grad_out},
                    {{"input_size", input_size.dims()},
                     {"kernel_size", std::move(kernel)},
                     {"stride", std::move(stride)},
                     {"padding", std::move(padding)},
                     {"ceil_mode", ceil_mode},
                     {"count_include_pad", count_include_pad}});
}

namespace ops::detail {

void register_nn_ops() {
  registry_add(OpDef{.name = "softmax_cross_entropy",
                     .ir_name = "SoftmaxCrossEntropy",
                     .kind = OpKind::Composite,
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .differentiable = true,
                     .infer = sce_infer,
                     .eval = sce_eval});
  registry_add(OpDef{.name = "conv2d",
                     .ir_name = "Conv2D",
                     .kind = OpKind::Conv,
                     .min_inputs = 2,
                     .max_inputs = 3,
                     .differentiable = true,
                     .infer = [](std::span<const TensorType> in,
                                 const Attrs& attrs) { return conv2d_infer(in, attrs); },
                     .eval = conv2d_eval});
  registry_add(
      OpDef{.name = "max_pool2d",
            .ir_name = "MaxPool2D",
            .kind = OpKind::Pool,
            .min_inputs = 1,
            .max_inputs = 1,
            .differentiable = true,
            .infer = [](std::span<const TensorType> in,
                        const Attrs& attrs) { return pool_infer("max_pool2d", true, in, attrs); },
            .eval = [](std::span<const Tensor> in, const Attrs& attrs) -> std::vector<Tensor> {
              return {pool_eval("max_pool2d", true, in, attrs)};
            }});
  registry_add(
      OpDef{.name = "avg_pool2d",
            .ir_name = "AvgPool2D",
            .kind = OpKind::Pool,
            .min_inputs = 1,
            .max_inputs = 1,
            .differentiable = true,
            .infer = [](std::span<const TensorType> in,
                        const Attrs& attrs) { return pool_infer("avg_pool2d", false, in, attrs); },
            .eval = [](std::span<const Tensor> in, const Attrs& attrs) -> std::vector<Tensor> {
              return {pool_eval("avg_pool2d", false, in, attrs)};
            }});
  // Gradients (rules in src/ops/grad.cpp), differentiable again (grad of grad).
  const auto grad_op = [](std::string_view name, std::string_view ir, OpKind kind, int inputs,
                          InferFn infer, EvalFn eval) {
    registry_add(OpDef{.name = name,
                       .ir_name = ir,
                       .kind = kind,
                       .min_inputs = inputs,
                       .max_inputs = inputs,
                       .differentiable = true,
                       .infer = std::move(infer),
                       .eval = std::move(eval)});
  };
  grad_op("conv2d_grad_input", "Conv2DGradInput", OpKind::Conv, 2, conv2d_grad_input_infer,
          conv2d_grad_input_eval);
  grad_op("conv2d_grad_weight", "Conv2DGradWeight", OpKind::Conv, 2, conv2d_grad_weight_infer,
          conv2d_grad_weight_eval);
  grad_op("max_pool2d_grad", "MaxPool2DGrad", OpKind::Pool, 2, max_pool2d_grad_infer,
          max_pool2d_grad_eval);
  grad_op("avg_pool2d_grad", "AvgPool2DGrad", OpKind::Pool, 1, avg_pool2d_grad_infer,
          avg_pool2d_grad_eval);
  registry_add(OpDef{.name = "max_pool2x2_grad_index",
                     .ir_name = "MaxPool2x2GradIndex",
                     .kind = OpKind::Pool,
                     .min_inputs = 2,
                     .max_inputs = 2,
                     .differentiable = false,
                     .no_grad_reason = "max_pool2x2_grad_index is the jit's compiled form of "
                                       "max_pool2d_grad; differentiate max_pool2d_grad instead",
                     .infer = max_pool2x2_grad_index_infer,
                     .eval = max_pool2x2_grad_index_eval});
}

}  // namespace ops::detail
}  // namespace ms
