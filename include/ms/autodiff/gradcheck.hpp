// ms/autodiff/gradcheck.hpp — finite-difference checks of gradients.
//
// Stage: autodiff. `ms::testing::gradcheck(fn, inputs)` compares the analytic
// gradient of fn (through ms::grad's machinery) with central finite
// differences, all in float64. A non-scalar output is reduced with fixed
// random weights first, so the check covers the whole Jacobian-vector product.
//
//   auto r = ms::testing::gradcheck(
//       [](const std::vector<ms::Tensor>& x) { return ms::Tensor(ms::tanh(x[0]) * x[1]); },
//       {ms::tensor({0.3, -1.2}), ms::tensor({2.0, 0.5})});
//   CHECK(r.ok);   // r.message says which input and element differ
#pragma once

#include <string>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/core/tensor.hpp"

namespace ms::testing {

/// Step and tolerances of gradcheck: an analytic entry `a` matches the numeric `n`
/// when |a - n| <= atol + rtol * |n|.
struct GradcheckOptions {
  /// The central-difference step.
  double eps = 1e-6;
  /// Absolute tolerance.
  double atol = 1e-5;
  /// Relative tolerance.
  double rtol = 1e-4;
  /// Inputs not to differentiate (indices), e.g. integer indices or masks.
  std::vector<int> skip = {};
};

/// What gradcheck found.
struct GradcheckResult {
  /// Whether every gradient entry matched.
  bool ok = true;
  std::string message;  ///< the first mismatch: input, element, analytic vs numeric
  /// The largest |analytic - numeric| seen over all entries.
  double max_error = 0;
};

/// `fn` maps the inputs (floating inputs are converted to float64) to a tensor.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          std::vector<Tensor> inputs, const GradcheckOptions& opts = {});

}  // namespace ms::testing
