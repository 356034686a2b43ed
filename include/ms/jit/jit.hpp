// ms/jit/jit.hpp — ms::jit: a C++ function becomes a compiled, cached graph.
//
// Stage: jit. `ms::jit(fn)` returns a callable. Its first call with a given
// signature traces `fn` with symbolic tensors into an ir::Graph, optimizes it
// (ms/jit/compile.hpp, private to libms) and caches the result; a later call with the same key
// runs the compiled graph without tracing.
//
//   auto f = ms::jit([&](const auto& x, const auto& b) { return ms::relu(ms::matmul(x, w) + b); });
//   ms::Tensor y = f(x, b);        // traced, compiled, run
//   y = f(x2, b);                  // same dtypes and shapes: a cache hit
//
// The key holds: the function (each jit object has its own cache), every
// argument's dtype and shape, the values of plain scalar arguments (baked into
// the graph; wrap one in ms::mutable_ to make it a 0-d tensor input instead),
// the lengths of vector arguments, the training flags the trace read (each
// cell's training() read while tracing, with its value: set_train switches to
// the other mode's graph, compiled once, and leaves every other graph cached;
// a generalized graph keys each of its traces, per rank and per size traced
// on its own, with the flags that trace read),
// and the global hook version (a hook change
// drops every graph keyed with an older version: no call can hit it again,
// so registering and removing hooks in a loop keeps the cache small). Tensors the
// function captures (parameters) are graph inputs bound by identity: in-place
// updates of them (assign, +=, copy_) are seen by later calls; rebinding a
// captured C++ variable to another tensor is not — use a Parameter for that.
//
// Arguments (the same rules for a lambda and for a cell's construct):
// - ms::Tensor (or an expression, a Parameter): a graph input; its dtype and
//   shape are in the key.
// - bool / integer / floating scalars, enums and strings (std::string, a
//   literal): constants of the graph; their values are in the key, so a new
//   value compiles a new graph and the same value hits the cache.
// - ms::mutable_(number): a 0-d tensor input instead of a constant (MindSpore's
//   `mutable`); the function sees an ms::Tensor, and a new value does not recompile.
// - std::optional<X> (or std::nullopt): its presence is in the key (absent and
//   present are two graphs); a present tensor is a graph input.
// - std::vector / std::array / std::tuple / std::pair of these: element-wise,
//   the length in the key. ms::mutable_(std::vector{...}) lets auto-dynamic
//   generalize its tensors one by one (a plain sequence keeps its shapes, as in
//   MindSpore).
// Results:
// a tensor (or expression), std::tuple / std::pair / std::vector / std::array
// of them, or an aggregate struct of them.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ms/core/function_ref.hpp"
#include "ms/core/std_parts.hpp"
#include "ms/core/symbolic.hpp"
#include "ms/dyn/spec.hpp"
#include "ms/expr/expr.hpp"
#include "ms/jit/options.hpp"
#include "ms/ops/op.hpp"

namespace ms::dyn::detail {
struct SigItem;
struct Signature;
struct TraceResult;
}  // namespace ms::dyn::detail

namespace ms::compiler {
class TraceContext;
}  // namespace ms::compiler

