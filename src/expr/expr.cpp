#include "ms/expr/expr.hpp"

#include <algorithm>

namespace ms::expr {

Lowered lower_tensor(Lowering& L, const Tensor& t, bool with_shape) {
  MS_CHECK(t.defined(), ValueError, "elementwise: an operand is an undefined tensor");
  MS_CHECK(!t.is_symbolic(), ValueError,
           "elementwise: a symbolic tensor is used outside its trace (was a traced value kept "
           "after its ms::jit call returned?)");
  Lowered r;
  r.dtype = t.dtype();
  r.reg_type = kernels::ew_register_type(t.dtype(), "elementwise");
  if (with_shape) r.shape = t.shape();
  r.reg = L.builder.load(L.input(&t), r.reg_type);
  return r;
}

Lowered lower_apply(Lowering& L, int op_id, std::span<const Lowered> operands) {
  const kernels::EwOpInfo& info = kernels::ew_op_info(op_id);
  kernels::EwOperand ops_types[3];
  Shape shape;
  bool first = true;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Lowered& o = operands[i];
    ops_types[i] = {o.dtype, o.is_scalar, o.value.kind()};
    if (o.is_scalar) continue;
    shape = first ? o.shape : shape_broadcast(shape, o.shape, info.name);
    first = false;
  }
  const kernels::EwTypes types = kernels::ew_infer_types(
      op_id, std::span<const kernels::EwOperand>(ops_types, operands.size()));
  Lowered r = lower_apply_typed(L, op_id, operands, types);
  r.shape = std::move(shape);
  return r;
}

Lowered lower_apply_typed(Lowering& L, int op_id, std::span<const Lowered> operands,
                          const kernels::EwTypes& types) {
  const bool select = kernels::ew_op_info(op_id).rule == kernels::EwRule::Select;
  int regs[3] = {-1, -1, -1};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Lowered& o = operands[i];
    const DType want = (select && i == 0) ? DType::Bool : types.operand;
    regs[i] = o.is_scalar ? L.builder.constant(o.value, want)
                          : L.builder.convert(o.reg, o.reg_type, want);
  }
  Lowered r;
  r.reg = L.builder.apply(op_id, types.compute, regs[0], regs[1], regs[2]);
  r.dtype = types.out;
  r.reg_type = types.compute;
  return r;
}

Inferred infer_apply(int op_id, std::span<const Meta> operands, std::shared_ptr<const Shape>& own) {
  const kernels::EwOpInfo& info = kernels::ew_op_info(op_id);
  // The shape first (as lower_apply does): mismatched shapes are a ShapeError
  // even when the dtypes are refused too.
  int from = -1;
  bool same = true;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const Meta& m = operands[i];
    MS_CHECK(m.defined, ValueError, info.name, ": operand ", i, " is an undefined tensor");
    if (m.shape == nullptr) continue;
    if (from < 0)
      from = static_cast<int>(i);
    else if (*m.shape != *operands[static_cast<std::size_t>(from)].shape)
      same = false;
  }
  if (!same) {
    // Broadcast left to right, as lower_apply does, so the message is the same.
    Shape shape;
    bool first = true;
    for (const Meta& m : operands) {
      if (m.shape == nullptr) continue;
      shape = first ? *m.shape : shape_broadcast(shape, *m.shape, info.name);
      first = false;
    }
    from = -1;
    for (std::size_t i = 0; i < operands.size() && from < 0; ++i)
      if (operands[i].shape != nullptr && *operands[i].shape == shape) from = static_cast<int>(i);
    if (from < 0) own = std::make_shared<const Shape>(std::move(shape));
  }
  const kernels::EwTypes out = infer_types(op_id, operands);
  const Meta& m = operands[static_cast<std::size_t>(std::max(from, 0))];
  return {out, from, from < 0 ? own.get() : (m.stable ? m.shape : nullptr)};
}

