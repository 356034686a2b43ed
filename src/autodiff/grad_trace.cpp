// The trace of one ms::grad / ms::value_and_grad call (autodiff::detail::GradTrace):
// the enclosing trace, or an eager one compiled and run at once.
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ms/autodiff/grad.hpp"
#include "ms/core/warning.hpp"
#include "ms/ir/graph.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/trace.hpp"

namespace ms::autodiff::detail {

GradTrace::GradTrace() : tc_(dynamic_cast<compiler::TraceContext*>(ops::active_tracer())) {
  if (tc_ == nullptr) {
    own_ = std::make_unique<compiler::TraceContext>();
    tc_ = own_.get();
  }
}

GradTrace::~GradTrace() = default;

void GradTrace::bind_input(const Tensor& t) {
  MS_CHECK(eager(), ValueError,
           "grad: GradTrace::bind_input: expected an eager trace, given the trace of an enclosing "
           "function");
  tc_->bind_input(t);
  bound_.push_back(t);
}

std::size_t GradTrace::mark() const { return tc_->graph().nodes.size(); }

std::vector<Tensor> GradTrace::gradients(std::size_t first_node, std::span<const Tensor> outputs,
                                         std::span<const Tensor* const> args,
                                         std::span<const int> position,
                                         std::span<const Tensor> weights, bool has_aux,
                                         bool warn_unused, const Tensor* sens,
                                         std::string_view api) {
  MS_CHECK(!outputs.empty(), ValueError, api, ": the function returns no tensor");
  MS_CHECK(has_aux || outputs.size() == 1, ValueError, api, ": the function returns ",
           outputs.size(),
           " tensors; differentiate one, or pass {.has_aux = true} to differentiate the first");
  if (sens != nullptr)
    check_sens(outputs[0], *sens, api);
  else
    check_output(outputs[0], api);
  std::vector<Tensor> wrt;
  for (int p : position) {
    MS_CHECK(p >= 0 && static_cast<std::size_t>(p) < args.size(), IndexError, api,
             ": grad_position ", p, " is out of range for a function of ", args.size(),
             " arguments");
    const Tensor* arg = args[static_cast<std::size_t>(p)];
    MS_CHECK(arg != nullptr, TypeError, api, ": argument ", p,
             " is not a tensor and cannot be differentiated");
    check_wrt(*arg, "argument " + std::to_string(p), api);
    wrt.push_back(*arg);
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    check_wrt(weights[i], "weight " + std::to_string(i), api);
    wrt.push_back(weights[i]);
  }
  std::vector<bool> reached;
  std::vector<Tensor> grads = backward(*tc_, first_node, outputs[0], wrt, sens, &reached);
  if (warn_unused)
    for (std::size_t i = 0; i < weights.size(); ++i)
      if (!reached[position.size() + i]) {
        const std::string& label = weights[i].storage()->label();
        warn(::ms::detail::str_cat(api, ": weight ", i,
                                   label.empty() ? std::string() : " '" + label + "'",
                                   " gets no gradient (the function does not use it, or only "
                                   "through non-differentiable ops); its gradient is zeros"));
      }
  return grads;
}

std::vector<Tensor> GradTrace::run(std::span<const Tensor> outputs) {
  MS_CHECK(
      eager(), ValueError,
      "grad: GradTrace::run: expected an eager trace, given the trace of an enclosing function");
  ir::Graph g = tc_->finish(outputs);
  compiler::optimize(g, {});
  return compiler::Executable(std::move(g)).run(bound_);
}

}  // namespace ms::autodiff::detail
