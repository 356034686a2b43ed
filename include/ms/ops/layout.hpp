// ms/ops/layout.hpp — shape and indexing ops: reshape, transpose, permute,
// squeeze, unsqueeze, flatten, broadcast_to, slice, select, stop_gradient
// (views), concat, stack, split, gather, index_select, gather_grad,
// index_select_grad, index_copy, scatter, cumsum, one_hot, triu, tril, masked_fill, pad, cast.
// The view methods of ms::Tensor (`x.slice(...)`, `x.transpose(...)`, ...)
// are these entries' public forms (src/ops/view.cpp).
//
// Stage: ops. Each function is one entry of the op table (kind Layout or
// Indexing, registered in src/ops/layout.cpp) and goes through ops::call, so
// eager calls and graph tracing share it. View ops return views that share
// the input's storage (as the Tensor methods of the same name; reshape copies
// only when no view is possible); split returns views; the others return new
// dense tensors. Index tensors are Int32 or Int64; an index value out of range
// (negative included) is an ms::IndexError naming its position and value.
//
//   ms::Tensor x = ms::arange(0, 6).reshape({2, 3});
//   ms::Tensor y = ms::concat({x, x}, 1);                          // [2, 6]
//   auto parts = ms::split(y, 2, 1);                               // 3 views of [2, 2]
//   ms::Tensor e = ms::index_select(x, 0, ms::tensor({1, 1, 0}));  // rows 1, 1, 0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms::ops {

// ---------------------------------------------------------------- views

/// Same elements with a new shape (one dim may be -1); a view when strides allow, else a copy.
struct Reshape {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "reshape";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.may_alias = true, .algebra = {.identity_when_same_type = true}};
  /// The attributes of reshape; their defaults are written here only.
  struct Attrs {
    /// The new shape; one dim may be -1 (inferred from the element count).
    std::vector<std::int64_t> shape = {};
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("shape", &Attrs::shape); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Swaps two axes (a view).
struct Transpose {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "transpose";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.view = true, .algebra = {.identity_when_same_type = true}};
  /// The attributes of transpose; their defaults are written here only.
  struct Attrs {
    /// The first axis swapped (negative counts from the end).
    std::int64_t axis0 = 0;
    /// The second axis swapped.
    std::int64_t axis1 = 1;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) {
      visit("axis0", &Attrs::axis0);
      visit("axis1", &Attrs::axis1);
    }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// Swapping an axis with itself changes nothing.
  static bool is_identity(const Attrs& a) { return a.axis0 == a.axis1; }
  static Samples samples();
  ///@}
};