namespace ms {

/// Options of ms::jit, as MindSpore's JitConfig.
struct JitConfig {
  JitLevel jit_level = JitLevel::O1;  ///< JitLevel::O0 (debugging: no fusion) or O1
  /// 1: automatic dynamic shapes (also MS_AUTO_DYNAMIC_SHAPE_ENABLE=1): after
  /// a few static graphs, a new shape gets a generalized graph that serves
  /// every later size (see ms/dyn/spec.hpp).
  int dynamic = 0;
  /// How auto-dynamic generalizes: DynamicPolicy::AllDims (MindSpore's
  /// manager: 2 static graphs, then one generalized graph where a changed
  /// tensor has every dim -1, or any rank) or DynamicPolicy::ChangedDims (from
  /// the 2nd signature on, only the dims that changed become symbols; equal
  /// changes share a symbol).
  DynamicPolicy dynamic_policy = DynamicPolicy::AllDims;
  /// Generalized graphs kept by ChangedDims (the oldest is deleted); AllDims
  /// keeps one, as MindSpore does.
  std::size_t max_generalized = 4;
  /// Concrete sizes kept per generalized graph (each an optimized graph with
  /// its memory plan); the least recently used is freed.
  std::size_t binding_cache_capacity = 64;
  /// Explicit specs, one per argument (`ms::TensorSpec({-1, 784}, ms::float32)`,
  /// named `ms::Dim`s shared): one generalized graph; a call that does not fit
  /// is an error, not a recompile. Turns auto-dynamic off.
  std::vector<TensorSpec> input_signature{};
  /// Called with one line per compile saying why it happened (which argument
  /// and dim changed, what it was generalized to). MS_LOG_RECOMPILES=1 also
  /// prints these lines to stderr.
  std::function<void(const std::string&)> on_recompile{};
  ExecOrder exec_order = ExecOrder::Bfs;  ///< Bfs, or Dfs (lower peak memory)
  std::size_t cache_capacity = 64;  ///< compiled graphs kept; the least recently used is evicted
  bool verify = compiler::kVerifyDefault;  ///< verify the graph after every pass
};

/// A scalar argument that is a graph input (a 0-d tensor) instead of a
/// constant baked into the graph: a new value does not recompile. A mutable
/// sequence (`ms::mutable_(std::vector<ms::Tensor>{...})`) lets auto-dynamic
/// generalize its tensors one by one; a plain sequence must keep its shapes.
template <class T>
struct Mutable {
  /// The wrapped argument.
  T value;
};
/// Marks the number `v` as a mutable graph input: `ms::mutable_(0.5)`.
template <Number T>
Mutable<T> mutable_(T v) {
  return {v};
}
/// Marks the sequence `v` as mutable: each element may be generalized on its own.
template <class X>
Mutable<std::vector<X>> mutable_(std::vector<X> v) {
  return {std::move(v)};
}

/// Whether ms::jit compiles (true, the default) or runs every jitted function
/// eagerly, as a plain call, for debugging: the results are the same, hooks
/// fire as in eager mode and ms::grad works; nothing is traced or cached
/// (compile_count() stays as it was). The environment variable `MS_JIT=0`
/// (read once, at the first call of a jitted function or of this function)
/// turns it off; set_jit_enabled overrides it.
///   ms::set_jit_enabled(false);   // every ms::jit function now runs eagerly
bool jit_enabled();
/// Turns ms::jit on or off for every jitted function (see jit_enabled); thread-safe.
void set_jit_enabled(bool enabled);

namespace compiler {

/// The global hook version: any hook registration or removal bumps it, and it
/// is part of every compile key, so graphs built before the change recompile.
std::uint64_t hook_version();
/// Increments the global hook version (cells call it when a hook is added or removed).
void bump_hook_version();

namespace detail {

/// Records that the trace ms::jit runs on this thread read the training flag
/// `flag` (a cell's training(), see ms::CellBase::set_train) as `value`: the
/// graph is then kept for that value only (a mode guard, checked on lookup),
/// and a call with the flag changed finds or compiles the other mode's graph.
/// Outside an ms::jit trace it does nothing.
void note_mode_read(const std::shared_ptr<std::atomic<bool>>& flag, bool value);

using dyn::detail::SigItem;
using dyn::detail::Signature;
using dyn::detail::TraceResult;
using ::ms::detail::FunctionRef;

/// Builds a compile key (compact bytes) and, on a miss, its readable phase.
/// Also records the call's Signature when given one.
class KeyBuilder {
 public:
  explicit KeyBuilder(bool readable, Signature* sig = nullptr) : readable_(readable), sig_(sig) {}
  void tensor(const Tensor& t);
  void mutable_scalar(DType t);
  void number(const Scalar& s, char type_tag);
  /// A constant compared by its bytes (a string, an enum); `readable` for the phase.
  void constant(char type_tag, std::string_view bytes, const std::string& readable);
  void open(char c, std::size_t n, bool is_mutable = false);
  void close(char c);
  void finish();
  std::string& key() { return key_; }
  std::string& phase() { return phase_; }

 private:
  void sep();
  void record(SigItem it);
  bool readable_;
  Signature* sig_;
  int depth_ = 0;
  bool first_ = true;
  std::string key_, phase_;
};

/// What compiling one signature produced (ms/jit/detail/cache.hpp).
struct Compiled;
/// Runs a compiled graph on the call's flat inputs.
std::vector<Tensor> run_compiled(const Compiled& c, std::span<const Tensor> inputs);
/// The vector lengths of a compiled graph's result, in flatten order.
const std::vector<std::size_t>& result_structure(const Compiled& c);

/// What the template side of ms::jit sees of a trace: it makes the graph
/// inputs of its arguments and hands over the result's tensors.
class TraceInputs {
 public:
  TraceInputs(TraceContext& tc, TraceResult& result) : tc_(&tc), result_(&result) {}
  /// A new graph input (the next flat argument): a symbolic tensor.
  Tensor add_input(DType dtype, const Shape& shape);
  /// Ends the trace: the graph returns `outputs`; `structure` holds the
  /// vector lengths of the result.
  void finish(std::span<const Tensor> outputs, std::vector<std::size_t> structure);
  /// The result, for a caller that hands over a graph it traced itself.
  TraceResult& result() { return *result_; }

