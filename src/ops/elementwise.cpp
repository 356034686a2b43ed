// Op-table entries of the elementwise ops: derived from the structs of
// ms/ops/elementwise.hpp (name, arity, dtype rule), evaluated by the same
// lowering and fused tile loop as the expression templates.
#include "ms/ops/elementwise.hpp"

#include "ms/expr/expr.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops::detail {
namespace {

// Ops whose result is piecewise constant or boolean have no gradient.
bool ew_differentiable(EwRule rule, std::string_view name) {
  if (rule == EwRule::Compare || rule == EwRule::Logical) return false;
  return name != "sign" && name != "floor" && name != "ceil" && name != "round";
}

std::vector<TensorType> ew_infer(int id, std::span<const TensorType> in) {
  const EwOpInfo& info = ew_op_info(id);
  kernels::EwOperand operands[3];
  Shape shape = in[0].shape;
  for (std::size_t i = 0; i < in.size(); ++i) {
    operands[i] = {in[i].dtype, false, ScalarKind::Float};
    if (i) shape = shape_broadcast(shape, in[i].shape, info.name);
  }
  const auto types =
      kernels::ew_infer_types(id, std::span<const kernels::EwOperand>(operands, in.size()));
  return {TensorType{types.out, shape}};
}

template <class... Ops>
void register_list(OpList<Ops...>) {
  (registry_add(OpDef{
       .name = Ops::name,
       .kind = OpKind::Elementwise,
       .min_inputs = Ops::arity,
       .max_inputs = Ops::arity,
       .differentiable = ew_differentiable(Ops::rule, Ops::name),
       .infer = [](std::span<const TensorType> in,
                   const Attrs&) { return ew_infer(ew_op_id<Ops>, in); },
       .eval =
           [](std::span<const Tensor> in, const Attrs&) {
             expr::Lowering L;
             expr::Lowered operands[3];
             for (std::size_t i = 0; i < in.size(); ++i) operands[i] = expr::lower_tensor(L, in[i]);
             const expr::Lowered root = expr::lower_apply(
                 L, ew_op_id<Ops>, std::span<const expr::Lowered>(operands, in.size()));
             return std::vector<Tensor>{expr::evaluate(L, root)};
           },
   }),
   ...);
}

}  // namespace

void register_elementwise_ops() { register_list(ElementwiseOps{}); }

}  // namespace ms::ops::detail
