// ms/expr/expr.hpp — expression templates for elementwise maths.
//
// Stage: expr. `a * b + c` on tensors builds a typed tree (`ms::Expr<Op, ...>`),
// not a computation. Converting the tree to a Tensor lowers it into one
// kernels::EwProgram and runs it in a single fused pass over memory, with one
// allocation (the result):
//
//   ms::Tensor y = ms::relu(a * b + c) * 0.5f;   // one pass, one allocation
//   auto e = a + 1;                               // an Expr: nothing computed yet
//   e.shape(); e.dtype();                         // known already, nothing computed
//   ms::Tensor z = e;                             // computed here
//   std::cout << e; e.item<float>();              // each computes the tree once
//
// Each node infers its dtype and shape when it is built, so a bad operand is
// an error on the line that builds the expression
// (`auto y = ms::zeros({3, 4}) + ms::zeros({5, 4});` throws ms::ShapeError
// there), never later where the value is first used.
//
// Operands are held by reference when they are lvalue tensors and by value
// when temporaries (as xtensor's closures), so a tree never dangles as long as
// the named tensors it refers to are alive. Numbers are weak operands: they
// lift the kind of the result (int tensor * 0.5 -> float32) but not its width
// (float16 tensor * 2.0 -> float16), as PyTorch's Python scalars.
#pragma once

#include <atomic>
#include <complex>
#include <concepts>
#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/expr/recorder.hpp"
#include "ms/kernels/elementwise.hpp"
#include "ms/kernels/ew_instructions.hpp"

namespace ms {

template <class Op, class... Children>
class Expr;

namespace detail {
template <class T>
struct is_expr : std::false_type {};
template <class Op, class... C>
struct is_expr<Expr<Op, C...>> : std::true_type {};
}  // namespace detail

/// An unevaluated elementwise expression: `static_assert(ms::TensorExpr<decltype(a + b)>);`
template <class E>
concept TensorExpr = detail::is_expr<std::remove_cvref_t<E>>::value;

/// A tensor (or a type derived from it, as ms::Parameter) or an expression:
/// what elementwise functions accept as tensors.
template <class T>
concept TensorLike = std::derived_from<std::remove_cvref_t<T>, Tensor> || TensorExpr<T>;

/// A C++ number usable as a weak scalar operand.
template <class T>
concept Number = (std::is_arithmetic_v<std::remove_cvref_t<T>> ||
                  std::same_as<std::remove_cvref_t<T>, float16_t> ||
                  std::same_as<std::remove_cvref_t<T>, bfloat16_t>);

/// Anything an elementwise function takes as an operand.
template <class T>
concept Operand = TensorLike<T> || Number<T>;

namespace expr {

/// What lowering knows about a subexpression.
struct Lowered {
  int reg = -1;                  ///< register of its value (-1 for a weak scalar)
  DType dtype = DType::Float32;  ///< dtype of its value
  /// The register type it is computed in.
  DType reg_type = DType::Float32;
  /// Its shape (empty for an operand inside an Expr: the node knows it).
  Shape shape;
  /// True for a weak scalar.
  bool is_scalar = false;
  Scalar value = 0;  ///< for weak scalars
};

/// Lowering state: the program being built and its inputs.
struct Lowering {
  /// The program being built.
  kernels::EwBuilder builder;
  /// The input tensors, in load order.
  std::vector<const Tensor*> inputs;
  /// The index of input `t`, added on first use.
  int input(const Tensor* t) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == t) return static_cast<int>(i);
    inputs.push_back(t);
    return static_cast<int>(inputs.size()) - 1;
  }
};

/// Lowers one op application whose operands are already lowered (shared by
/// every Expr node and by the op table's eager entries).
Lowered lower_apply(Lowering& L, int op_id, std::span<const Lowered> operands);
/// Lowers one op application whose result types are already known (an Expr
/// node inferred them when it was built): no shape or type inference, and
/// Lowered::shape stays empty.
Lowered lower_apply_typed(Lowering& L, int op_id, std::span<const Lowered> operands,
                          const kernels::EwTypes& types);
