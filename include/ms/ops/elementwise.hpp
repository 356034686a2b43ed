// ms/ops/elementwise.hpp — the elementwise entries of the op table.
//
// Stage: ops. One struct per op: its name, arity, dtype rule, evaluation as
// an Eigen array expression (so it runs with SIMD packets in the fused tile
// loop of kernels/elementwise), a double-precision reference, its
// vector-Jacobian product (`vjp`, defined in src/ops/elementwise.cpp; an op
// without one is not differentiable) and the domain tests draw its operands
// from. The op table, the public functions (ms/expr/expr.hpp) and the
// table-driven tests derive from ElementwiseOps below. Nothing here includes
// Eigen's heavy modules: `eval` is a generic function instantiated only in src/.
//
//   struct Exp {
//     static constexpr std::string_view name = "exp";
//     static constexpr int arity = 1;
//     static constexpr EwRule rule = EwRule::Float;      // ints compute as float32
//     static auto eval(const auto& x) { return x.exp(); }
//     static double ref(double x) { return std::exp(x); }
//     static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);  // g * out
//   };
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ms/core/dtype.hpp"
#include "ms/core/tensor.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops {

/// How an elementwise op maps input dtypes to its compute and output dtypes.
enum class EwRule : std::uint8_t {
  Same,     ///< output = promoted inputs; integers compute as integers
  Float,    ///< like Same, but bool and integers promote to float32
  Compare,  ///< compute in the promoted type, output bool
  Logical,  ///< inputs read as `!= 0`, output bool
  Select,   ///< where(cond, x, y): cond read as bool, output = promoted x, y
};

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

namespace detail {
template <class X>
using scalar_of = typename std::decay_t<X>::Scalar;
template <class X>
inline constexpr bool is_int_expr = std::is_integral_v<scalar_of<X>>;
}  // namespace detail

// ---------------------------------------------------------------- unary

struct Neg {
  static constexpr std::string_view name = "neg";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // In unsigned arithmetic: -INT64_MIN wraps to INT64_MIN (NumPy's value), without UB.
      using U = std::make_unsigned_t<T>;
      return x.unaryExpr([](T v) { return static_cast<T>(U(0) - static_cast<U>(v)); });
    } else {
      return -x;
    }
  }
  static double ref(double x) { return -x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Algebra algebra{.involution = true};
};

