// ms/dyn/detail/manager.hpp — the auto-dynamic-shape manager's decisions.
//
// Stage: dyn (private). MindSpore's manager, as DESIGN.md describes it: the
// first signatures compile static graphs ("real" entries kept for good); a
// later signature is generalized against them and against the kept
// generalized signature (DynamicPolicy::AllDims: every dim of a changed tensor
// becomes a symbol, or any rank; ChangedDims: only the changed dims); an
// argument check failing switches the manager off for good. The manager only
// decides; the jit's cache compiles, instantiates and keeps the graphs.
#pragma once

#ifndef MS_BUILDING_LIBRARY
#error "ms/dyn/detail/manager.hpp is internal to libms; include <ms/jit/jit.hpp> instead"
#endif

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ms/dyn/detail/generalize.hpp"
#include "ms/dyn/spec.hpp"

namespace ms::dyn::detail {

/// What the manager decides for a call that no kept graph serves.
struct Decision {
  enum class Kind : std::uint8_t {
    Static,      ///< compile a static graph for this signature
    Reuse,       ///< a kept generalized signature fits: `reuse` is its index
    Generalize,  ///< a new generalized signature `gen` (the oldest kept one may go)
  };
  Kind kind = Kind::Static;
  std::string why;            ///< Static, Generalize: the reason, for the compile log
  std::size_t reuse = 0;      ///< Reuse: index into the kept generalized signatures
  Generalized gen;            ///< Generalize
  bool switched_off = false;  ///< this call switched the manager off: drop generalized graphs
};

/// One manager per jitted function. Not thread-safe (the jit's cache holds its lock).
class AutoDynamic {
 public:
  AutoDynamic(bool enabled, DynamicPolicy policy) : enabled_(enabled), policy_(policy) {}
  /// Enabled by JitConfig::dynamic or the environment (and no input_signature).
  bool enabled() const { return enabled_; }
  /// Enabled and not switched off.
  bool active() const { return enabled_ && !off_; }
  /// The decision for a new signature (`shapes`: its flat input shapes) given
  /// the generalized signatures the cache keeps, newest first. Call only when active().
  Decision decide(const Signature& sig, std::span<const Shape> shapes,
                  std::span<const Generalized* const> kept);
  /// Generalized graphs to keep: one (MindSpore) for AllDims, `max_generalized` for ChangedDims.
  std::size_t keep(std::size_t max_generalized) const;

 private:
  std::optional<std::string> switch_off(const Signature& sig);
  std::optional<Decision> keep_static(const Generalized& now);
  Decision generalize(const Generalized& now, std::span<const Generalized* const> kept) const;

  bool enabled_;
  bool off_ = false;
  DynamicPolicy policy_;
  std::optional<Signature> first_;
  std::vector<Generalized> real_;  ///< the static signatures kept for generalizing
};

/// "argument 0 dim 0: 2 -> 4" for every fixed dim of `ref` that `call` changes.
std::string describe_changes(const Generalized& call, const Generalized& ref);

}  // namespace ms::dyn::detail
