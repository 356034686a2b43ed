// ms/dyn/detail/generalize.hpp — generalized (dynamic-shape) graphs behind ms::jit.
//
// Stage: dyn (private; above ir, below the jit front end). The pieces that let one compiled graph
// serve many shapes:
//
// - `Signature`: what a call looks like (tensor dtypes and shapes, scalar
//   values, sequence structure), recorded while its compile key is built.
// - `Generalized`: a signature where tensor dims may be symbols (`-1` in
//   MindSpore's terms, or a named `ms::Dim`) or a tensor has any rank (`-2`).
//   The rules that make one from two signatures (the auto-dynamic-shape
//   manager's "every dim" rule and the "changed dims" rule) live here.
// - `SymbolicGraph`: a graph whose dims (and the sizes and numbers derived from
//   them: reshape targets, the 1/N of a mean) are expressions of the symbols.
//   A C++ lambda is traced with concrete sizes, so the symbolic form is found
//   by tracing it at the call's sizes and again with each symbol moved
//   ("probes"), and fitting every number that moved (ms::SymExpr: affine,
//   product or inverse product). A dim the function pins (a matmul against a
//   fixed weight) or ties to another (x and its labels share the batch) is
//   found the same way and becomes a guard.
// - Instantiation: for a concrete binding of the symbols the numbers are
//   evaluated, the graph is checked by re-inferring every type from the op
//   table (ir::verify), optimized and planned like a static graph; the result
//   is cached per binding, so a second call with a size costs what a static
//   graph costs.
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/dyn/detail/generalize.hpp is internal to libms; include <ms/jit/jit.hpp> instead"
#endif

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ms/core/function_ref.hpp"
#include "ms/core/std_parts.hpp"
#include "ms/core/symbolic.hpp"
#include "ms/core/tensor.hpp"
#include "ms/ir/graph.hpp"

namespace ms::dyn::detail {

/// One element of a call's signature, in argument order (sequences flattened
/// between Open and Close).
struct SigItem {
  enum class Kind : std::uint8_t { Tensor, Mutable, Number, Constant, Open, Close };
  Kind kind = Kind::Tensor;
  DType dtype = float32;  ///< Tensor, Mutable
  Shape shape;            ///< Tensor
  Scalar value = 0;       ///< Number
  std::string text;       ///< Constant: its bytes (a string; an enum's type and value)
  char tag = 0;           ///< Number: 'b' 'i' 'f' 'd'; Constant: 's' 'e'; Open / Close: the bracket
  std::size_t length = 0;   ///< Open
  bool is_mutable = false;  ///< Open: an ms::mutable_ sequence
  int depth = 0;            ///< nesting depth (0: a top-level argument)
};

struct Signature {
  std::vector<SigItem> items;
  /// Number of top-level arguments.
  int arguments() const;
  /// Flat graph inputs (tensors and mutable scalars), in order.
  std::vector<const SigItem*> inputs() const;
};

/// The spec of one flat graph input of a generalized signature.
struct InputSpec {
  DType dtype = float32;
  bool any_rank = false;
  /// Sizes >= 0, or a symbol `-1 - id`.
  std::vector<std::int64_t> dims;
  bool fixed_sequence = false;  ///< inside a non-mutable sequence: must not change
  int argument = 0;             ///< the top-level argument it belongs to
  friend bool operator==(const InputSpec&, const InputSpec&) = default;
};

inline constexpr bool is_symbol(std::int64_t d) { return d < 0; }
inline constexpr int symbol_id(std::int64_t d) { return static_cast<int>(-1 - d); }
inline constexpr std::int64_t symbol_dim(int id) { return -1 - static_cast<std::int64_t>(id); }

/// A signature with symbolic dims.
struct Generalized {
  std::vector<InputSpec> inputs;
  std::vector<std::string> names;  ///< per symbol: the ms::Dim name, or empty (printed s0, s1, ...)

