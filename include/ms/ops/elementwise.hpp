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

#include <algorithm>
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
  double lo = -2, hi = 2;
  double int_lo = -3, int_hi = 3;
  bool halves = false;
  bool avoid_zero = false;
};

// ---------------------------------------------------------------- unary

struct Neg : kernels::ew::Neg {
  static double ref(double x) { return -x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Algebra algebra{.involution = true};
};

struct Abs : kernels::ew::Abs {
  static double ref(double x) { return std::fabs(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Exp : kernels::ew::Exp {
  static double ref(double x) { return std::exp(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Log : kernels::ew::Log {
  static double ref(double x) { return std::log(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Log1p : kernels::ew::Log1p {
  static double ref(double x) { return std::log1p(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -0.5, .hi = 3, .int_lo = 0, .int_hi = 4}};
};

struct Sqrt : kernels::ew::Sqrt {
  static double ref(double x) { return std::sqrt(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Rsqrt : kernels::ew::Rsqrt {
  static double ref(double x) { return 1.0 / std::sqrt(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Square : kernels::ew::Square {
  static double ref(double x) { return x * x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Reciprocal : kernels::ew::Reciprocal {
  static double ref(double x) { return 1.0 / x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -3, .hi = 3, .avoid_zero = true}};
};

struct Sign : kernels::ew::Sign {
  static double ref(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x * 0.0; }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Floor : kernels::ew::Floor {
  static double ref(double x) { return std::floor(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Ceil : kernels::ew::Ceil {
  static double ref(double x) { return std::ceil(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

/// Rounds half to even, as NumPy, PyTorch and MindSpore.
struct Round : kernels::ew::Round {
  static double ref(double x) { return std::nearbyint(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Sin : kernels::ew::Sin {
  static double ref(double x) { return std::sin(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Cos : kernels::ew::Cos {
  static double ref(double x) { return std::cos(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Tanh : kernels::ew::Tanh {
  static double ref(double x) { return std::tanh(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Sigmoid : kernels::ew::Sigmoid {
  static double ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// max(x, 0); NaN stays NaN, as PyTorch.
struct Relu : kernels::ew::Relu {
  static double ref(double x) { return x < 0 ? 0.0 : x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// relu's gradient: relu_grad(g, x) = g where x > 0, else 0 (NaN x gives 0),
/// one pass instead of where(x > 0, g, 0)'s two (MindSpore's ReluGrad).
struct ReluGrad : kernels::ew::ReluGrad {
  static double ref(double g, double x) { return x > 0 ? g : 0.0; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
};

/// x * Phi(x) with the exact (erf) form, PyTorch's default gelu.
struct Gelu : kernels::ew::Gelu {
  static double ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The error function (used by gelu's gradient).
struct Erf : kernels::ew::Erf {
  static double ref(double x) { return std::erf(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The tanh approximation of gelu (PyTorch's approximate="tanh", MindSpore's default).
struct GeluTanh : kernels::ew::GeluTanh {
  static double ref(double x) {
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Silu : kernels::ew::Silu {
  static double ref(double x) { return x / (1.0 + std::exp(-x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// log(1 + exp(x)), linear above 20 as PyTorch (threshold=20) to avoid overflow.
struct Softplus : kernels::ew::Softplus {
  static double ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// x * relu6(x + 3) / 6 (MindSpore's HSwish, PyTorch's hardswish).
struct Hardswish : kernels::ew::Hardswish {
  static double ref(double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -4, .hi = 4, .int_lo = -5, .int_hi = 5}};
};

struct LogicalNot : kernels::ew::LogicalNot {
  static double ref(double x) { return x == 0 ? 1.0 : 0.0; }
  static constexpr Domain domain[] = {{.halves = true}};
};

// ---------------------------------------------------------------- binary

struct Add : kernels::ew::Add {
  static double ref(double a, double b) { return a + b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  // x + 0 is not x for floats: -0.0 + 0 = +0.0
  static constexpr Algebra algebra{.identity = 0,
                                   .identity_right = true,
                                   .identity_left = true,
                                   .identity_exact_for_floats = false};
};

struct Sub : kernels::ew::Sub {
  static double ref(double a, double b) { return a - b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Algebra algebra{.identity = 0, .identity_right = true};
};

struct Mul : kernels::ew::Mul {
  static double ref(double a, double b) { return a * b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Algebra algebra{.identity = 1, .identity_right = true, .identity_left = true};
};

/// True division: integers divide as float32 (as PyTorch's `/`).
struct Div : kernels::ew::Div {
  static double ref(double a, double b) { return a / b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{}, {.lo = -3, .hi = 3, .avoid_zero = true}};
  static constexpr Algebra algebra{.identity = 1, .identity_right = true};
};

/// a ** b. Integer powers of integers stay integers (negative exponents give
/// 0 except for bases 1 and -1, as NumPy's integer power).
struct Pow : kernels::ew::Pow {
  static double ref(double a, double b) { return std::pow(a, b); }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.5, .hi = 2, .int_lo = 1, .int_hi = 4},
                                      {.lo = -2, .hi = 2, .int_lo = 0, .int_hi = 3}};
};

/// Elementwise max; NaN propagates (as PyTorch's maximum).
struct Maximum : kernels::ew::Maximum {
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// Elementwise min; NaN propagates (as PyTorch's minimum).
struct Minimum : kernels::ew::Minimum {
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Eq : kernels::ew::Eq {
  static double ref(double a, double b) { return a == b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Ne : kernels::ew::Ne {
  static double ref(double a, double b) { return a != b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Lt : kernels::ew::Lt {
  static double ref(double a, double b) { return a < b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Le : kernels::ew::Le {
  static double ref(double a, double b) { return a <= b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Gt : kernels::ew::Gt {
  static double ref(double a, double b) { return a > b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Ge : kernels::ew::Ge {
  static double ref(double a, double b) { return a >= b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct LogicalAnd : kernels::ew::LogicalAnd {
  static double ref(double a, double b) { return (a != 0) && (b != 0); }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct LogicalOr : kernels::ew::LogicalOr {
  static double ref(double a, double b) { return (a != 0) || (b != 0); }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

// ---------------------------------------------------------------- ternary

/// where(cond, x, y): x where cond is true, else y.
struct Where : kernels::ew::Where {
  static double ref(double c, double x, double y) { return c != 0 ? x : y; }
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}, {.halves = true}};
};

/// clamp(x, lo, hi) = min(max(x, lo), hi); NaN in x propagates.
struct Clamp : kernels::ew::Clamp {
  static double ref(double x, double lo, double hi) {
    return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
  }
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{},
                                      {.lo = -2, .hi = -0.25, .int_lo = -3, .int_hi = -1},
                                      {.lo = 0.25, .hi = 2, .int_lo = 1, .int_hi = 3}};
};

/// Every elementwise op, in one list, in the order of the kernels'
/// EwInstructions: the op table and the table-driven tests iterate over it.
using ElementwiseOps =
    OpList<Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt, Square, Reciprocal, Sign, Floor, Ceil, Round,
           Sin, Cos, Tanh, Sigmoid, Relu, ReluGrad, Gelu, Erf, GeluTanh, Silu, Softplus, Hardswish,
           LogicalNot, Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge,
           LogicalAnd, LogicalOr, Where, Clamp>;

/// Position of an op in ElementwiseOps: the id of its instruction in fused programs.
template <class Op>
inline constexpr int ew_op_id = kernels::ew_instr_id<Op>;

namespace detail {
template <class... Ops>
constexpr bool ew_ids_in_order(OpList<Ops...>) {
  int i = 0;
  return ((ew_op_id<Ops> == i++) && ...);
}
}  // namespace detail
static_assert(
    ElementwiseOps::size == kernels::EwInstructions::size &&
        detail::ew_ids_in_order(ElementwiseOps{}),
    "ElementwiseOps lists one entry per kernels::EwInstructions instruction, in its order");

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
