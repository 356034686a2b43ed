// The mixed-precision cast policy of ms/ops/cast_policy.hpp, applied by ops::call.
#include "ms/ops/cast_policy.hpp"

#include <span>
#include <vector>

#include "ms/ops/entry.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops {
namespace {
thread_local CastPolicy t_policy{};
}  // namespace

CastPolicy cast_policy() { return t_policy; }

CastPolicy set_cast_policy(CastPolicy p) {
  const CastPolicy prev = t_policy;
  t_policy = p;
  return prev;
}

namespace detail {

// ops::call under a policy (p.mode != None): casts the inputs the policy
// names, runs the op, and for WhiteList casts its floating outputs to float32.
// The policy is off meanwhile, so the casts themselves, and the op, are plain
// calls. Host callbacks, random draws and explicit casts are left as they are.
std::vector<Tensor> call_with_cast_policy(const OpDef& def, std::span<const Tensor> inputs,
                                          const Attrs& attrs, CastPolicy p) {
  CastPolicyScope off(CastPolicy{});
  const bool exempt =
      def.kind == OpKind::HostCallback || def.kind == OpKind::Random || &def == &def_of<Cast>();
  const bool white = def.kind == OpKind::Linalg || def.kind == OpKind::Conv;
  if (exempt || (p.mode == CastPolicy::Mode::WhiteList && !white)) return call(def, inputs, attrs);
  std::vector<Tensor> in(inputs.begin(), inputs.end());
  for (Tensor& t : in)
    if (t.defined() && dtype_is_float(t.dtype()) && t.dtype() != p.dtype) t = cast(t, p.dtype);
  std::vector<Tensor> out = call(def, in, attrs);
  if (p.mode == CastPolicy::Mode::WhiteList)
    for (Tensor& t : out)
      if (t.defined() && dtype_is_float(t.dtype()) && t.dtype() != float32) t = cast(t, float32);
  return out;
}

}  // namespace detail
}  // namespace ms::ops
