// ms/train/checkpoint.hpp — model + optimizer + training position in one safetensors file.
//
// Stage: train. The file holds the model's state dict under its own names
// (`fc1.weight`, ... — loadable by any safetensors reader), the optimizer's
// state under `optimizer.` (`optimizer.step`, `optimizer.fc1.weight.moments`),
// the default generator's state as `rng.default`, and the training position
// in the metadata (`epoch`, `step`, `global_step`, plus user entries). Saving
// is atomic (a failure leaves the previous file intact); loading validates the
// file and every entry first and changes nothing unless all of it fits.
//
//   ms::save_checkpoint("mlp.safetensors", net, &opt, {.epoch = 2, .step = 0});
//   ms::CheckpointInfo at = ms::load_checkpoint("mlp.safetensors", net, &opt);
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "ms/nn/cell.hpp"
#include "ms/nn/optim.hpp"

namespace ms {

/// Where training was when a checkpoint was saved.
struct CheckpointInfo {
  std::int64_t epoch = 0;        ///< the epoch to resume at
  std::int64_t step = 0;         ///< steps of that epoch already done
  std::int64_t global_step = 0;  ///< steps done in all
  /// Further metadata by name, saved and loaded as it is (e.g.
  /// ms::train::CosineSchedule::save_to writes its length here).
  std::map<std::string, std::string> extra = {};
};

/// Saves `net` (and `opt` and the default generator, when given) to `path`.
void save_checkpoint(const std::string& path, const CellBase& net,
                     const optim::Optimizer* opt = nullptr, const CheckpointInfo& info = {});

/// Loads `path` into `net` (and `opt`, and the default generator when the file
/// has its state). strict: missing or unexpected model keys are errors.
/// Every entry is checked before anything is written: the optimizer's (each
/// key present once, no other, shapes and dtypes as `opt`'s, a step count and
/// a rate that are numbers >= 0) and the generator state (Int64 [2]), then the
/// model's (load_state_dict checks all before it writes). On any error
/// nothing is changed: model, optimizer step, rate and buffers, generator.
CheckpointInfo load_checkpoint(const std::string& path, CellBase& net,
                               optim::Optimizer* opt = nullptr, bool strict = true);

}  // namespace ms