/// Lowers a tensor leaf (with its shape unless `with_shape` is false: an
/// operand inside an Expr, whose node knows the shape).
Lowered lower_tensor(Lowering& L, const Tensor& t, bool with_shape = true);
/// Finishes the program of a lowered root and evaluates it into a new tensor.
Tensor evaluate(Lowering& L, const Lowered& root);
/// Evaluates the root into `dst` (which it must broadcast to), casting to dst's dtype.
void evaluate_into(Lowering& L, const Lowered& root, const Tensor& dst);

/// Leaf holding an lvalue tensor by reference. While ms::jit traces, it keeps
/// a copy instead (symbolic tensors are cheap to copy), so that a traced
/// function may return an expression over its local tensors.
struct TensorRef {
  /// References `*p` (or copies it while a trace records).
  explicit TensorRef(const Tensor* p) : t(p) {
    if (expr::active_recorder() != nullptr) {
      own = std::make_shared<const Tensor>(*p);
      t = own.get();
    }
  }
  /// The tensor.
  const Tensor* t;
  /// The copy made while tracing (null otherwise).
  std::shared_ptr<const Tensor> own;
  /// Lowers the tensor as a program input.
  Lowered lower(Lowering& L) const { return lower_tensor(L, *t); }
};
/// Leaf owning a temporary tensor.
struct TensorVal {
  /// The tensor.
  Tensor t;
  /// Lowers the tensor as a program input.
  Lowered lower(Lowering& L) const { return lower_tensor(L, t); }
};
/// Leaf holding a weak scalar.
struct ScalarVal {
  /// The number.
  Scalar v;
  /// A weak scalar operand (no register).
  Lowered lower(Lowering&) const {
    Lowered r;
    r.is_scalar = true;
    r.value = v;
    r.dtype = v.default_dtype();
    r.reg_type = r.dtype;
    return r;
  }
};

/// What a node knows of an operand when it is built: its dtype and, for a
/// tensor, its shape (null for a weak scalar).
struct Meta {
  /// The operand's shape (null for a weak scalar).
  const Shape* shape = nullptr;
  /// The operand's dtype.
  DType dtype = DType::Float32;
  ScalarKind kind = ScalarKind::Float;  ///< of a weak scalar
  bool defined = true;                  ///< false for an undefined tensor
  /// `shape` stays at its address when the operand is moved into a parent
  /// (the shape of a referenced tensor, or one a node holds on the heap).
  bool stable = false;
};
/// @{
/// The Meta of a leaf or node.
inline Meta meta(const TensorRef& r) {
  return {&r.t->shape(), r.t->dtype(), {}, r.t->defined(), true};
}
inline Meta meta(const TensorVal& v) {
  return {&v.t.shape(), v.t.dtype(), {}, v.t.defined(), false};
}
inline Meta meta(const ScalarVal& v) {
  return {nullptr, v.v.default_dtype(), v.v.kind(), true, false};
}
template <TensorExpr E>
Meta meta(const E& e) {
  return {&e.shape(), e.dtype(), {}, true, e.stable_shape() != nullptr};
}
/// @}

/// @{
/// The shape of a leaf or node (a weak scalar has none: an empty shape).
inline const Shape& shape_of(const TensorRef& r) { return r.t->shape(); }
inline const Shape& shape_of(const TensorVal& v) { return v.t.shape(); }
inline const Shape& shape_of(const ScalarVal&) {
  static const Shape none;
  return none;
}
template <TensorExpr E>
const Shape& shape_of(const E& e) {
  return e.shape();
}
/// @}

/// What a node infers when it is built.
struct Inferred {
  kernels::EwTypes types;  ///< the dtype of its value, and the register types computing it
  int shape_from;       ///< the operand whose shape its value has, or -1: the shape is new (`own`)
  const Shape* stable;  ///< the shape's address when it survives moves of the node, else null
};
/// Dtype and shape inference of one op application, run when an Expr node is
/// built (the rules lower_apply applies when it is evaluated). Sets `own` only
/// when broadcasting makes a shape no operand has. ShapeError naming the op and
/// both shapes when the operands do not broadcast, TypeError for an
/// unsupported dtype, ValueError for an undefined tensor.
Inferred infer_apply(int op_id, std::span<const Meta> operands, std::shared_ptr<const Shape>& own);
/// Dtype inference only (kernels::ew_infer_types on the operands' metas).
kernels::EwTypes infer_types(int op_id, std::span<const Meta> operands);

