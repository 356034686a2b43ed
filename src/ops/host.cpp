// The HostCallback op: see ms/ops/host.hpp.
#include "ms/ops/host.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"
#include "ms/ops/op.hpp"

namespace ms::ops {
namespace {

struct Callback {
  HostFn fn;
  std::string label;
  GradHookFn grad_fn = {};
  CustomGradFn custom_fn = {};
};

// Closures recorded into traces, by id (see detail::keep_closure).
std::mutex g_mu;
std::unordered_map<std::int64_t, std::shared_ptr<const void>> g_closures;
std::int64_t g_next = 1;

std::shared_ptr<const Callback> find(std::int64_t id) {
  return std::static_pointer_cast<const Callback>(detail::find_closure(id, "host_callback"));
}

std::vector<Tensor> run(const Callback& cb, std::span<const Tensor> in) {
  std::vector<Tensor> args(in.begin(), in.end());
  // User code allocates from the system, not from a compiled graph's arena:
  // a tensor it keeps (an activation statistic, a saved gradient) must not
  // point into memory the next run reuses.
  struct SourceGuard {
    std::shared_ptr<StorageSource> prev = set_storage_source(nullptr);
    ~SourceGuard() { set_storage_source(std::move(prev)); }
  } guard;
  std::vector<Tensor> out = cb.fn(args);
  MS_CHECK(out.size() == in.size(), ValueError, "host_callback '", cb.label, "': returned ",
           out.size(), " tensors for ", in.size(), " inputs");
  for (std::size_t i = 0; i < out.size(); ++i) {
    MS_CHECK(out[i].defined() && !out[i].is_symbolic(), ValueError, "host_callback '", cb.label,
             "': output ", i, " is undefined or symbolic");
    MS_CHECK(out[i].dtype() == in[i].dtype() && out[i].shape() == in[i].shape(), ValueError,
             "host_callback '", cb.label, "': output ", i, " is ", out[i].dtype(), out[i].shape(),
             " but must keep its input's type ", in[i].dtype(), in[i].shape());
  }
  return out;
}

// Both ops give their outputs the types of their inputs.
std::vector<TensorType> same_types(std::span<const TensorType> in, const Attrs& attrs,
                                   std::string_view op) {
  (void)attrs.get<std::int64_t>("fn", op);
  return std::vector<TensorType>(in.begin(), in.end());
}

// Registers `cb` under a fresh id and records a node of `def` that refers to it.
std::vector<Tensor> record(const OpDef& def, std::shared_ptr<const Callback> cb,
                           std::span<const Tensor> inputs) {
  const std::int64_t id = detail::keep_closure(cb);
  return call(def, inputs, Attrs{{"fn", id}, {"label", cb->label}});
}

}  // namespace

std::vector<Tensor> grad_hook(GradHookFn fn, std::vector<Tensor> inputs, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "grad_hook '", label, "': empty function");
  MS_CHECK(!inputs.empty(), ValueError, "grad_hook '", label, "': needs at least one tensor");
  if (active_tracer() == nullptr) return inputs;
  auto cb = std::make_shared<Callback>(Callback{{}, std::move(label), std::move(fn)});
  static const OpDef& def = op("grad_hook");
  return record(def, std::move(cb), inputs);
}

Tensor custom_grad(CustomGradFn fn, std::vector<Tensor> inputs, Tensor out, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "custom_grad '", label, "': empty function");
  MS_CHECK(!inputs.empty(), ValueError, "custom_grad '", label, "': needs at least one input");
  MS_CHECK(out.defined(), ValueError, "custom_grad '", label, "': undefined output");
  if (active_tracer() == nullptr) return out;
  auto cb = std::make_shared<Callback>(Callback{{}, std::move(label), {}, std::move(fn)});
  inputs.push_back(std::move(out));
  static const OpDef& def = op("custom_grad");
  return record(def, std::move(cb), inputs)[0];
}

std::size_t host_callbacks_alive() {
  std::lock_guard lock(g_mu);
  return g_closures.size();
}

