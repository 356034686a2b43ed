// ms/ops/cast_policy.hpp — the mixed-precision cast policy that ops::call applies.
//
// Stage: ops. Mixed precision (ms/nn/amp.hpp) is casts inserted at op inputs:
// while a cell set to a low precision runs, its call makes a CastPolicy this
// thread's, and every op that goes through ops::call (eagerly, or recorded
// while ms::jit or ms::grad traces) first casts its floating inputs as the
// policy says. The casts are ordinary `cast` ops, so a traced graph holds
// them as nodes and autodiff sends each gradient back through its cast (a
// float32 parameter gets a float32 gradient).
//
//   ms::ops::CastPolicyScope scope({.mode = ms::ops::CastPolicy::Mode::All,
//                                   .dtype = ms::bfloat16});
//   ms::Tensor y = ms::matmul(x, w);   // x and w (float32) are cast to bfloat16 first
#pragma once

#include <cstdint>

#include "ms/core/dtype.hpp"

namespace ms::ops {

/// Which inputs ops::call casts, and to what (mixed precision).
struct CastPolicy {
  /// What the policy casts.
  enum class Mode : std::uint8_t {
    None,       ///< nothing: ops run in their inputs' dtypes
    All,        ///< every floating input of every op becomes `dtype` (a cell's to_float)
    WhiteList,  ///< only the inputs of matmul and convolution ops (kinds Linalg and Conv)
                ///< become `dtype`, and their floating outputs float32 (amp level O1)
  };
  /// What is cast.
  Mode mode = Mode::None;
  /// The dtype cast to (float16, bfloat16, float32 or float64).
  DType dtype = float32;
};

/// The policy in force on this thread (Mode::None when none).
CastPolicy cast_policy();
/// Makes `p` this thread's policy; returns the previous one.
CastPolicy set_cast_policy(CastPolicy p);

/// Makes a policy this thread's for the scope's lifetime (the previous one is
/// restored on exit, exceptions included).
class CastPolicyScope {
 public:
  /// Sets `p`.
  explicit CastPolicyScope(CastPolicy p) : prev_(set_cast_policy(p)) {}
  ~CastPolicyScope() { set_cast_policy(prev_); }
  CastPolicyScope(const CastPolicyScope&) = delete;
  CastPolicyScope& operator=(const CastPolicyScope&) = delete;

 private:
  CastPolicy prev_;
};

}  // namespace ms::ops