/// What dtype inference reads of an application, packed: each operand's dtype,
/// whether it is a weak scalar, and its kind (0 is never a key).
inline std::uint64_t types_key(std::span<const Meta> operands) {
  std::uint64_t k = 1;
  for (const Meta& m : operands) {
    const bool scalar = m.shape == nullptr;
    k = (k << 8) | static_cast<std::uint64_t>(m.dtype) |
        (scalar ? 16u | (static_cast<std::uint64_t>(m.kind) << 5) : 0u);
  }
  return k;
}
/// The last inference of op `Op` (key << 32 | types), shared by all threads:
/// the types are a function of the key, so a relaxed load is enough.
template <class Op>
inline std::atomic<std::uint64_t> g_types_cache{0};

/// infer_apply for an Expr node of op `Op`, with the common case inline:
/// operands of one shape whose dtypes were seen last time (no call into libms).
template <class Op>
Inferred infer_node(std::span<const Meta> operands, std::shared_ptr<const Shape>& own) {
  std::size_t from = operands.size();
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Meta& m = operands[i];
    if (!m.defined) return infer_apply(kernels::ew_instr_id<Op>, operands, own);
    if (m.shape == nullptr) continue;
    if (from == operands.size())
      from = i;
    else if (m.shape != operands[from].shape && *m.shape != *operands[from].shape)
      return infer_apply(kernels::ew_instr_id<Op>, operands, own);  // broadcasting, or an error
  }
  const std::uint64_t key = types_key(operands);
  const std::uint64_t seen = g_types_cache<Op>.load(std::memory_order_relaxed);
  kernels::EwTypes t;
  if ((seen >> 32) == key) {
    t = {static_cast<DType>(seen & 15u), static_cast<DType>((seen >> 4) & 15u),
         static_cast<DType>((seen >> 8) & 15u)};
  } else {
    t = infer_types(kernels::ew_instr_id<Op>, operands);
    g_types_cache<Op>.store(key << 32 | static_cast<std::uint64_t>(t.out) |
                                static_cast<std::uint64_t>(t.compute) << 4 |
                                static_cast<std::uint64_t>(t.operand) << 8,
                            std::memory_order_relaxed);
  }
  const Meta& m = operands[from];
  return {t, static_cast<int>(from), m.stable ? m.shape : nullptr};
}

/// @{
/// Lowers an operand of an Expr node (tensors without their shape).
inline Lowered lower_operand(Lowering& L, const TensorRef& r) {
  return lower_tensor(L, *r.t, false);
}
inline Lowered lower_operand(Lowering& L, const TensorVal& v) {
  return lower_tensor(L, v.t, false);
}
inline Lowered lower_operand(Lowering& L, const ScalarVal& v) { return v.lower(L); }
template <TensorExpr E>
Lowered lower_operand(Lowering& L, const E& e) {
  return e.lower_node(L);
}
/// @}

/// @{
/// The tensor of a tensor leaf.
inline const Tensor* leaf_tensor(const TensorRef& r) { return r.t; }
inline const Tensor* leaf_tensor(const TensorVal& v) { return &v.t; }
/// @}
/// True for the two tensor leaves, TensorRef and TensorVal.
template <class C>
inline constexpr bool is_tensor_leaf = std::is_same_v<C, TensorRef> || std::is_same_v<C, TensorVal>;

/// The small-op path of Expr::eval: one op applied to one or two dense
/// tensors of one shape and one dtype, whose value has that dtype (`a + b`,
/// `relu(x)` in float32, ...), up to 2^16 elements: the op's dense kernel
/// writes a new tensor, without building a program (the values ew_run would
/// compute, with the same kernel; larger tensors take the tiled, threaded
/// interpreter). Returns false, doing nothing, for anything else.
/// `known`: the op's types for these operands when the caller has them (an
/// Expr node inferred them when it was built).
bool eval_dense(int op_id, std::span<const Tensor* const> operands, Tensor& out,
                const kernels::EwTypes* known = nullptr);

