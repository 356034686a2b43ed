#include "ms/autodiff/gradcheck.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "ms/autodiff/grad.hpp"
#include "ms/jit/compile.hpp"
#include "ms/jit/trace.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::testing {

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          std::vector<Tensor> inputs, const GradcheckOptions& opts) {
  std::vector<bool> diff(inputs.size(), true);
  for (int s : opts.skip) diff.at(static_cast<std::size_t>(s)) = false;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (dtype_is_float(inputs[i].dtype())) inputs[i] = inputs[i].to(float64);
    diff[i] = diff[i] && inputs[i].dtype() == float64;
  }
  // Fixed random weights reduce the output to a scalar.
  const Tensor probe = fn(inputs);
  std::mt19937 rng(12345);
  std::vector<double> wv(static_cast<std::size_t>(probe.numel()));
  for (double& w : wv) w = std::uniform_real_distribution<double>(0.5, 1.5)(rng);
  const Tensor weights = from_vector(wv, probe.shape());
  auto scalar_fn = [&](const std::vector<Tensor>& xs) {
    return sum(Tensor(fn(xs).to(float64) * weights));
  };

  // Analytic: trace, differentiate, run.
  std::vector<Tensor> analytic;
  {
    compiler::TraceContext tc;
    for (const Tensor& x : inputs) tc.bind_input(x);
    const Tensor y = scalar_fn(inputs);
    std::vector<Tensor> wrt;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      if (diff[i]) wrt.push_back(inputs[i]);
    std::vector<Tensor> g = autodiff::backward(tc, 0, y, wrt);
    ir::Graph graph = tc.finish(g);
    compiler::optimize(graph, {.verify = true});
    analytic = compiler::Executable(std::move(graph)).run(inputs);
  }

  GradcheckResult res;
  std::size_t k = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!diff[i]) continue;
    const Tensor a = analytic[k++].contiguous();
    const Tensor x = inputs[i].clone();
    std::vector<Tensor> xs = inputs;
    xs[i] = x;
    double* p = x.data<double>();
    for (std::int64_t e = 0; e < x.numel(); ++e) {
      const double v = p[e];
      p[e] = v + opts.eps;
      const double fp = scalar_fn(xs).item<double>();
      p[e] = v - opts.eps;
      const double fm = scalar_fn(xs).item<double>();
      p[e] = v;
      const double num = (fp - fm) / (2 * opts.eps);
      const double an = a.data<double>()[e];
      const double err = std::abs(an - num);
      res.max_error = std::max(res.max_error, err);
      if (res.ok && !(err <= opts.atol + opts.rtol * std::abs(num))) {
        res.ok = false;
        res.message = ::ms::detail::str_cat("gradcheck: input ", i, " element ", e, ": analytic ",
                                            an, " vs numeric ", num);
      }
    }
  }
  return res;
}

}  // namespace ms::testing
