// ms/data/dataset.hpp — an in-memory dataset of (sample, label) pairs.
//
// Stage: data. A TensorDataset holds two tensors with the same first dim N:
// `x` ([N, ...], uint8 or floating) and `y` ([N], integer labels). Datasets
// that load everything into memory (ms::data::FashionMNIST) are TensorDatasets,
// and ms::data::DataLoader batches any TensorDataset.
//
//   ms::data::TensorDataset ds(ms::zeros({100, 8}), ms::zeros({100}, ms::int32));
//   ms::data::Sample s = ds.get(3);   // s.x: [8] (a view), s.y: 0
#pragma once

#include <cstdint>

#include "ms/core/tensor.hpp"

namespace ms::data {

/// One sample: `x` a view of row i (no copy), `y` its label.
struct Sample {
  /// The sample: a view of row i of the dataset's x.
  Tensor x;
  /// Its label.
  std::int64_t y;
};

/// Samples `x[i]` with labels `y[i]`, both kept in memory (sharing the storage of
/// the tensors given).
/// Example: `ms::data::TensorDataset ds(images, labels); auto n = ds.size();`
class TensorDataset {
 public:
  TensorDataset() = default;
  /// `x`: rank >= 1, dtype uint8 or floating; `y`: rank 1, an integer dtype;
  /// x.dim(0) == y.dim(0). ShapeError / TypeError / ValueError (undefined or
  /// symbolic tensors) naming the argument otherwise.
  TensorDataset(Tensor x, Tensor y);

  /// The number of samples N.
  std::int64_t size() const { return y_.defined() ? y_.dim(0) : 0; }
  /// All samples, [N, ...].
  const Tensor& x() const { return x_; }
  /// All labels, [N].
  const Tensor& y() const { return y_; }
  /// Sample `i` (0 <= i < size(), else ms::IndexError).
  Sample get(std::int64_t i) const;

 private:
  Tensor x_, y_;
};

}  // namespace ms::data