/// A subexpression as ms::jit traces it: a (symbolic) tensor or a weak number.
struct Traced {
  /// The tensor (undefined for a number).
  Tensor t;
  /// The number.
  Scalar s = 0;
  /// True for a weak number.
  bool is_scalar = false;
};
/// @{
/// A leaf or node as the tracer sees it (a node records its op).
inline Traced trace_node(const TensorRef& r) { return {*r.t}; }
inline Traced trace_node(const TensorVal& v) { return {v.t}; }
inline Traced trace_node(const ScalarVal& v) { return {Tensor(), v.v, true}; }
template <TensorExpr E>
Traced trace_node(const E& e) {
  return {e.trace()};
}
/// @}
/// Records one elementwise op application with the active tracer.
Tensor trace_apply(int op_id, std::span<const Traced> args);
/// Records `dst = v` (an in-place update) with the active tracer.
void trace_assign(const Tensor& dst, const Traced& v);

/// The leaf or node holding `x` as an Expr child: an Expr itself, an lvalue tensor by
/// reference (TensorRef), a temporary tensor by value (TensorVal), a number as a weak
/// scalar (ScalarVal).
template <class T>
auto make_leaf(T&& x) {
  using D = std::remove_cvref_t<T>;
  if constexpr (TensorExpr<T>) {
    return D(std::forward<T>(x));
  } else if constexpr (std::derived_from<D, Tensor>) {
    if constexpr (std::is_lvalue_reference_v<T>)
      return TensorRef(static_cast<const Tensor*>(&x));
    else
      return TensorVal{Tensor(std::move(x))};
  } else {
    return ScalarVal{Scalar(x)};
  }
}

/// The type make_leaf gives for a T.
template <class T>
using leaf_t = decltype(make_leaf(std::declval<T>()));

}  // namespace expr

/// An elementwise op applied to children (leaves or other Exprs). It behaves
/// like the tensor it stands for: `shape()` and `dtype()` are known from
/// construction, and `item`, `to_vector`, `to_string` and `<<` compute the
/// tree (once per call; convert to ms::Tensor to keep the values).
template <class Op, class... Children>
class Expr {
 public:
  /// The op (a kernels::ew instruction).
  using op_type = Op;
  /// Builds the node and infers its dtype and shape (nothing is computed):
  /// operands that do not broadcast are an ms::ShapeError here.
  explicit Expr(Children... children) : children_(std::move(children)...) {
    const expr::Inferred inf = with_children([&](const auto&... c) {
      const expr::Meta operands[] = {expr::meta(c)...};
      return expr::infer_node<Op>(operands, own_shape_);
    });
    types_ = inf.types;
    shape_ = inf.stable;
    shape_from_ = static_cast<std::int8_t>(inf.shape_from);
  }

  /// Computes the expression into a new tensor (one fused pass). While
  /// ms::jit traces, records its ops instead (the jit fuses them again).
  Tensor eval() const {
    if (expr::active_recorder() != nullptr) return trace();
    if constexpr (sizeof...(Children) <= 2 && (expr::is_tensor_leaf<Children> && ...)) {
      Tensor out;
      const bool done = with_children([&](const auto&... c) {
        const Tensor* operands[] = {expr::leaf_tensor(c)...};
        return expr::eval_dense(kernels::ew_instr_id<Op>, operands, out, &types_);
      });
      if (done) return out;
    }
    expr::Lowering L;
    const expr::Lowered root = lower(L);
    return expr::evaluate(L, root);
  }
  /// Evaluates the expression into a new tensor.
  operator Tensor() const { return eval(); }  // NOLINT: implicit on purpose

  /// Dtype of the value, inferred at construction (nothing is computed).
  DType dtype() const { return types_.out; }
  /// Shape of the value, inferred at construction (nothing is computed).
  const Shape& shape() const { return shape_ != nullptr ? *shape_ : child_shape<0>(shape_from_); }
  /// The address of shape() when it stays valid as this node is moved or
  /// copied into a parent (null when it lives in a temporary tensor the tree
  /// holds): what a parent keeps so that its shape() is one load.
  const Shape* stable_shape() const { return shape_; }
  /// Number of axes of the value.
  std::int64_t rank() const { return shape().rank(); }
  /// Size of a (possibly negative) axis of the value.
  std::int64_t dim(std::int64_t axis) const { return shape().at(axis); }
  /// Number of elements of the value.
  std::int64_t numel() const { return shape_numel(shape(), "Expr::numel"); }

