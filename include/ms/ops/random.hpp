// ms/ops/random.hpp — random tensors drawn from an ms::Generator, and the
// Random op that records them under ms::jit.
//
// Stage: ops (the nn stage's initializers and dropout layers draw from here;
// the Generator itself is core's, ms/core/random.hpp). Every function
// validates its arguments, reserves the Philox blocks it needs with one
// Generator::step, then fills element i from block `offset + i / k` (k
// elements per block), so any chunking, hence any thread count, yields the
// same numbers.
//
//   ms::manual_seed(42);
//   ms::Tensor w = ms::normal({256, 784}, 0.0, 0.02);      // float32
//   ms::Tensor h = ms::dropout(x, 0.5, net.training());
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ms/core/random.hpp"
#include "ms/core/tensor.hpp"
#include "ms/ops/entry.hpp"

namespace ms {

// ------------------------------------------------------------------ random tensors
// Each function draws from `gen` (the default generator when omitted). Floating
// results are computed in float32 (float64 for float64) and rounded on store for
// float16 / bfloat16. ValueError for bad parameters, TypeError for a dtype the
// function cannot produce, naming the function, the argument, expected vs given.

/// Uniform in [low, high) (float16 / bfloat16 may round up to `high`). Needs finite low < high.
/// Example: `ms::uniform({2, 3}, -1.0, 1.0)`.
Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, DType dtype = float32);
/// As above, drawing from `gen`.
Tensor uniform(const Shape& shape, double low, double high, Generator& gen, DType dtype = float32);

/// Normal N(mean, std^2) by the Box-Muller transform. Needs std >= 0.
/// Example: `ms::normal({128, 64}, 0.0, 0.02)`.
Tensor normal(const Shape& shape, double mean = 0.0, double std = 1.0, DType dtype = float32);
/// As above, drawing from `gen`.
Tensor normal(const Shape& shape, double mean, double std, Generator& gen, DType dtype = float32);

/// Normal N(mean, std^2) conditioned on [a, b] (absolute bounds, as PyTorch's
/// trunc_normal_ and MindSpore's TruncatedNormal), by inverting the CDF: one
/// draw per element, no rejection. Needs std >= 0 and a < b.
/// Example: `ms::truncated_normal({64, 64}, 0.0, 1.0, -2.0, 2.0)`.
Tensor truncated_normal(const Shape& shape, double mean = 0.0, double std = 1.0, double a = -2.0,
                        double b = 2.0, DType dtype = float32);
/// As above, drawing from `gen`.
Tensor truncated_normal(const Shape& shape, double mean, double std, double a, double b,
                        Generator& gen, DType dtype = float32);

/// 1 with probability p, else 0, in `dtype` (bool, integer or floating). Needs p in [0, 1].
/// Example: `ms::bernoulli({10}, 0.3)`.
Tensor bernoulli(const Shape& shape, double p = 0.5, DType dtype = float32);
/// As above, drawing from `gen`.
Tensor bernoulli(const Shape& shape, double p, Generator& gen, DType dtype = float32);
/// Element i is 1 with probability probs[i] (a floating tensor with values in
/// [0, 1]); the result has the shape and dtype of `probs`.
/// Example: `ms::bernoulli(ms::full({3}, 0.25))`.
Tensor bernoulli(const Tensor& probs);
/// As above, drawing from `gen`.
Tensor bernoulli(const Tensor& probs, Generator& gen);

/// Integers uniform in [low, high), int64 by default (any integer dtype whose
/// range holds [low, high - 1]).
/// Example: `ms::randint(0, 10, {5})`.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, DType dtype = int64);
/// As above, drawing from `gen`.
Tensor randint(std::int64_t low, std::int64_t high, const Shape& shape, Generator& gen,
               DType dtype = int64);

/// A random permutation of 0 .. n-1 (Fisher-Yates), int64 by default (integer
/// or floating dtypes that hold n - 1 exactly).
/// Example: `ms::randperm(5)` may give [3, 0, 4, 1, 2].
Tensor randperm(std::int64_t n, DType dtype = int64);
/// As above, drawing from `gen`.
Tensor randperm(std::int64_t n, Generator& gen, DType dtype = int64);

/// Inverted dropout: each element is zeroed with probability p and the others
/// are scaled by 1 / (1 - p); with `training` false or p == 0 returns `x`
/// itself, with p == 1 zeros. `x` must be floating. Needs p in [0, 1].
/// Example: `ms::dropout(h, 0.5, net.training())`.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// As above, drawing from `gen`.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen);

}  // namespace ms

namespace ms::ops {

// ------------------------------------------------------------------ under ms::jit
// While a trace is active (ms::jit, ms::grad), a random function does not draw:
// it records a `Random` node that draws each time the graph runs, from the same
// generator and in the order the function called them, so a jitted function
// draws exactly the numbers the eager one would and each call advances the
// generator's offset. The generator is held by identity (as a captured
// parameter): it must outlive the compiled function, as it must outlive a
// Dropout cell that holds it. A generator created inside the traced function
// is the exception (Generator::created_in_trace): its draws are constants.
//
/// The node a random function records while tracing: `fn` names its draw (a
/// closure over the function's arguments and its generator, kept by id in the
/// table of host callbacks, ms/ops/host.hpp), `label` names it in dumps. Its
/// first `data_inputs` inputs are the tensors the draw reads (dropout's input
/// for its shape, bernoulli's probabilities); one more input chains it to the
/// trace's previous Random node, so that every execution order draws in the
/// order the function called them. Without data inputs the output has `shape`.
/// Passes never fold, merge or drop it. Not differentiable: the numbers do not
/// depend on the inputs' values in a differentiable way (zero gradient).
struct Random {
  /// The op-table name.
  static constexpr std::string_view name = "random";
  /// The name in graph dumps.
  static constexpr std::string_view ir_name = "Random";
  /// The op's family.
  static constexpr OpKind kind = OpKind::Random;
  /// How many inputs it takes.
  static constexpr Arity arity{0, -1};
  /// What passes and tests may assume of it.
  static constexpr Props props{.differentiable = false, .random = true};
  /// What the recorded draw is.
  struct Attrs {
    /// The draw's id in the table of host callbacks.
    std::int64_t fn = -1;
    /// The name shown in dumps.
    std::string label = {};
    /// The output dtype.
    DType dtype = float32;
    /// How many leading inputs the draw reads.
    std::int64_t data_inputs = 0;
    /// The output shape when there is no data input.
    std::optional<std::vector<std::int64_t>> shape = {};
    /// Each attribute's name and member, for dumps and export.
    static void fields(auto&& visit) {
      visit("fn", &Attrs::fn);
      visit("label", &Attrs::label);
      visit("dtype", &Attrs::dtype);
      visit("data_inputs", &Attrs::data_inputs);
      visit("shape", &Attrs::shape);
    }
  };
  /// Output dtypes and shapes; checks the inputs (an ms::Error naming the op).
  static std::vector<TensorType> infer(const Attrs& a, std::span<const TensorType> in);
  /// Computes the outputs.
  static std::vector<Tensor> eval(const Attrs& a, std::span<const Tensor> in);
  /// The cases the table-driven tests run (tests/ops/test_entries.cpp).
  static Samples samples();
};

}  // namespace ms::ops
