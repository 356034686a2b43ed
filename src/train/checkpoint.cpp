// Checkpoints of ms/train/checkpoint.hpp.
#include "ms/train/checkpoint.hpp"

#include <charconv>
#include <cmath>
#include <unordered_map>

#include "ms/io/safetensors.hpp"
#include "ms/ops/random.hpp"

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

namespace {

// Checks the optimizer entries of a file against `opt` as
// Optimizer::load_state_dict would, without loading them: every key present
// once, no other key, the same shapes and dtypes, and a usable step and rate.
void check_optimizer_state(const std::string& path, const optim::Optimizer& opt,
                           const StateDict& given) {
  std::unordered_map<std::string, const Tensor*> by_key;
  for (const auto& [k, t] : given)
    MS_CHECK(by_key.emplace(k, &t).second, ValueError, "load_checkpoint: ", path, ": '", kOpt, k,
             "' appears twice (nothing was loaded)");
  const StateDict mine = opt.state_dict();
  for (const auto& [k, t] : mine) {
    auto it = by_key.find(k);
    MS_CHECK(it != by_key.end(), ValueError, "load_checkpoint: ", path, ": the ", opt.name(),
             " optimizer's entry '", kOpt, k, "' is missing (nothing was loaded)");
    const Tensor& s = *it->second;
    MS_CHECK(s.shape() == t.shape(), ShapeError, "load_checkpoint: ", path, ": '", kOpt, k,
             "' has shape ", s.shape(), ", the ", opt.name(), " optimizer's ", t.shape(),
             " (nothing was loaded)");
    MS_CHECK(s.dtype() == t.dtype(), TypeError, "load_checkpoint: ", path, ": '", kOpt, k,
             "' has dtype ", s.dtype(), ", the ", opt.name(), " optimizer's ", t.dtype(),
             " (nothing was loaded)");
    if (k == "step" || k == "lr") {
      const double v = s.item<double>();
      MS_CHECK(std::isfinite(v) && v >= 0.0 && (k == "lr" || v == std::floor(v)), ValueError,
               "load_checkpoint: ", path, ": '", kOpt, k, "' = ", v, " is not ",
               k == "lr" ? "a finite rate >= 0" : "a step count (an integer >= 0)",
               " (nothing was loaded)");
    }
  }
  if (given.size() == mine.size()) return;  // every key of `mine` was found once
  std::unordered_map<std::string, int> known;
  for (const auto& [k, t] : mine) known.emplace(k, 0);
  for (const auto& [k, t] : given)
    MS_CHECK(known.count(k) != 0, ValueError, "load_checkpoint: ", path, ": '", kOpt, k,
             "' is not an entry of the ", opt.name(), " optimizer (", given.size() - mine.size(),
             " unexpected; nothing was loaded)");
}

// The generator state must be what Generator::get_state makes.
void check_rng_state(const std::string& path, const Tensor& rng) {
  MS_CHECK(rng.dtype() == int64, TypeError, "load_checkpoint: ", path, ": '", kRng, "' has dtype ",
           rng.dtype(), ", a generator state is Int64 (nothing was loaded)");
  MS_CHECK(rng.shape() == Shape{2}, ShapeError, "load_checkpoint: ", path, ": '", kRng,
           "' has shape ", rng.shape(), ", a generator state is [2] {seed, offset}",
           " (nothing was loaded)");
}

}  // namespace

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
  // Validate everything first, then apply: the optimizer's entries and the
  // generator state are checked before the model is touched, and the model's
  // load_state_dict checks all of its entries before it writes any.
  if (opt != nullptr) {
    MS_CHECK(!optim_sd.empty(), ValueError, "load_checkpoint: ", path,
             " holds no optimizer state (saved without one)");
    auto it = f.metadata.find("optimizer");
    MS_CHECK(it == f.metadata.end() || it->second == opt->name(), ValueError,
             "load_checkpoint: ", path, " holds the state of a ", it->second,
             " optimizer, not of a ", opt->name());
    check_optimizer_state(path, *opt, optim_sd);
    if (rng.defined()) check_rng_state(path, rng);
  }
  // What is put back if applying fails all the same (an allocation, a load
  // hook of the model): the model's values, the optimizer's, the generator's.
  StateDict before, opt_before;
  for (auto& [k, t] : net.state_dict()) before.emplace_back(k, t.clone());
  if (opt != nullptr)
    for (auto& [k, t] : opt->state_dict()) opt_before.emplace_back(k, t.clone());
  const Tensor rng_before = default_generator().get_state();
  net.load_state_dict(model, strict);
  try {
    if (opt != nullptr) opt->load_state_dict(optim_sd);
    if (opt != nullptr && rng.defined()) default_generator().set_state(rng);
  } catch (...) {
    net.load_state_dict(before, false);
    if (opt != nullptr) opt->load_state_dict(opt_before);
    default_generator().set_state(rng_before);
    throw;
  }
  return info;
}

}  // namespace ms
