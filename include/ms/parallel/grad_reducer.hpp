// ms/parallel/grad_reducer.hpp — data-parallel training: one model per rank,
// gradients averaged across the ranks inside the training step.
//
// Stage: parallel. MindSpore's data parallelism wraps the gradients of a train
// step in `nn.DistributedGradReducer`; ms does the same, so a single-process
// step becomes data-parallel by one line (`opt.apply(reducer(grads))`). The
// reducer checks at construction that every rank holds the same parameters
// (count, names, dtypes, shapes; an ms::ValueError naming the first mismatching
// parameter otherwise) and copies rank 0's values to every rank, so all ranks
// start from the same model.
//
// Gradients travel in buckets (about `bucket_bytes` each, 25 MB by default)
// filled from the last parameter backwards, the order backward computes them.
// Under ms::jit each gradient passes a host-callback node that copies it into
// its bucket as soon as backward has computed it; a full bucket starts its
// reduction (non-blocking MPI) while backward continues, and the node that
// returns the averaged gradients waits for the rest. Buckets start in a fixed
// order and each is reduced as a reduce-scatter followed by an all-gather, so
// every rank receives the very same bits and a run is reproducible.
//
//   ms::parallel::init();
//   MLP net;
//   ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
//   ms::parallel::DistributedGradReducer reducer(opt.parameters());  // rank 0's weights everywhere
//   auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
//     auto [loss, grads] = ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights =
//     opt.parameters()})(x, y); opt.apply(reducer(grads));                    // the mean of every
//     rank's gradients return loss;                                  // this rank's loss
//   });
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ms/core/tensor.hpp"
#include "ms/nn/parameter.hpp"
#include "ms/parallel/comm.hpp"

namespace ms::parallel {

/// Options of a DistributedGradReducer (`{.bucket_bytes = 1 << 20}`).
struct GradReducerOptions {
  /// Average the gradients (MindSpore's `mean=True`); else sum them.
  bool mean = true;
  /// Bytes per bucket (> 0); a parameter larger than this gets a bucket of its own.
  std::int64_t bucket_bytes = std::int64_t{25} << 20;
  /// Copy rank 0's parameter values to every rank at construction.
  bool broadcast = true;
};

namespace detail {
struct ReducerState;
}

/// Sums or averages gradients across the ranks, in buckets (see the header comment).
/// Example: `opt.apply(reducer(grads));`
class DistributedGradReducer {
 public:
  /// Collective: every rank constructs it with its own copies of the same
  /// parameters (ValueError naming the first parameter that differs from rank
  /// 0's, or a bad option). Floating parameters only (TypeError otherwise).
  explicit DistributedGradReducer(const ParameterList& params, GradReducerOptions options = {});

  /// The gradients of `params` (one per parameter, same order, dtype and
  /// shape; ValueError / ShapeError / TypeError naming the parameter
  /// otherwise), reduced across the ranks. Eager or under ms::jit.
  std::vector<Tensor> operator()(const std::vector<Tensor>& grads) const;

  /// The buckets in reduction order, each the indices of its parameters.
  const std::vector<std::vector<std::size_t>>& buckets() const;
  /// The options it was made with.
  const GradReducerOptions& options() const;
  /// Steps reduced so far, and how many buckets started their reduction
  /// before the step's last gradient arrived (overlapping the rest of backward).
  std::int64_t steps() const;
  /// The number of buckets whose reduction started early, over all steps.
  std::int64_t early_starts() const;

 private:
  std::shared_ptr<detail::ReducerState> state_;
};

/// Collective: checks that every rank holds the same parameters (count, then
/// each parameter's name, dtype and shape, in order) and copies rank `root`'s
/// values into every rank's parameters. ValueError on every rank, naming the
/// first mismatching parameter and the rank, when a model differs.
void broadcast_parameters(const ParameterList& params, int root = 0);

}  // namespace ms::parallel