 private:
  TraceContext* tc_;
  TraceResult* result_;
};

/// What the cache needs of a call besides its key (used only on a miss).
struct CallInfo {
  FunctionRef<std::string()> phase;  ///< the readable key
  FunctionRef<void(Signature&)> signature;
  /// Traces the function (the cache makes the trace; see trace_call).
  FunctionRef<void(TraceInputs&)> trace;
  /// Specs from enable_dynamic or Cell::set_inputs (null: none), and which.
  const std::vector<TensorSpec>* specs = nullptr;
  std::string_view spec_api;
};

/// The bounded LRU cache of one jitted function, with the auto-dynamic-shape
/// manager and explicit specs. Thread-safe: concurrent calls with a new key
/// compile it once.
class FunctionCache {
 public:
  explicit FunctionCache(JitConfig cfg);
  ~FunctionCache();
  /// The compiled graph for this call (`key`, flat `inputs`), compiling on a miss.
  std::shared_ptr<const Compiled> get(const std::string& key, std::span<const Tensor> inputs,
                                      const CallInfo& call);
  int compile_count() const;
  int trace_count() const;
  std::size_t size() const;
  std::size_t generalized_count() const;
  bool auto_dynamic_active() const;
  std::string phase() const;
  std::string dump() const;
  const JitConfig& config() const { return cfg_; }

