// Checkpoints: a failed load_checkpoint changes nothing, whichever entry is bad.
#include <doctest/doctest.h>

#include <unistd.h>
#include "temp_dir.hpp"
#include "train/net.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <ms/cell.hpp>
#include <ms/io/safetensors.hpp>
#include <ms/train/checkpoint.hpp>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

using ms_test::Net;

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

// A model with extra state: a vocabulary (bytes) in the head, a float
// history in the root.
struct Vocab : ms::Cell<Vocab> {
  ms::nn::Dense fc{3, 2};
  std::string words = "";
  Vocab() { register_cells("fc", fc); }
  ms::Tensor construct(const ms::Tensor& x) { return fc(x); }
  ms::Tensor get_extra_state() const override { return ms::extra_state_from_string(words); }
  void set_extra_state(const ms::Tensor& t) override { words = ms::extra_state_to_string(t); }
};
struct WithState : ms::Cell<WithState> {
  Vocab head;
  std::vector<double> history;
  WithState() { register_cells("head", head); }
  ms::Tensor construct(const ms::Tensor& x) { return head(x); }
  ms::Tensor get_extra_state() const override {
    return ms::from_vector(history, ms::Shape{static_cast<std::int64_t>(history.size())});
  }
  void set_extra_state(const ms::Tensor& t) override { history = t.to_vector<double>(); }
};

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
  TEST_CASE("checkpoint: extra state saved and loaded through the file") {
    const ms::test::TempDir tmp("ms_test_ckpt_extra_state");
    const std::string path = tmp.file("extra.safetensors");
    WithState a;
    a.head.words = "the quick brown fox";
    a.history = {0.5, 0.25, 0.125};
    a.head.fc.weight.set_data(ms::full({2, 3}, 0.75));
    ms::save_checkpoint(path, a);
    // The file holds the entries under their state-dict keys, as uint8 and float64 tensors.
    const ms::io::SafetensorsFile file = ms::io::load_safetensors(path);
    bool saw_head = false, saw_root = false;
    for (const auto& [k, t] : file.tensors) {
      if (k == "head._extra_state") {
        saw_head = true;
        CHECK(t.dtype() == ms::uint8);
        CHECK(t.numel() == 19);
      }
      if (k == "_extra_state") {
        saw_root = true;
        CHECK(t.dtype() == ms::float64);
      }
    }
    CHECK(saw_head);
    CHECK(saw_root);
    WithState b;
    ms::load_checkpoint(path, b);
    CHECK(b.head.words == "the quick brown fox");
    CHECK(b.history == std::vector<double>{0.5, 0.25, 0.125});
    CHECK(ms::allclose(b.head.fc.weight, a.head.fc.weight, 0, 0));
    // A file without the extra state (the same layers, no get_extra_state):
    // strict reports its keys missing and changes nothing; non-strict loads the rest.
    struct PlainHead : ms::Cell<PlainHead> {
      ms::nn::Dense fc{3, 2};
      PlainHead() { register_cells("fc", fc); }
      ms::Tensor construct(const ms::Tensor& x) { return fc(x); }
    };
    struct Plain : ms::Cell<Plain> {
      PlainHead head;
      Plain() { register_cells("head", head); }
      ms::Tensor construct(const ms::Tensor& x) { return head(x); }
    } plain;
    plain.head.fc.weight.set_data(ms::full({2, 3}, -1.0));
    const std::string plain_path = tmp.file("plain.safetensors");
    ms::save_checkpoint(plain_path, plain);
    WithState c;
    c.head.words = "kept";
    const ms::Tensor w0 = c.head.fc.weight.clone();
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(plain_path, c),
                         doctest::Contains("'head._extra_state'"), ms::ValueError);
    CHECK(c.head.words == "kept");
    CHECK(ms::allclose(c.head.fc.weight, w0, 0, 0));
    ms::load_checkpoint(plain_path, c, nullptr, /*strict=*/false);
    CHECK(c.head.words == "kept");
    CHECK(ms::allclose(c.head.fc.weight, plain.head.fc.weight, 0, 0));
  }

  TEST_CASE("checkpoint of an O2 net: float32 masters saved; a load reaches the jitted step") {
    const ms::test::TempDir tmp("ms_test_ckpt_amp_o2");
    const std::string path = tmp.file("o2.safetensors");
    ms::default_generator().manual_seed(31);
    Net net;
    ms::amp::auto_mixed_precision(net, "O2", ms::bfloat16);
    ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.5, .momentum = 0.9});
    ms::Generator g(4);
    const ms::Tensor x = ms::normal(ms::Shape{6, 5}, 0.0, 1.0, g).to(ms::float32);
    const ms::Tensor y = ms::tensor({0, 1, 2, 0, 1, 2}).to(ms::int32);
    auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
      return ms::nn::cross_entropy(net(a), b);
    };
    auto step = ms::jit([&](const ms::Tensor& a, const ms::Tensor& b) {
      auto [loss, grads] = ms::value_and_grad(
          loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(a, b);
      opt.apply(grads);
      return ms::Tensor(loss);
    });
    step(x, y);
    ms::save_checkpoint(path, net, &opt);
    const ms::io::SafetensorsFile file = ms::io::load_safetensors(path);
    int weights = 0;
    for (const auto& [k, t] : file.tensors)
      if (k.rfind("fc", 0) == 0) {
        ++weights;
        CHECK(t.dtype() == ms::float32);
      }
    CHECK(weights == 4);
    const double at_save = loss_fn(x, y).item<double>();
    for (int i = 0; i < 3; ++i) step(x, y);  // the weights move on (lr 0.5)
    CHECK(std::abs(loss_fn(x, y).item<double>() - at_save) > 1e-3);
    ms::load_checkpoint(path, net, &opt);
    // The jitted step computes from the loaded masters, not from the
    // bfloat16 weights of the last step.
    CHECK(std::abs(step(x, y).item<double>() - at_save) <= 1e-5 * std::max(1.0, at_save));
    CHECK(step.compile_count() == 1);
  }
}
