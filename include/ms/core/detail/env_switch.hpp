// ms/core/detail/env_switch.hpp — a process-wide on/off setting whose start
// value comes from an environment variable, read at the setting's first use
// ("0" starts it off; unset or anything else, on), and which code can set at
// any time.
//
// Stage: core (private). A namespace-scope `constinit` object, so it is
// ready before any static constructor may ask it:
//
//   constinit ms::detail::EnvSwitch g_jit{"MS_JIT"};
//   if (g_jit.on()) ...
//   const bool was = g_jit.set(false);
#pragma once

#if !defined(MS_BUILDING_LIBRARY)
#error "ms/core/detail/env_switch.hpp is private to libms"
#endif

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace ms::detail {

class EnvSwitch {
 public:
  explicit constexpr EnvSwitch(const char* variable) noexcept : variable_(variable) {}
  EnvSwitch(const EnvSwitch&) = delete;
  EnvSwitch& operator=(const EnvSwitch&) = delete;

  bool on() noexcept {
    int v = state_.load(std::memory_order_acquire);
    if (v < 0) [[unlikely]] {
      const char* e = std::getenv(variable_);
      const int from_env = e != nullptr && std::string_view(e) == "0" ? 0 : 1;
      state_.compare_exchange_strong(v, from_env, std::memory_order_acq_rel);
      v = state_.load(std::memory_order_acquire);
    }
    return v != 0;
  }

  // Sets it; returns the setting before.
  bool set(bool on_now) noexcept {
    const bool was = on();
    state_.store(on_now ? 1 : 0, std::memory_order_release);
    return was;
  }

 private:
  const char* variable_;
  std::atomic<int> state_{-1};  // -1: the variable not read yet; 0: off; 1: on
};

}  // namespace ms::detail
