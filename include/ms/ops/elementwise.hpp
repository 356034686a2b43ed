// ms/ops/elementwise.hpp — the elementwise entries of the op table.
//
// Stage: ops. One struct per op, deriving from the kernels' instruction of the
// same name (ms/kernels/ew_instructions.hpp: name, arity, dtype rule, Eigen
// evaluation) and adding a double-precision reference, its vector-Jacobian
// product (`vjp`, defined in src/ops/elementwise.cpp; an op without one is not
// differentiable) and the domain tests draw its operands from. The op table,
// the public functions (ms/expr/expr.hpp evaluates the instructions) and the
// table-driven tests derive from ElementwiseOps below.
//
//   struct Exp : kernels::ew::Exp {
//     static double ref(double x) { return std::exp(x); }
//     static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);  // g * out
//   };
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <utility>

#include "ms/core/dtype.hpp"
#include "ms/core/tensor.hpp"
#include "ms/kernels/ew_instructions.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops {

using kernels::ew_op_find;
using kernels::ew_op_info;
using kernels::EwOpInfo;
using kernels::EwRule;
using kernels::OpList;

/// Where tests draw an operand's values: uniform in [lo, hi] for floating
/// dtypes, whole numbers in [int_lo, int_hi] for integer ones; `halves` rounds
/// floats to multiples of 0.5 (ties for comparisons and rounding),
/// `avoid_zero` keeps |x| >= 0.25.
struct Domain {
  /// @{
  /// The range of floating operands.
  double lo = -2, hi = 2;
  /// @}
  /// @{
  /// The range of integer operands.
  double int_lo = -3, int_hi = 3;
  /// @}
  /// Round floating operands to multiples of 0.5.
  bool halves = false;
  /// Keep |x| >= 0.25.
  bool avoid_zero = false;
};

// ---------------------------------------------------------------- unary

/// The entry of the elementwise op behind kernels::ew::Neg: the instruction plus its
/// reference, gradient and test domain.
struct Neg : kernels::ew::Neg {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return -x; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// Algebraic facts the jit's simplification uses.
  static constexpr Algebra algebra{.involution = true};
};

