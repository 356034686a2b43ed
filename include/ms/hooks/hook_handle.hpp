// ms/hooks/hook_handle.hpp — ms::HookHandle and the ordered hook lists behind it.
//
// Stage: nn. Every register_*_hook returns a HookHandle; `remove()` takes the
// hook out (idempotent, and safe after the cell or tensor that held the hook
// is gone: the handle keeps only a weak reference, as MindSpore's
// `_TensorHookHandle` / `HookHandle` do). Registering or removing any hook
// bumps the global hook version (ms::compiler::hook_version), so graphs
// compiled before the change are recompiled.
//
// Thread-safe: a hook list locks while a hook is added or removed and while a
// call copies the list it is about to run, so registering or removing hooks
// while other threads call or trace the same cell is safe. A call runs the
// hooks the list held when it copied it: one that began before a removal may
// still run the removed hook once. The version is bumped after the list has
// changed, so a trace keyed with the new version sees the new list.
//
//   ms::HookHandle h = net.register_forward_hook([](Net&, const ms::Args&, const ms::Tensor& y) {
//     std::cout << ms::mean(y).item<float>() << "\n";
//   });
//   h.remove();                      // again: no effect
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "ms/core/std_parts.hpp"

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
/// Bumps the global hook version (a hook list changed).
void hook_changed();

/// Hooks of one kind, in registration order. Thread-safe (every member locks
/// or reads an atomic count).
template <class Fn>
class HookList final : public HookOwner {
 public:
  using value_type = Fn;
  /// Appends `fn`; returns its id. The hook version is bumped once `fn` is in.
  std::uint64_t add(Fn fn) {
    const std::uint64_t id = new_hook_id();
    {
      std::lock_guard<std::mutex> lock(mu_);
      hooks_.emplace_back(id, std::move(fn));
      count_.store(hooks_.size(), std::memory_order_release);
    }
    hook_changed();
    return id;
  }
  /// Removes hook `id` (no effect when it is not here).
  void erase_hook(std::uint64_t id) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = hooks_.begin();
      while (it != hooks_.end() && it->first != id) ++it;
      if (it == hooks_.end()) return;
      hooks_.erase(it);
      count_.store(hooks_.size(), std::memory_order_release);
    }
    hook_removed();
  }
  /// Whether no hook is registered (one atomic load: the cost of a call without hooks).
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  /// Number of hooks registered.
  std::size_t size() const { return count_.load(std::memory_order_acquire); }
  /// The hooks in registration order, copied: a hook may remove itself (or
  /// others) while the list is walked, and another thread may change the list.
  std::vector<Fn> snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Fn> out;
    out.reserve(hooks_.size());
    for (const auto& e : hooks_) out.push_back(e.second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::uint64_t, Fn>> hooks_;
  std::atomic<std::size_t> count_{0};
};

/// A `T` made on first use and never replaced: `get()` may run in one thread
/// while another makes it (`get_or_make()`), and two threads making it at once
/// agree on one object. What a cell's hook lists hang from, so that a cell
/// without hooks costs one pointer.
template <class T>
class LazyOnce {
 public:
  LazyOnce() = default;
  LazyOnce(const LazyOnce&) = delete;
  LazyOnce& operator=(const LazyOnce&) = delete;
  ~LazyOnce() { delete p_.load(std::memory_order_acquire); }
  /// The object, or null before the first get_or_make().
  T* get() const { return p_.load(std::memory_order_acquire); }
  T* operator->() const { return get(); }
  explicit operator bool() const { return get() != nullptr; }
  /// The object, made now when it is not yet.
  T& get_or_make() {
    if (T* p = get()) return *p;
    auto fresh = std::make_unique<T>();
    T* expected = nullptr;
    if (p_.compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel,
                                   std::memory_order_acquire))
      return *fresh.release();
    return *expected;  // another thread made it first
  }

 private:
  std::atomic<T*> p_{nullptr};
};

}  // namespace detail

/// Tag: a forward pre-hook or forward hook that also takes the call's keyword
/// arguments (MindSpore's with_kwargs=True), chosen when the hook is registered:
///   net.register_forward_pre_hook(
///       [](Net&, const ms::Args& a, const ms::Kwargs& kw) { ... }, ms::with_kwargs);
struct WithKwargs {
  explicit WithKwargs() = default;
};
/// The ms::WithKwargs tag value, passed as the last argument of a hook registration.
inline constexpr WithKwargs with_kwargs{};

/// Removes the hook it was returned for. Copyable; `remove()` is idempotent.
class HookHandle {
 public:
  HookHandle() = default;
  /// A handle to hook `id` of `owner` (made by the register_* functions; users get one from them).
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
  /// Takes over `h`: the hook is removed when this object is destroyed.
  ScopedHook(HookHandle h) : h_(std::move(h)) {}  // NOLINT: implicit, for `ScopedHook s = ...`
  ScopedHook(const ScopedHook&) = delete;
  ScopedHook& operator=(const ScopedHook&) = delete;
  ~ScopedHook() { h_.remove(); }
  /// The wrapped handle (to read its id, or remove the hook early).
  HookHandle& handle() { return h_; }

 private:
  HookHandle h_;
};

}  // namespace ms
