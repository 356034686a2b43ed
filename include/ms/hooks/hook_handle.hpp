// ms/hooks/hook_handle.hpp — ms::HookHandle and the ordered hook lists behind it.
//
// Stage: nn. Every register_*_hook returns a HookHandle; `remove()` takes the
// hook out (idempotent, and safe after the cell or tensor that held the hook
// is gone: the handle keeps only a weak reference, as the seeds'
// `_TensorHookHandle` / `HookHandle` do). Registering or removing any hook
// bumps the global hook version (ms::compiler::hook_version), so graphs
// compiled before the change are recompiled.
//
//   ms::HookHandle h = net.register_forward_hook([](Net&, const ms::Args&, const ms::Tensor& y) {
//     std::cout << ms::mean(y).item<float>() << "\n";
//   });
//   h.remove();                      // again: no effect
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace ms {
namespace detail {

/// What a HookHandle points at: something it can remove hook `id` from.
class HookOwner {
 public:
  virtual ~HookOwner() = default;
  virtual void erase_hook(std::uint64_t id) = 0;
};

/// A fresh hook id (unique in the process); bumps the global hook version.
std::uint64_t new_hook_id();
/// Bumps the global hook version (a hook was removed).
void hook_removed();

/// Hooks of one kind, in registration order.
template <class Fn>
class HookList final : public HookOwner {
 public:
  using value_type = Fn;
  std::uint64_t add(Fn fn) {
    const std::uint64_t id = new_hook_id();
    hooks_.emplace_back(id, std::move(fn));
    return id;
  }
  void erase_hook(std::uint64_t id) override {
    for (auto it = hooks_.begin(); it != hooks_.end(); ++it)
      if (it->first == id) {
        hooks_.erase(it);
        hook_removed();
        return;
      }
  }
  bool empty() const { return hooks_.empty(); }
  std::size_t size() const { return hooks_.size(); }
  /// The hooks in registration order, copied: a hook may remove itself (or
  /// others) while the list is walked.
  std::vector<Fn> snapshot() const {
    std::vector<Fn> out;
    out.reserve(hooks_.size());
    for (const auto& e : hooks_) out.push_back(e.second);
    return out;
  }

 private:
  std::vector<std::pair<std::uint64_t, Fn>> hooks_;
};

}  // namespace detail

/// Removes the hook it was returned for. Copyable; `remove()` is idempotent.
class HookHandle {
 public:
  HookHandle() = default;
  HookHandle(std::weak_ptr<detail::HookOwner> owner, std::uint64_t id)
      : owner_(std::move(owner)), id_(id) {}
  /// Takes the hook out. No effect when already removed or when its owner is gone.
  void remove() {
    if (auto o = owner_.lock()) o->erase_hook(id_);
    owner_.reset();
  }
  /// The hook's id (unique in the process; 0 for an empty handle).
  std::uint64_t id() const { return id_; }

 private:
  std::weak_ptr<detail::HookOwner> owner_;
  std::uint64_t id_ = 0;
};

/// Removes its hook when it goes out of scope: `ms::ScopedHook s = net.register_...;`.
class ScopedHook {
 public:
  ScopedHook(HookHandle h) : h_(std::move(h)) {}  // NOLINT: implicit, for `ScopedHook s = ...`
  ScopedHook(const ScopedHook&) = delete;
  ScopedHook& operator=(const ScopedHook&) = delete;
  ~ScopedHook() { h_.remove(); }
  HookHandle& handle() { return h_; }

 private:
  HookHandle h_;
};

}  // namespace ms
