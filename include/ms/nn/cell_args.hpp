// ms/nn/cell_args.hpp — the arguments of a cell call: ms::Arg and ms::ArgList.
//
// Stage: nn. A cell's `construct` takes any of these argument kinds, eagerly
// and under ms::jit (the same rules as a jitted lambda, ms/jit/jit.hpp):
//
//   kind                                      under ms::jit              hooks see (ms::Arg)
//   ms::Tensor (an expression, a Parameter)   graph input                Tensor
//   std::vector / std::array / std::tuple /   graph inputs, the length   std::vector<Tensor>
//     std::pair of tensors (or Parameters)      in the key
//   std::optional<ms::Tensor>, std::nullopt   presence in the key        std::optional<Tensor>
//   integers, enums                           value in the key           std::int64_t
//   float, double                             value in the key           double
//   bool                                      value in the key           bool
//   std::string, std::string_view, literals,  value in the key           std::string
//     const char*
//   ms::mutable_(number)                      0-d tensor input (no key)  Tensor (0-d)
//   ms::mutable_(std::vector<Tensor>)         graph inputs               std::vector<Tensor>
//   ms::Kwargs (the last argument only)       see below                  (the kwargs, apart)
//
// `construct` may take text as std::string, std::string_view or const char*
// (under ms::jit and through hooks a const char* points into a std::string
// that lives for the call), and a sequence of Parameters as a sequence of
// ms::Tensor (what ms::jit passes). Under ms::jit an ms::Kwargs is keyed by
// its names and its non-tensor values (constants of the graph: a new value
// compiles a new graph); a tensor value is a graph input, its dtype and shape
// in the key (a mask of the same shape with other values hits the cache).
//
// A mutable_ number reaches `construct` as a 0-d ms::Tensor, eagerly too, so
// that the same code runs in both modes: declare that parameter `const auto&`
// or `const ms::Tensor&`. Anything else stops the build with a static_assert
// listing these kinds.
//
// Hooks see the positional arguments as an ms::ArgList, one ms::Arg each, with
// typed access:
//
//   net.register_forward_pre_hook([](Net&, const ms::ArgList& a) {
//     ms::ArgList r = a;
//     r.set(1, a.get<std::int64_t>(1) * 2);   // construct gets steps * 2
//     return r;
//   });
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/core/tensor.hpp"
#include "ms/jit/jit.hpp"

namespace ms {

/// Positional tensor arguments (and outputs) as the tensor-only hook forms see them.
using Args = std::vector<Tensor>;

/// One positional argument of a cell call as hooks see it (see the table above).
using Arg = std::variant<Tensor, std::optional<Tensor>, std::vector<Tensor>, std::int64_t, double,
                         bool, std::string>;

/// The name of the kind an Arg holds ("Tensor", "int64", ...), for messages.
std::string_view arg_kind_name(const Arg& a);

/// The positional arguments of a cell call, one ms::Arg each:
/// `args.get<std::int64_t>(1)`, `args.set(1, std::int64_t{4})`, `args.tensors()`.
class ArgList {
 public:
  // The constructors, assignments, destructor and push_back are defined out
  // of line (src/nn/cell_args.cpp): the copies and moves of the variant's
  // vector are compiled there once, not in every translation unit that
  // includes <ms/cell.hpp> (bench/compile_time.sh measures the difference).

  /// No arguments.
  ArgList();
  /// `ms::ArgList{x, 3, 2.5, true, "relu"}`: an int is held as std::int64_t,
  /// a float as double, text as std::string.
  ArgList(std::initializer_list<Arg> items);
  /// Takes `items`.
  explicit ArgList(std::vector<Arg> items);
  /// A copy of `other`.
  ArgList(const ArgList& other);
  /// Takes `other`'s arguments.
  ArgList(ArgList&& other) noexcept;
  /// Copies `other`'s arguments.
  ArgList& operator=(const ArgList& other);
  /// Takes `other`'s arguments.
  ArgList& operator=(ArgList&& other) noexcept;
  /// Releases the arguments.
  ~ArgList();

  /// The number of arguments.
  std::size_t size() const { return items_.size(); }
  /// Whether there are none.
  bool empty() const { return items_.empty(); }
  /// Argument `i` (unchecked).
  const Arg& operator[](std::size_t i) const { return items_[i]; }
  /// Argument `i` (unchecked).
  Arg& operator[](std::size_t i) { return items_[i]; }
  /// The arguments.
  const std::vector<Arg>& items() const { return items_; }
  /// First argument.
  auto begin() const { return items_.begin(); }
  /// Past the last argument.
  auto end() const { return items_.end(); }
  /// Appends an argument.
  void push_back(Arg a);

