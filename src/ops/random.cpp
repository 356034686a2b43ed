// The Random op: random functions (ms/core/random.hpp) under a trace.
//
// A random function called while tracing records one `Random` node whose
// attribute `fn` names its draw (a closure over the function's arguments and
// its generator, kept by id in the table of host callbacks). The node's data
// inputs are the tensors the draw reads (dropout's input for its shape,
// bernoulli's probabilities); a last input chains it to the trace's previous
// Random node, so that every execution order (bfs, dfs) draws in the order the
// function called them, which is what makes a jitted function draw the eager
// function's numbers. Passes never fold, merge or drop a Random node.
#include <memory>

#include "ms/core/error.hpp"
#include "ms/core/random.hpp"
#include "ms/ops/host.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops {
namespace {

struct Draw {
  ::ms::detail::RandomDrawFn fn;
  std::string label;
};

std::shared_ptr<const Draw> find(std::int64_t id) {
  return std::static_pointer_cast<const Draw>(detail::find_closure(id, "random"));
}

// The trace's last Random node (its output), to chain the next one to.
struct LastDraw {
  std::uint32_t trace = 0;
  Tensor value;
};
thread_local LastDraw t_last;

Tensor dropout_result(const ::ms::detail::TracedRandom& r, const Tensor& drawn);

Tensor record(::ms::detail::TracedRandom r) {
  Tracer* tracer = active_tracer();
  MS_CHECK(tracer != nullptr, ValueError, r.label, ": recorded without an active trace");
  if (r.drawn.defined()) return r.dropout_scale ? dropout_result(r, r.drawn) : r.drawn;
  static const OpDef& def = op("random");
  const std::int64_t id =
      detail::keep_closure(std::make_shared<const Draw>(Draw{std::move(r.draw), r.label}));
  std::vector<Tensor> in = r.inputs;
  const auto data = static_cast<std::int64_t>(in.size());
  const bool chained = t_last.trace == tracer->trace_id() && t_last.value.defined();
  if (chained) in.push_back(t_last.value);
  Attrs attrs{{"fn", id}, {"label", r.label}, {"dtype", r.dtype}, {"data_inputs", data}};
  if (data == 0) attrs.set("shape", r.shape.dims());
  Tensor drawn = call1(def, in, attrs);
  t_last = {tracer->trace_id(), drawn};
  return r.dropout_scale ? dropout_result(r, drawn) : drawn;
}

// where(drop, 0, x * scale) in float32 (float64): eager dropout's numbers.
Tensor dropout_result(const ::ms::detail::TracedRandom& r, const Tensor& drawn) {
  static const OpDef& mul = op("mul");
  static const OpDef& where = op("where");
  const Tensor& x = r.inputs[0];
  const DType ct = x.dtype() == float64 ? float64 : float32;
  const Tensor kept = call1(mul, {x.to(ct), full({}, *r.dropout_scale, ct)});
  return call1(where, {drawn, zeros({}, ct), kept}).to(x.dtype());
}

std::vector<TensorType> infer(std::span<const TensorType> in, const Attrs& attrs) {
  (void)attrs.get<std::int64_t>("fn", "random");
  const auto data = attrs.get<std::int64_t>("data_inputs", "random");
  MS_CHECK(data >= 0 && static_cast<std::size_t>(data) <= in.size() &&
               in.size() <= static_cast<std::size_t>(data) + 1,
           ValueError, "random: ", in.size(), " inputs for ", data, " data inputs");
  const DType dtype = attrs.get<DType>("dtype", "random");
  if (data > 0) return {{dtype, in[0].shape}};
  return {{dtype, Shape(attrs.get<std::vector<std::int64_t>>("shape", "random"))}};
}

}  // namespace

namespace detail {
void register_random_ops();
void register_random_ops() {
  registry_add({
      .name = "random",
      .ir_name = "Random",
      .kind = OpKind::Random,
      .min_inputs = 0,
      .max_inputs = -1,
      // The numbers do not depend on the inputs' values in a differentiable way
      // (dropout's input gives a shape, bernoulli's a threshold): zero gradient.
      .differentiable = false,
      .infer = infer,
      .eval =
          [](std::span<const Tensor> in, const Attrs& attrs) {
            const std::vector<TensorType> want = infer(types_of(in), attrs);
            const auto d = find(attrs.get<std::int64_t>("fn", "random"));
            const auto data =
                static_cast<std::size_t>(attrs.get<std::int64_t>("data_inputs", "random"));
            Tensor out = d->fn(in.first(data), want[0].shape);
            MS_CHECK(out.dtype() == want[0].dtype && out.shape() == want[0].shape, ValueError,
                     d->label, ": drew ", out.dtype(), out.shape(), " where the graph expects ",
                     want[0].dtype, want[0].shape);
            return std::vector<Tensor>{std::move(out)};
          },
  });
  ::ms::detail::set_random_trace_fn(record);
}
}  // namespace detail

}  // namespace ms::ops
