// ms/kernels/ew_instructions.hpp — the elementwise instruction set.
//
// Stage: kernels. One struct per instruction: its name, arity, dtype rule and
// its evaluation as an Eigen array expression (so it runs with SIMD packets in
// the fused tile loop of kernels/elementwise), in one list, EwInstructions,
// whose positions are the instruction ids of EwPrograms. The elementwise
// entries of the op table (ms/ops/elementwise.hpp) derive from these structs
// and add what an op has beyond its arithmetic (reference, gradient, test
// domain). Nothing here includes Eigen: `eval` is a generic function
// instantiated only in src/.
//
//   struct Exp {
//     static constexpr std::string_view name = "exp";
//     static constexpr int arity = 1;
//     static constexpr EwRule rule = EwRule::Float;      // ints compute as float32
//     static auto eval(const auto& x) { return x.exp(); }
//   };
//
// An instruction whose `eval` uses only exactly rounded arithmetic (+, -, *,
// / of values, comparisons, selects, abs) says so with `exact = true`
// (EwExact): Eigen's packets and its scalar remainder then agree bit for bit,
// and kernels/elementwise may run it as generated machine code instead of
// Eigen's kernels (the same `eval`, instantiated on a code-emitting vector
// type), with the same results.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ms::kernels {

/// Where Eigen's float exp without AVX-512 (SSE, AVX2) clamps its argument
/// (exp_flushed, logistic_flushed).
inline constexpr double kFloatExpClamp = -88.72283935546875;

/// e^x of an Eigen array expression, for every kernel that exponentiates.
/// Eigen's vectorized double exp clamps its argument at about -709.78, so
/// exp(-inf) would be 5.6e-309 (and a sum of such terms, a logsumexp of
/// masked entries, not -inf): below that point the float64 result (a
/// subnormal under 5.5e-309) is 0. Its float exp without AVX-512 (SSE, AVX2)
/// clamps at kFloatExpClamp (exp(-inf) = 2.9e-39, and inf * exp(-inf) = inf, not
/// NaN): below that point the float32 result is 0, as with AVX-512.
inline auto exp_flushed(const auto& x) {
  using S = typename std::decay_t<decltype(x)>::Scalar;
  if constexpr (std::is_same_v<S, double>) return (x < S(-709.78)).select(S(0), x.exp());
#if !defined(__AVX512F__)
  else if constexpr (std::is_same_v<S, float>)
    return (x < S(kFloatExpClamp)).select(S(0), x.exp());
#endif
  else
    return x.exp();
}

/// 1 / (1 + e^-x) of an Eigen array expression: Eigen's float logistic
/// without AVX-512 is 2.9e-39 at -inf (its exp's clamp, see exp_flushed); 0
/// there.
inline auto logistic_flushed(const auto& x) {
#if !defined(__AVX512F__)
  using S = typename std::decay_t<decltype(x)>::Scalar;
  if constexpr (std::is_same_v<S, float>)
    return (x < S(kFloatExpClamp)).select(S(0), x.logistic());
  else
#endif
    return x.logistic();
}

/// The square root of an Eigen array expression: Eigen's float square root
/// without AVX-512 (a reciprocal estimate and a Newton step) is NaN at +inf;
/// +inf there.
inline auto sqrt_of(const auto& x) {
#if !defined(__AVX512F__)
  using S = typename std::decay_t<decltype(x)>::Scalar;
  if constexpr (std::is_same_v<S, float>)
    return (x == std::numeric_limits<S>::infinity()).select(x, x.sqrt());
  else
#endif
    return x.sqrt();
}

/// How an elementwise instruction maps input dtypes to its compute and output dtypes.
enum class EwRule : std::uint8_t {
  Same,     ///< output = promoted inputs; integers compute as integers
  Float,    ///< like Same, but bool and integers promote to float32
  Compare,  ///< compute in the promoted type, output bool
  Logical,  ///< inputs read as `!= 0`, output bool
  Select,   ///< where(cond, x, y): cond read as bool, output = promoted x, y
};

/// A list of elementwise instructions (or of the op entries deriving from them).
template <class... Ops>
struct OpList {
  /// The number of instructions in the list.
  static constexpr int size = sizeof...(Ops);
};

namespace ew {

namespace detail {
template <class X>
using scalar_of = typename std::decay_t<X>::Scalar;
template <class X>
inline constexpr bool is_int_expr = std::is_integral_v<scalar_of<X>>;
}  // namespace detail

// ---------------------------------------------------------------- unary

/// The elementwise instruction "neg": 1 operand, EwRule::Same.
struct Neg {
  /// The instruction's name.
  static constexpr std::string_view name = "neg";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// The instruction on Eigen array expressions (vectorized).
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
};

/// The elementwise instruction "abs": 1 operand, EwRule::Same.
struct Abs {
  /// The instruction's name.
  static constexpr std::string_view name = "abs";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
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
};

/// The elementwise instruction "exp": 1 operand, EwRule::Float.
struct Exp {
  /// The instruction's name.
  static constexpr std::string_view name = "exp";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized; exp_flushed).
  static auto eval(const auto& x) { return exp_flushed(x); }
};

