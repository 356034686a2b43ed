// ms/io/named_tensors.hpp — the ordered (name, tensor) list the io stage saves and loads.
//
// Stage: io. Shared by ms/io/safetensors.hpp and ms/io/npy.hpp (npz archives).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ms/core/tensor.hpp"

namespace ms::io {

/// Tensors with their names, in order (a state dict).
/// Example: `ms::io::NamedTensors s = {{"fc.weight", w}, {"fc.bias", b}};`
using NamedTensors = std::vector<std::pair<std::string, ms::Tensor>>;

}  // namespace ms::io