kernels::EwTypes infer_types(int op_id, std::span<const Meta> operands) {
  kernels::EwOperand types[3];
  for (std::size_t i = 0; i < operands.size(); ++i)
    types[i] = {operands[i].dtype, operands[i].shape == nullptr, operands[i].kind};
  return kernels::ew_infer_types(op_id,
                                 std::span<const kernels::EwOperand>(types, operands.size()));
}

bool eval_dense(int op_id, std::span<const Tensor* const> operands, Tensor& out,
                const kernels::EwTypes* known) {
  // ew_run's grain: up to it, the interpreter runs on one thread too.
  constexpr std::int64_t kMaxDense = std::int64_t{1} << 16;
  const Tensor& a = *operands[0];
  if (!a.defined() || a.is_symbolic() || !a.is_contiguous()) return false;
  const DType t = a.dtype();
  const std::int64_t n = a.numel();
  if (n == 0 || n > kMaxDense) return false;
  for (const Tensor* b : operands.subspan(1))
    if (!b->defined() || b->is_symbolic() || b->dtype() != t || b->shape() != a.shape() ||
        !b->is_contiguous())
      return false;
  const kernels::EwDenseFn fn = kernels::ew_dense_kernel(op_id, t);
  if (fn == nullptr) return false;
  const kernels::EwOperand types_in[2] = {{t, false, ScalarKind::Float},
                                          {t, false, ScalarKind::Float}};
  const kernels::EwTypes types =
      known != nullptr ? *known
                       : kernels::ew_infer_types(
                             op_id, std::span<const kernels::EwOperand>(types_in, operands.size()));
  if (types.out != t || types.compute != t || types.operand != t) return false;
  out = empty(a.shape(), t);
  const void* in[2] = {a.raw_data(), operands.size() > 1 ? operands[1]->raw_data() : nullptr};
  fn(in, out.raw_data(), n);
  return true;
}

Tensor evaluate(Lowering& L, const Lowered& root) {
  const kernels::EwProgram prog = L.builder.finish(root.reg, root.shape, root.dtype);
  return kernels::ew_eval(prog, L.inputs);
}

void evaluate_into(Lowering& L, const Lowered& root, const Tensor& dst) {
  MS_CHECK(dst.defined(), ValueError, "assign: the destination is an undefined tensor");
  if (root.is_scalar) {
    Tensor(dst).fill_(root.value);
    return;
  }
  const Shape b = shape_broadcast(root.shape, dst.shape(), "assign");
  MS_CHECK(b == dst.shape(), ShapeError, "assign: a value of shape ", root.shape,
           " cannot be written into a tensor of shape ", dst.shape());
  kernels::ew_register_type(dst.dtype(), "assign");  // rejects complex / int4 destinations
  const kernels::EwProgram prog = L.builder.finish(root.reg, dst.shape(), dst.dtype());
  dst.storage()->note_write();
  kernels::ew_run(prog, L.inputs, dst);
}

Tensor trace_apply(int op_id, std::span<const Traced> args) {
  Recorder* t = active_recorder();
  MS_CHECK(t != nullptr, ValueError, kernels::ew_op_info(op_id).name, ": no active trace");
  EwTraceArg a[3];
  for (std::size_t i = 0; i < args.size(); ++i)
    a[i] = args[i].is_scalar ? EwTraceArg{nullptr, args[i].s} : EwTraceArg{&args[i].t, Scalar(0)};
  return t->record_elementwise(op_id, std::span<const EwTraceArg>(a, args.size()));
}

void trace_assign(const Tensor& dst, const Traced& v) {
  Recorder* t = active_recorder();
  MS_CHECK(t != nullptr, ValueError, "assign: no active trace");
  MS_CHECK(dst.defined(), ValueError, "assign: the destination is an undefined tensor");
  t->record_assign(dst, v.is_scalar ? full({}, v.s, dst.dtype()) : v.t, "assign");
}

}  // namespace ms::expr
