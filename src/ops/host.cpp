// The host-callback ops (see ms/ops/host.hpp): entries private to this file,
// since users reach them only through host_call, grad_hook and custom_grad.
#include "ms/ops/host.hpp"

#include <memory>
#include <mutex>
#include <unordered_map>

#include "ms/core/error.hpp"
#include "ms/core/storage.hpp"
#include "ms/ops/detail/entry_impl.hpp"
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

// The attributes of the three nodes: the closure's id and its label (dumps).
struct HostAttrs {
  std::int64_t fn = -1;
  std::string label = {};
  static void fields(auto&& visit) {
    visit("fn", &HostAttrs::fn);
    visit("label", &HostAttrs::label);
  }
};

using Types = std::span<const TensorType>;
using Inputs = std::span<const Tensor>;
using TensorList = std::vector<Tensor>;

// Runs closure `fn` on its inputs each time the graph runs. For gradients it is
// the identity: its outputs' gradients flow to its inputs unchanged.
struct HostCallback {
  static constexpr std::string_view name = "host_callback";
  static constexpr std::string_view ir_name = "HostCallback";
  static constexpr OpKind kind = OpKind::HostCallback;
  static constexpr Arity arity{1, -1};
  static constexpr Props props{.may_alias = true};
  using Attrs = HostAttrs;
  static std::vector<TensorType> infer(const Attrs&, Types in) { return {in.begin(), in.end()}; }
  static TensorList eval(const Attrs& a, Inputs in) { return run(*find(a.fn), in); }
  static TensorList vjp(const Attrs&, const GradContext& c) {
    return {c.out_grads.begin(), c.out_grads.end()};
  }
  static Samples samples();
};

// Passes its inputs through; when a gradient is traced through it, closure
// `fn` maps its outputs' gradients (zeros where none flows) to its inputs'.
struct GradHook {
  static constexpr std::string_view name = "grad_hook";
  static constexpr std::string_view ir_name = "GradHook";
  static constexpr OpKind kind = OpKind::HostCallback;
  static constexpr Arity arity{1, -1};
  static constexpr Props props{.may_alias = true};
  using Attrs = HostAttrs;
  static std::vector<TensorType> infer(const Attrs&, Types in) { return {in.begin(), in.end()}; }
  static TensorList eval(const Attrs&, Inputs in) { return {in.begin(), in.end()}; }
  static TensorList vjp(const Attrs& a, const GradContext& c) {
    auto cb = find(a.fn);
    TensorList g(c.out_grads.begin(), c.out_grads.end());
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!g[i].defined()) g[i] = zeros(c.outputs[i].shape(), c.outputs[i].dtype());
    TensorList r = cb->grad_fn(std::move(g));
    MS_CHECK(r.size() == c.inputs.size(), ValueError, "grad_hook '", cb->label, "': returned ",
             r.size(), " gradients for ", c.inputs.size(), " inputs");
    return r;
  }
  static Samples samples();
};

// Inputs x..., out; forward: out. Gradient: closure `fn`'s for x..., none for
// out, so the ops that computed out are not differentiated. No samples: its
// gradient is by design not the derivative of its forward, which is what the
// table-driven gradient check compares (tests/ops/test_host.cpp tests it).
struct CustomGrad {
  static constexpr std::string_view name = "custom_grad";
  static constexpr std::string_view ir_name = "CustomGrad";
  static constexpr OpKind kind = OpKind::HostCallback;
  static constexpr Arity arity{2, -1};
  static constexpr Props props{.may_alias = true};
  using Attrs = HostAttrs;
  static std::vector<TensorType> infer(const Attrs&, Types in) { return {in.back()}; }
  static TensorList eval(const Attrs&, Inputs in) { return {in.back()}; }
  static TensorList vjp(const Attrs& a, const GradContext& c) {
    auto cb = find(a.fn);
    const std::size_t n = c.inputs.size() - 1;
    TensorList r = cb->custom_fn(TensorList(c.inputs.begin(), c.inputs.end() - 1), c.outputs[0],
                                 c.out_grads[0]);
    MS_CHECK(r.size() == n, ValueError, cb->label, ": returned ", r.size(), " gradients, expected ",
             n, " (one per tensor input)");
    for (std::size_t i = 0; i < n; ++i) {
      if (!r[i].defined()) continue;
      const Tensor& x = c.inputs[i];
      MS_CHECK(r[i].shape() == x.shape(), ShapeError, cb->label, ": the gradient of input ", i,
               " has shape ", r[i].shape(), ", expected ", x.shape(), " (the input's)");
      MS_CHECK(r[i].dtype() == x.dtype(), TypeError, cb->label, ": the gradient of input ", i,
               " has dtype ", r[i].dtype(), ", expected ", x.dtype(), " (the input's)");
    }
    r.emplace_back();  // out: no gradient
    return r;
  }
};