/// The entry of the elementwise op behind kernels::ew::Abs: the instruction plus its
/// reference, gradient and test domain.
struct Abs : kernels::ew::Abs {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::fabs(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Exp: the instruction plus its
/// reference, gradient and test domain.
struct Exp : kernels::ew::Exp {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::exp(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Log: the instruction plus its
/// reference, gradient and test domain.
struct Log : kernels::ew::Log {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::log(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

/// The entry of the elementwise op behind kernels::ew::Log1p: the instruction plus its
/// reference, gradient and test domain.
struct Log1p : kernels::ew::Log1p {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::log1p(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = -0.5, .hi = 3, .int_lo = 0, .int_hi = 4}};
};

/// The entry of the elementwise op behind kernels::ew::Sqrt: the instruction plus its
/// reference, gradient and test domain.
struct Sqrt : kernels::ew::Sqrt {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::sqrt(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

/// The entry of the elementwise op behind kernels::ew::Rsqrt: the instruction plus its
/// reference, gradient and test domain.
struct Rsqrt : kernels::ew::Rsqrt {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return 1.0 / std::sqrt(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

/// The entry of the elementwise op behind kernels::ew::Square: the instruction plus its
/// reference, gradient and test domain.
struct Square : kernels::ew::Square {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x * x; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Reciprocal: the instruction plus its
/// reference, gradient and test domain.
struct Reciprocal : kernels::ew::Reciprocal {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return 1.0 / x; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = -3, .hi = 3, .avoid_zero = true}};
};

/// The entry of the elementwise op behind kernels::ew::Sign: the instruction plus its
/// reference, gradient and test domain.
struct Sign : kernels::ew::Sign {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x * 0.0; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Floor: the instruction plus its
/// reference, gradient and test domain.
struct Floor : kernels::ew::Floor {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::floor(x); }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Ceil: the instruction plus its
/// reference, gradient and test domain.
struct Ceil : kernels::ew::Ceil {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::ceil(x); }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}};
};

/// Rounds half to even, as NumPy, PyTorch and MindSpore.
struct Round : kernels::ew::Round {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::nearbyint(x); }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Sin: the instruction plus its
/// reference, gradient and test domain.
struct Sin : kernels::ew::Sin {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::sin(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Cos: the instruction plus its
/// reference, gradient and test domain.
struct Cos : kernels::ew::Cos {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::cos(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Tanh: the instruction plus its
/// reference, gradient and test domain.
struct Tanh : kernels::ew::Tanh {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::tanh(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The entry of the elementwise op behind kernels::ew::Sigmoid: the instruction plus its
/// reference, gradient and test domain.
struct Sigmoid : kernels::ew::Sigmoid {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// max(x, 0); NaN stays NaN, as PyTorch.
struct Relu : kernels::ew::Relu {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x < 0 ? 0.0 : x; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// relu's gradient: relu_grad(g, x) = g where x > 0, else 0 (NaN x gives 0),
/// one pass instead of where(x > 0, g, 0)'s two (MindSpore's ReluGrad).
struct ReluGrad : kernels::ew::ReluGrad {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double g, double x) { return x > 0 ? g : 0.0; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
};

/// x * Phi(x) with the exact (erf) form, PyTorch's default gelu.
struct Gelu : kernels::ew::Gelu {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// gelu's gradient: gelu_grad(g, x) = g * (Phi(x) + x * phi(x)) in one pass (MindSpore's GeLUGrad).
struct GeluGrad : kernels::ew::GeluGrad {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double g, double x) {
    return g * (0.5 * (1.0 + std::erf(x / std::numbers::sqrt2)) +
                x * std::exp(-0.5 * x * x) * std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& g, const Tensor& x, const Tensor& out,
                                       const Tensor& gg);
};

/// The error function (used by gelu's gradient).
struct Erf : kernels::ew::Erf {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return std::erf(x); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The tanh approximation of gelu (PyTorch's approximate="tanh", MindSpore's default).
struct GeluTanh : kernels::ew::GeluTanh {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) {
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// gelu_tanh's gradient: gelu_tanh_grad(g, x) in one pass.
struct GeluTanhGrad : kernels::ew::GeluTanhGrad {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double g, double x) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    const double t = std::tanh(k * (x + 0.044715 * x * x * x));
    return g * (0.5 * (1.0 + t) + 0.5 * k * x * (1.0 - t * t) * (1.0 + 3 * 0.044715 * x * x));
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& g, const Tensor& x, const Tensor& out,
                                       const Tensor& gg);
};

/// The entry of the elementwise op behind kernels::ew::Silu: the instruction plus its
/// reference, gradient and test domain.
struct Silu : kernels::ew::Silu {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x / (1.0 + std::exp(-x)); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// log(1 + exp(x)), linear above 20 as PyTorch (threshold=20) to avoid overflow.
struct Softplus : kernels::ew::Softplus {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// x * relu6(x + 3) / 6 (MindSpore's HSwish, PyTorch's hardswish).
struct Hardswish : kernels::ew::Hardswish {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) {
    const double r = x + 3 < 0 ? 0.0 : x + 3;  // relu6(x + 3)
    return x * (6.0 < r ? 6.0 : r) / 6;
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = -4, .hi = 4, .int_lo = -5, .int_hi = 5}};
};

/// The entry of the elementwise op behind kernels::ew::LogicalNot: the instruction plus its
/// reference, gradient and test domain.
struct LogicalNot : kernels::ew::LogicalNot {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x) { return x == 0 ? 1.0 : 0.0; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}};
};

// ---------------------------------------------------------------- binary

/// The entry of the elementwise op behind kernels::ew::Add: the instruction plus its
/// reference, gradient and test domain.
struct Add : kernels::ew::Add {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a + b; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  // x + 0 is not x for floats: -0.0 + 0 = +0.0
  /// Algebraic facts the jit's simplification uses.
  static constexpr Algebra algebra{.identity = 0,
                                   .identity_right = true,
                                   .identity_left = true,
                                   .identity_exact_for_floats = false};
};

/// The entry of the elementwise op behind kernels::ew::Sub: the instruction plus its
/// reference, gradient and test domain.
struct Sub : kernels::ew::Sub {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a - b; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// Algebraic facts the jit's simplification uses.
  static constexpr Algebra algebra{.identity = 0, .identity_right = true};
};

/// The entry of the elementwise op behind kernels::ew::Mul: the instruction plus its
/// reference, gradient and test domain.
struct Mul : kernels::ew::Mul {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a * b; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// Algebraic facts the jit's simplification uses.
  static constexpr Algebra algebra{.identity = 1, .identity_right = true, .identity_left = true};
};

/// True division: integers divide as float32 (as PyTorch's `/`).
struct Div : kernels::ew::Div {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a / b; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{}, {.lo = -3, .hi = 3, .avoid_zero = true}};
  /// Algebraic facts the jit's simplification uses.
  static constexpr Algebra algebra{.identity = 1, .identity_right = true};
};

/// a ** b. Integer powers of integers stay integers (negative exponents give
/// 0 except for bases 1 and -1, as NumPy's integer power).
struct Pow : kernels::ew::Pow {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return std::pow(a, b); }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.lo = 0.5, .hi = 2, .int_lo = 1, .int_hi = 4},
                                      {.lo = -2, .hi = 2, .int_lo = 0, .int_hi = 3}};
};

/// Elementwise max; NaN propagates (as PyTorch's maximum).
struct Maximum : kernels::ew::Maximum {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : (a < b ? b : a);  // std::max
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// Elementwise min; NaN propagates (as PyTorch's minimum).
struct Minimum : kernels::ew::Minimum {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : (b < a ? b : a);  // std::min
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Eq: the instruction plus its
/// reference, gradient and test domain.
struct Eq : kernels::ew::Eq {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a == b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Ne: the instruction plus its
/// reference, gradient and test domain.
struct Ne : kernels::ew::Ne {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a != b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Lt: the instruction plus its
/// reference, gradient and test domain.
struct Lt : kernels::ew::Lt {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a < b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Le: the instruction plus its
/// reference, gradient and test domain.
struct Le : kernels::ew::Le {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a <= b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Gt: the instruction plus its
/// reference, gradient and test domain.
struct Gt : kernels::ew::Gt {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a > b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::Ge: the instruction plus its
/// reference, gradient and test domain.
struct Ge : kernels::ew::Ge {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return a >= b; }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::LogicalAnd: the instruction plus its
/// reference, gradient and test domain.
struct LogicalAnd : kernels::ew::LogicalAnd {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return (a != 0) && (b != 0); }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// The entry of the elementwise op behind kernels::ew::LogicalOr: the instruction plus its
/// reference, gradient and test domain.
struct LogicalOr : kernels::ew::LogicalOr {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double a, double b) { return (a != 0) || (b != 0); }
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

// ---------------------------------------------------------------- ternary

/// where(cond, x, y): x where cond is true, else y.
struct Where : kernels::ew::Where {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double c, double x, double y) { return c != 0 ? x : y; }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}, {.halves = true}};
};

/// clamp(x, lo, hi) = min(max(x, lo), hi); NaN in x propagates.
struct Clamp : kernels::ew::Clamp {
  /// The result in double precision: the reference the tests compare against.
  static double ref(double x, double lo, double hi) {
    if (std::isnan(x)) return x;
    const double m = x < lo ? lo : x;  // std::min(std::max(x, lo), hi)
    return hi < m ? hi : m;
  }
  /// The gradient of each input given `g`, the output's gradient (written with ops).
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  /// The domain the tests draw each operand from.
  static constexpr Domain domain[] = {{},
                                      {.lo = -2, .hi = -0.25, .int_lo = -3, .int_hi = -1},
                                      {.lo = 0.25, .hi = 2, .int_lo = 1, .int_hi = 3}};
};

/// Every elementwise op, in one list, in the order of the kernels'
/// EwInstructions: the op table and the table-driven tests iterate over it.
using ElementwiseOps =
    OpList<Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt, Square, Reciprocal, Sign, Floor, Ceil, Round,
           Sin, Cos, Tanh, Sigmoid, Relu, ReluGrad, Gelu, GeluGrad, Erf, GeluTanh, GeluTanhGrad,
           Silu, Softplus, Hardswish, LogicalNot, Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne,
           Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, Where, Clamp>;

/// Position of an op in ElementwiseOps: the id of its instruction in fused programs.
template <class Op>
inline constexpr int ew_op_id = kernels::ew_instr_id<Op>;

/// True for the elementwise ops with a gradient (a `vjp`).
template <class Op>
concept EwDifferentiable = requires {
  &Op::vjp;
};

/// The domain tests draw operand `i` of Op from.
template <class Op>
constexpr Domain ew_domain(int i) {
  if constexpr (requires { Op::domain; })
    return Op::domain[i];
  else
    return Domain{};
}

}  // namespace ms::ops