  /// Whether argument `i` holds a T (IndexError past the end).
  template <class T>
  bool holds(std::size_t i) const {
    return std::holds_alternative<T>(at(i));
  }
  /// Argument `i` as a T, one of ms::Arg's kinds: IndexError past the end,
  /// TypeError naming the index, T and the kind held when it holds another.
  template <class T>
  const T& get(std::size_t i) const {
    const Arg& a = at(i);
    const T* p = std::get_if<T>(&a);
    if (p == nullptr) wrong_kind(i, kind_name<T>(), a);
    return *p;
  }
  /// Replaces argument `i` (IndexError past the end). Integers are stored as
  /// std::int64_t, floats as double, text as std::string, an expression or a
  /// Parameter as an ms::Tensor (`args.set(0, args.get<ms::Tensor>(0) * 2.f)`).
  template <class T>
  void set(std::size_t i, T&& v) {
    at(i) = to_arg_value(std::forward<T>(v));
  }

  /// The tensors of every argument, in order (a vector's elements, a present
  /// optional): what the tensor-only hook forms see.
  Args tensors() const;
  /// The number of tensors() there are.
  std::size_t tensor_count() const;
  /// This list with its tensors replaced, in order, by `flat` (ValueError
  /// naming `what` when the counts differ).
  ArgList with_tensors(std::span<const Tensor> flat, std::string_view what) const;

  /// The ms::Arg kind name of T.
  template <class T>
  static std::string_view kind_name() {
    return arg_kind_name(Arg(std::in_place_type<T>));
  }
  /// `v` as an ms::Arg (an integer as std::int64_t, a float as double, text as
  /// std::string, an expression or a Parameter as an ms::Tensor).
  template <class T>
  static Arg to_arg_value(T&& v) {
    using D = std::remove_cvref_t<T>;
    if constexpr (TensorExpr<D> || std::derived_from<D, Tensor>)
      return Arg(std::in_place_type<Tensor>, Tensor(std::forward<T>(v)));
    else if constexpr (std::same_as<D, bool>)
      return Arg(std::in_place_type<bool>, v);
    else if constexpr (std::is_integral_v<D> || std::is_enum_v<D>)
      return Arg(std::in_place_type<std::int64_t>, static_cast<std::int64_t>(v));
    else if constexpr (std::is_floating_point_v<D>)
      return Arg(std::in_place_type<double>, static_cast<double>(v));
    else if constexpr (std::is_convertible_v<T, std::string_view> && !std::same_as<D, Tensor>)
      return Arg(std::in_place_type<std::string>, std::string(std::string_view(v)));
    else
      return Arg(std::forward<T>(v));
  }