  /// The single element of a one-element value, converted to T (computes the tree).
  template <Element T>
  T item() const {
    return eval().template item<T>();
  }
  /// All elements in row-major order, converted to T (computes the tree).
  template <Element T>
  std::vector<T> to_vector() const {
    return eval().template to_vector<T>();
  }
  /// The value as ms::Tensor prints it (computes the tree).
  std::string to_string() const { return eval().to_string(); }
  /// Prints the value as ms::Tensor does (computes the tree).
  friend std::ostream& operator<<(std::ostream& os, const Expr& e) { return os << e.eval(); }

  /// Lowers the tree into L's program; the result carries the node's shape.
  expr::Lowered lower(expr::Lowering& L) const {
    expr::Lowered r = lower_node(L);
    r.shape = shape();
    return r;
  }
  /// Lowers the tree with the types inferred at construction, without
  /// shapes (the kernel checks every input against the root's shape).
  expr::Lowered lower_node(expr::Lowering& L) const {
    return with_children([&](const auto&... c) {
      const expr::Lowered operands[] = {expr::lower_operand(L, c)...};
      return expr::lower_apply_typed(L, kernels::ew_instr_id<Op>, operands, types_);
    });
  }

  /// The operands (leaves or nodes).
  const std::tuple<Children...>& children() const { return children_; }

  /// Records the tree, one node per op, with the active tracer.
  Tensor trace() const {
    return with_children([&](const auto&... c) {
      const expr::Traced args[] = {expr::trace_node(c)...};
      return expr::trace_apply(kernels::ew_instr_id<Op>, args);
    });
  }

 private:
  // f(children...), without std::apply: its noexcept test would instantiate a
  // chain of invocability traits per node type in every file that includes
  // this header.
  template <class F>
  auto with_children(F&& f) const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return f(std::get<I>(children_)...); }
    (std::index_sequence_for<Children...>{});
  }

  // The shape of child `k`, found again on each call: a node holding a
  // temporary tensor moves with its parent, so no pointer into it is kept.
  template <std::size_t I>
  const Shape& child_shape(int k) const {
    if constexpr (I + 1 < sizeof...(Children)) {
      if (k != static_cast<int>(I)) return child_shape<I + 1>(k);
    }
    return expr::shape_of(std::get<I>(children_));
  }

  std::tuple<Children...> children_;
  /// The shape when no operand has it (broadcasting made it); on the heap, so
  /// that copies and moves of the node keep its address.
  std::shared_ptr<const Shape> own_shape_;
  const Shape* shape_ = nullptr;  ///< where the shape is, when that survives moves (else null)
  kernels::EwTypes types_{};      ///< the value's dtype and the register types computing it
  std::int8_t shape_from_ = -1;   ///< the operand whose shape the value has (when shape_ is null)
};

namespace detail {
template <class... A>
inline constexpr bool any_tensor_like = (TensorLike<A> || ...);
}  // namespace detail

/// The callable behind each elementwise function: `ms::exp(x)`, `ms::add(a, 2)`.
template <class Op>
struct EwFunction {
  /// Applies the op to `a` (at least one tensor or expression): an unevaluated Expr.
  template <class... A>
  requires(sizeof...(A) == Op::arity && (Operand<A> && ...) && detail::any_tensor_like<A...>) auto
  operator()(A&&... a) const {
    return Expr<Op, expr::leaf_t<A&&>...>(expr::make_leaf(std::forward<A>(a))...);
  }
};