std::int64_t keep(Callback cb) {
  return detail::keep_closure(std::make_shared<const Callback>(std::move(cb)));
}

Samples HostCallback::samples() {
  const std::int64_t observe = keep({[](std::vector<Tensor> v) { return v; }, "observe"});
  const std::int64_t twice = keep({[](std::vector<Tensor> v) {
                                     std::vector<double> d = v[0].to_vector<double>();
                                     for (double& x : d) x *= 2;
                                     return std::vector<Tensor>{from_vector(d, v[0].shape())};
                                   },
                                   "twice"});
  const std::int64_t none =
      keep({[](std::vector<Tensor>) { return std::vector<Tensor>{}; }, "none"});
  const std::int64_t flat = keep({[](std::vector<Tensor> v) {
                                    return std::vector<Tensor>{zeros({v[0].numel()}, v[0].dtype())};
                                  },
                                  "flat"});
  const Tensor a = detail::sample_tensor({3, 4}, 41, -2, 2, float64);
  const Tensor b = detail::sample_tensor({2}, 42, -2, 2, float64);
  return {
      .cases = {detail::sample("observes two inputs", {a, b}, Attrs{observe, "observe"}, {a, b},
                               {0, 1}),
                detail::sample("doubles on the host", {tensor({1.5, -2.0}, float64)},
                               Attrs{twice, "twice"}, {tensor({3.0, -4.0}, float64)})},
      .errors = {detail::error_sample("returns nothing", {a}, Attrs{none, "none"}, "ms::ValueError",
                                      "host_callback 'none': returned 0 tensors for 1 inputs"),
                 detail::error_sample("changes the shape", {a}, Attrs{flat, "flat"},
                                      "ms::ValueError", "must keep its input's type")}};
}

Samples GradHook::samples() {
  const std::int64_t id = keep({{}, "id", [](std::vector<Tensor> g) { return g; }});
  const Tensor a = detail::sample_tensor({3, 4}, 43, -2, 2, float64);
  return {
      .cases = {detail::sample("identity, forward and backward", {a}, Attrs{id, "id"}, {a}, {0})}};
}

// Registers `cb` under a fresh id and records a node of entry E that refers to it.
template <class E>
std::vector<Tensor> record(std::shared_ptr<const Callback> cb, std::span<const Tensor> inputs) {
  const std::int64_t id = detail::keep_closure(cb);
  return invoke<E>(inputs, {id, cb->label});
}

}  // namespace

std::vector<Tensor> grad_hook(GradHookFn fn, std::vector<Tensor> inputs, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "grad_hook '", label, "': empty function");
  MS_CHECK(!inputs.empty(), ValueError, "grad_hook '", label, "': needs at least one tensor");
  if (active_tracer() == nullptr) return inputs;
  auto cb = std::make_shared<Callback>(Callback{{}, std::move(label), std::move(fn)});
  return record<GradHook>(std::move(cb), inputs);
}

Tensor custom_grad(CustomGradFn fn, std::vector<Tensor> inputs, Tensor out, std::string label) {
  MS_CHECK(static_cast<bool>(fn), ValueError, "custom_grad '", label, "': empty function");
  MS_CHECK(!inputs.empty(), ValueError, "custom_grad '", label, "': needs at least one input");
  MS_CHECK(out.defined(), ValueError, "custom_grad '", label, "': undefined output");
  if (active_tracer() == nullptr) return out;
  auto cb = std::make_shared<Callback>(Callback{{}, std::move(label), {}, std::move(fn)});
  inputs.push_back(std::move(out));
  return record<CustomGrad>(std::move(cb), inputs)[0];
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
void register_host_ops() { register_entries<HostCallback, GradHook, CustomGrad>(); }
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
  return record<HostCallback>(std::move(cb), inputs);
}

}  // namespace ms::ops
