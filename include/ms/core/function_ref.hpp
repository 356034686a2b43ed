// ms/core/function_ref.hpp — a non-owning reference to a callable.
//
// Stage: core (a utility for the stages above: the jit's cache calls back
// into the template side of ms::jit through it, without allocating).
#pragma once

#include <type_traits>
#include <utility>

namespace ms::detail {

/// A non-owning reference to a callable (no allocation, unlike std::function):
/// valid while the referenced object lives.
template <class Sig>
class FunctionRef;
template <class R, class... A>
class FunctionRef<R(A...)> {
 public:
  template <class F>
  requires(!std::is_same_v<std::remove_cvref_t<F>, FunctionRef>) FunctionRef(F& f)  // NOLINT
      : obj_(&f),
        call_([](void* o, A... a) -> R { return (*static_cast<F*>(o))(std::forward<A>(a)...); }) {}
  R operator()(A... a) const { return call_(obj_, std::forward<A>(a)...); }

 private:
  void* obj_;
  R (*call_)(void*, A...);
};

}  // namespace ms::detail