/// -x
inline constexpr EwFunction<kernels::ew::Neg> neg{};
/// |x|
inline constexpr EwFunction<kernels::ew::Abs> abs{};
/// e^x (integers compute as float32)
inline constexpr EwFunction<kernels::ew::Exp> exp{};
/// natural log
inline constexpr EwFunction<kernels::ew::Log> log{};
/// log(1 + x), accurate near 0
inline constexpr EwFunction<kernels::ew::Log1p> log1p{};
/// sqrt(x)
inline constexpr EwFunction<kernels::ew::Sqrt> sqrt{};
/// 1 / sqrt(x)
inline constexpr EwFunction<kernels::ew::Rsqrt> rsqrt{};
/// x * x
inline constexpr EwFunction<kernels::ew::Square> square{};
/// 1 / x
inline constexpr EwFunction<kernels::ew::Reciprocal> reciprocal{};
/// -1, 0 or 1 (NaN stays NaN)
inline constexpr EwFunction<kernels::ew::Sign> sign{};
/// rounds toward -infinity
inline constexpr EwFunction<kernels::ew::Floor> floor{};
/// rounds toward +infinity
inline constexpr EwFunction<kernels::ew::Ceil> ceil{};
/// rounds half to even
inline constexpr EwFunction<kernels::ew::Round> round{};
/// sine
inline constexpr EwFunction<kernels::ew::Sin> sin{};
/// cosine
inline constexpr EwFunction<kernels::ew::Cos> cos{};
/// hyperbolic tangent
inline constexpr EwFunction<kernels::ew::Tanh> tanh{};
/// 1 / (1 + e^-x)
inline constexpr EwFunction<kernels::ew::Sigmoid> sigmoid{};
/// max(x, 0)
inline constexpr EwFunction<kernels::ew::Relu> relu{};
/// relu's gradient: `ms::relu_grad(g, x)` is g where x > 0, else 0
inline constexpr EwFunction<kernels::ew::ReluGrad> relu_grad{};
/// gelu, exact (erf) form: `ms::gelu(x)`; the tanh form is `ms::gelu_tanh(x)`
inline constexpr EwFunction<kernels::ew::Gelu> gelu{};
/// gelu's gradient: `ms::gelu_grad(g, x)` is g * gelu'(x)
inline constexpr EwFunction<kernels::ew::GeluGrad> gelu_grad{};
/// the error function
inline constexpr EwFunction<kernels::ew::Erf> erf{};
/// gelu, tanh approximation (MindSpore's default for nn::GELU)
inline constexpr EwFunction<kernels::ew::GeluTanh> gelu_tanh{};
/// gelu_tanh's gradient: `ms::gelu_tanh_grad(g, x)` is g * gelu_tanh'(x)
inline constexpr EwFunction<kernels::ew::GeluTanhGrad> gelu_tanh_grad{};
/// x * sigmoid(x)
inline constexpr EwFunction<kernels::ew::Silu> silu{};
/// x * relu6(x + 3) / 6: `ms::hardswish(x)`
inline constexpr EwFunction<kernels::ew::Hardswish> hardswish{};
/// log(1 + e^x)
inline constexpr EwFunction<kernels::ew::Softplus> softplus{};
/// true where x is zero
inline constexpr EwFunction<kernels::ew::LogicalNot> logical_not{};
/// a + b
inline constexpr EwFunction<kernels::ew::Add> add{};
/// a - b
inline constexpr EwFunction<kernels::ew::Sub> sub{};
/// a * b
inline constexpr EwFunction<kernels::ew::Mul> mul{};
/// true division (integers give float32)
inline constexpr EwFunction<kernels::ew::Div> div{};
/// a to the power b
inline constexpr EwFunction<kernels::ew::Pow> pow{};
/// elementwise max of two operands (NaN propagates)
inline constexpr EwFunction<kernels::ew::Maximum> maximum{};
/// elementwise min of two operands (NaN propagates)
inline constexpr EwFunction<kernels::ew::Minimum> minimum{};
/// a == b (bool)
inline constexpr EwFunction<kernels::ew::Eq> eq{};
/// a != b (bool)
inline constexpr EwFunction<kernels::ew::Ne> ne{};
/// a < b (bool)
inline constexpr EwFunction<kernels::ew::Lt> lt{};
/// a <= b (bool)
inline constexpr EwFunction<kernels::ew::Le> le{};
/// a > b (bool)
inline constexpr EwFunction<kernels::ew::Gt> gt{};
/// a >= b (bool)
inline constexpr EwFunction<kernels::ew::Ge> ge{};
/// a and b, each read as `!= 0` (bool)
inline constexpr EwFunction<kernels::ew::LogicalAnd> logical_and{};
/// a or b, each read as `!= 0` (bool)
inline constexpr EwFunction<kernels::ew::LogicalOr> logical_or{};
/// where(cond, x, y): x where cond is non-zero, else y. `ms::where(x > 0, x, 0.f)`
inline constexpr EwFunction<kernels::ew::Where> where{};
/// clamp(x, lo, hi). `ms::clamp(x, -1.f, 1.f)`
inline constexpr EwFunction<kernels::ew::Clamp> clamp{};

