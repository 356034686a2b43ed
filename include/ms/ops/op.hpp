// ms/ops/op.hpp — THE op table: one OpDef per op.
//
// Stage: ops. An OpDef holds everything about an op that the rest of ms reads:
// its name, kind, arity, attributes, dtype and shape rule (`infer`), and its
// evaluation (`eval`, which calls kernels/). Eager calls, and later tracing,
// printing, autodiff and fusion, all go through this table — no switch over
// op kinds anywhere else. Ops register in src/ops/registry.cpp.
//
//   const ms::ops::OpDef& sum = ms::ops::op("sum");
//   auto out = ms::ops::call(sum, {x}, ms::ops::Attrs{{"axes", std::vector<int64_t>{1}}});
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"
#include "ms/expr/recorder.hpp"

namespace ms::ops {

/// What an op is, for passes that group ops (fusion, printing, tests).
enum class OpKind : std::uint8_t {
  Elementwise,   ///< same-shape map with broadcasting: fusable, run by the tile loop
  Reduction,     ///< reduces axes (sum, max, argmax, ...)
  Linalg,        ///< matmul
  Conv,          ///< convolution
  Pool,          ///< pooling
  Layout,        ///< reshape, transpose, concat, pad, cast, ...
  Indexing,      ///< gather, index_select, one_hot
  Composite,     ///< built from other ops (softmax, log_softmax, ...)
  HostCallback,  ///< runs C++ code on concrete values (ms/ops/host.hpp): never folded or merged
  Random,        ///< draws from a Generator when the graph runs: never folded, merged or dropped
};

/// The name of `k` (`Elementwise`, `Reduction`, ...).
std::string_view op_kind_name(OpKind k);

/// One attribute value.
using AttrValue =
    std::variant<bool, std::int64_t, double, std::string, DType, std::vector<std::int64_t>>;

/// Named attributes of an op call, in insertion order (printing follows it).
class Attrs {
 public:
  Attrs() = default;
  /// `{{"axis", std::int64_t{1}}, {"keepdims", true}}`: the attributes in order.
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items);
  /// @{
  /// Copies, moves and destroys the list (in src/ops/op.cpp, so that files
  /// that only pass attributes do not compile the list's code).
  Attrs(const Attrs&);
  Attrs(Attrs&&) noexcept;
  Attrs& operator=(const Attrs&);
  Attrs& operator=(Attrs&&) noexcept;
  ~Attrs();
  /// @}

  /// Sets (or replaces) an attribute.
  Attrs& set(std::string name, AttrValue v);
  /// Whether an attribute `name` is set.
  bool has(std::string_view name) const;
  /// The attribute `name` as T; ValueError naming `op` when missing or of another type.
  /// int64 attributes also read as double.
  template <class T>
  T get(std::string_view name, std::string_view op) const;
  /// As get, or `fallback` when no attribute `name` is set.
  template <class T>
  T get_or(std::string_view name, T fallback, std::string_view op) const {
    return has(name) ? get<T>(name, op) : fallback;
  }
  /// The attributes in the order they were set.
  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  /// "axes=[1], keepdims=false"
  std::string to_string() const;
  /// Same attributes, values and order.
  friend bool operator==(const Attrs& a, const Attrs& b);