/// The elementwise instruction "log": 1 operand, EwRule::Float.
struct Log {
  /// The instruction's name.
  static constexpr std::string_view name = "log";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.log(); }
};

/// The elementwise instruction "log1p": 1 operand, EwRule::Float.
struct Log1p {
  /// The instruction's name.
  static constexpr std::string_view name = "log1p";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.log1p(); }
};

/// The elementwise instruction "sqrt": 1 operand, EwRule::Float.
struct Sqrt {
  /// The instruction's name.
  static constexpr std::string_view name = "sqrt";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return sqrt_of(x); }
};

/// The elementwise instruction "rsqrt": 1 operand, EwRule::Float.
struct Rsqrt {
  /// The instruction's name.
  static constexpr std::string_view name = "rsqrt";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.rsqrt(); }
};

/// The elementwise instruction "square": 1 operand, EwRule::Same.
struct Square {
  /// The instruction's name.
  static constexpr std::string_view name = "square";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.square(); }
};

/// The elementwise instruction "reciprocal": 1 operand, EwRule::Float.
struct Reciprocal {
  /// The instruction's name.
  static constexpr std::string_view name = "reciprocal";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.inverse(); }
};

/// The elementwise instruction "sign": 1 operand, EwRule::Same.
struct Sign {
  /// The instruction's name.
  static constexpr std::string_view name = "sign";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  // NaN stays NaN (x * 0), as NumPy.
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(0)).select(T(1), (x < T(0)).select(T(-1), x * T(0)));
  }
};

/// The elementwise instruction "floor": 1 operand, EwRule::Same.
struct Floor {
  /// The instruction's name.
  static constexpr std::string_view name = "floor";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.floor();
  }
};

/// The elementwise instruction "ceil": 1 operand, EwRule::Same.
struct Ceil {
  /// The instruction's name.
  static constexpr std::string_view name = "ceil";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.ceil();
  }
};

/// Rounds half to even, as NumPy, PyTorch and MindSpore.
struct Round {
  /// The instruction's name.
  static constexpr std::string_view name = "round";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    if constexpr (detail::is_int_expr<decltype(x)>)
      return x;
    else
      return x.rint();
  }
};

/// The elementwise instruction "sin": 1 operand, EwRule::Float.
struct Sin {
  /// The instruction's name.
  static constexpr std::string_view name = "sin";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.sin(); }
};

/// The elementwise instruction "cos": 1 operand, EwRule::Float.
struct Cos {
  /// The instruction's name.
  static constexpr std::string_view name = "cos";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.cos(); }
};

/// The elementwise instruction "tanh": 1 operand, EwRule::Float.
struct Tanh {
  /// The instruction's name.
  static constexpr std::string_view name = "tanh";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.tanh(); }
};

/// The elementwise instruction "sigmoid": 1 operand, EwRule::Float.
struct Sigmoid {
  /// The instruction's name.
  static constexpr std::string_view name = "sigmoid";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return logistic_flushed(x); }
};

/// max(x, 0); NaN stays NaN, as PyTorch.
struct Relu {
  /// The instruction's name.
  static constexpr std::string_view name = "relu";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x < T(0)).select(T(0), x);
  }
};

/// relu's gradient: relu_grad(g, x) = g where x > 0, else 0 (NaN x gives 0),
/// one pass instead of where(x > 0, g, 0)'s two (MindSpore's ReluGrad).
struct ReluGrad {
  /// The instruction's name.
  static constexpr std::string_view name = "relu_grad";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& g, const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(0)).select(g, T(0));
  }
};

/// x * Phi(x) with the exact (erf) form, PyTorch's default gelu.
struct Gelu {
  /// The instruction's name.
  static constexpr std::string_view name = "gelu";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return T(0.5) * x * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf());
  }
};

/// The error function (used by gelu's gradient).
struct Erf {
  /// The instruction's name.
  static constexpr std::string_view name = "erf";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x.erf(); }
};

/// gelu's gradient: gelu_grad(g, x) = g * (Phi(x) + x * phi(x)), one pass over g and x
/// instead of the dozen of the composition (MindSpore's GeLUGrad).
struct GeluGrad {
  /// The instruction's name.
  static constexpr std::string_view name = "gelu_grad";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& g, const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const T inv_sqrt_2pi = T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
    return g * (T(0.5) * (T(1) + (x * T(std::numbers::sqrt2 / 2)).erf()) +
                x * exp_flushed(x.square() * T(-0.5)) * inv_sqrt_2pi);
  }
};

