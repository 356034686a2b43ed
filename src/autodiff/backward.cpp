#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ms/autodiff/grad.hpp"
#include "ms/autodiff/tensor_hooks.hpp"
#include "ms/jit/recompute.hpp"
#include "ms/jit/trace.hpp"
#include "ms/ops/layout.hpp"

namespace ms {

namespace autodiff {

void check_output(const Tensor& y, std::string_view api) {
  MS_CHECK(y.numel() == 1, ValueError, api, ": the function's output has shape ", y.shape(),
           "; only a scalar (one element) output can be differentiated without a sensitivity "
           "(pass ms::sens_param and the output's gradient as the last argument)");
  MS_CHECK(dtype_is_float(y.dtype()), TypeError, api, ": the function's output has dtype ",
           y.dtype(), "; only floating outputs can be differentiated");
}

void check_sens(const Tensor& y, const Tensor& sens, std::string_view api) {
  MS_CHECK(dtype_is_float(y.dtype()), TypeError, api, ": the function's output has dtype ",
           y.dtype(), "; only floating outputs can be differentiated");
  MS_CHECK(sens.defined(), ValueError, api, ": the sensitivity is an undefined tensor");
  MS_CHECK(sens.shape() == y.shape(), ShapeError, api, ": the sensitivity has shape ", sens.shape(),
           " but the function's output has shape ", y.shape());
  MS_CHECK(dtype_is_float(sens.dtype()), TypeError, api, ": the sensitivity has dtype ",
           sens.dtype(), "; it must be floating");
}

void check_wrt(const Tensor& t, std::string_view what, std::string_view api) {
  MS_CHECK(t.defined(), ValueError, api, ": ", what, " is an undefined tensor");
  MS_CHECK(dtype_is_float(t.dtype()), TypeError, api, ": ", what, " has dtype ", t.dtype(),
           "; gradients exist only for floating tensors");
}

namespace {

using GradMap = std::unordered_map<ir::ValueId, Tensor>;

// The clones of the recompute regions (ms/jit/recompute.hpp) that the backward
// has reached: each region's ops re-emitted once, right before its first
// gradient rule, and read by its rules in place of the forward values.
class Recomputer {
 public:
  Recomputer(compiler::TraceContext& tc, std::size_t first, std::size_t end)
      : tc_(tc), first_(first), end_(end) {}

  // Re-emits region `r` unless done: its ops in trace order, reading the
  // clones of region values and, for any other value, that value after the
  // gradients that have reached the region (`grads`), so that no execution
  // order runs a clone before the backward gets there.
  void reach(int r, const GradMap& grads) {
    if (!done_.insert(r).second) return;
    std::vector<ir::NodeId> nodes;
    std::vector<Tensor> deps;
    for (std::size_t i = first_; i < end_; ++i) {
      const ir::Node& n = tc_.graph().nodes[i];
      if (n.kind != ir::NodeKind::Op || n.recompute_region != r) continue;
      nodes.push_back(ir::NodeId{i});
      for (ir::ValueId v : n.outputs)
        if (auto it = grads.find(v); it != grads.end()) deps.push_back(it->second);
    }
    std::unordered_map<ir::ValueId, ir::ValueId> after;  // value -> it, after deps
    for (ir::NodeId id : nodes) {
      const ir::Node n = tc_.graph().node(id);  // a copy: replay appends nodes
      // A random draw or host callback runs once: its forward value is kept.
      if (n.def->random || n.def->kind == ops::OpKind::HostCallback) continue;
      std::vector<ir::ValueId> in;
      for (ir::ValueId v : n.inputs) {
        if (auto c = clone_.find(v); c != clone_.end()) {
          in.push_back(c->second);
        } else if (tc_.graph().value(v).weak) {
          in.push_back(v);
        } else {
          auto it = after.find(v);
          if (it == after.end())
            it = after.emplace(v, tc_.value_id(depend(tc_.symbolic_value(v), deps))).first;
          in.push_back(it->second);
        }
      }
      const std::vector<Tensor> outs = tc_.replay(id, in);
      for (std::size_t k = 0; k < outs.size(); ++k) clone_[n.outputs[k]] = tc_.value_id(outs[k]);
    }
  }

  // What a gradient rule reads for value `v`: its clone, or `v` itself.
  Tensor read(ir::ValueId v) const {
    auto it = clone_.find(v);
    return tc_.symbolic_value(it == clone_.end() ? v : it->second);
  }