 private:
  const Arg& at(std::size_t i) const;
  Arg& at(std::size_t i);
  [[noreturn]] static void wrong_kind(std::size_t i, std::string_view want, const Arg& have);
  std::vector<Arg> items_;
};

namespace detail {

template <class T>
struct IsMutable : std::false_type {};
template <class T>
struct IsMutable<Mutable<T>> : std::true_type {};

template <class T>
inline constexpr bool is_tensorish_v =
    std::derived_from<std::remove_cvref_t<T>, Tensor> || TensorExpr<T>;

template <class T>
struct TensorSeq : std::false_type {};
template <class X>
struct TensorSeq<std::vector<X>> : std::bool_constant<is_tensorish_v<X>> {};
template <class X, std::size_t N>
struct TensorSeq<std::array<X, N>> : std::bool_constant<is_tensorish_v<X>> {};
template <class... X>
struct TensorSeq<std::tuple<X...>> : std::bool_constant<(is_tensorish_v<X> && ...)> {};
template <class A, class B>
struct TensorSeq<std::pair<A, B>> : std::bool_constant<is_tensorish_v<A> && is_tensorish_v<B>> {};

template <class T>
concept TextArg = std::is_convertible_v<const T&, std::string_view> && !is_tensorish_v<T>;

/// The kinds a cell call takes (the table in ms/nn/cell_args.hpp), besides ms::Kwargs.
template <class A, class D = std::remove_cvref_t<A>>
concept CellArgument = is_tensorish_v<D> || TensorSeq<D>::value ||
    std::same_as<D, std::optional<Tensor>> || std::same_as<D, std::nullopt_t> ||
    std::is_arithmetic_v<D> || std::is_enum_v<D> || TextArg<D> ||
    (IsMutable<D>::value && (Number<decltype(D::value)> || TensorSeq<decltype(D::value)>::value));

/// What `construct` gets for a call argument of type A: a mutable number as a
/// 0-d tensor, a mutable vector as the vector; anything else as it is.
template <class A>
decltype(auto) construct_arg(const A& a) {
  if constexpr (IsMutable<A>::value)
    return compiler::detail::ArgTraits<A>::inlined(a);
  else
    return (a);
}

/// A call argument as an ms::Arg (the hooks' view of it).
template <class A>
Arg to_arg(const A& a) {
  if constexpr (IsMutable<A>::value)
    return to_arg(construct_arg(a));
  else if constexpr (is_tensorish_v<A>)
    return Arg(std::in_place_type<Tensor>, Tensor(a));
  else if constexpr (std::same_as<A, std::nullopt_t>)
    return Arg(std::in_place_type<std::optional<Tensor>>);
  else if constexpr (std::same_as<A, std::optional<Tensor>>)
    return Arg(std::in_place_type<std::optional<Tensor>>, a);
  else if constexpr (TensorSeq<A>::value && requires { typename A::allocator_type; })
    return Arg(std::in_place_type<std::vector<Tensor>>, std::vector<Tensor>(a.begin(), a.end()));
  else if constexpr (TensorSeq<A>::value)
    return Arg(std::in_place_type<std::vector<Tensor>>,
               std::apply([](const auto&... t) { return std::vector<Tensor>{Tensor(t)...}; }, a));
  else
    return ArgList::to_arg_value(a);
}

/// Raises the TypeError of a sequence argument of the wrong length.
[[noreturn]] void raise_arg_length(std::string_view cell, std::size_t i, std::size_t expected,
                                   std::size_t given);

/// A sequence of tensors of type A from the tensors `v` (a fixed-size A needs
/// its length).
template <class A>
A seq_from_arg(const std::vector<Tensor>& v, std::size_t i, std::string_view cell) {
  if constexpr (requires { typename A::allocator_type; }) {
    return A(v.begin(), v.end());
  } else {
    constexpr std::size_t n = std::tuple_size_v<A>;
    if (v.size() != n) raise_arg_length(cell, i, n, v.size());
    return [&]<std::size_t... I>(std::index_sequence<I...>) { return A{v[I]...}; }
    (std::make_index_sequence<n>{});
  }
}

/// Raises the TypeError of argument `i` of `cell`'s call: the kind `construct`
/// takes there and the kind the forward pre-hooks gave.
[[noreturn]] void raise_arg_kind(std::string_view cell, std::size_t i, std::string_view expected,
                                 std::string_view given);

/// The value `construct` gets for argument `i` of type A from the (hooked)
/// ms::Arg `a`: the kind must be A's (TypeError otherwise, naming `cell`).
template <class A>
auto from_arg(const Arg& a, std::size_t i, std::string_view cell) {
  auto take = [&]<class K>(std::type_identity<K>) -> const K& {
    const K* p = std::get_if<K>(&a);
    if (p == nullptr) raise_arg_kind(cell, i, ArgList::kind_name<K>(), arg_kind_name(a));
    return *p;
  };
  if constexpr (IsMutable<A>::value) {
    using C = std::remove_cvref_t<decltype(construct_arg(std::declval<const A&>()))>;
    return from_arg<C>(a, i, cell);
  } else if constexpr (is_tensorish_v<A>) {
    return Tensor(take(std::type_identity<Tensor>{}));
  } else if constexpr (std::same_as<A, std::nullopt_t> || std::same_as<A, std::optional<Tensor>>) {
    return take(std::type_identity<std::optional<Tensor>>{});
  } else if constexpr (TensorSeq<A>::value) {
    return seq_from_arg<A>(take(std::type_identity<std::vector<Tensor>>{}), i, cell);
  } else if constexpr (std::same_as<A, bool>) {
    return take(std::type_identity<bool>{});
  } else if constexpr (std::is_integral_v<A> || std::is_enum_v<A>) {
    return static_cast<A>(take(std::type_identity<std::int64_t>{}));
  } else if constexpr (std::is_floating_point_v<A>) {
    return static_cast<A>(take(std::type_identity<double>{}));
  } else {
    return std::string(take(std::type_identity<std::string>{}));
  }
}

/// Whether a call argument of type A is a C string (a literal, a `const char*`):
/// `construct` may take it as a `const char*`.
template <class A>
concept CStringArg = std::same_as < std::decay_t<A>,
const char* > || std::same_as<std::decay_t<A>, char*>;

/// What `construct` gets from the value `v` that from_arg<A> made: a C
/// string (pointing into `v`) for a C-string argument, `v` itself otherwise.
template <class A, class V>
decltype(auto) construct_value(V&& v) {
  if constexpr (CStringArg<A>)
    return static_cast<const char*>(v.c_str());
  else
    return std::forward<V>(v);
}

template <class A>
struct AdaptedArgOf {
  using type = A;
};
template <>
struct AdaptedArgOf<std::string> {
  using type = const char*;
};
template <class P>
requires(std::derived_from<P, Tensor> &&
         !std::same_as<P, Tensor>) struct AdaptedArgOf<std::vector<P>> {
  using type = std::vector<Tensor>;
};

/// A call argument of type A as passed on to a construct that does not take
/// A itself: a std::string as its C string, a std::vector of Parameters as a
/// std::vector<ms::Tensor>, anything else as it is.
template <class A>
using AdaptedArg = typename AdaptedArgOf<A>::type;

/// `a` as an AdaptedArg<A>.
template <class A>
decltype(auto) adapt_arg(const A& a) {
  if constexpr (std::same_as<A, std::string>)
    return a.c_str();
  else if constexpr (std::same_as<AdaptedArg<A>, A>)
    return (a);
  else
    return AdaptedArg<A>(a.begin(), a.end());
}

}  // namespace detail
}  // namespace ms