 private:
  struct Impl;
  JitConfig cfg_;
  std::unique_ptr<Impl> impl_;
};

/// A function's cache with the options `cfg` (made in libms: a user's file
/// does not compile FunctionCache's shared_ptr control block).
std::shared_ptr<FunctionCache> make_function_cache(JitConfig&& cfg);
/// A function's cache with the options `*cfg`, the default options when
/// `cfg` is null (copied in libms).
std::shared_ptr<FunctionCache> make_function_cache(const JitConfig* cfg);

// ---------------------------------------------------------------- arguments

template <class T>
struct ArgTraits;

template <>
struct ArgTraits<Tensor> {
  using traced = Tensor;
  static void key(const Tensor& t, KeyBuilder& k) { k.tensor(t); }
  template <class Ctx>
  static Tensor trace(const Tensor& t, Ctx& c) {
    return c.add_input(t.dtype(), t.shape());
  }
  static void flatten(const Tensor& t, std::vector<Tensor>& out) { out.push_back(t); }
  static Tensor inlined(const Tensor& t) { return t; }
};

/// A Parameter (any subclass of Tensor) inside a sequence or an optional: a
/// graph input as a plain tensor; the function sees an ms::Tensor.
template <class T>
requires(std::derived_from<T, Tensor> && !std::same_as<T, Tensor>) struct ArgTraits<T>
    : ArgTraits<Tensor> {
};

template <Number T>
struct ArgTraits<T> {
  using traced = T;
  static void key(const T& v, KeyBuilder& k) {
    k.number(Scalar(v), std::is_same_v<T, bool>     ? 'b'
                        : std::is_integral_v<T>     ? 'i'
                        : std::is_same_v<T, double> ? 'd'
                                                    : 'f');
  }
  template <class Ctx>
  static T trace(const T& v, Ctx&) {
    return v;
  }
  static void flatten(const T&, std::vector<Tensor>&) {}
  static T inlined(const T& v) { return v; }
};

template <Number T>
struct ArgTraits<Mutable<T>> {
  using traced = Tensor;
  static DType dtype() { return Scalar(T{}).default_dtype(); }
  static void key(const Mutable<T>&, KeyBuilder& k) { k.mutable_scalar(dtype()); }
  template <class Ctx>
  static Tensor trace(const Mutable<T>&, Ctx& c) {
    return c.add_input(dtype(), Shape{});
  }
  static void flatten(const Mutable<T>& m, std::vector<Tensor>& out) {
    out.push_back(tensor(Scalar(m.value), dtype()));
  }
  static Tensor inlined(const Mutable<T>& m) { return tensor(Scalar(m.value), dtype()); }
};

template <class X>
struct ArgTraits<Mutable<std::vector<X>>> {
  using traced = std::vector<typename ArgTraits<X>::traced>;
  static void key(const Mutable<std::vector<X>>& v, KeyBuilder& k) {
    k.open('{', v.value.size(), true);
    for (const X& x : v.value) ArgTraits<X>::key(x, k);
    k.close('}');
  }
  template <class Ctx>
  static traced trace(const Mutable<std::vector<X>>& v, Ctx& c) {
    traced out;
    for (const X& x : v.value) out.push_back(ArgTraits<X>::trace(x, c));
    return out;
  }
  static void flatten(const Mutable<std::vector<X>>& v, std::vector<Tensor>& out) {
    for (const X& x : v.value) ArgTraits<X>::flatten(x, out);
  }
  static traced inlined(const Mutable<std::vector<X>>& v) {
    traced out;
    for (const X& x : v.value) out.push_back(ArgTraits<X>::inlined(x));
    return out;
  }
};

/// A text constant of the key: a string, or an enum (its type and value).
template <>
struct ArgTraits<std::string> {
  using traced = std::string;
  static void key(const std::string& v, KeyBuilder& k) { k.constant('s', v, '"' + v + '"'); }
  template <class Ctx>
  static std::string trace(const std::string& v, Ctx&) {
    return v;
  }
  static void flatten(const std::string&, std::vector<Tensor>&) {}
  static std::string inlined(const std::string& v) { return v; }
};

template <class E>
requires std::is_enum_v<E>
struct ArgTraits<E> {
  using traced = E;
  static void key(const E& v, KeyBuilder& k) {
    const auto n = static_cast<std::int64_t>(v);
    std::string bytes = typeid(E).name();
    bytes.append(reinterpret_cast<const char*>(&n), sizeof n);
    k.constant('e', bytes, "enum " + std::to_string(n));
  }
  template <class Ctx>
  static E trace(const E& v, Ctx&) {
    return v;
  }
  static void flatten(const E&, std::vector<Tensor>&) {}
  static E inlined(const E& v) { return v; }
};

/// An optional: its presence is part of the key (a sequence of length 0 or 1).
template <class X>
struct ArgTraits<std::optional<X>> {
  using traced = std::optional<typename ArgTraits<X>::traced>;
  static void key(const std::optional<X>& v, KeyBuilder& k) {
    // Not a sequence for auto-dynamic: a present tensor generalizes as a plain one.
    k.open('?', v ? 1 : 0, /*is_mutable=*/true);
    if (v) ArgTraits<X>::key(*v, k);
    k.close('?');
  }
  template <class Ctx>
  static traced trace(const std::optional<X>& v, Ctx& c) {
    return v ? traced(ArgTraits<X>::trace(*v, c)) : traced();
  }
  static void flatten(const std::optional<X>& v, std::vector<Tensor>& out) {
    if (v) ArgTraits<X>::flatten(*v, out);
  }
  static traced inlined(const std::optional<X>& v) {
    return v ? traced(ArgTraits<X>::inlined(*v)) : traced();
  }
};

/// `std::nullopt` passed as is: an absent optional tensor.
template <>
struct ArgTraits<std::nullopt_t> : ArgTraits<std::optional<Tensor>> {
  using traced = std::optional<Tensor>;
  static void key(std::nullopt_t, KeyBuilder& k) {
    k.open('?', 0, /*is_mutable=*/true);
    k.close('?');
  }
  template <class Ctx>
  static traced trace(std::nullopt_t, Ctx&) {
    return std::nullopt;
  }
  static void flatten(std::nullopt_t, std::vector<Tensor>&) {}
  static traced inlined(std::nullopt_t) { return std::nullopt; }
};

template <class X, std::size_t N>
struct ArgTraits<std::array<X, N>> {
  using traced = std::array<typename ArgTraits<X>::traced, N>;
  static void key(const std::array<X, N>& v, KeyBuilder& k) {
    k.open('[', N);
    for (const X& x : v) ArgTraits<X>::key(x, k);
    k.close(']');
  }
  template <class Ctx>
  static traced trace(const std::array<X, N>& v, Ctx& c) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return traced{ArgTraits<X>::trace(v[I], c)...};  // braced: left to right
    }
    (std::make_index_sequence<N>{});
  }
  static void flatten(const std::array<X, N>& v, std::vector<Tensor>& out) {
    for (const X& x : v) ArgTraits<X>::flatten(x, out);
  }
  static traced inlined(const std::array<X, N>& v) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return traced{ArgTraits<X>::inlined(v[I])...};
    }
    (std::make_index_sequence<N>{});
  }
};