struct Abs {
  static constexpr std::string_view name = "abs";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      // abs(INT64_MIN) wraps to INT64_MIN (NumPy's value), without UB.
      using U = std::make_unsigned_t<T>;
      return x.unaryExpr([](T v) { return v < 0 ? static_cast<T>(U(0) - static_cast<U>(v)) : v; });
    } else {
      return x.abs();
    }
  }
  static double ref(double x) { return std::fabs(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Exp {
  static constexpr std::string_view name = "exp";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.exp(); }
  static double ref(double x) { return std::exp(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Log {
  static constexpr std::string_view name = "log";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.log(); }
  static double ref(double x) { return std::log(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Log1p {
  static constexpr std::string_view name = "log1p";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.log1p(); }
  static double ref(double x) { return std::log1p(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -0.5, .hi = 3, .int_lo = 0, .int_hi = 4}};
};

struct Sqrt {
  static constexpr std::string_view name = "sqrt";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.sqrt(); }
  static double ref(double x) { return std::sqrt(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Rsqrt {
  static constexpr std::string_view name = "rsqrt";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.rsqrt(); }
  static double ref(double x) { return 1.0 / std::sqrt(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.25, .hi = 3, .int_lo = 1, .int_hi = 4}};
};

struct Square {
  static constexpr std::string_view name = "square";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) { return x.square(); }
  static double ref(double x) { return x * x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Reciprocal {
  static constexpr std::string_view name = "reciprocal";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.inverse(); }
  static double ref(double x) { return 1.0 / x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -3, .hi = 3, .avoid_zero = true}};
};

struct Sign {
  static constexpr std::string_view name = "sign";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  // NaN stays NaN (x * 0), as NumPy.
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(0)).select(T(1), (x < T(0)).select(T(-1), x * T(0)));
  }
  static double ref(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x * 0.0; }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Floor {
  static constexpr std::string_view name = "floor";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.floor();
  }
  static double ref(double x) { return std::floor(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Ceil {
  static constexpr std::string_view name = "ceil";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.ceil();
  }
  static double ref(double x) { return std::ceil(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

/// Rounds half to even, as NumPy, PyTorch and MindSpore.
struct Round {
  static constexpr std::string_view name = "round";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.rint();
  }
  static double ref(double x) { return std::nearbyint(x); }
  static constexpr Domain domain[] = {{.halves = true}};
};

struct Sin {
  static constexpr std::string_view name = "sin";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.sin(); }
  static double ref(double x) { return std::sin(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Cos {
  static constexpr std::string_view name = "cos";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.cos(); }
  static double ref(double x) { return std::cos(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Tanh {
  static constexpr std::string_view name = "tanh";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.tanh(); }
  static double ref(double x) { return std::tanh(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Sigmoid {
  static constexpr std::string_view name = "sigmoid";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.logistic(); }
  static double ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// max(x, 0); NaN stays NaN, as PyTorch.
struct Relu {
  static constexpr std::string_view name = "relu";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x < T(0)).select(T(0), x);
  }
  static double ref(double x) { return x < 0 ? 0.0 : x; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// relu's gradient: relu_grad(g, x) = g where x > 0, else 0 (NaN x gives 0),
/// one pass instead of where(x > 0, g, 0)'s two (MindSpore's ReluGrad).
struct ReluGrad {
  static constexpr std::string_view name = "relu_grad";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& g, const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(0)).select(g, T(0));
  }
  static double ref(double g, double x) { return x > 0 ? g : 0.0; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
};

/// x * Phi(x) with the exact (erf) form, PyTorch's default gelu.
struct Gelu {
  static constexpr std::string_view name = "gelu";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return T(0.5) * x * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf());
  }
  static double ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The error function (used by gelu's gradient).
struct Erf {
  static constexpr std::string_view name = "erf";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.erf(); }
  static double ref(double x) { return std::erf(x); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// The tanh approximation of gelu (PyTorch's approximate="tanh", MindSpore's default).
struct GeluTanh {
  static constexpr std::string_view name = "gelu_tanh";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const T k = T(std::sqrt(2.0 / std::numbers::pi));
    return T(0.5) * x * (T(1) + (k * (x + T(0.044715) * x.cube())).tanh());
  }
  static double ref(double x) {
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

struct Silu {
  static constexpr std::string_view name = "silu";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x * x.logistic(); }
  static double ref(double x) { return x / (1.0 + std::exp(-x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// log(1 + exp(x)), linear above 20 as PyTorch (threshold=20) to avoid overflow.
struct Softplus {
  static constexpr std::string_view name = "softplus";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(20)).select(x, x.exp().log1p());
  }
  static double ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
};

/// x * relu6(x + 3) / 6 (MindSpore's HSwish, PyTorch's hardswish).
struct Hardswish {
  static constexpr std::string_view name = "hardswish";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const auto r = x + T(3);
    return x * (r < T(0)).select(T(0), (r > T(6)).select(T(6), r)) * T(1.0 / 6);
  }
  static double ref(double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }
  static Tensor vjp(const Tensor& x, const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.lo = -4, .hi = 4, .int_lo = -5, .int_hi = 5}};
};

struct LogicalNot {
  static constexpr std::string_view name = "logical_not";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& x) { return !x; }
  static double ref(double x) { return x == 0 ? 1.0 : 0.0; }
  static constexpr Domain domain[] = {{.halves = true}};
};

// ---------------------------------------------------------------- binary

struct Add {
  static constexpr std::string_view name = "add";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a + b; }
  static double ref(double a, double b) { return a + b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  // x + 0 is not x for floats: -0.0 + 0 = +0.0
  static constexpr Algebra algebra{.identity = 0,
                                   .identity_right = true,
                                   .identity_left = true,
                                   .identity_exact_for_floats = false};
};

struct Sub {
  static constexpr std::string_view name = "sub";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a - b; }
  static double ref(double a, double b) { return a - b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Algebra algebra{.identity = 0, .identity_right = true};
};

struct Mul {
  static constexpr std::string_view name = "mul";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a * b; }
  static double ref(double a, double b) { return a * b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Algebra algebra{.identity = 1, .identity_right = true, .identity_left = true};
};

/// True division: integers divide as float32 (as PyTorch's `/`).
struct Div {
  static constexpr std::string_view name = "div";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& a, const auto& b) { return a / b; }
  static double ref(double a, double b) { return a / b; }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{}, {.lo = -3, .hi = 3, .avoid_zero = true}};
  static constexpr Algebra algebra{.identity = 1, .identity_right = true};
};

/// a ** b. Integer powers of integers stay integers (negative exponents give
/// 0 except for bases 1 and -1, as NumPy's integer power).
struct Pow {
  static constexpr std::string_view name = "pow";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) {
    using T = detail::scalar_of<decltype(a)>;
    if constexpr (std::is_integral_v<T>) {
      return a.binaryExpr(b, [](T base, T e) {
        if (e < 0) return base == 1 ? T(1) : base == -1 ? (e % 2 ? T(-1) : T(1)) : T(0);
        using U = std::make_unsigned_t<T>;  // wrap like C on overflow, without UB
        U r = 1, p = static_cast<U>(base);
        for (T k = e; k > 0; k >>= 1, p = static_cast<U>(p * p))
          if (k & 1) r = static_cast<U>(r * p);
        return static_cast<T>(r);
      });
    } else {
      return a.pow(b);
    }
  }
  static double ref(double a, double b) { return std::pow(a, b); }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.lo = 0.5, .hi = 2, .int_lo = 1, .int_hi = 4},
                                      {.lo = -2, .hi = 2, .int_lo = 0, .int_hi = 3}};
};

/// Elementwise max; NaN propagates (as PyTorch's maximum).
struct Maximum {
  static constexpr std::string_view name = "maximum";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return (a < b || b != b).select(b, a); }
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
  }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

/// Elementwise min; NaN propagates (as PyTorch's minimum).
struct Minimum {
  static constexpr std::string_view name = "minimum";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return (a > b || b != b).select(b, a); }
  static double ref(double a, double b) {
    return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
  }
  static std::pair<Tensor, Tensor> vjp(const Tensor& x, const Tensor& y, const Tensor& out,
                                       const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Eq {
  static constexpr std::string_view name = "eq";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a == b; }
  static double ref(double a, double b) { return a == b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Ne {
  static constexpr std::string_view name = "ne";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a != b; }
  static double ref(double a, double b) { return a != b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Lt {
  static constexpr std::string_view name = "lt";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a < b; }
  static double ref(double a, double b) { return a < b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Le {
  static constexpr std::string_view name = "le";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a <= b; }
  static double ref(double a, double b) { return a <= b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Gt {
  static constexpr std::string_view name = "gt";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a > b; }
  static double ref(double a, double b) { return a > b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct Ge {
  static constexpr std::string_view name = "ge";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a >= b; }
  static double ref(double a, double b) { return a >= b; }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct LogicalAnd {
  static constexpr std::string_view name = "logical_and";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& a, const auto& b) { return a && b; }
  static double ref(double a, double b) { return (a != 0) && (b != 0); }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

struct LogicalOr {
  static constexpr std::string_view name = "logical_or";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& a, const auto& b) { return a || b; }
  static double ref(double a, double b) { return (a != 0) || (b != 0); }
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}};
};

// ---------------------------------------------------------------- ternary

/// where(cond, x, y): x where cond is true, else y.
struct Where {
  static constexpr std::string_view name = "where";
  static constexpr int arity = 3;
  static constexpr EwRule rule = EwRule::Select;
  static auto eval(const auto& c, const auto& x, const auto& y) { return c.select(x, y); }
  static double ref(double c, double x, double y) { return c != 0 ? x : y; }
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{.halves = true}, {.halves = true}, {.halves = true}};
};

/// clamp(x, lo, hi) = min(max(x, lo), hi); NaN in x propagates.
struct Clamp {
  static constexpr std::string_view name = "clamp";
  static constexpr int arity = 3;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x, const auto& lo, const auto& hi) {
    const auto m = (x < lo).select(lo, x);
    return (m > hi).select(hi, m);
  }
  static double ref(double x, double lo, double hi) {
    return std::isnan(x) ? x : std::min(std::max(x, lo), hi);
  }
  static std::array<Tensor, 3> vjp(const Tensor& x, const Tensor& y, const Tensor& z,
                                   const Tensor& out, const Tensor& g);
  static constexpr Domain domain[] = {{},
                                      {.lo = -2, .hi = -0.25, .int_lo = -3, .int_hi = -1},
                                      {.lo = 0.25, .hi = 2, .int_lo = 1, .int_hi = 3}};
};

/// Every elementwise op, in one list: the kernels, the op table and the
/// table-driven tests iterate over it.
template <class... Ops>
struct OpList {
  static constexpr int size = sizeof...(Ops);
};

using ElementwiseOps =
    OpList<Neg, Abs, Exp, Log, Log1p, Sqrt, Rsqrt, Square, Reciprocal, Sign, Floor, Ceil, Round,
           Sin, Cos, Tanh, Sigmoid, Relu, ReluGrad, Gelu, Erf, GeluTanh, Silu, Softplus, Hardswish,
           LogicalNot, Add, Sub, Mul, Div, Pow, Maximum, Minimum, Eq, Ne, Lt, Le, Gt, Ge,
           LogicalAnd, LogicalOr, Where, Clamp>;

namespace detail {
template <class Op, class List>
struct op_index;
template <class Op, class... Ops>
struct op_index<Op, OpList<Ops...>> {
  static constexpr int value = [] {
    constexpr bool match[] = {std::is_same_v<Op, Ops>...};
    for (int i = 0; i < static_cast<int>(sizeof...(Ops)); ++i)
      if (match[i]) return i;
    return -1;
  }();
};
}  // namespace detail

/// Position of an op in ElementwiseOps (its id in fused programs).
template <class Op>
inline constexpr int ew_op_id = detail::op_index<Op, ElementwiseOps>::value;

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

/// Static facts about an elementwise op, by id.
struct EwOpInfo {
  std::string_view name;
  int arity;
  EwRule rule;
};
const EwOpInfo& ew_op_info(int id);
/// Id of the elementwise op called `name`, or -1.
int ew_op_find(std::string_view name);

}  // namespace ms::ops
