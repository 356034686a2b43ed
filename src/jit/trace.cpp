#include "ms/jit/trace.hpp"

#include <atomic>

#include "ms/jit/dump.hpp"
#include "ms/jit/recompute.hpp"
#include "ms/ops/elementwise.hpp"
#include "ms/ops/layout.hpp"

namespace ms::compiler {
namespace {
std::atomic<std::uint32_t> g_next_trace{1};
std::atomic<int> g_next_region{0};
thread_local int t_region = -1;
}  // namespace

namespace detail {
int current_recompute_region() { return t_region; }
RecomputeScope::RecomputeScope(bool on) {
  if (!on || t_region >= 0) return;
  t_region = g_next_region.fetch_add(1, std::memory_order_relaxed);
  opened_ = true;
}
RecomputeScope::~RecomputeScope() {
  if (opened_) t_region = -1;
}
}  // namespace detail

TraceContext::TraceContext()
    : id_(g_next_trace.fetch_add(1, std::memory_order_relaxed)),
      first_serial_(Storage::next_serial()) {
  ops::registry();  // the op table installs the symbolic-view bridge
  prev_ = ops::set_active_tracer(this);
  active_ = true;
}

TraceContext::~TraceContext() { deactivate(); }

void TraceContext::deactivate() {
  if (!active_) return;
  ops::set_active_tracer(prev_);
  active_ = false;
}

Tensor TraceContext::symbolic(ir::ValueId value) const {
  const ir::Value& v = g_.value(value);
  return Tensor::symbolic(v.type.dtype, v.type.shape, id_, value.raw());
}

Tensor TraceContext::add_input(DType dtype, const Shape& shape, std::string name) {
  ir::Node n;
  n.kind = ir::NodeKind::Input;
  n.arg_index = num_inputs_;
  n.name = name.empty() ? "arg" + std::to_string(num_inputs_) : std::move(name);
  const auto i = static_cast<std::size_t>(num_inputs_);
  ++num_inputs_;
  const Shape& s = i < shapes_.size() ? shapes_[i] : shape;
  return symbolic(g_.value_of(g_.add(std::move(n), {{dtype, s}})));
}

void TraceContext::bind_input(const Tensor& t, std::string name) {
  MS_CHECK(t.defined() && !t.is_symbolic(), ValueError,
           "jit_begin: arguments must be concrete tensors");
  const Tensor s = add_input(t.dtype(), t.shape(), std::move(name));
  const ir::ValueId v{s.symbolic_id()};
  bound_.push_back({t, v, v});
}

bool TraceContext::bound(const Tensor& t) const {
  for (const Bound& b : bound_)
    if (b.tensor.storage() == t.storage()) return true;
  return false;
}

ir::ValueId TraceContext::value_of(const Tensor& t, std::string_view what) {
  MS_CHECK(t.defined(), ValueError, what, ": an input is an undefined tensor");
  if (t.is_symbolic()) {
    MS_CHECK(t.trace_id() == id_, ValueError, what,
             ": a symbolic tensor of another trace was used (a traced value was kept after its "
             "ms::jit call returned)");
    return ir::ValueId{t.symbolic_id()};
  }
  for (const Bound& b : bound_)
    if (b.tensor.is_same(t)) return b.current;
  ir::Node n;
  const bool made_here = t.storage()->serial() >= first_serial_;
  n.kind = made_here ? ir::NodeKind::Const : ir::NodeKind::Capture;
  n.tensor = t;
  if (!made_here) {
    // A whole labelled storage (a Parameter) is named after it: `%fc1.weight`.
    const std::string& label = t.storage()->label();
    const bool whole = t.offset() == 0 && t.is_contiguous() && t.nbytes() == t.storage()->nbytes();
    std::string name = "cap" + std::to_string(num_captures_++);
    if (whole && !label.empty()) {
      bool taken = false;
      for (const ir::Node& m : g_.nodes) taken |= m.name == label;
      if (!taken) name = label;
    }
    n.name = std::move(name);
  }
  const ir::ValueId v = g_.value_of(g_.add(std::move(n), {{t.dtype(), t.shape()}}));
  bound_.push_back({t, v, v});
  return v;
}

std::vector<Tensor> TraceContext::record(const ops::OpDef& def, std::span<const Tensor> inputs,
                                         const ops::Attrs& attrs) {
  MS_CHECK(active_, ValueError, def.name, ": recorded into a finished trace");
  if (def.kind == ops::OpKind::Elementwise) {
    const int id = ops::ew_op_find(def.name);
    MS_ASSERT(id >= 0);
    std::vector<ops::EwTraceArg> args;
    for (const Tensor& t : inputs) args.push_back({&t, Scalar(0)});
    Tensor r = record_elementwise(id, args);
    g_.nodes.back().attrs = attrs;  // e.g. split_op, func_id
    return {r};
  }
  ir::Node n;
  n.kind = ir::NodeKind::Op;
  n.def = &def;
  n.attrs = attrs;
  std::vector<ops::TensorType> types;
  for (const Tensor& t : inputs) {
    n.inputs.push_back(value_of(t, def.name));
    types.push_back(g_.value(n.inputs.back()).type);
  }
  // Shape and dtype errors surface here, at trace time, from the op's own rule.
  const std::vector<ops::TensorType> out = def.infer(types, attrs);
  n.dump_scope = detail::current_dump_scope();
  n.recompute_region = detail::current_recompute_region();
  const ir::NodeId node = g_.add(std::move(n), out);
  std::vector<Tensor> res;
  for (ir::ValueId v : g_.node(node).outputs) res.push_back(symbolic(v));
  return res;
}

Tensor TraceContext::record_elementwise(int op_id, std::span<const ops::EwTraceArg> args) {
  const ops::EwOpInfo& info = ops::ew_op_info(op_id);
  MS_CHECK(active_, ValueError, info.name, ": recorded into a finished trace");
  ir::Node n;
  n.kind = ir::NodeKind::Op;
  n.def = &ops::op(info.name);
  n.ew_id = op_id;
  std::vector<ir::Value> vals;
  std::vector<Scalar> scalars;
  for (const ops::EwTraceArg& a : args) {
    ir::ValueId v;
    if (a.tensor == nullptr) {
      ir::Node s;
      s.kind = ir::NodeKind::Scalar;
      s.scalar = a.scalar;
      v = g_.value_of(g_.add(std::move(s), {{a.scalar.default_dtype(), Shape{}}}, true));
    } else {
      v = value_of(*a.tensor, info.name);
    }
    n.inputs.push_back(v);
    vals.push_back(g_.value(v));
    scalars.push_back(a.scalar);
  }
  const ops::TensorType out = ir::infer_elementwise(op_id, vals, scalars);
  n.dump_scope = detail::current_dump_scope();
  n.recompute_region = detail::current_recompute_region();
  return symbolic(g_.value_of(g_.add(std::move(n), {out})));
}

std::vector<Tensor> TraceContext::replay(ir::NodeId node, std::span<const ir::ValueId> inputs) {
  MS_CHECK(active_, ValueError, "recompute: replayed into a finished trace");
  ir::Node n = g_.node(node);
  MS_CHECK(n.kind == ir::NodeKind::Op && inputs.size() == n.inputs.size(), ValueError,
           "recompute: can replay only an op node with as many inputs; given ", inputs.size(),
           " inputs for ", n.inputs.size());
  std::vector<ops::TensorType> types;
  for (ir::ValueId v : n.outputs) types.push_back(g_.value(v).type);
  n.inputs.assign(inputs.begin(), inputs.end());
  n.outputs.clear();
  n.recompute_region = -1;
  n.recomputed = true;
  const ir::NodeId id = g_.add(std::move(n), types);
  std::vector<Tensor> res;
  for (ir::ValueId v : g_.node(id).outputs) res.push_back(symbolic(v));
  return res;
}

void TraceContext::record_assign(const Tensor& dst, const Tensor& src, const char* what) {
  MS_CHECK(active_, ValueError, what, ": recorded into a finished trace");
  MS_CHECK(!dst.is_symbolic(), ValueError, what,
           ": cannot write in place into a value computed inside ms::jit; rebind it instead "
           "(`y = y + x`)");
  MS_CHECK(dst.defined() && src.defined(), ValueError, what, ": undefined tensor");
  if (dst.storage()->serial() >= first_serial_ && !src.is_symbolic()) {
    // A constant being built (e.g. `t = zeros(...); t.fill_(2)`): write it now.
    MS_CHECK(!bound(dst), ValueError, what,
             ": cannot write into a constant that the traced function already used");
    ops::Tracer* self = ops::set_active_tracer(nullptr);
    try {
      Tensor(dst).copy_(src);
    } catch (...) {
      ops::set_active_tracer(self);
      throw;
    }
    ops::set_active_tracer(self);
    return;
  }
  value_of(dst, what);  // registers the capture if new
  std::size_t bi = 0;
  while (!bound_[bi].tensor.is_same(dst)) ++bi;
  const ir::ValueId dst_capture = bound_[bi].value;
  MS_CHECK(g_.producer(dst_capture).kind == ir::NodeKind::Capture, ValueError, what,
           ": cannot write into a tensor created inside the traced function");
  // Writes convert and broadcast like copy_: record that as ops, then the update.
  Tensor v = src;
  if (v.dtype() != dst.dtype()) v = cast(v, dst.dtype());
  if (v.shape() != dst.shape()) v = broadcast_to(v, dst.shape());
  const ir::ValueId src_value = value_of(v, what);
  ir::Node n;
  n.kind = ir::NodeKind::Assign;
  n.inputs = {dst_capture, src_value};
  g_.add(std::move(n), {});
  bound_[bi].current = src_value;  // later reads see the written value
}

ir::Graph TraceContext::finish(std::span<const Tensor> outputs) {
  for (const Tensor& t : outputs) g_.outputs.push_back(value_of(t, "jit output"));
  deactivate();
  return std::move(g_);
}

}  // namespace ms::compiler