template <class X>
struct ArgTraits<std::vector<X>> {
  using traced = std::vector<typename ArgTraits<X>::traced>;
  static void key(const std::vector<X>& v, KeyBuilder& k) {
    k.open('[', v.size());
    for (const X& x : v) ArgTraits<X>::key(x, k);
    k.close(']');
  }
  template <class Ctx>
  static traced trace(const std::vector<X>& v, Ctx& c) {
    traced out;
    for (const X& x : v) out.push_back(ArgTraits<X>::trace(x, c));
    return out;
  }
  static void flatten(const std::vector<X>& v, std::vector<Tensor>& out) {
    for (const X& x : v) ArgTraits<X>::flatten(x, out);
  }
  static traced inlined(const std::vector<X>& v) {
    traced out;
    for (const X& x : v) out.push_back(ArgTraits<X>::inlined(x));
    return out;
  }
};

template <class... X>
struct ArgTraits<std::tuple<X...>> {
  using traced = std::tuple<typename ArgTraits<X>::traced...>;
  static void key(const std::tuple<X...>& v, KeyBuilder& k) {
    k.open('(', sizeof...(X));
    std::apply([&](const auto&... x) { (ArgTraits<X>::key(x, k), ...); }, v);
    k.close(')');
  }
  template <class Ctx>
  static traced trace(const std::tuple<X...>& v, Ctx& c) {
    // Braced initialization evaluates left to right: inputs keep argument order.
    return std::apply([&](const auto&... x) { return traced{ArgTraits<X>::trace(x, c)...}; }, v);
  }
  static void flatten(const std::tuple<X...>& v, std::vector<Tensor>& out) {
    std::apply([&](const auto&... x) { (ArgTraits<X>::flatten(x, out), ...); }, v);
  }
  static traced inlined(const std::tuple<X...>& v) {
    return std::apply([&](const auto&... x) { return traced{ArgTraits<X>::inlined(x)...}; }, v);
  }
};

template <class A, class B>
struct ArgTraits<std::pair<A, B>> {
  using traced = std::pair<typename ArgTraits<A>::traced, typename ArgTraits<B>::traced>;
  static void key(const std::pair<A, B>& v, KeyBuilder& k) {
    k.open('(', 2);
    ArgTraits<A>::key(v.first, k);
    ArgTraits<B>::key(v.second, k);
    k.close(')');
  }
  template <class Ctx>
  static traced trace(const std::pair<A, B>& v, Ctx& c) {
    return traced{ArgTraits<A>::trace(v.first, c), ArgTraits<B>::trace(v.second, c)};
  }
  static void flatten(const std::pair<A, B>& v, std::vector<Tensor>& out) {
    ArgTraits<A>::flatten(v.first, out);
    ArgTraits<B>::flatten(v.second, out);
  }
  static traced inlined(const std::pair<A, B>& v) {
    return traced{ArgTraits<A>::inlined(v.first), ArgTraits<B>::inlined(v.second)};
  }
};

template <class T>
concept JitArg = requires {
  typename ArgTraits<T>::traced;
};

/// Expressions are computed into tensors before the call, a Parameter is
/// passed as its tensor, and text (a literal, a std::string_view) as a std::string.
template <class A>
decltype(auto) materialize(A&& a) {
  using D = std::remove_cvref_t<A>;
  if constexpr (TensorExpr<A> || (std::derived_from<D, Tensor> && !std::same_as<D, Tensor>))
    return Tensor(std::forward<A>(a));
  else if constexpr (std::is_convertible_v<A, std::string_view> && !std::same_as<D, std::string>)
    return std::string(std::string_view(a));
  else
    return std::forward<A>(a);
}

// ---------------------------------------------------------------- results

struct AnyField {
  template <class T>
  operator T() const;  // NOLINT: only used in unevaluated contexts
};
template <class T, class... A>
concept BraceInit = requires {
  T{std::declval<A>()...};
};
template <class T, class... A>
constexpr std::size_t field_count() {
  if constexpr (sizeof...(A) < 8 && BraceInit<T, A..., AnyField>)
    return field_count<T, A..., AnyField>();
  else
    return sizeof...(A);
}
/// The fields of an aggregate as a tuple of references (up to 8 fields).
template <class T>
auto fields_of(T& s) {
  constexpr std::size_t n = field_count<T>();
  if constexpr (n == 1) {
    auto& [a] = s;
    return std::tie(a);
  } else if constexpr (n == 2) {
    auto& [a, b] = s;
    return std::tie(a, b);
  } else if constexpr (n == 3) {
    auto& [a, b, c] = s;
    return std::tie(a, b, c);
  } else if constexpr (n == 4) {
    auto& [a, b, c, d] = s;
    return std::tie(a, b, c, d);
  } else if constexpr (n == 5) {
    auto& [a, b, c, d, e] = s;
    return std::tie(a, b, c, d, e);
  } else if constexpr (n == 6) {
    auto& [a, b, c, d, e, f] = s;
    return std::tie(a, b, c, d, e, f);
  } else if constexpr (n == 7) {
    auto& [a, b, c, d, e, f, g] = s;
    return std::tie(a, b, c, d, e, f, g);
  } else {
    static_assert(n == 8, "ms::jit: a result struct may have 1 to 8 fields");
    auto& [a, b, c, d, e, f, g, h] = s;
    return std::tie(a, b, c, d, e, f, g, h);
  }
}

