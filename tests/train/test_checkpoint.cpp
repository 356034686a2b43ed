// Checkpoints: a failed load_checkpoint changes nothing, whichever entry is bad.
#include <doctest/doctest.h>

#include <unistd.h>
#include "temp_dir.hpp"

#include <filesystem>
#include <functional>
#include <ms/cell.hpp>
#include <ms/io/safetensors.hpp>
#include <ms/train/checkpoint.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct Net : ms::Cell<Net> {
  ms::nn::Dense fc1{5, 12}, fc2{12, 3};
  Net() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

// A model and a Momentum optimizer that has taken steps: every part of the
// state (weights, step, rate, moment buffers) differs from a fresh one.
struct Trained {
  Net net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
  explicit Trained(std::uint64_t seed) {
    ms::Generator g(seed);
    for (auto& p : net.parameters()) p.set_data(ms::normal(p.shape(), 0.0, 0.3, g));
    const ms::Tensor x = ms::normal({8, 5}, 0.0, 1.0, g);
    const ms::Tensor y = ms::argmax(x.slice(1, 0, 3), 1).to(ms::int32);
    for (int i = 0; i < 2 + static_cast<int>(seed % 3); ++i) {
      auto lf = [&](const ms::Tensor& a, const ms::Tensor& b) {
        return ms::nn::cross_entropy(net(a), b);
      };
      auto [loss, grads] =
          ms::value_and_grad(lf, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(grads);
    }
    opt.set_lr(0.01 * static_cast<double>(seed));
  }
};

// Everything load_checkpoint may change, copied.
struct Snapshot {
  std::vector<std::pair<std::string, ms::Tensor>> model, optim;
  ms::Tensor rng;
  Snapshot(const ms::CellBase& net, const ms::optim::Optimizer& opt) {
    for (const auto& [k, t] : net.state_dict()) model.emplace_back(k, t.clone());
    for (const auto& [k, t] : opt.state_dict()) optim.emplace_back(k, t.clone());
    rng = ms::default_generator().get_state();
  }
};

bool same(const Snapshot& a, const Snapshot& b) {
  auto eq = [](const auto& x, const auto& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i)
      if (x[i].first != y[i].first || !ms::allclose(x[i].second, y[i].second, 0, 0)) return false;
    return true;
  };
  return eq(a.model, b.model) && eq(a.optim, b.optim) &&
         a.rng.to_vector<std::int64_t>() == b.rng.to_vector<std::int64_t>();
}

// One way of spoiling one entry of a checkpoint.
struct Bad {
  std::string entry;  // the key it spoils
  std::string kind;   // "shape", "dtype" or "missing"
};

// The checkpoint at `good` with `b` applied, written to `out`.
void spoil(const std::string& good, const Bad& b, const std::string& out) {
  ms::io::SafetensorsFile f = ms::io::load_safetensors(good);
  ms::io::NamedTensors ts;
  bool found = false;
  for (auto& [k, t] : f.tensors) {
    if (k != b.entry) {
      ts.emplace_back(k, t);
      continue;
    }
    found = true;
    if (b.kind == "shape")
      ts.emplace_back(k, ms::zeros({t.numel() + 1}, t.dtype()));
    else if (b.kind == "dtype")
      ts.emplace_back(k, t.to(t.dtype() == ms::float32 ? ms::float64 : ms::int32));
    // "missing": left out
  }
  REQUIRE_MESSAGE(found, b.entry);
  ms::io::save_safetensors(out, ts, f.metadata);
}

}  // namespace