 private:
  compiler::TraceContext& tc_;
  std::size_t first_, end_;  ///< the differentiated function's nodes
  std::unordered_set<int> done_;
  std::unordered_map<ir::ValueId, ir::ValueId> clone_;  ///< forward value -> its clone
};

// Traces the gradient rule of node `i` (which some gradient reaches) and
// accumulates the gradients of its inputs into `grads`.
void apply_rule(compiler::TraceContext& tc, std::size_t i, GradMap& grads, Recomputer& rc) {
  // Copy what the rule needs: it appends nodes, which moves the node list.
  const ir::Node node = tc.graph().nodes[i];
  const ops::OpDef* def = node.def;
  if (node.recompute_region >= 0) rc.reach(node.recompute_region, grads);
  std::vector<Tensor> outs, out_grads;
  for (ir::ValueId v : node.outputs) {
    outs.push_back(rc.read(v));
    auto it = grads.find(v);
    out_grads.push_back(it == grads.end() ? Tensor() : it->second);
  }
  const DType out_dtype = tc.graph().value(node.outputs[0]).type.dtype;
  std::vector<Tensor> ins;
  std::vector<bool> weak;
  for (ir::ValueId v : node.inputs) {
    const ir::Value& val = tc.graph().value(v);
    weak.push_back(val.weak);
    // A weak number becomes a 0-d constant of the op's dtype (no promotion change).
    ins.push_back(val.weak ? full({}, tc.graph().producer(v).scalar, out_dtype) : rc.read(v));
  }
  const ops::GradContext ctx{ins, outs, out_grads, node.attrs};
  const std::vector<Tensor> gi = def->grad(ctx);
  MS_CHECK(gi.size() == ins.size(), ValueError, "grad: the rule of '", def->name, "' returned ",
           gi.size(), " gradients for ", ins.size(), " inputs");
  for (std::size_t k = 0; k < gi.size(); ++k) {
    if (!gi[k].defined() || weak[k]) continue;
    MS_CHECK(gi[k].shape() == ins[k].shape(), ShapeError, "grad: the rule of '", def->name,
             "' gave input ", k, " a gradient of shape ", gi[k].shape(), ", expected ",
             ins[k].shape());
    // A gradient has its value's dtype: an op mixing float dtypes promotes
    // (a bfloat16 value plus a float32 parameter), its rule gives the
    // promoted dtype, and the value's producer expects its own.
    const DType want = ins[k].dtype();
    const Tensor g = gi[k].dtype() != want && dtype_is_float(want) ? gi[k].to(want) : gi[k];
    auto [it, fresh] = grads.emplace(node.inputs[k], g);
    if (!fresh) it->second = it->second + g;
  }
}

}  // namespace

std::vector<Tensor> backward(compiler::TraceContext& tc, std::size_t first_node, const Tensor& y,
                             std::span<const Tensor> wrt, const Tensor* sens,
                             std::vector<bool>* reached) {
  GradMap grads;  // value -> its gradient (symbolic)
  grads[tc.value_id(y)] = sens != nullptr ? sens->to(y.dtype()) : full(y.shape(), 1.0, y.dtype());
  const std::size_t end = tc.graph().nodes.size();  // rules append nodes past it
  Recomputer rc(tc, first_node, end);
  for (std::size_t i = end; i-- > first_node;) {
    const ir::Node& node = tc.graph().nodes[i];
    if (node.kind != ir::NodeKind::Op) continue;
    const bool any = std::any_of(node.outputs.begin(), node.outputs.end(),
                                 [&](ir::ValueId v) { return grads.contains(v); });
    if (!any) continue;
    if (!node.def->differentiable) {
      MS_CHECK(node.def->no_grad_reason.empty(), ValueError, "grad: cannot differentiate through '",
               node.def->name, "': ", node.def->no_grad_reason);
      continue;
    }
    MS_CHECK(static_cast<bool>(node.def->grad), ValueError, "grad: op '", node.def->name,
             "' has no gradient rule yet");
    apply_rule(tc, i, grads, rc);
  }
  std::vector<Tensor> res;
  if (reached != nullptr) reached->clear();
  for (const Tensor& t : wrt) {
    auto it = grads.find(tc.value_id(t));
    if (reached != nullptr) reached->push_back(it != grads.end());
    // A weight that gets no gradient does not call its hooks (zeros).
    res.push_back(it != grads.end() ? apply_tensor_grad_hooks(t, it->second.to(t.dtype()))
                                    : zeros(t.shape(), t.dtype()));
  }
  return res;
}

}  // namespace autodiff
}  // namespace ms