template <class T>
struct OutTraits;

template <>
struct OutTraits<Tensor> {
  using type = Tensor;
  static void flatten(const Tensor& t, std::vector<Tensor>& out, std::vector<std::size_t>&) {
    out.push_back(t);
  }
  static Tensor unflatten(std::vector<Tensor>& v, std::size_t& pos, const std::vector<std::size_t>&,
                          std::size_t&) {
    return std::move(v[pos++]);
  }
};

template <TensorExpr E>
struct OutTraits<E> : OutTraits<Tensor> {
  static void flatten(const E& e, std::vector<Tensor>& out, std::vector<std::size_t>&) {
    out.push_back(Tensor(e));
  }
};

template <class X>
struct OutTraits<std::vector<X>> {
  using type = std::vector<typename OutTraits<X>::type>;
  static void flatten(const std::vector<X>& v, std::vector<Tensor>& out,
                      std::vector<std::size_t>& st) {
    st.push_back(v.size());
    for (const X& x : v) OutTraits<X>::flatten(x, out, st);
  }
  static type unflatten(std::vector<Tensor>& v, std::size_t& pos,
                        const std::vector<std::size_t>& st, std::size_t& sp) {
    const std::size_t n = st.at(sp++);
    type out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.push_back(OutTraits<X>::unflatten(v, pos, st, sp));
    return out;
  }
};

template <class X, std::size_t N>
struct OutTraits<std::array<X, N>> {
  using type = std::array<typename OutTraits<X>::type, N>;
  static void flatten(const std::array<X, N>& v, std::vector<Tensor>& out,
                      std::vector<std::size_t>& st) {
    for (const X& x : v) OutTraits<X>::flatten(x, out, st);
  }
  static type unflatten(std::vector<Tensor>& v, std::size_t& pos,
                        const std::vector<std::size_t>& st, std::size_t& sp) {
    type out;
    for (auto& x : out) x = OutTraits<X>::unflatten(v, pos, st, sp);
    return out;
  }
};

template <class... X>
struct OutTraits<std::tuple<X...>> {
  using type = std::tuple<typename OutTraits<X>::type...>;
  static void flatten(const std::tuple<X...>& v, std::vector<Tensor>& out,
                      std::vector<std::size_t>& st) {
    std::apply([&](const auto&... x) { (OutTraits<X>::flatten(x, out, st), ...); }, v);
  }
  static type unflatten(std::vector<Tensor>& v, std::size_t& pos,
                        const std::vector<std::size_t>& st, std::size_t& sp) {
    return type{OutTraits<X>::unflatten(v, pos, st, sp)...};
  }
};

template <class A, class B>
struct OutTraits<std::pair<A, B>> {
  using type = std::pair<typename OutTraits<A>::type, typename OutTraits<B>::type>;
  static void flatten(const std::pair<A, B>& v, std::vector<Tensor>& out,
                      std::vector<std::size_t>& st) {
    OutTraits<A>::flatten(v.first, out, st);
    OutTraits<B>::flatten(v.second, out, st);
  }
  static type unflatten(std::vector<Tensor>& v, std::size_t& pos,
                        const std::vector<std::size_t>& st, std::size_t& sp) {
    auto a = OutTraits<A>::unflatten(v, pos, st, sp);
    auto b = OutTraits<B>::unflatten(v, pos, st, sp);
    return type{std::move(a), std::move(b)};
  }
};

template <class S>
requires(std::is_aggregate_v<S> && !TensorExpr<S>) struct OutTraits<S> {
  using type = S;
  static void flatten(const S& s, std::vector<Tensor>& out, std::vector<std::size_t>& st) {
    std::apply(
        [&](const auto&... f) {
          (OutTraits<std::remove_cvref_t<decltype(f)>>::flatten(f, out, st), ...);
        },
        fields_of(const_cast<S&>(s)));
  }
  static S unflatten(std::vector<Tensor>& v, std::size_t& pos, const std::vector<std::size_t>& st,
                     std::size_t& sp) {
    using Refs = decltype(fields_of(std::declval<S&>()));
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return S{OutTraits<std::remove_cvref_t<std::tuple_element_t<I, Refs>>>::unflatten(v, pos, st,
                                                                                        sp)...};
    }
    (std::make_index_sequence<std::tuple_size_v<Refs>>{});
  }
};

}  // namespace detail
}  // namespace compiler