/// The tanh approximation of gelu (PyTorch's approximate="tanh", MindSpore's default).
struct GeluTanh {
  /// The instruction's name.
  static constexpr std::string_view name = "gelu_tanh";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const T k = T(std::sqrt(2.0 / std::numbers::pi));
    return T(0.5) * x * (T(1) + (k * (x + T(0.044715) * x.cube())).tanh());
  }
};

/// gelu_tanh's gradient: gelu_tanh_grad(g, x), one pass over g and x.
struct GeluTanhGrad {
  /// The instruction's name.
  static constexpr std::string_view name = "gelu_tanh_grad";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& g, const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const T k = T(std::sqrt(2.0 / std::numbers::pi));
    const auto x2 = x.square();
    const auto t = (k * x * (T(1) + T(0.044715) * x2)).tanh();
    return g * (T(0.5) * (T(1) + t) +
                T(0.5) * k * x * (T(1) - t.square()) * (T(1) + T(3 * 0.044715) * x2));
  }
};

/// The elementwise instruction "silu": 1 operand, EwRule::Float.
struct Silu {
  /// The instruction's name.
  static constexpr std::string_view name = "silu";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return x * logistic_flushed(x); }
};

/// log(1 + exp(x)), linear above 20 as PyTorch (threshold=20) to avoid overflow.
struct Softplus {
  /// The instruction's name.
  static constexpr std::string_view name = "softplus";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    return (x > T(20)).select(x, x.exp().log1p());
  }
};

/// x * relu6(x + 3) / 6 (MindSpore's HSwish, PyTorch's hardswish).
struct Hardswish {
  /// The instruction's name.
  static constexpr std::string_view name = "hardswish";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) {
    using T = detail::scalar_of<decltype(x)>;
    const auto r = x + T(3);
    return x * (r < T(0)).select(T(0), (r > T(6)).select(T(6), r)) * T(1.0 / 6);
  }
};

/// The elementwise instruction "logical_not": 1 operand, EwRule::Logical.
struct LogicalNot {
  /// The instruction's name.
  static constexpr std::string_view name = "logical_not";
  /// Number of operands (1).
  static constexpr int arity = 1;
  /// Dtype rule: EwRule::Logical.
  static constexpr EwRule rule = EwRule::Logical;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x) { return !x; }
};

// ---------------------------------------------------------------- binary

/// The elementwise instruction "add": 2 operands, EwRule::Same.
struct Add {
  /// The instruction's name.
  static constexpr std::string_view name = "add";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a + b; }
};

/// The elementwise instruction "sub": 2 operands, EwRule::Same.
struct Sub {
  /// The instruction's name.
  static constexpr std::string_view name = "sub";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a - b; }
};

/// The elementwise instruction "mul": 2 operands, EwRule::Same.
struct Mul {
  /// The instruction's name.
  static constexpr std::string_view name = "mul";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a * b; }
};

/// True division: integers divide as float32 (as PyTorch's `/`).
struct Div {
  /// The instruction's name.
  static constexpr std::string_view name = "div";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Float.
  static constexpr EwRule rule = EwRule::Float;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a / b; }
};

/// a ** b. Integer powers of integers stay integers (negative exponents give
/// 0 except for bases 1 and -1, as NumPy's integer power).
struct Pow {
  /// The instruction's name.
  static constexpr std::string_view name = "pow";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// The instruction on Eigen array expressions (vectorized).
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
};

/// Elementwise max; NaN propagates (as PyTorch's maximum).
struct Maximum {
  /// The instruction's name.
  static constexpr std::string_view name = "maximum";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return (a < b || b != b).select(b, a); }
};

/// Elementwise min; NaN propagates (as PyTorch's minimum).
struct Minimum {
  /// The instruction's name.
  static constexpr std::string_view name = "minimum";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return (a > b || b != b).select(b, a); }
};

/// The elementwise instruction "eq": 2 operands, EwRule::Compare.
struct Eq {
  /// The instruction's name.
  static constexpr std::string_view name = "eq";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a == b; }
};

/// The elementwise instruction "ne": 2 operands, EwRule::Compare.
struct Ne {
  /// The instruction's name.
  static constexpr std::string_view name = "ne";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a != b; }
};

/// The elementwise instruction "lt": 2 operands, EwRule::Compare.
struct Lt {
  /// The instruction's name.
  static constexpr std::string_view name = "lt";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a < b; }
};