 private:
  const AttrValue* find(std::string_view name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;
};

/// The dtype and shape of a value (a tensor not yet computed).
struct TensorType {
  /// The element type.
  DType dtype = float32;
  /// The dims.
  Shape shape;
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// Shape and dtype inference: the output types for the input types and attributes.
using InferFn = std::function<std::vector<TensorType>(std::span<const TensorType>, const Attrs&)>;

/// What a gradient rule sees: the op's inputs and outputs (symbolic while
/// autodiff traces the backward pass) and the gradients of its outputs.
struct GradContext {
  std::span<const Tensor> inputs;  ///< a weak scalar operand is a 0-d tensor of its partner's dtype
  /// The op's outputs from the forward pass.
  std::span<const Tensor> outputs;
  std::span<const Tensor> out_grads;  ///< undefined where an output gets no gradient
  /// The op's attributes.
  const Attrs& attrs;
};
/// Reverse-mode rule: one gradient per input (undefined: none), written with
/// ops so that it records graph nodes (and so is differentiable again). The
/// gradient of an input must have that input's shape.
using GradFn = std::function<std::vector<Tensor>(const GradContext&)>;
/// Evaluation: the concrete outputs for concrete inputs and attributes.
using EvalFn = std::function<std::vector<Tensor>(std::span<const Tensor>, const Attrs&)>;
/// In-place evaluation: writes output k into input k (a contiguous tensor of
/// the output's type) instead of a new tensor. Called on inputs whose types
/// `infer` accepted (a compiled graph's step): it checks only what values
/// and layouts can tell.
using UpdateFn = std::function<void(std::span<const Tensor>, const Attrs&)>;
/// `eval` with its attributes already read: what the jit's executor runs for a
/// step, so that a call does not parse the attribute map again.
using BoundEvalFn = std::function<std::vector<Tensor>(std::span<const Tensor>)>;
/// `update` with its attributes already read.
using BoundUpdateFn = std::function<void(std::span<const Tensor>)>;
/// An entry's `run` with its attributes already read: writes the outputs
/// (`out`, dense tensors of the types `infer` gives, allocated by the caller)
/// from the inputs (`in`).
using BoundRunFn = std::function<void(std::span<const Tensor> in, std::span<const Tensor> out)>;

/// An op's samples for the table-driven tests (ms/ops/samples.hpp).
struct Samples;

/// Algebraic facts of an op, read by the jit's simplification (so that no
/// pass compares op names).
struct Algebra {
  /// A binary op's identity element e: x op e == x when `identity_right`
  /// (x * 1, x / 1, x - 0, x + 0), e op x == x when `identity_left` (1 * x, 0 + x).
  double identity = 0;
  /// Whether x op e == x.
  bool identity_right = false;
  /// Whether e op x == x.
  bool identity_left = false;
  /// False where the identity fails for floating and complex dtypes (x + 0 is
  /// +0.0 for x = -0.0).
  bool identity_exact_for_floats = true;
  /// A unary op with f(f(x)) == x (neg).
  bool involution = false;
  /// The output equals the input whenever their dtypes and shapes match
  /// (reshape, cast, broadcast_to, flatten, stop_gradient).
  bool identity_when_same_type = false;
  /// Likewise, but only for the attributes this accepts (transpose of an axis
  /// with itself); null: `identity_when_same_type` alone decides.
  bool (*identity_when)(const Attrs&) = nullptr;
};

/// One entry of the op table.
struct OpDef {
  /// The name of the public function and of the entry (`matmul`).
  std::string_view name;
  /// Name in graph dumps (`MatMul`); empty: the name in CamelCase (`log_softmax` -> `LogSoftmax`).
  std::string_view ir_name = {};
  /// The op's family (elementwise, reduction, ...).
  OpKind kind = OpKind::Elementwise;
  /// The fewest inputs.
  int min_inputs = 1;
  int max_inputs = 1;  ///< -1: variadic (concat, stack)
  /// Whether gradients flow through the op.
  bool differentiable = true;
  /// For a non-differentiable op whose gradient is not zero (an op whose
  /// rule is not written yet): why ms cannot
  /// differentiate through it. A gradient reaching it is then a ValueError
  /// with this text instead of a silent zero. Empty: the zero gradient is
  /// right (comparisons, argmax, floor, stop_gradient, ...).
  std::string_view no_grad_reason = {};
  /// The output views the first input's memory on every eager call (an
  /// entry's `props.view`): tests check it shares that input's storage.
  bool view = false;
  /// The output may share memory with an input (an entry's `props.may_alias`
  /// or `props.view`): the executor never writes into that input in place.
  bool may_alias = false;
  /// Draws from a Generator (an entry's `props.random`).
  bool random = false;
  /// Output dtypes and shapes from input types and attributes. Raises the
  /// op's ms::Error for bad inputs; `eval` relies on it having done so.
  InferFn infer;
  /// Computes the outputs (calls kernels/).
  EvalFn eval;
  /// Gradient rule (the entry's `vjp`); empty for non-differentiable ops.
  GradFn grad = {};
  /// In-place form of `eval` (the entry's `update`); empty for most ops. The
  /// jit's executor runs it for a capture update `Assign(c, op(c, ...))` when
  /// nothing reads c's old value afterwards: the output is written into c
  /// instead of a new tensor that the Assign would then copy into c.
  UpdateFn update = {};
  /// For an op whose update form can also write a bfloat16 copy of an input
  /// it updates in place, in the same pass (the copy passed as one more input
  /// after the op's own): for inputs of these types, the index of the input
  /// it copies, else -1 (an entry's `update_bf16_copy`). The jit's executor
  /// keeps its bfloat16 copy of such an input (a kept cast) through it. Null:
  /// no such form.
  int (*update_bf16_copy)(std::span<const TensorType> in) = nullptr;
  /// The op's samples (an entry's `samples`); null where the test tables hold them.
  Samples (*samples)() = nullptr;
  /// What the jit's simplification may assume.
  Algebra algebra = {};
  /// The serialized form of the entry's typed attributes (`const E::Attrs*`),
  /// so that ops::invoke runs in libms and not in every file that calls an op.
  Attrs (*attrs_of)(const void* typed) = nullptr;
  /// `eval` on the entry's typed attributes (`typed` points to its `E::Attrs`):
  /// what an eager ops::invoke runs, without serializing them. Null for rows
  /// not made from an entry.
  std::vector<Tensor> (*eval_typed)(const void* typed, std::span<const Tensor> inputs) = nullptr;
  /// `eval` bound to attributes read once (the jit's executor binds each step
  /// when it plans a graph). Null: callers run `eval` with the map.
  BoundEvalFn (*bind)(const Attrs& attrs) = nullptr;
  /// `update` bound likewise; null when `update` is empty or not from an entry.
  BoundUpdateFn (*bind_update)(const Attrs& attrs) = nullptr;
  /// The entry's `run` bound likewise; null when the entry has none (its
  /// outputs are not always fresh dense tensors of the inferred types). The
  /// jit's executor calls it on outputs allocated from the graph's types, so a
  /// compiled step does not infer again.
  BoundRunFn (*bind_run)(const Attrs& attrs) = nullptr;
};

/// Every registered op, in registration order.
const std::vector<const OpDef*>& registry();
/// The op named `name`; ValueError when there is none.
const OpDef& op(std::string_view name);

/// Runs an op on concrete tensors: checks arity, infers, evaluates. This is
/// the single point through which every non-elementwise eager op passes.
std::vector<Tensor> call(const OpDef& def, std::span<const Tensor> inputs, const Attrs& attrs = {});
/// `call` for a single-output op.
Tensor call1(const OpDef& def, std::span<const Tensor> inputs, const Attrs& attrs = {});
/// As call1(def, inputs, attrs) with the inputs in braces.
inline Tensor call1(const OpDef& def, std::initializer_list<Tensor> inputs,
                    const Attrs& attrs = {}) {
  return call1(def, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs);
}

/// `call` with the entry's typed attributes (`typed` points to its `E::Attrs`;
/// `def.attrs_of` serializes them): what ops::invoke runs.
std::vector<Tensor> call_typed(const OpDef& def, std::span<const Tensor> inputs, const void* typed);

/// `def.eval` bound to `attrs` (through `def.bind` when the row has one): what
/// the jit's executor runs for a step. An attribute of the wrong type is the
/// op's ValueError, raised here.
BoundEvalFn bind_eval(const OpDef& def, const Attrs& attrs);
/// `def.update` bound to `attrs` likewise; ValueError when the op has no update form.
BoundUpdateFn bind_update(const OpDef& def, const Attrs& attrs);

/// Types of concrete tensors.
std::vector<TensorType> types_of(std::span<const Tensor> ts);

/// The name of `def` in graph dumps: `ir_name`, else `name` in CamelCase.
std::string ir_name(const OpDef& def);

// ---------------------------------------------------------------- tracing
/// One operand of a traced elementwise op: a tensor or a weak C++ number.
using EwTraceArg = expr::EwTraceArg;

/// Records op calls instead of running them, while ms::jit traces a function
/// on this thread: the expressions' recorder (elementwise applications and
/// in-place writes) and op calls. Implemented by the jit stage; the ops and
/// expr stages only see this interface, so that lower stages never include
/// higher ones.
class Tracer : public expr::Recorder {
 public:
  /// Records `def` applied to `inputs` (symbolic, or concrete: captured or constant).
  virtual std::vector<Tensor> record(const OpDef& def, std::span<const Tensor> inputs,
                                     const Attrs& attrs) = 0;
};

/// The tracer active on this thread, or nullptr.
Tracer* active_tracer();
/// Makes `t` this thread's tracer (nullptr: none); returns the previous one.
Tracer* set_active_tracer(Tracer* t);

// ---------------------------------------------------------------- registration
namespace detail {
/// Appends an op; called only from the register_* functions in src/ops/.
void registry_add(OpDef def);
}  // namespace detail

// ---------------------------------------------------------------- templates

template <class T>
T Attrs::get(std::string_view name, std::string_view op) const {
  const AttrValue* v = find(name);
  MS_CHECK(v != nullptr, ValueError, op, ": missing attribute '", name, "'");
  if (const T* p = std::get_if<T>(v)) return *p;
  if constexpr (std::is_same_v<T, double>)
    if (const auto* i = std::get_if<std::int64_t>(v)) return static_cast<double>(*i);
  ::ms::detail::raise<ValueError>(op, ": attribute '", name, "' has the wrong type");
}

}  // namespace ms::ops
