// ms/parallel/collective.hpp — collectives on tensors across the ranks of a run.
//
// Stage: parallel. Each collective takes this rank's tensor and returns a new
// one; every rank must call the same collectives in the same order with the
// same dtype and shape (a small header is exchanged first, so a mismatch is an
// ms::ShapeError / TypeError / ValueError on every rank, not a hang). Eagerly
// they run at once; under ms::jit they are host-callback nodes (ms::ops::
// host_call) that run each time the graph runs. They are not differentiated:
// a gradient flows through them unchanged (host callbacks are the identity
// for gradients). Without mpirun (1 rank) each returns a copy of its input.
//
//   ms::Tensor g = ms::parallel::all_reduce(local, ms::parallel::ReduceOp::Mean);
//   ms::Tensor w = ms::parallel::broadcast(weights, 0);          // rank 0's values everywhere
//   ms::Tensor all = ms::parallel::all_gather(x);                // [p * n, ...]
//   ms::Tensor part = ms::parallel::reduce_scatter(x);           // [n / p, ...], summed
#pragma once

#include <cstdint>

#include "ms/core/tensor.hpp"
#include "ms/parallel/comm.hpp"

namespace ms::parallel {

/// How all_reduce and reduce_scatter combine the ranks' values.
/// Sum: every dtype but bool and int4. Max: integers and floating types.
/// Mean: the sum divided by world_size(), floating and complex types only.
enum class ReduceOp : std::uint8_t { Sum, Mean, Max };

/// Every rank gets the elementwise reduction of all ranks' `x` (same dtype and shape).
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum);
/// Every rank gets rank `root`'s `x` (root in [0, world_size()), else
/// IndexError; every rank passes a tensor of the same dtype and shape and the
/// same root). Any dtype but int4.
Tensor broadcast(const Tensor& x, int root = 0);
/// The ranks' `x` stacked along axis 0 in rank order: [p * n, ...] for x of
/// shape [n, ...], [p] for a 0-d x. Any dtype but int4.
Tensor all_gather(const Tensor& x);
/// The reduction of all ranks' `x` (shape [n, ...], n divisible by p, else
/// ShapeError), cut along axis 0 into p blocks; rank r gets block r, [n / p, ...].
Tensor reduce_scatter(const Tensor& x, ReduceOp op = ReduceOp::Sum);

}  // namespace ms::parallel