// ---------------------------------------------------------------- operators

/// ms::add(a, b), unevaluated: `auto y = x + 1.f;`
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator+(A&& a, B&& b) {
  return add(std::forward<A>(a), std::forward<B>(b));
}
/// ms::sub(a, b), unevaluated.
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator-(A&& a, B&& b) {
  return sub(std::forward<A>(a), std::forward<B>(b));
}
/// ms::mul(a, b), unevaluated.
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator*(A&& a, B&& b) {
  return mul(std::forward<A>(a), std::forward<B>(b));
}
/// ms::div(a, b), unevaluated.
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator/(A&& a, B&& b) {
  return div(std::forward<A>(a), std::forward<B>(b));
}
/// ms::eq(a, b), unevaluated (a bool tensor, not a C++ bool).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator==(A&& a, B&& b) {
  return eq(std::forward<A>(a), std::forward<B>(b));
}
/// ms::ne(a, b), unevaluated (a bool tensor).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator!=(A&& a, B&& b) {
  return ne(std::forward<A>(a), std::forward<B>(b));
}
/// ms::lt(a, b), unevaluated (a bool tensor).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator<(A&& a, B&& b) {
  return lt(std::forward<A>(a), std::forward<B>(b));
}
/// ms::le(a, b), unevaluated (a bool tensor).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator<=(A&& a, B&& b) {
  return le(std::forward<A>(a), std::forward<B>(b));
}
/// ms::gt(a, b), unevaluated (a bool tensor).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator>(A&& a, B&& b) {
  return gt(std::forward<A>(a), std::forward<B>(b));
}
/// ms::ge(a, b), unevaluated (a bool tensor).
template <class A, class B>
requires(Operand<A>&& Operand<B>&& detail::any_tensor_like<A, B>) auto operator>=(A&& a, B&& b) {
  return ge(std::forward<A>(a), std::forward<B>(b));
}
/// ms::neg(a), unevaluated.
template <TensorLike A>
auto operator-(A&& a) {
  return neg(std::forward<A>(a));
}
/// ms::logical_not(a), unevaluated.
template <TensorLike A>
auto operator!(A&& a) {
  return logical_not(std::forward<A>(a));
}

/// Evaluates `e` into the existing tensor `dst` (e must broadcast to dst's
/// shape; the result is cast to dst's dtype). No allocation when dst is
/// contiguous. Inputs may alias dst only elementwise (same index).
template <Operand E>
void assign(const Tensor& dst, E&& e) {
  const auto leaf = expr::make_leaf(std::forward<E>(e));
  if (expr::active_recorder() != nullptr) return expr::trace_assign(dst, expr::trace_node(leaf));
  expr::Lowering L;
  expr::evaluate_into(L, leaf.lower(L), dst);
}

/// `a = a + b` in place (assign): `a` keeps its storage; traced tensors are rebound.
template <Operand B>
Tensor& operator+=(Tensor& a, B&& b) {
  if (a.is_symbolic()) return a = add(a, std::forward<B>(b));  // traced values are rebound
  assign(a, add(a, std::forward<B>(b)));
  return a;
}
/// `a = a - b` in place, as operator+=.
template <Operand B>
Tensor& operator-=(Tensor& a, B&& b) {
  if (a.is_symbolic()) return a = sub(a, std::forward<B>(b));  // traced values are rebound
  assign(a, sub(a, std::forward<B>(b)));
  return a;
}
/// `a = a * b` in place, as operator+=.
template <Operand B>
Tensor& operator*=(Tensor& a, B&& b) {
  if (a.is_symbolic()) return a = mul(a, std::forward<B>(b));  // traced values are rebound
  assign(a, mul(a, std::forward<B>(b)));
  return a;
}
/// `a = a / b` in place, as operator+=.
template <Operand B>
Tensor& operator/=(Tensor& a, B&& b) {
  if (a.is_symbolic()) return a = div(a, std::forward<B>(b));  // traced values are rebound
  assign(a, div(a, std::forward<B>(b)));
  return a;
}

}  // namespace ms