TEST_SUITE("train") {
  TEST_CASE("load_checkpoint: a bad entry anywhere is an error that changes nothing") {
    const ms::test::TempDir tmp("ms_test_ckpt_bad_entry");
    const fs::path& dir = tmp.path;
    const std::string good = (dir / "good.safetensors").string();
    {
      Trained saved(4);  // 3 steps, lr 0.04 (the live models below: 4 steps, lr 0.02)
      ms::manual_seed(11);
      (void)ms::uniform({7}, 0.0, 1.0);  // a generator offset that is not 0
      ms::save_checkpoint(good, saved.net, &saved.opt, {.epoch = 1, .global_step = 4});
    }
    std::vector<Bad> cases;
    for (const char* entry :
         {"fc1.weight", "fc2.bias", "optimizer.step", "optimizer.lr",
          "optimizer.fc1.weight.moments", "optimizer.fc2.bias.moments", "rng.default"})
      for (const char* kind : {"shape", "dtype", "missing"})
        if (std::string(entry) != "rng.default" || std::string(kind) != "missing")
          cases.push_back({entry, kind});
    for (const Bad& b : cases) {
      CAPTURE(b.entry);
      CAPTURE(b.kind);
      const std::string path = (dir / "bad.safetensors").string();
      spoil(good, b, path);
      Trained live(2);  // another state than the file's
      ms::manual_seed(99);
      (void)ms::uniform({3}, 0.0, 1.0);
      const Snapshot before(live.net, live.opt);
      CHECK_THROWS_AS(ms::load_checkpoint(path, live.net, &live.opt), ms::Error);
      CHECK(same(Snapshot(live.net, live.opt), before));
      CHECK(live.opt.lr() == doctest::Approx(0.02));
      CHECK(live.opt.step_count() == 4);
    }
    // The good file loads all of it (so the cases above failed for their entry).
    Trained live(2);
    ms::load_checkpoint(good, live.net, &live.opt);
    Trained saved(4);
    CHECK(ms::allclose(live.net.fc1.weight, saved.net.fc1.weight, 0, 0));
    CHECK(live.opt.step_count() == saved.opt.step_count());
    CHECK(live.opt.lr() == doctest::Approx(saved.opt.lr()));
  }

  TEST_CASE("load_checkpoint: the errors name the file, the entry, expected and given") {
    const ms::test::TempDir tmp("ms_test_ckpt_messages");
    const fs::path& dir = tmp.path;
    const std::string good = (dir / "good.safetensors").string();
    const std::string bad = (dir / "bad.safetensors").string();
    Trained saved(4);
    ms::save_checkpoint(good, saved.net, &saved.opt);
    Trained live(1);
    spoil(good, {"rng.default", "shape"}, bad);
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                         doctest::Contains("'rng.default' has shape [3], a generator state is [2]"),
                         ms::ShapeError);
    spoil(good, {"rng.default", "dtype"}, bad);
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                         doctest::Contains("'rng.default' has dtype Int32"), ms::TypeError);
    spoil(good, {"optimizer.fc1.bias.moments", "shape"}, bad);
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                         doctest::Contains("'optimizer.fc1.bias.moments' has shape [13], the "
                                           "Momentum optimizer's [12]"),
                         ms::ShapeError);
    spoil(good, {"optimizer.fc1.bias.moments", "missing"}, bad);
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                         doctest::Contains("entry 'optimizer.fc1.bias.moments' is missing"),
                         ms::ValueError);
    // A step count that is not a count, a rate that is not a rate.
    for (const auto& [key, value] : std::vector<std::pair<std::string, float>>{
             {"optimizer.step", -1.0f}, {"optimizer.step", 2.5f}, {"optimizer.lr", NAN}}) {
      CAPTURE(key);
      ms::io::SafetensorsFile f = ms::io::load_safetensors(good);
      for (auto& [k, t] : f.tensors)
        if (k == key) t = ms::full(ms::Shape{}, value, ms::float32);
      ms::io::save_safetensors(bad, f.tensors, f.metadata);
      CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                           doctest::Contains(("'" + key + "' = ").c_str()), ms::ValueError);
    }
    // An entry the optimizer does not have.
    {
      ms::io::SafetensorsFile f = ms::io::load_safetensors(good);
      f.tensors.emplace_back("optimizer.fc9.weight.moments", ms::zeros({2}));
      ms::io::save_safetensors(bad, f.tensors, f.metadata);
      CHECK_THROWS_WITH_AS(ms::load_checkpoint(bad, live.net, &live.opt),
                           doctest::Contains("'optimizer.fc9.weight.moments' is not an entry of "
                                             "the Momentum optimizer"),
                           ms::ValueError);
    }
  }
}