/// The elementwise instruction "le": 2 operands, EwRule::Compare.
struct Le {
  /// The instruction's name.
  static constexpr std::string_view name = "le";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a <= b; }
};

/// The elementwise instruction "gt": 2 operands, EwRule::Compare.
struct Gt {
  /// The instruction's name.
  static constexpr std::string_view name = "gt";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a > b; }
};

/// The elementwise instruction "ge": 2 operands, EwRule::Compare.
struct Ge {
  /// The instruction's name.
  static constexpr std::string_view name = "ge";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Compare.
  static constexpr EwRule rule = EwRule::Compare;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a >= b; }
};

/// The elementwise instruction "logical_and": 2 operands, EwRule::Logical.
struct LogicalAnd {
  /// The instruction's name.
  static constexpr std::string_view name = "logical_and";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Logical.
  static constexpr EwRule rule = EwRule::Logical;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a && b; }
};

/// The elementwise instruction "logical_or": 2 operands, EwRule::Logical.
struct LogicalOr {
  /// The instruction's name.
  static constexpr std::string_view name = "logical_or";
  /// Number of operands (2).
  static constexpr int arity = 2;
  /// Dtype rule: EwRule::Logical.
  static constexpr EwRule rule = EwRule::Logical;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& a, const auto& b) { return a || b; }
};

// ---------------------------------------------------------------- ternary

/// where(cond, x, y): x where cond is true, else y.
struct Where {
  /// The instruction's name.
  static constexpr std::string_view name = "where";
  /// Number of operands (3).
  static constexpr int arity = 3;
  /// Dtype rule: EwRule::Select.
  static constexpr EwRule rule = EwRule::Select;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& c, const auto& x, const auto& y) { return c.select(x, y); }
};

/// clamp(x, lo, hi) = min(max(x, lo), hi); NaN in x propagates.
struct Clamp {
  /// The instruction's name.
  static constexpr std::string_view name = "clamp";
  /// Number of operands (3).
  static constexpr int arity = 3;
  /// Dtype rule: EwRule::Same.
  static constexpr EwRule rule = EwRule::Same;
  /// Exact: a packet and a scalar compute the same bits (see EwExact).
  static constexpr bool exact = true;
  /// The instruction on Eigen array expressions (vectorized).
  static auto eval(const auto& x, const auto& lo, const auto& hi) {
    const auto m = (x < lo).select(lo, x);
    return (m > hi).select(hi, m);
  }
};

}  // namespace ew

/// Every elementwise instruction, in one list: an instruction's position is
/// its id in EwPrograms (EwInstr::op).
using EwInstructions =
    OpList<ew::Neg, ew::Abs, ew::Exp, ew::Log, ew::Log1p, ew::Sqrt, ew::Rsqrt, ew::Square,
           ew::Reciprocal, ew::Sign, ew::Floor, ew::Ceil, ew::Round, ew::Sin, ew::Cos, ew::Tanh,
           ew::Sigmoid, ew::Relu, ew::ReluGrad, ew::Gelu, ew::GeluGrad, ew::Erf, ew::GeluTanh,
           ew::GeluTanhGrad, ew::Silu, ew::Softplus, ew::Hardswish, ew::LogicalNot, ew::Add,
           ew::Sub, ew::Mul, ew::Div, ew::Pow, ew::Maximum, ew::Minimum, ew::Eq, ew::Ne, ew::Lt,
           ew::Le, ew::Gt, ew::Ge, ew::LogicalAnd, ew::LogicalOr, ew::Where, ew::Clamp>;

namespace detail {
template <class Op, class List>
struct instr_index;
template <class Op, class... Instrs>
struct instr_index<Op, OpList<Instrs...>> {
  static constexpr int value = [] {
    constexpr bool match[] = {std::is_base_of_v<Instrs, Op>...};
    for (int i = 0; i < static_cast<int>(sizeof...(Instrs)); ++i)
      if (match[i]) return i;
    return -1;
  }();
};
}  // namespace detail

/// True for an instruction marked `exact` (see the file's comment).
template <class Op>
concept EwExact = requires {
  requires Op::exact;
};

/// The id of the instruction `Op` is (or derives from, as an op entry does).
template <class Op>
inline constexpr int ew_instr_id = detail::instr_index<Op, EwInstructions>::value;

/// Static facts about an elementwise instruction, by id.
struct EwOpInfo {
  /// The instruction's name.
  std::string_view name;
  /// Number of operands.
  int arity;
  /// Its dtype rule.
  EwRule rule;
};
/// The facts of instruction `id`; IndexError for an id out of range.
const EwOpInfo& ew_op_info(int id);
/// Id of the elementwise instruction called `name`, or -1.
int ew_op_find(std::string_view name);

}  // namespace ms::kernels
