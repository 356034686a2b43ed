#include <unordered_map>

#include "ms/autodiff/grad.hpp"
#include "ms/autodiff/tensor_hooks.hpp"
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

std::vector<Tensor> backward(compiler::TraceContext& tc, std::size_t first_node, const Tensor& y,
                             std::span<const Tensor> wrt, const Tensor* sens,
                             std::vector<bool>* reached) {
  std::unordered_map<ir::ValueId, Tensor> grads;  // value -> its gradient (symbolic)
  grads[tc.value_id(y)] = sens != nullptr ? sens->to(y.dtype()) : full(y.shape(), 1.0, y.dtype());
  auto accumulate = [&](ir::ValueId v, const Tensor& g) {
    auto [it, fresh] = grads.emplace(v, g);
    if (!fresh) it->second = it->second + g;
  };
  const std::size_t end = tc.graph().nodes.size();  // rules append nodes past it
  for (std::size_t i = end; i-- > first_node;) {
    const ir::Node& node = tc.graph().nodes[i];
    if (node.kind != ir::NodeKind::Op) continue;
    std::vector<Tensor> outs, out_grads;
    bool any = false;
    for (ir::ValueId v : node.outputs) {
      outs.push_back(tc.symbolic_value(v));
      auto it = grads.find(v);
      out_grads.push_back(it == grads.end() ? Tensor() : it->second);
      any |= it != grads.end();
    }
    if (!any) continue;
    if (!node.def->differentiable) {
      MS_CHECK(node.def->no_grad_reason.empty(), ValueError, "grad: cannot differentiate through '",
               node.def->name, "': ", node.def->no_grad_reason);
      continue;
    }
    MS_CHECK(static_cast<bool>(node.def->grad), ValueError, "grad: op '", node.def->name,
             "' has no gradient rule yet");
    // Copy what the rule needs: it appends nodes, which moves the node list.
    const ops::OpDef* def = node.def;
    const ops::Attrs attrs = node.attrs;
    const std::vector<ir::ValueId> in_values = node.inputs;
    const DType out_dtype = tc.graph().value(node.outputs[0]).type.dtype;
    std::vector<Tensor> ins;
    std::vector<bool> weak;
    for (ir::ValueId v : in_values) {
      const ir::Value& val = tc.graph().value(v);
      weak.push_back(val.weak);
      // A weak number becomes a 0-d constant of the op's dtype (no promotion change).
      ins.push_back(val.weak ? full({}, tc.graph().producer(v).scalar, out_dtype)
                             : tc.symbolic_value(v));
    }
    const ops::GradContext ctx{ins, outs, out_grads, attrs};
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
      accumulate(in_values[k],
                 gi[k].dtype() != want && dtype_is_float(want) ? gi[k].to(want) : gi[k]);
    }
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