/// How ms::jit and ms::grad take a function's result apart into tensors and
/// put it back together (a tensor or expression, std::tuple / std::pair /
/// std::vector / std::array of them, or an aggregate struct of them):
/// `ResultTraits<R>::flatten(r, tensors, structure)` and
/// `ResultTraits<R>::unflatten(tensors, pos, structure, structure_pos)`.
template <class T>
using ResultTraits = compiler::detail::OutTraits<T>;

/// The callable that ms::jit returns.
template <class F>
class Jitted {
 public:
  /// Wraps `fn`; nothing is compiled until the first call (see ms::jit).
  Jitted(F fn, JitConfig cfg)
      : fn_(std::move(fn)), cache_(compiler::detail::make_function_cache(std::move(cfg))) {}
  /// Wraps `fn` with the options `*cfg`, or the default options when `cfg`
  /// is null (the config is copied in libms).
  Jitted(F fn, const JitConfig* cfg)
      : fn_(std::move(fn)), cache_(compiler::detail::make_function_cache(cfg)) {}

  /// Runs the compiled graph for these arguments, compiling it on a miss.
  template <class... A>
  auto operator()(A&&... a) {
    return call(compiler::detail::materialize(std::forward<A>(a))...);
  }

  /// Graphs compiled so far: static graphs and generalized graphs (a
  /// generalized graph counts once, however many sizes it serves).
  int compile_count() const { return cache_->compile_count(); }
  /// Times the function was traced: one per static graph, and for a
  /// generalized graph its trace plus the probes that find its symbolic form
  /// (once per rank when it has any-rank inputs), plus any size it had to
  /// specialize (see dump()).
  int trace_count() const { return cache_->trace_count(); }
  /// Graphs held in the cache now (static and generalized).
  std::size_t cache_size() const { return cache_->size(); }
  /// Generalized graphs held now.
  std::size_t generalized_count() const { return cache_->generalized_count(); }
  /// False once auto-dynamic switched itself off for this function (a changed
  /// scalar, dtype, argument kind or count, or a 0-d tensor), or when it is not enabled.
  bool auto_dynamic_active() const { return cache_->auto_dynamic_active(); }
  /// The optimized graph of the last call, as text.
  std::string dump() const { return cache_->dump(); }
  /// The readable key of the last call.
  std::string phase() const { return cache_->phase(); }

 private:
  template <class... A>
  auto call(const A&... a) {
    static_assert((compiler::detail::JitArg<std::remove_cvref_t<A>> && ...),
                  "ms::jit: arguments must be tensors, numbers (integers, floats, bools), enums, "
                  "strings, ms::mutable_ numbers or vectors, std::optional, or std::vector / "
                  "std::array / std::tuple / std::pair of these");
    static_assert(std::is_invocable_v<F&, typename compiler::detail::ArgTraits<A>::traced&...>,
                  "ms::jit: the function cannot be called with these arguments");
    using Raw = std::remove_cvref_t<
        std::invoke_result_t<F&, typename compiler::detail::ArgTraits<A>::traced&...>>;
    using Out = compiler::detail::OutTraits<Raw>;
    using R = typename Out::type;
    // Called inside another trace: inlined; with ms::jit off: run eagerly.
    if (ops::active_tracer() != nullptr || !jit_enabled()) {
      std::tuple<typename compiler::detail::ArgTraits<A>::traced...> args{
          compiler::detail::ArgTraits<A>::inlined(a)...};
      auto r = std::apply(fn_, args);
      std::vector<Tensor> flat;
      std::vector<std::size_t> st;
      Out::flatten(r, flat, st);
      std::size_t pos = 0, sp = 0;
      return Out::unflatten(flat, pos, st, sp);
    }
    compiler::detail::KeyBuilder k(false);
    (compiler::detail::ArgTraits<A>::key(a, k), ...);
    k.finish();
    std::vector<Tensor> inputs;
    (compiler::detail::ArgTraits<A>::flatten(a, inputs), ...);
    auto phase = [&] {
      compiler::detail::KeyBuilder p(true);
      (compiler::detail::ArgTraits<A>::key(a, p), ...);
      p.finish();
      return p.phase();
    };
    auto signature = [&](compiler::detail::Signature& sig) {
      compiler::detail::KeyBuilder p(false, &sig);
      (compiler::detail::ArgTraits<A>::key(a, p), ...);
    };
    auto trace = [&](compiler::detail::TraceInputs& in) {
      // Braced initialization: arguments become graph inputs left to right.
      std::tuple<typename compiler::detail::ArgTraits<A>::traced...> args{
          compiler::detail::ArgTraits<A>::trace(a, in)...};
      std::vector<Tensor> flat;
      std::vector<std::size_t> st;
      {
        auto r = std::apply(fn_, args);
        Out::flatten(r, flat, st);
      }
      in.finish(flat, std::move(st));
    };
    const auto [spec_api, specs] = explicit_specs();
    const compiler::detail::CallInfo info{phase, signature, trace, specs, spec_api};
    const std::shared_ptr<const compiler::detail::Compiled> c = cache_->get(k.key(), inputs, info);
    std::vector<Tensor> outs = compiler::detail::run_compiled(*c, inputs);
    std::size_t pos = 0, sp = 0;
    return R(Out::unflatten(outs, pos, compiler::detail::result_structure(*c), sp));
  }