  int num_symbols() const { return static_cast<int>(names.size()); }
  /// The printed name of symbol `i`: its ms::Dim name or "s<i>".
  std::string symbol_name(int i) const;
  int unknown_ranks() const;
  int unknown_shapes() const;  ///< inputs with at least one symbol
  bool is_static() const { return unknown_ranks() == 0 && unknown_shapes() == 0; }
  /// Renumbers symbols by first use (names s0, s1, ... unless named).
  void canonicalize();
  /// "f32[-1,-1], i64[-1]" (MindSpore's notation; named symbols by name).
  std::string to_string() const;
  friend bool operator==(const Generalized& a, const Generalized& b) {
    return a.inputs == b.inputs && a.names == b.names;
  }
};

/// Same flat inputs (count, dtypes, arguments, sequence mutability): the
/// precondition of generalizing one against the other.
bool same_structure(const Generalized& a, const Generalized& b);

/// The all-static generalized form of a signature.
Generalized exact(const Signature& s);

/// MindSpore's rule: a tensor with the same shape stays; same rank, another
/// shape: every dim -1; another rank or an any-rank entry: any rank. A tensor
/// inside a non-mutable sequence must not change. nullopt when the call cannot
/// be generalized against `entry` (the structure differs).
std::optional<Generalized> generalize_all_dims(const Generalized& call, const Generalized& entry);
/// The "changed_dims" rule: only dims that differ become symbols; a dim that
/// is a symbol in `entry` stays one; changed dims with the same old and new
/// sizes share a symbol; a rank change gives any rank.
std::optional<Generalized> generalize_changed_dims(const Generalized& call,
                                                   const Generalized& entry);
/// The generalized form given by explicit specs (one per top-level argument;
/// named dims shared). ValueError / TypeError / ShapeError naming `api` when
/// the call does not fit them.
Generalized from_specs(std::span<const TensorSpec> specs, const Signature& call,
                       std::string_view api);

/// Binds the symbols of `g` to the sizes of `shapes` (one per flat input).
/// On a mismatch returns false and, when `why` is given, says which argument,
/// dim, spec and size.
bool bind_symbols(const Generalized& g, std::span<const Shape> shapes,
                  std::vector<std::int64_t>& values, std::string* why = nullptr);

using ::ms::detail::FunctionRef;

/// What tracing the function at given input shapes produced.
struct TraceResult {
  ir::Graph graph;
  std::vector<std::size_t> structure;
};
using TraceAt = FunctionRef<TraceResult(std::span<const Shape>)>;

/// A traced graph with symbolic numbers (see the header comment).
class SymbolicGraph {
 public:
  /// Traces at `base` (the shapes of the call, which must bind `g`) and probes.
  SymbolicGraph(const Generalized& g, std::span<const Shape> base, const TraceAt& trace);

  /// False when the function's graph cannot be expressed over the symbols (a
  /// probe traced another structure, a number fits no form); `why` says why.
  bool generalizable() const { return ok_; }
  const std::string& why() const { return why_; }
  /// Traces done to build it (the call's own and the probes).
  int traces() const { return traces_; }
  /// Symbols that the function pins to the traced size, and groups of symbols
  /// it requires to be equal, as readable guards ("s1 == 784", "s0 == s2").
  std::vector<std::string> guards() const;
  /// The concrete (unoptimized) graph for symbol values `s`; nullopt when `s`
  /// breaks a guard or a derived number is not a valid size (`why` says which).
  std::optional<ir::Graph> instantiate(std::span<const std::int64_t> s, std::string* why) const;
  const std::vector<std::size_t>& structure() const { return structure_; }
  /// The traced graph printed with symbolic dims.
  const std::string& dump() const { return dump_; }

  /// Where a size-dependent number lives, and its expression.
  struct Slot {
    enum class Where : std::uint8_t { Dim, Attr, AttrElem, Scalar } where = Where::Dim;
    ir::ValueId value;         ///< Dim: the value
    ir::NodeId node;           ///< Attr, AttrElem, Scalar: the node
    std::size_t b = 0, c = 0;  ///< Dim: dim b; Attr(Elem): attribute b (element c)
    SymExpr expr;
  };

 private:
  bool probe(const TraceAt& trace, std::span<const Shape> shapes, std::vector<double>& out,
             std::string& reason);
  std::vector<std::vector<double>> find_variables(const Generalized& g, std::span<const Shape> base,
                                                  const TraceAt& trace);
  bool fit_numbers(const std::vector<double>& nums0, const std::vector<Slot>& locs,
                   const std::vector<std::vector<double>>& probes,
                   const std::vector<double>& check);
  void print_symbolic();

  bool ok_ = false;
  std::string why_;
  int traces_ = 0;
  ir::Graph base_;
  std::vector<std::size_t> structure_;
  std::vector<std::int64_t> base_values_;  ///< per symbol
  std::vector<int> var_of_;                ///< per symbol: its variable, or -1 when pinned
  std::vector<std::vector<int>> vars_;     ///< per variable: the symbols it stands for
  std::vector<Slot> slots_;
  std::vector<std::string> names_;
  std::string dump_;
};

}  // namespace ms::dyn::detail
