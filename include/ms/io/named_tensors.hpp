// ms/io/named_tensors.hpp — the ordered (name, tensor) list the io stage saves and loads.
//
// Stage: io. Shared by ms/io/safetensors.hpp and ms/io/npy.hpp (npz archives).
// It is the nn stage's ms::StateDict, so what a file holds is looked up by name
// as a cell's state dict is: `ms::io::load_npz("w.npz")["fc.weight"]`.
#pragma once

#include "ms/nn/state_dict.hpp"

namespace ms::io {

/// Tensors with their names, in order, indexable by name (a state dict).
/// Example: `ms::io::NamedTensors s = {{"fc.weight", w}, {"fc.bias", b}};`
using NamedTensors = ms::StateDict;

}  // namespace ms::io
