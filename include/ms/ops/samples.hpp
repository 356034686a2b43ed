// ms/ops/samples.hpp — the samples an op entry gives the table-driven tests.
//
// Stage: ops. For entry authors and tests: an entry's `samples()` returns
// these (defined beside its kernels in src/ops/), tests/ops/test_entries.cpp
// runs them. Kept apart from ms/ops/op.hpp so that a user's file, which
// never builds samples, does not compile them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ms/ops/op.hpp"

namespace ms::ops {

/// One sample of an op, for the table-driven tests (tests/ops/test_entries.cpp):
/// inputs and attributes, and what the test checks of them.
struct Sample {
  /// What the case covers (shown when it fails).
  std::string label;
  /// The inputs.
  std::vector<Tensor> inputs;
  /// The attributes.
  Attrs attrs = {};
  /// The outputs' values (compared to `tol`, 0: bitwise); empty: not compared.
  std::vector<Tensor> expected = {};
  /// The largest allowed |output - expected| (0: bitwise equal).
  double tol = 0;
  /// Inputs the finite-difference gradient check differentiates (floating
  /// inputs, run in float64); empty: no gradient check of this sample.
  std::vector<int> grad_inputs = {};
  /// @{
  /// The gradient check's step and absolute tolerance (larger where an op
  /// rounds through a narrower dtype).
  double grad_eps = 1e-6, grad_atol = 1e-5;
  /// @}
};

/// A bad call of an op and the error it must raise.
struct ErrorSample {
  /// What the case tries (shown when it fails).
  std::string label;
  /// The inputs of the bad call.
  std::vector<Tensor> inputs;
  /// The attributes of the bad call.
  Attrs attrs = {};
  std::string_view kind;  ///< Error::kind() of the error, e.g. "ms::ShapeError"
  std::string message;    ///< a part of its message
};

/// An op's samples: calls that must work (checked forward, eagerly against
/// `ms::jit` at O0 and O1, and by gradcheck) and calls that must fail.
struct Samples {
  /// Calls that must work.
  std::vector<Sample> cases;
  /// Calls that must fail, with their errors.
  std::vector<ErrorSample> errors = {};
};

}  // namespace ms::ops
