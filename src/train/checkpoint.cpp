// Checkpoints of ms/train/checkpoint.hpp.
#include "ms/train/checkpoint.hpp"

#include <charconv>

#include "ms/core/random.hpp"
#include "ms/io/safetensors.hpp"

namespace ms {
namespace {

constexpr std::string_view kOpt = "optimizer.";
constexpr std::string_view kRng = "rng.default";

std::int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key,
                      const std::string& path) {
  auto it = m.find(key);
  if (it == m.end()) return 0;
  std::int64_t v = 0;
  const auto& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  MS_CHECK(ec == std::errc() && p == s.data() + s.size() && v >= 0, ValueError,
           "load_checkpoint: ", path, ": metadata '", key, "' = '", s,
           "' is not a non-negative integer");
  return v;
}

}  // namespace

void save_checkpoint(const std::string& path, const CellBase& net, const optim::Optimizer* opt,
                     const CheckpointInfo& info) {
  io::NamedTensors all;
  for (auto& [k, t] : net.state_dict()) {
    MS_CHECK(k.rfind(kOpt, 0) != 0 && k != kRng, ValueError, "save_checkpoint: model key '", k,
             "' collides with the optimizer / generator entries");
    all.emplace_back(k, t);
  }
  if (opt != nullptr) {
    for (auto& [k, t] : opt->state_dict()) all.emplace_back(std::string(kOpt) + k, t);
    all.emplace_back(std::string(kRng), default_generator().get_state());
  }
  std::map<std::string, std::string> meta = info.extra;
  meta["format"] = "ms.checkpoint.v1";
  meta["epoch"] = std::to_string(info.epoch);
  meta["step"] = std::to_string(info.step);
  meta["global_step"] = std::to_string(info.global_step);
  if (opt != nullptr) meta["optimizer"] = opt->name();
  io::save_safetensors(path, all, meta);
}

CheckpointInfo load_checkpoint(const std::string& path, CellBase& net, optim::Optimizer* opt,
                               bool strict) {
  io::SafetensorsFile f = io::load_safetensors(path);  // validated as a whole
  CheckpointInfo info;
  info.epoch = meta_int(f.metadata, "epoch", path);
  info.step = meta_int(f.metadata, "step", path);
  info.global_step = meta_int(f.metadata, "global_step", path);
  for (auto& [k, v] : f.metadata)
    if (k != "epoch" && k != "step" && k != "global_step" && k != "format" && k != "optimizer")
      info.extra[k] = v;
  StateDict model, optim_sd;
  Tensor rng;
  for (auto& [k, t] : f.tensors) {
    if (k.rfind(kOpt, 0) == 0)
      optim_sd.emplace_back(k.substr(kOpt.size()), t);
    else if (k == kRng)
      rng = t;
    else
      model.emplace_back(k, t);
  }
  if (opt != nullptr) {
    MS_CHECK(!optim_sd.empty(), ValueError, "load_checkpoint: ", path,
             " holds no optimizer state (saved without one)");
    auto it = f.metadata.find("optimizer");
    MS_CHECK(it == f.metadata.end() || it->second == opt->name(), ValueError,
             "load_checkpoint: ", path, " holds the state of a ", it->second,
             " optimizer, not of a ", opt->name());
  }
  // All-or-nothing across model, optimizer and generator: keep the model's
  // values, and put them back if a later part fails.
  StateDict before;
  for (auto& [k, t] : net.state_dict()) before.emplace_back(k, t.clone());
  const Tensor rng_before = default_generator().get_state();
  net.load_state_dict(model, strict);
  try {
    if (opt != nullptr) opt->load_state_dict(optim_sd);
    if (opt != nullptr && rng.defined()) default_generator().set_state(rng);
  } catch (...) {
    net.load_state_dict(before, false);
    default_generator().set_state(rng_before);
    throw;
  }
  return info;
}

}  // namespace ms