/// Reorders the axes (a view): out.dim(i) = x.dim(axes[i]).
struct Permute {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "permute";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.view = true};
  /// The attributes of permute; their defaults are written here only.
  struct Attrs {
    /// Output axis i is input axis axes[i]; a permutation of the axes.
    std::vector<std::int64_t> axes = {};
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axes", &Attrs::axes); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Removes `axis` (size 1, else a ShapeError, as MindSpore), or every size-1 axis when absent (a
/// view).
struct Squeeze {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "squeeze";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.view = true};
  /// The attributes of squeeze; their defaults are written here only.
  struct Attrs {
    /// The size-1 axis removed; none removes every size-1 axis.
    std::optional<std::int64_t> axis = {};
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Inserts a size-1 axis at `axis` in [-rank-1, rank] (a view).
struct Unsqueeze {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "unsqueeze";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.view = true};
  /// The attributes of unsqueeze; their defaults are written here only.
  struct Attrs {
    /// Where the new size-1 axis goes, in [-rank - 1, rank].
    std::int64_t axis = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Merges axes [start, end] into one (a view when possible); a rank-0 tensor becomes [1].
struct Flatten {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "flatten";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.may_alias = true, .algebra = {.identity_when_same_type = true}};
  /// The attributes of flatten; their defaults are written here only.
  struct Attrs {
    /// The first axis merged.
    std::int64_t start = 0;
    /// The last axis merged (-1: the last axis).
    std::int64_t end = -1;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) {
      visit("start", &Attrs::start);
      visit("end", &Attrs::end);
    }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Broadcasts to `shape` (NumPy rules, -1 keeps a dim) as a stride-0 view.
struct BroadcastTo {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "broadcast_to";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.view = true, .algebra = {.identity_when_same_type = true}};
  /// The attributes of broadcast_to; their defaults are written here only.
  struct Attrs {
    /// The target shape (NumPy broadcasting rules).
    std::vector<std::int64_t> shape = {};
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("shape", &Attrs::shape); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Elements start, start + step, ... < stop along `axis` (a view; Python
/// slice semantics: negative start / stop count from the end and are clamped;
/// step > 0). `x.slice(1, 0, -1, 2)`
struct Slice {
  /// The op-table name.
  static constexpr std::string_view name = "slice";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Layout;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  /// What passes and tests may assume of it.
  static constexpr Props props{.view = true};
  /// Which part of which axis is kept.
  struct Attrs {
    /// The axis (negative: from the end).
    std::int64_t axis = 0;
    /// The first index kept.
    std::int64_t start = 0;
    /// One past the last index kept.
    std::int64_t stop = 0;
    /// The distance between kept indices.
    std::int64_t step = 1;
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      visit("axis", &Attrs::axis);
      visit("start", &Attrs::start);
      visit("stop", &Attrs::stop);
      visit("step", &Attrs::step);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The sub-tensor at `index` (in [-size, size)) along `axis`, which is
/// removed (a view). `x.select(0, -1)` is the last row.
struct Select {
  /// The op-table name.
  static constexpr std::string_view name = "select";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Layout;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  /// What passes and tests may assume of it.
  static constexpr Props props{.view = true};
  /// Which axis is removed, at which index.
  struct Attrs {
    /// The axis (negative: from the end).
    std::int64_t axis = 0;
    /// The index kept (negative: from the end).
    std::int64_t index = 0;
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      visit("axis", &Attrs::axis);
      visit("index", &Attrs::index);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The inputs' gradients, written with ops (so they are differentiable again).
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// Its first input, read only after the others are computed (MindSpore's
/// `ops.depend(value, expr)`): `ms::depend(x, {g})` is `x` itself (a view,
/// no copy), and every execution order computes `g` before anything that
/// reads the result. Gradients flow to the first input only. Recompute uses
/// it to keep a cell's recomputed forward in the backward (ms/jit/recompute.hpp).
struct Depend {
  /// The op-table name.
  static constexpr std::string_view name = "depend";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Layout;
  /// How many inputs it takes: the value, then one or more dependencies.
  static constexpr Arity arity{2, -1};
  /// What passes and tests may assume of it.
  static constexpr Props props{.view = true};
  /// Its attributes.
  using Attrs = NoAttrs;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The gradients of the inputs: the output's for the first, none for the others.
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The identity whose gradient is zero (`ms::stop_gradient`): the input itself.
struct StopGradient {
  /// The op-table name.
  static constexpr std::string_view name = "stop_gradient";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Layout;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  // Not differentiable on purpose: no gradient flows through it.
  /// What passes and tests may assume of it.
  static constexpr Props props{
      .differentiable = false, .view = true, .algebra = {.identity_when_same_type = true}};
  /// Its attributes.
  using Attrs = NoAttrs;
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

// ---------------------------------------------------------------- copies

/// Joins tensors along an existing axis; the dtype is the promotion of all inputs.
struct Concat {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "concat";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, -1};
  static constexpr Props props{.may_alias = true};
  /// The attributes of concat; their defaults are written here only.
  struct Attrs {
    /// The axis the inputs are joined along.
    std::int64_t axis = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Joins same-shape tensors along a new axis; dtypes promote as in concat.
struct Stack {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "stack";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, -1};
  static constexpr Props props{.may_alias = true};
  /// The attributes of stack; their defaults are written here only.
  struct Attrs {
    /// Where the new axis goes.
    std::int64_t axis = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Views of consecutive chunks along `axis`: of `split_size` each, or of the given `sizes` (exactly
/// one of the two).
struct Split {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "split";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.may_alias = true};
  /// The attributes of split; their defaults are written here only.
  struct Attrs {
    /// The size of each chunk (the last may be smaller); or
    std::optional<std::int64_t> split_size = {};
    /// the size of each chunk (summing to the axis size).
    std::optional<std::vector<std::int64_t>> sizes = {};
    /// The axis split.
    std::int64_t axis = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) {
      visit("split_size", &Attrs::split_size);
      visit("sizes", &Attrs::sizes);
      visit("axis", &Attrs::axis);
    }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Pads (or crops) the trailing axes; see ms::pad.
struct Pad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "pad";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.may_alias = true};
  /// The attributes of pad; their defaults are written here only.
  struct Attrs {
    /// Before/after amounts, last axis first (negative crops); see ms::pad.
    std::vector<std::int64_t> pads = {};
    /// "constant", "reflect" or "replicate".
    std::string mode = "constant";
    /// The fill value of "constant" mode.
    double value = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) {
      visit("pads", &Attrs::pads);
      visit("mode", &Attrs::mode);
      visit("value", &Attrs::value);
    }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Converts to `dtype`; see ms::cast.
struct Cast {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "cast";
  static constexpr OpKind kind = OpKind::Layout;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{.may_alias = true, .algebra = {.identity_when_same_type = true}};
  /// The attributes of cast; their defaults are written here only.
  struct Attrs {
    /// The target dtype.
    DType dtype = float32;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("dtype", &Attrs::dtype); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

// ---------------------------------------------------------------- views

/// Same elements with a new shape (one dim may be -1); a view when strides
/// allow, else a copy. `ms::reshape(x, {3, -1})`
inline Tensor reshape(const Tensor& x, const Shape& shape) {
  return ops::invoke1<ops::Reshape>({x}, {shape.to_vector()});
}

/// Swaps two axes (a view). `ms::transpose(x, 0, 1)`
inline Tensor transpose(const Tensor& x, std::int64_t axis0, std::int64_t axis1) {
  return ops::invoke1<ops::Transpose>({x}, {axis0, axis1});
}

/// Reorders the axes (a view): out.dim(i) = x.dim(axes[i]). `ms::permute(x, {2, 0, 1})`
inline Tensor permute(const Tensor& x, const std::vector<std::int64_t>& axes) {
  return ops::invoke1<ops::Permute>({x}, {axes});
}

/// Removes every size-1 axis (a view). `ms::squeeze(ms::zeros({1, 3, 1}))` is [3].
inline Tensor squeeze(const Tensor& x) { return ops::invoke1<ops::Squeeze>({x}, {}); }

/// Removes `axis`, which must have size 1 (ShapeError otherwise, as
/// MindSpore). `ms::squeeze(x, 0)`
inline Tensor squeeze(const Tensor& x, std::int64_t axis) {
  return ops::invoke1<ops::Squeeze>({x}, {axis});
}

/// Inserts a size-1 axis at `axis` in [-rank-1, rank] (a view). `ms::unsqueeze(x, -1)`
inline Tensor unsqueeze(const Tensor& x, std::int64_t axis) {
  return ops::invoke1<ops::Unsqueeze>({x}, {axis});
}

/// Merges axes [start, end] into one (a view when possible); a rank-0
/// tensor becomes [1]. `ms::flatten(ms::zeros({2, 3, 4}), 1)` is [2, 12].
inline Tensor flatten(const Tensor& x, std::int64_t start = 0, std::int64_t end = -1) {
  return ops::invoke1<ops::Flatten>({x}, {start, end});
}

/// Broadcasts to `shape` (NumPy rules, -1 keeps a dim) as a stride-0 view;
/// do not write through it. `ms::broadcast_to(ms::ones({3}), {2, 3})`
inline Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  return ops::invoke1<ops::BroadcastTo>({x}, {shape.to_vector()});
}

/// `value` itself, computed after `deps` in every execution order (ms::ops::Depend):
/// `ms::depend(x, {g})`. Needs at least one dependency.
inline Tensor depend(const Tensor& value, const std::vector<Tensor>& deps) {
  MS_CHECK(!deps.empty(), ValueError, "depend: expected at least one dependency, got none");
  std::vector<Tensor> in{value};
  in.insert(in.end(), deps.begin(), deps.end());
  return ops::invoke<ops::Depend>(in, {})[0];
}

/// The identity whose gradient is zero (ms::ops::StopGradient): `ms::stop_gradient(x)`.
inline Tensor stop_gradient(const Tensor& x) { return ops::invoke1<ops::StopGradient>({x}, {}); }

// ---------------------------------------------------------------- copies

/// Joins tensors along an existing axis. The dtype is the promotion of all
/// inputs (as torch.cat). Inputs of shape [0] are skipped whatever their rank
/// relation to the others (PyTorch's legacy rule), but still take part in the
/// dtype promotion. `ms::concat({a, b}, 1)`
inline Tensor concat(const std::vector<Tensor>& xs, std::int64_t axis = 0) {
  MS_CHECK(!xs.empty(), ValueError, "concat: expected a non-empty list of tensors, got none");
  return ops::invoke<ops::Concat>(xs, {axis})[0];
}

/// Joins same-shape tensors along a new axis in [-rank-1, rank]; dtypes
/// promote as in concat. `ms::stack({a, b})` is [2, ...a.shape].
inline Tensor stack(const std::vector<Tensor>& xs, std::int64_t axis = 0) {
  MS_CHECK(!xs.empty(), ValueError, "stack: expected a non-empty list of tensors, got none");
  return ops::invoke<ops::Stack>(xs, {axis})[0];
}

/// Views of consecutive chunks of `split_size` along `axis` (the last may be
/// smaller; split_size 0 only for an empty axis). Note: `split(x, {2})` picks
/// this overload; write `std::vector<std::int64_t>{2}` for a list of one.
/// `ms::split(ms::zeros({5}), 2)` gives sizes 2, 2, 1.
inline std::vector<Tensor> split(const Tensor& x, std::int64_t split_size, std::int64_t axis = 0) {
  return ops::invoke<ops::Split>({x}, {.split_size = split_size, .axis = axis});
}

/// Views of chunks of the given sizes (>= 0, summing to x.dim(axis)).
/// `ms::split(x, std::vector<std::int64_t>{1, 3}, 0)`
inline std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes,
                                 std::int64_t axis = 0) {
  return ops::invoke<ops::Split>({x}, {.sizes = sizes, .axis = axis});
}

}  // namespace ms

namespace ms::ops {

/// torch.gather: out[i][j][k] = x[index[i][j][k]][j][k] for axis 0 (likewise
/// for other axes). `index` (Int32/Int64) has x's rank and, on every other
/// axis, a size <= x's; out has index's shape and x's dtype.
/// `ms::gather(x, 1, ms::tensor({{0, 0}, {1, 0}}))`
struct Gather {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "gather";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  /// The attributes of gather; their defaults are written here only.
  struct Attrs {
    /// The axis indexed (negative counts from the end).
    std::int64_t axis = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("axis", &Attrs::axis); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The slices of x at positions `index` (1-D Int32/Int64, values in
/// [0, x.dim(axis)), negative ones out of range) along `axis`.
/// `ms::index_select(embedding, 0, ids)`
struct IndexSelect {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "index_select";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  using Attrs = Gather::Attrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Attributes of the indexing gradients: the axis and the input's shape.
struct ScatterGradAttrs {
  /// The axis that was indexed.
  std::int64_t axis = 0;
  /// The shape of the indexed input (the gradient's shape).
  std::vector<std::int64_t> input_size = {};
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) {
    visit("axis", &ScatterGradAttrs::axis);
    visit("input_size", &ScatterGradAttrs::input_size);
  }
};

/// The gradient of `gather(x, axis, index)` for x of shape input_size: zeros
/// of that shape with grad_out (index's shape) added at the gathered
/// positions (repeated indices add up, in index order). Floating grad_out only
/// (TypeError otherwise); index and input_size are checked as gather checks x
/// and index (ShapeError, IndexError for values out of range), input_size
/// sizes must be >= 0 (ValueError). Differentiable in g (its adjoint is gather).
/// `ms::gather_grad(g, 1, index, x.shape())`
struct GatherGrad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "gather_grad";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  using Attrs = ScatterGradAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The gradient of `index_select(x, axis, index)` for x of shape input_size:
/// zeros with the slices of grad_out added at positions `index` along `axis`
/// (repeated indices add up, in index order). Errors as gather_grad, and
/// ShapeError when grad_out is not index_select's output shape.
/// `ms::index_select_grad(g, 0, ids, embedding.shape())`
struct IndexSelectGrad {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "index_select_grad";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  using Attrs = ScatterGradAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// x with its slices at positions `index` (1-D Int32/Int64, distinct values
/// in [0, x.dim(axis))) along `axis` replaced by the slices of `source` in
/// order (torch.index_copy): source has x's shape except source.dim(axis) =
/// index.dim(0), and x's dtype. The output is a new contiguous tensor (x is
/// not written). TypeError for another source dtype or a non-integer index,
/// ShapeError for other shapes, IndexError for an index out of range,
/// ValueError for a repeated index. Differentiable in x and source. Inside
/// ms::jit, `c.copy_(index_copy(c, axis, index, source))` of a captured,
/// contiguous c writes only the copied slices into c (the entry's `update`).
/// `ms::index_copy(cache, 2, slot, k)` writes k into slot `slot` of axis 2.
struct IndexCopy {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "index_copy";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{3, 3};
  static constexpr Props props{};
  using Attrs = Gather::Attrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static void update(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// torch.scatter with a tensor source (ONNX ScatterElements without
/// reduction, MindSpore's ops.scatter): x with, for every coordinate c of
/// index, out[c with c[axis] replaced by index[c]] = src[c]. index
/// (Int32/Int64) has x's rank and, on every axis but `axis`, a size <= x's;
/// src has index's shape and x's dtype. The output is a new contiguous tensor
/// (x is not written). TypeError for another src dtype or a non-integer
/// index, ShapeError for other shapes, IndexError for an index out of range,
/// ValueError when two elements of src would land on one position (which one
/// wins would be arbitrary). Differentiable in x and src; the adjoint of
/// gather on the positions it writes.
/// `ms::scatter(ms::zeros({2, 3}), 1, ms::tensor({{2, 1}, {0, 2}}), ms::ones({2, 2}))`
struct Scatter {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "scatter";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{3, 3};
  static constexpr Props props{};
  using Attrs = Gather::Attrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// Inclusive (or exclusive) running sums along `axis`, front to back (or back
/// to front with `reverse`), as MindSpore's CumSum: out[i] = x[0] + ... + x[i]
/// (exclusive: up to x[i - 1], so out[0] = 0). The output has x's shape and
/// dtype; floating dtypes sum in float64 and integers in 64 bits (wrapping
/// as NumPy), each sum converted to the dtype. Bool, complex and Int4 inputs
/// are a TypeError. Its gradient is the cumsum of the gradient in the other
/// direction. `ms::cumsum(ms::tensor({1, 2, 3}))` is [1, 3, 6].
struct Cumsum {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "cumsum";
  static constexpr OpKind kind = OpKind::Reduction;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  /// The attributes of cumsum; their defaults are written here only.
  struct Attrs {
    /// The axis summed along (negative counts from the end).
    std::int64_t axis = 0;
    /// Sums up to the previous element (out[0] = 0).
    bool exclusive = false;
    /// Sums from the back of the axis to the front.
    bool reverse = false;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) {
      visit("axis", &Attrs::axis);
      visit("exclusive", &Attrs::exclusive);
      visit("reverse", &Attrs::reverse);
    }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// One-hot encoding (MindSpore's OneHot with on=1, off=0): out has shape
/// indices.shape + [num_classes] and dtype `dtype`; index values must lie in
/// [0, num_classes) (IndexError otherwise). Integer indices carry no
/// gradient. The public ms::one_hot also accepts num_classes -1.
struct OneHot {
  /// The op-table name.
  static constexpr std::string_view name = "one_hot";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Indexing;
  /// How many inputs it takes.
  static constexpr Arity arity{1, 1};
  // Its input is integer indices: a zero gradient is right.
  /// What passes and tests may assume of it.
  static constexpr Props props{.differentiable = false};
  /// The number of classes and the output dtype.
  struct Attrs {
    /// The size of the new last axis.
    std::int64_t num_classes = 0;
    /// The output dtype.
    DType dtype = float32;
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      visit("num_classes", &Attrs::num_classes);
      visit("dtype", &Attrs::dtype);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

/// The attributes of triu and tril: which diagonal bounds the kept band.
struct TriangleAttrs {
  /// The diagonal j - i = diagonal of rows i and columns j: 0 the main one,
  /// positive above it, negative below it (any value; beyond the matrix all
  /// elements are kept or all zeroed).
  std::int64_t diagonal = 0;
  /// Each attribute by name, for dumps and export.
  static void fields(auto&& visit) { visit("diagonal", &TriangleAttrs::diagonal); }
};

/// The upper triangle of the matrices in x's last two axes (torch.triu,
/// MindSpore's Triu): out[..., i, j] = x[..., i, j] where j - i >= diagonal,
/// else 0. x has rank >= 2 (ShapeError otherwise; leading axes are a batch)
/// and any dtype but packed Int4; out has x's shape and dtype. Its gradient is
/// triu of the gradient. `ms::triu(scores, {.diagonal = 1})`
struct Triu {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "triu";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = TriangleAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// The lower triangle of the matrices in x's last two axes (torch.tril,
/// MindSpore's Tril): out[..., i, j] = x[..., i, j] where j - i <= diagonal,
/// else 0. Otherwise as triu; its gradient is tril of the gradient.
/// `ms::tril(ms::ones({4, 4}, ms::bool_))` is a causal mask.
struct Tril {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "tril";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{1, 1};
  static constexpr Props props{};
  using Attrs = TriangleAttrs;
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

/// x with `value` where `mask` is true (torch.masked_fill, MindSpore's
/// MaskedFill): out = mask ? value : x. mask has dtype Bool (TypeError
/// otherwise) and broadcasts to x's shape (NumPy rules, from the right; a
/// mask that does not, or that would grow x, is a ShapeError: out has x's
/// shape). `value` is converted to x's dtype as a cast is (for an integer
/// dtype it must fit, ValueError otherwise); x has any dtype but packed Int4.
/// x's gradient is the gradient with zeros where mask is true; mask gets none.
/// `ms::masked_fill(scores, causal, -1e9)`
struct MaskedFill {
  ///@{
  /// What the op table reads of this entry (ms::ops::OpEntry).
  static constexpr std::string_view name = "masked_fill";
  static constexpr OpKind kind = OpKind::Indexing;
  static constexpr Arity arity{2, 2};
  static constexpr Props props{};
  /// The attributes of masked_fill; their defaults are written here only.
  struct Attrs {
    /// The value written where mask is true (converted to x's dtype).
    double value = 0;
    /// Each attribute by name, for dumps and export.
    static void fields(auto&& visit) { visit("value", &Attrs::value); }
  };
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  static void run(const Attrs& a, std::span<const Tensor> in, std::span<const Tensor> out);
  static std::vector<Tensor> vjp(const Attrs& a, const GradContext& c);
  static Samples samples();
  ///@}
};

}  // namespace ms::ops

namespace ms {

// The public functions of the entries above.

/// torch.gather along `axis` (ms::ops::Gather).
inline Tensor gather(const Tensor& x, std::int64_t axis, const Tensor& index) {
  return ops::invoke1<ops::Gather>({x, index}, {.axis = axis});
}
/// Slices along `axis` at positions `index` (ms::ops::IndexSelect).
inline Tensor index_select(const Tensor& x, std::int64_t axis, const Tensor& index) {
  return ops::invoke1<ops::IndexSelect>({x, index}, {.axis = axis});
}
/// The gradient of gather (ms::ops::GatherGrad).
inline Tensor gather_grad(const Tensor& grad_out, std::int64_t axis, const Tensor& index,
                          const Shape& input_size) {
  return ops::invoke1<ops::GatherGrad>({grad_out, index},
                                       {.axis = axis, .input_size = input_size.to_vector()});
}
/// The gradient of index_select (ms::ops::IndexSelectGrad).
inline Tensor index_select_grad(const Tensor& grad_out, std::int64_t axis, const Tensor& index,
                                const Shape& input_size) {
  return ops::invoke1<ops::IndexSelectGrad>({grad_out, index},
                                            {.axis = axis, .input_size = input_size.to_vector()});
}
/// x with the slices at `index` along `axis` replaced by those of `source`
/// (ms::ops::IndexCopy): `ms::index_copy(x, 0, ms::tensor({2}), row)`.
inline Tensor index_copy(const Tensor& x, std::int64_t axis, const Tensor& index,
                         const Tensor& source) {
  return ops::invoke1<ops::IndexCopy>({x, index, source}, {.axis = axis});
}
/// x with the elements of `src` written at the positions `index` gives along
/// `axis` (ms::ops::Scatter, torch.scatter):
/// `ms::scatter(x, 1, ms::tensor({{2, 1}, {0, 2}}), src)`.
inline Tensor scatter(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& src) {
  return ops::invoke1<ops::Scatter>({x, index, src}, {.axis = axis});
}
/// Running sums along an axis (ms::ops::Cumsum): `ms::cumsum(x, {.axis = 1, .reverse = true})`.
inline Tensor cumsum(const Tensor& x, const ops::Cumsum::Attrs& a = {}) {
  return ops::invoke1<ops::Cumsum>({x}, a);
}
/// The upper triangle of the last two axes (ms::ops::Triu), zeros below
/// diagonal `a.diagonal`. Example: `ms::triu(x, {.diagonal = 1})`.
inline Tensor triu(const Tensor& x, const ops::TriangleAttrs& a = {}) {
  return ops::invoke1<ops::Triu>({x}, a);
}
/// The lower triangle of the last two axes (ms::ops::Tril), zeros above
/// diagonal `a.diagonal`. Example: `ms::tril(ms::ones({4, 4}, ms::bool_))` is a causal mask.
inline Tensor tril(const Tensor& x, const ops::TriangleAttrs& a = {}) {
  return ops::invoke1<ops::Tril>({x}, a);
}
/// `value` where the Bool `mask` (broadcast to x's shape) is true, else x
/// (ms::ops::MaskedFill). Example: `ms::masked_fill(x, mask, -1e9)`.
inline Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  return ops::invoke1<ops::MaskedFill>({x, mask}, {.value = value});
}

/// One-hot encoding (MindSpore's OneHot with on=1, off=0): out has shape
/// indices.shape + [num_classes] and dtype `dtype`. num_classes -1 infers
/// max(indices) + 1 (as PyTorch). Index values must lie in [0, num_classes).
/// `ms::one_hot(ms::tensor({0, 2}), 3)` is [[1, 0, 0], [0, 0, 1]].
Tensor one_hot(const Tensor& indices, std::int64_t num_classes = -1, DType dtype = float32);

/// Pads (or, with negative pads, crops) the trailing axes; `pads` is in
/// PyTorch's order: (left, right) of the last axis, then of the one before,
/// ... Modes: "constant" (fills `value`, converted like a cast; for integer
/// dtypes it must fit the dtype), "reflect" (mirror without the edge, pads <
/// size), "replicate" (repeat the edge). Any rank; a crop must fit the axis.
/// `ms::pad(img, {1, 1, 2, 2})` pads W by 1 and H by 2 on each side.
inline Tensor pad(const Tensor& x, const std::vector<std::int64_t>& pads,
                  const std::string& mode = "constant", double value = 0) {
  return ops::invoke1<ops::Pad>({x}, {pads, mode, value});
}

/// Converts to `dtype` (float -> int truncates toward zero, -> bool is != 0,
/// complex -> real drops the imaginary part). Returns x itself when it
/// already has that dtype and is contiguous. `ms::cast(x, ms::float16)`
inline Tensor cast(const Tensor& x, DType dtype) { return ops::invoke1<ops::Cast>({x}, {dtype}); }

}  // namespace ms