namespace detail {
std::int64_t keep_closure(std::shared_ptr<const void> closure) {
  std::lock_guard lock(g_mu);
  const std::int64_t id = g_next++;
  g_closures.emplace(id, std::move(closure));
  return id;
}

std::shared_ptr<const void> find_closure(std::int64_t id, std::string_view op) {
  std::lock_guard lock(g_mu);
  auto it = g_closures.find(id);
  MS_CHECK(it != g_closures.end(), ValueError, op, ": no closure with id ", id);
  return it->second;
}

void register_host_ops();
void register_host_ops() {
  registry_add({
      .name = "host_callback",
      .ir_name = "HostCallback",
      .kind = OpKind::HostCallback,
      .min_inputs = 1,
      .max_inputs = -1,
      .differentiable = true,
      .infer = [](std::span<const TensorType> in,
                  const Attrs& attrs) { return same_types(in, attrs, "host_callback"); },
      .eval =
          [](std::span<const Tensor> in, const Attrs& attrs) {
            return run(*find(attrs.get<std::int64_t>("fn", "host_callback")), in);
          },
      .grad =
          [](const GradContext& c) {
            return std::vector<Tensor>(c.out_grads.begin(), c.out_grads.end());
          },
  });
  registry_add({
      .name = "grad_hook",
      .ir_name = "GradHook",
      .kind = OpKind::HostCallback,
      .min_inputs = 1,
      .max_inputs = -1,
      .differentiable = true,
      .infer = [](std::span<const TensorType> in,
                  const Attrs& attrs) { return same_types(in, attrs, "grad_hook"); },
      .eval = [](std::span<const Tensor> in,
                 const Attrs&) { return std::vector<Tensor>(in.begin(), in.end()); },
      .grad =
          [](const GradContext& c) {
            auto cb = find(c.attrs.get<std::int64_t>("fn", "grad_hook"));
            std::vector<Tensor> g(c.out_grads.begin(), c.out_grads.end());
            for (std::size_t i = 0; i < g.size(); ++i)
              if (!g[i].defined()) g[i] = zeros(c.outputs[i].shape(), c.outputs[i].dtype());
            std::vector<Tensor> r = cb->grad_fn(std::move(g));
            MS_CHECK(r.size() == c.inputs.size(), ValueError, "grad_hook '", cb->label,
                     "': returned ", r.size(), " gradients for ", c.inputs.size(), " inputs");
            return r;
          },
  });
  // Inputs x..., out; forward: out. Gradient: the callback's for x..., none
  // for out, so the ops that computed out are not differentiated.
  registry_add({
      .name = "custom_grad",
      .ir_name = "CustomGrad",
      .kind = OpKind::HostCallback,
      .min_inputs = 2,
      .max_inputs = -1,
      .differentiable = true,
      .infer =
          [](std::span<const TensorType> in, const Attrs& attrs) {
            (void)attrs.get<std::int64_t>("fn", "custom_grad");
            return std::vector<TensorType>{in.back()};
          },
      .eval = [](std::span<const Tensor> in,
                 const Attrs&) { return std::vector<Tensor>{in.back()}; },
      .grad =
          [](const GradContext& c) {
            auto cb = find(c.attrs.get<std::int64_t>("fn", "custom_grad"));
            const std::size_t n = c.inputs.size() - 1;
            std::vector<Tensor> r =
                cb->custom_fn(std::vector<Tensor>(c.inputs.begin(), c.inputs.end() - 1),
                              c.outputs[0], c.out_grads[0]);
            MS_CHECK(r.size() == n, ValueError, cb->label, ": returned ", r.size(),
                     " gradients, expected ", n, " (one per tensor input)");
            for (std::size_t i = 0; i < n; ++i) {
              if (!r[i].defined()) continue;
              const Tensor& x = c.inputs[i];
              MS_CHECK(r[i].shape() == x.shape(), ShapeError, cb->label, ": the gradient of input ",
                       i, " has shape ", r[i].shape(), ", expected ", x.shape(), " (the input's)");
              MS_CHECK(r[i].dtype() == x.dtype(), TypeError, cb->label, ": the gradient of input ",
                       i, " has dtype ", r[i].dtype(), ", expected ", x.dtype(), " (the input's)");
            }
            r.emplace_back();  // out: no gradient
            return r;
          },
  });
}
}  // namespace detail

std::vector<Tensor> host_call(HostFn fn, std::vector<Tensor> inputs, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "host_call '", label, "': empty function");
  MS_CHECK(!inputs.empty(), ValueError, "host_call '", label, "': needs at least one tensor");
  auto cb = std::make_shared<Callback>(Callback{std::move(fn), std::move(label)});
  if (active_tracer() == nullptr) {
    for (const Tensor& t : inputs)
      MS_CHECK(t.defined(), ValueError, "host_call '", cb->label, "': undefined input");
    return run(*cb, inputs);
  }
  static const OpDef& def = op("host_callback");
  return record(def, std::move(cb), inputs);
}

}  // namespace ms::ops
