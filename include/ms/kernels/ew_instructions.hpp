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
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>
#include <type_traits>
#include <utility>

namespace ms::kernels {

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
};

struct Exp {
  static constexpr std::string_view name = "exp";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.exp(); }
};

struct Log {
  static constexpr std::string_view name = "log";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.log(); }
};

struct Log1p {
  static constexpr std::string_view name = "log1p";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.log1p(); }
};

struct Sqrt {
  static constexpr std::string_view name = "sqrt";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.sqrt(); }
};

struct Rsqrt {
  static constexpr std::string_view name = "rsqrt";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.rsqrt(); }
};

struct Square {
  static constexpr std::string_view name = "square";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& x) { return x.square(); }
};

struct Reciprocal {
  static constexpr std::string_view name = "reciprocal";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.inverse(); }
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
};

struct Sin {
  static constexpr std::string_view name = "sin";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.sin(); }
};

struct Cos {
  static constexpr std::string_view name = "cos";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.cos(); }
};

struct Tanh {
  static constexpr std::string_view name = "tanh";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.tanh(); }
};

struct Sigmoid {
  static constexpr std::string_view name = "sigmoid";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.logistic(); }
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
};

/// The error function (used by gelu's gradient).
struct Erf {
  static constexpr std::string_view name = "erf";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x.erf(); }
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
};

struct Silu {
  static constexpr std::string_view name = "silu";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& x) { return x * x.logistic(); }
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
};

struct LogicalNot {
  static constexpr std::string_view name = "logical_not";
  static constexpr int arity = 1;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& x) { return !x; }
};

// ---------------------------------------------------------------- binary

struct Add {
  static constexpr std::string_view name = "add";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a + b; }
};

struct Sub {
  static constexpr std::string_view name = "sub";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a - b; }
};

struct Mul {
  static constexpr std::string_view name = "mul";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return a * b; }
};

/// True division: integers divide as float32 (as PyTorch's `/`).
struct Div {
  static constexpr std::string_view name = "div";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Float;
  static auto eval(const auto& a, const auto& b) { return a / b; }
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
};

/// Elementwise max; NaN propagates (as PyTorch's maximum).
struct Maximum {
  static constexpr std::string_view name = "maximum";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return (a < b || b != b).select(b, a); }
};

/// Elementwise min; NaN propagates (as PyTorch's minimum).
struct Minimum {
  static constexpr std::string_view name = "minimum";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Same;
  static auto eval(const auto& a, const auto& b) { return (a > b || b != b).select(b, a); }
};

struct Eq {
  static constexpr std::string_view name = "eq";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a == b; }
};

struct Ne {
  static constexpr std::string_view name = "ne";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a != b; }
};

struct Lt {
  static constexpr std::string_view name = "lt";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a < b; }
};

struct Le {
  static constexpr std::string_view name = "le";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a <= b; }
};

struct Gt {
  static constexpr std::string_view name = "gt";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a > b; }
};

struct Ge {
  static constexpr std::string_view name = "ge";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Compare;
  static auto eval(const auto& a, const auto& b) { return a >= b; }
};

struct LogicalAnd {
  static constexpr std::string_view name = "logical_and";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& a, const auto& b) { return a && b; }
};

struct LogicalOr {
  static constexpr std::string_view name = "logical_or";
  static constexpr int arity = 2;
  static constexpr EwRule rule = EwRule::Logical;
  static auto eval(const auto& a, const auto& b) { return a || b; }
};

// ---------------------------------------------------------------- ternary

/// where(cond, x, y): x where cond is true, else y.
struct Where {
  static constexpr std::string_view name = "where";
  static constexpr int arity = 3;
  static constexpr EwRule rule = EwRule::Select;
  static auto eval(const auto& c, const auto& x, const auto& y) { return c.select(x, y); }
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
};

}  // namespace ew

/// Every elementwise instruction, in one list: an instruction's position is
/// its id in EwPrograms (EwInstr::op).
using EwInstructions =
    OpList<ew::Neg, ew::Abs, ew::Exp, ew::Log, ew::Log1p, ew::Sqrt, ew::Rsqrt, ew::Square,
           ew::Reciprocal, ew::Sign, ew::Floor, ew::Ceil, ew::Round, ew::Sin, ew::Cos, ew::Tanh,
           ew::Sigmoid, ew::Relu, ew::ReluGrad, ew::Gelu, ew::Erf, ew::GeluTanh, ew::Silu,
           ew::Softplus, ew::Hardswish, ew::LogicalNot, ew::Add, ew::Sub, ew::Mul, ew::Div, ew::Pow,
           ew::Maximum, ew::Minimum, ew::Eq, ew::Ne, ew::Lt, ew::Le, ew::Gt, ew::Ge, ew::LogicalAnd,
           ew::LogicalOr, ew::Where, ew::Clamp>;

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

/// The id of the instruction `Op` is (or derives from, as an op entry does).
template <class Op>
inline constexpr int ew_instr_id = detail::instr_index<Op, EwInstructions>::value;

/// Static facts about an elementwise instruction, by id.
struct EwOpInfo {
  std::string_view name;
  int arity;
  EwRule rule;
};
/// The facts of instruction `id`; IndexError for an id out of range.
const EwOpInfo& ew_op_info(int id);
/// Id of the elementwise instruction called `name`, or -1.
int ew_op_find(std::string_view name);

}  // namespace ms::kernels
