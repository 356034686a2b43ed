// bench/torch_convert.hpp — ms tensors into LibTorch ones, for the benchmarks
// that run both (bench_common.hpp) and the LibTorch twins (gpt_torch.hpp).
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "ms/core/tensor.hpp"

namespace bench {

/// A float32 LibTorch copy of a float32 ms tensor (LibTorch owns its memory).
inline torch::Tensor to_torch(const ms::Tensor& t) {
  const ms::Tensor c = t.contiguous();
  std::vector<std::int64_t> sizes(c.shape().begin(), c.shape().end());
  return torch::from_blob(c.data<float>(), sizes, torch::kFloat32).clone();
}

}  // namespace bench
