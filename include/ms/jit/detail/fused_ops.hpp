// ms/jit/detail/fused_ops.hpp — the jit's fused ops: compiled forms of op
// patterns, made only by the fusion rules of src/jit/passes.cpp.
//
// Stage: jit, internal to libms. Each is an op entry (ms/ops/entry.hpp) whose
// row is not in the op table: no user calls it, autodiff never sees it (the
// rules run after differentiation), and `ms::ops::op(name)` does not find it.
// They run the kernels of the ops they fuse, with the same maths, so a
// compiled graph is bitwise the unfused one:
//   conv2d_fused{relu, max_pool2x2, max_pool2x2_index}(x, w[, b]):
//     conv2d, then relu on each output tile while in cache (relu), and
//     max_pool2d(y, 2) of the planes right after they are written, as a second
//     output (max_pool2x2), with a third output, the tap each window chose
//     (max_pool2x2_index, uint8);
//   max_pool2d_grad_relu(relu(y), gy): relu_grad(max_pool2d_grad(relu(y), gy), y);
//   max_pool2x2_grad_index(index, gy){input_hw, relu}: max_pool2d_grad of a
//     2x2, stride-2 pooling from the taps conv2d_fused noted, so the backward
//     never reads the conv output back.
//   matmul_bias(a, b, bias): add(matmul(a, b), bias), the bias added to each
//     tile of the product while in cache.
//   matmul_scale_add(c, [d,] a, b[, t]){scale}: add(mul(c, scale),
//     matmul(a, b)) [and sub(d, mul(t, that))], each tile of c (and d)
//     combined with its product while in cache, in place in c (and d).
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/jit/detail/fused_ops.hpp is internal to libms; include <ms/jit/jit.hpp> instead"
#endif

#include <cstdint>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

#include "ms/ops/entry.hpp"
#include "ms/ops/nn.hpp"

namespace ms::compiler::fused {

inline constexpr ops::Props kFusedProps{
    .differentiable = false,
    .no_grad_reason =
        "a fused op of the jit is made after differentiation; differentiate the "
        "ops it fuses"};

/// conv2d with relu and 2x2 max pooling folded in (float32, float64, int32,
/// int64; the tap index: float32, float64).
struct Conv2dFused {
  static constexpr std::string_view name = "conv2d_fused";
  static constexpr std::string_view ir_name = "Conv2DFused";
  static constexpr ops::OpKind kind = ops::OpKind::Conv;
  static constexpr ops::Arity arity{2, 3};
  static constexpr ops::Props props = kFusedProps;
  struct Attrs : Conv2dOptions {
    bool relu = false;
    bool max_pool2x2 = false;
    bool max_pool2x2_index = false;
    static void fields(auto&& visit) {
      Conv2dOptions::fields(visit);
      visit("relu", &Attrs::relu);
      visit("max_pool2x2", &Attrs::max_pool2x2);
      visit("max_pool2x2_index", &Attrs::max_pool2x2_index);
    }
  };
  static std::vector<ops::TensorType> infer(const Attrs& a, std::span<const ops::TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
};

/// relu_grad(max_pool2d_grad(relu(y), gy), y) as max_pool2d_grad_relu(relu(y), gy).
struct MaxPool2dGradRelu {
  static constexpr std::string_view name = "max_pool2d_grad_relu";
  static constexpr std::string_view ir_name = "MaxPool2DGradRelu";
  static constexpr ops::OpKind kind = ops::OpKind::Pool;
  static constexpr ops::Arity arity{2, 2};
  static constexpr ops::Props props = kFusedProps;
  using Attrs = MaxPool2dOptions;
  static std::vector<ops::TensorType> infer(const Attrs& a, std::span<const ops::TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
};

/// max_pool2d_grad of a 2x2, stride-2 pooling from conv2d_fused's tap index.
/// input_hw: the pooled input's [H, W]; relu: drop the elements whose tap
/// held a value that is not > 0 (as max_pool2d_grad_relu).
struct MaxPool2x2GradIndex {
  static constexpr std::string_view name = "max_pool2x2_grad_index";
  static constexpr std::string_view ir_name = "MaxPool2x2GradIndex";
  static constexpr ops::OpKind kind = ops::OpKind::Pool;
  static constexpr ops::Arity arity{2, 2};
  static constexpr ops::Props props = kFusedProps;
  struct Attrs {
    std::vector<std::int64_t> input_hw = {};
    bool relu = false;
    static void fields(auto&& visit) {
      visit("input_hw", &Attrs::input_hw);
      visit("relu", &Attrs::relu);
    }
  };
  static std::vector<ops::TensorType> infer(const Attrs& a, std::span<const ops::TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
};

/// add(matmul(a, b), bias) as matmul_bias(a, b, bias): float32, b 2-D, bias
/// [n] (b's columns); the bias is added to each tile of the product while it
/// is in cache (kernels::gemm_bias), bitwise as the two ops. With `relu`,
/// relu(add(matmul(a, b), bias)), relu applied in the same pass.
struct MatmulBias {
  static constexpr std::string_view name = "matmul_bias";
  static constexpr std::string_view ir_name = "MatMulBias";
  static constexpr ops::OpKind kind = ops::OpKind::Linalg;
  static constexpr ops::Arity arity{3, 3};
  static constexpr ops::Props props = kFusedProps;
  struct Attrs {
    /// relu of the result.
    bool relu = false;
    /// Each attribute by name, for dumps.
    static void fields(auto&& visit) { visit("relu", &Attrs::relu); }
  };
  static std::vector<ops::TensorType> infer(const Attrs& a, std::span<const ops::TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
};

/// add(mul(c, s), matmul(a, b)) as matmul_scale_add(c, a, b){scale}: float32,
/// a and b 2-D, c of the product's type, s a number (c * s + a b), or a and b
/// bfloat16 with the product cast to a float32 c (c * s + float(a b), amp
/// O2's weight gradient); and
/// sub(d, mul(t, that)) as a second output, matmul_scale_add(c, d, a, b, t)
/// (d - t * (c * s + a b), d of c's type, t a 0-d float32 tensor: an
/// optimizer's learning rate). Where kernels::gemm_scale_add takes the
/// product, each tile of c is scaled, gets its product added and is taken
/// from d's tile while in cache, else the product is made and combined
/// (bitwise the ops either way). Its update form writes output k into input
/// k, so a compiled Momentum step's `v = v * momentum + x^T dy; w = w - lr * v`
/// is one pass over v and w inside the product, and the gradient is never
/// made (a bfloat16 gradient is made, then one pass takes v and w; the update
/// form given a sixth input, a bfloat16 tensor of w's shape, also writes
/// cast(w) there in that pass: the executor's kept bfloat16 copy of w).
struct MatmulScaleAdd {
  static constexpr std::string_view name = "matmul_scale_add";
  static constexpr std::string_view ir_name = "MatMulScaleAdd";
  static constexpr ops::OpKind kind = ops::OpKind::Linalg;
  static constexpr ops::Arity arity{3, 5};
  static constexpr ops::Props props = kFusedProps;
  struct Attrs {
    double scale = 0.0;
    static void fields(auto&& visit) { visit("scale", &Attrs::scale); }
  };
  static std::vector<ops::TensorType> infer(const Attrs& a, std::span<const ops::TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static void update(const Attrs& a, std::span<const Tensor> in);
  /// d (input 1) beside a bfloat16 product, else -1 (OpDef::update_bf16_copy).
  static int update_bf16_copy(std::span<const ops::TensorType> in);
};

/// The row of fused op E (not in the op table).
template <class E>
const ops::OpDef& def();

}  // namespace ms::compiler::fused