  // The specs that fix this function's dynamic shapes, and the API they came
  // from (MindSpore's precedence: enable_dynamic, then set_inputs; the cache
  // falls back to JitConfig::input_signature, then to auto-dynamic).
  std::pair<std::string_view, const std::vector<TensorSpec>*> explicit_specs() const {
    if constexpr (dyn::IsEnableDynamic<F>::value) {
      if constexpr (dyn::HasInputs<decltype(fn_.fn)>)
        MS_CHECK(fn_.fn.get_inputs().empty(), ValueError,
                 "ms::jit: when enable_dynamic is provided, set_inputs() cannot be set (the cell "
                 "has ",
                 fn_.fn.get_inputs().size(), " input specs from set_inputs)");
      return {"enable_dynamic", &fn_.specs};
    } else if constexpr (dyn::HasInputs<F>) {
      if (!fn_.get_inputs().empty()) return {"set_inputs", &fn_.get_inputs()};
    }
    return {"", nullptr};
  }

  F fn_;
  std::shared_ptr<compiler::detail::FunctionCache> cache_;
};

namespace dyn {
/// A callable with a jit config of its own (a cell after set_jit_config):
/// `get_jit_config()` returns a `const JitConfig*`, null when none is set.
template <class T>
concept HasJitConfig = requires(const T& t) {
  { t.get_jit_config() } -> std::convertible_to<const JitConfig*>;
};
}  // namespace dyn

/// Compiles `fn` (a lambda or function object taking tensors as `const auto&`)
/// with the options `cfg`. A cell (anything with `get_inputs()`) passed as an
/// lvalue is held by reference, and its `set_inputs` specs apply.
template <class F>
auto jit(F&& fn, JitConfig cfg) {
  using D = std::remove_cvref_t<F>;
  if constexpr (dyn::HasInputs<D> && std::is_lvalue_reference_v<F>)
    return Jitted<dyn::CellRef<std::remove_reference_t<F>>>({&fn}, std::move(cfg));
  else
    return Jitted<std::decay_t<F>>(std::forward<F>(fn), std::move(cfg));
}

/// Compiles `fn` with default options; a cell given as an lvalue (also inside
/// ms::enable_dynamic) compiles with the JitConfig of its set_jit_config, if any.
///   net.set_jit_config({.jit_level = ms::JitLevel::O0});
///   auto f = ms::jit(net);   // O0
template <class F>
auto jit(F&& fn) {
  using D = std::remove_cvref_t<F>;
  const JitConfig* own = nullptr;
  if constexpr (dyn::HasJitConfig<D> && std::is_lvalue_reference_v<F>)
    own = fn.get_jit_config();
  else if constexpr (dyn::IsEnableDynamic<D>::value) {
    if constexpr (dyn::HasJitConfig<decltype(fn.fn)>) own = fn.fn.get_jit_config();
  }
  // The config is passed by pointer: copying a JitConfig here would compile
  // its copy (TensorSpec vectors) in every translation unit calling ms::jit.
  if constexpr (dyn::HasInputs<D> && std::is_lvalue_reference_v<F>)
    return Jitted<dyn::CellRef<std::remove_reference_t<F>>>({&fn}, own);
  else
    return Jitted<std::decay_t<F>>(std::forward<F>(fn), own);
}

}  // namespace ms
