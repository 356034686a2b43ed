// The training loop, its callbacks, and checkpoints that resume exactly.
#include <doctest/doctest.h>

#include "io/memory_file_system.hpp"
#include "temp_dir.hpp"
#include "train/net.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <ms/cell.hpp>
#include <ms/core/warning.hpp>
#include <ms/data/dataloader.hpp>
#include <ms/io/safetensors.hpp>
#include <ms/train/checkpoint.hpp>
#include <ms/train/fit.hpp>
#include <numbers>
#include <sstream>

namespace {

namespace fs = std::filesystem;

using ms_test::Net;

// 100 samples of 5 features; the class is the argmax of the first 3.
ms::data::TensorDataset toy() {
  ms::Generator g(3);
  ms::Tensor x = ms::normal({100, 5}, 0.0, 1.0, g);
  ms::Tensor y = ms::argmax(x.slice(1, 0, 3), 1).to(ms::int32);
  return ms::data::TensorDataset(x, y);
}

struct Setup {
  Net net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
  decltype(ms::jit(std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)>{})) step;
  explicit Setup(std::uint64_t seed) : step(make()) {
    ms::Generator g(seed);
    for (auto& p : net.parameters()) p.set_data(ms::normal(p.shape(), 0.0, 0.3, g));
  }
  std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)> fn() {
    return [this](const ms::Tensor& x, const ms::Tensor& y) {
      auto lf = [&](const ms::Tensor& a, const ms::Tensor& b) {
        return ms::nn::cross_entropy(net(a), b);
      };
      auto [loss, grads] =
          ms::value_and_grad(lf, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
      opt.apply(grads);
      return loss;
    };
  }
  decltype(ms::jit(std::function<ms::Tensor(const ms::Tensor&, const ms::Tensor&)>{})) make() {
    return ms::jit(fn());
  }
};

/// The cells of a CSV file, row by row (empty cells kept).
std::vector<std::vector<std::string>> read_csv(const fs::path& path) {
  std::ifstream f(path);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(f, line);) {
    std::vector<std::string> cells(1);
    for (char c : line) {
      if (c == ',')
        cells.emplace_back();
      else
        cells.back().push_back(c);
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

/// The bias-corrected moving average of losses[0..n) with decay b, as a
/// weighted mean: sum b^(n-1-k) l_k / sum b^(n-1-k).
double ema_of(const std::vector<double>& losses, std::size_t n, double b) {
  double num = 0, den = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const double w = std::pow(b, static_cast<double>(n - 1 - k));
    num += w * losses[k];
    den += w;
  }
  return num / den;
}

struct Recorder : ms::train::Callback {
  std::vector<std::string> events;
  void on_train_begin(ms::train::TrainState&) override { events.push_back("begin"); }
  void on_epoch_begin(ms::train::TrainState& s) override {
    events.push_back("epoch" + std::to_string(s.epoch));
  }
  void on_step_end(ms::train::TrainState& s) override {
    if (s.step == 1) events.push_back("step1");
  }
  void on_epoch_end(ms::train::TrainState& s) override {
    events.push_back("end" + std::to_string(s.epoch));
  }
  void on_train_end(ms::train::TrainState&) override { events.push_back("done"); }
};

}  // namespace

TEST_SUITE("train") {
  TEST_CASE("fit runs every batch of every epoch and tells the callbacks in order") {
    const auto ds = toy();
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 4});
    Setup s(1);
    auto rec = std::make_shared<Recorder>();
    int evals = 0;
    auto ev = std::make_shared<ms::train::Evaluate>(
        [&] {
          ++evals;
          return 0.5;
        },
        "acc", false);
    const auto r = ms::train::fit(s.step, loader, {.epochs = 3, .callbacks = {rec, ev}});
    CHECK(r.step_loss.size() == 3 * 7);  // ceil(100 / 16) = 7
    CHECK(r.epoch_loss.size() == 3);
    CHECK(r.epoch_loss[2] < r.epoch_loss[0]);  // it learns
    CHECK(evals == 3);
    CHECK(r.epoch_metrics[1].at("acc") == 0.5);
    CHECK(rec->events == std::vector<std::string>{"begin", "epoch0", "step1", "end0", "epoch1",
                                                  "step1", "end1", "epoch2", "step1", "end2",
                                                  "done"});
    CHECK(s.step.compile_count() == 2);  // batches of 16 and the last of 4
    CHECK(s.opt.step_count() == 21);
  }

  TEST_CASE("train N steps, save, load into a fresh model, train M: the same losses as N + M") {
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_resume");
    const fs::path& dir = tmp.path;
    const std::string ckpt = (dir / "c.safetensors").string();
    // Uninterrupted: 3 epochs.
    std::vector<double> full;
    {
      ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 9});
      Setup s(2);
      full = ms::train::fit(s.step, loader, {.epochs = 3}).step_loss;
    }
    // Interrupted after epoch 1 and 3 steps of epoch 2, resumed in a new model.
    std::vector<double> first, second;
    {
      ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 9});
      Setup s(2);
      struct StopAt : ms::train::Callback {
        std::int64_t at;
        explicit StopAt(std::int64_t a) : at(a) {}
        void on_step_end(ms::train::TrainState& st) override { st.stop = st.global_step == at; }
      };
      auto stop = std::make_shared<StopAt>(7 + 3);
      ms::train::TrainState last;
      struct Keep : ms::train::Callback {
        ms::train::TrainState* out;
        void on_step_end(ms::train::TrainState& st) override { *out = st; }
      };
      auto keep = std::make_shared<Keep>();
      keep->out = &last;
      first = ms::train::fit(s.step, loader, {.epochs = 3, .callbacks = {keep, stop}}).step_loss;
      REQUIRE(first.size() == 10);
      ms::save_checkpoint(
          ckpt, s.net, &s.opt,
          {.epoch = last.epoch, .step = last.step, .global_step = last.global_step});
    }
    {
      ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 9});
      Setup s(77);  // other initial weights: the checkpoint must replace them all
      const ms::CheckpointInfo at = ms::load_checkpoint(ckpt, s.net, &s.opt);
      CHECK(at.epoch == 1);
      CHECK(at.step == 3);
      CHECK(at.global_step == 10);
      second = ms::train::fit(s.step, loader,
                              {.epochs = 3, .initial_epoch = at.epoch, .initial_step = at.step})
                   .step_loss;
    }
    std::vector<double> joined = first;
    joined.insert(joined.end(), second.begin(), second.end());
    REQUIRE(joined.size() == full.size());
    for (std::size_t i = 0; i < full.size(); ++i)
      CHECK(joined[i] == doctest::Approx(full[i]).epsilon(1e-6));
  }

  TEST_CASE("load_checkpoint changes nothing on error; the file is a plain safetensors file") {
    const ms::test::TempDir tmp("ms_test_train_bad");
    const fs::path& dir = tmp.path;
    const std::string path = (dir / "m.safetensors").string();
    Setup a(3);
    ms::save_checkpoint(path, a.net, &a.opt, {.epoch = 2, .extra = {{"note", "hi"}}});
    const auto f = ms::io::load_safetensors(path);
    CHECK(f.metadata.at("epoch") == "2");
    CHECK(f.metadata.at("note") == "hi");
    CHECK(ms::allclose(f.at("fc1.weight"), a.net.fc1.weight, 0, 0));
    CHECK(f.at("optimizer.fc1.weight.moments").shape() == ms::Shape({12, 5}));
    // A model of another shape: ShapeError, and nothing of b changed.
    struct Other : ms::Cell<Other> {
      ms::nn::Dense fc1{5, 12}, fc2{12, 4};
      Other() { register_cells("fc1", fc1, "fc2", fc2); }
      ms::Tensor construct(const ms::Tensor& x) { return fc2(fc1(x)); }
    } b;
    const ms::Tensor before = b.fc1.weight.clone();
    CHECK_THROWS_AS(ms::load_checkpoint(path, b), ms::ShapeError);
    CHECK(ms::allclose(b.fc1.weight, before, 0, 0));
    // An optimizer of another kind: error, and the model is put back as it was.
    Setup c(4);
    const ms::Tensor cw = c.net.fc1.weight.clone();
    ms::optim::Adam adam(c.net.trainable_params());
    CHECK_THROWS_WITH_AS(ms::load_checkpoint(path, c.net, &adam),
                         doctest::Contains("state of a Momentum optimizer, not of a Adam"),
                         ms::ValueError);
    CHECK(ms::allclose(c.net.fc1.weight, cw, 0, 0));
    // A truncated file: an error naming the file; the old checkpoint is still loadable.
    {
      std::ifstream in(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), {});
      std::ofstream out((dir / "t.safetensors").string(), std::ios::binary);
      out << bytes.substr(0, bytes.size() - 10);
    }
    CHECK_THROWS_AS(ms::load_checkpoint((dir / "t.safetensors").string(), c.net), ms::Error);
    CHECK(ms::allclose(c.net.fc1.weight, cw, 0, 0));
  }

  TEST_CASE("Checkpoint callback keeps the last K; CurveWriter writes CSV and SVG") {
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_cb");
    const fs::path& dir = tmp.path;
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 1});
    Setup s(5);
    auto ck = std::make_shared<ms::train::Checkpoint>(
        [&](const std::string& p, const ms::train::TrainState& st) {
          ms::save_checkpoint(p, s.net, &s.opt, {.global_step = st.global_step});
        },
        dir.string(), "net", 5, 2);
    auto curves = std::make_shared<ms::train::CurveWriter>((dir / "curves").string());
    auto ev = std::make_shared<ms::train::Evaluate>([] { return 0.75; }, "test_accuracy", false);
    ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {ev, ck, curves}});
    // Saved at steps 5 and 10 and at the end (14); the last two are kept.
    CHECK(ck->kept() == std::vector<std::string>{(dir / "net-10.safetensors").string(),
                                                 (dir / "net-14.safetensors").string()});
    CHECK_FALSE(fs::exists(dir / "net-5.safetensors"));
    CHECK(fs::exists(dir / "net-14.safetensors"));
    std::ifstream csv(dir / "curves.csv");
    std::string header, row1, row2;
    std::getline(csv, header);
    std::getline(csv, row1);
    std::getline(csv, row2);
    CHECK(header == "epoch,loss,seconds,test_accuracy");
    CHECK(row1.rfind("1,", 0) == 0);
    CHECK(row2.find(",0.75") != std::string::npos);
    std::ifstream svg(dir / "curves.svg");
    std::stringstream ss;
    ss << svg.rdbuf();
    CHECK(ss.str().rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(ss.str().find("test accuracy") != std::string::npos);
    CHECK(ss.str().find("</svg>") != std::string::npos);
  }

  TEST_CASE(
      "CurveWriter: a row per step with the raw and smoothed loss, validation every N steps") {
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_steps");
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 2});  // 7 steps an epoch
    Setup s(7);
    int calls = 0;
    auto ev = std::make_shared<ms::train::Evaluate>([&] { return static_cast<double>(++calls); },
                                                    "val", false, 3);
    const double b = 0.5;
    auto cw = std::make_shared<ms::train::CurveWriter>(
        (tmp.path / "c").string(), ms::train::CurveWriterOptions{.ema_decay = b});
    const auto r = ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {ev, cw}});
    REQUIRE(r.step_loss.size() == 14);
    const auto rows = read_csv(tmp.path / "c_steps.csv");
    REQUIRE(rows.size() == 15);
    CHECK(rows[0] == std::vector<std::string>{"step", "epoch", "loss", "loss_ema", "val"});
    // Evaluated after global steps 3, 6, 9, 12 (values 1..4), and at the ends
    // of epochs 1 and 2 (steps 7 and 14: not multiples of 3, so evaluated again).
    int val_rows = 0;
    for (std::size_t i = 1; i < rows.size(); ++i) {
      const auto& row = rows[i];
      REQUIRE(row.size() == 5);
      CHECK(std::stoll(row[0]) == static_cast<long long>(i));
      CHECK(std::stoll(row[1]) == (i <= 7 ? 1 : 2));
      CHECK(std::stod(row[2]) == doctest::Approx(r.step_loss[i - 1]).epsilon(1e-7));
      CHECK(std::stod(row[3]) == doctest::Approx(ema_of(r.step_loss, i, b)).epsilon(1e-7));
      if (i % 3 == 0) {
        ++val_rows;
        // calls: 1, 2 at steps 3, 6; the epoch end at 7 is call 3; then 4, 5 at 9, 12.
        const double want = i <= 6 ? static_cast<double>(i / 3) : static_cast<double>(i / 3 + 1);
        CHECK(std::stod(row[4]) == want);
      } else {
        CHECK(row[4].empty());
      }
    }
    CHECK(val_rows == 4);
    CHECK(ev->calls() == 6);
    CHECK(r.epoch_metrics[0].at("val") == 3.0);
    CHECK(r.epoch_metrics[1].at("val") == 6.0);
    CHECK(cw->loss_ema() == doctest::Approx(ema_of(r.step_loss, 14, b)).epsilon(1e-12));
    // The smoothed values differ from the raw ones (the average is not a copy).
    CHECK(std::stod(rows[5][3]) != doctest::Approx(std::stod(rows[5][2])).epsilon(1e-6));
    CHECK(fs::exists(tmp.path / "c_steps.svg"));
    // The epoch file keeps its format.
    const auto epochs = read_csv(tmp.path / "c.csv");
    REQUIRE(epochs.size() == 3);
    CHECK(epochs[0] == std::vector<std::string>{"epoch", "loss", "seconds", "val"});
  }

  TEST_CASE("Evaluate every N steps: an epoch ending on such a step is evaluated once") {
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_steps7");
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 2});  // 7 steps an epoch
    Setup s(7);
    int calls = 0;
    auto ev = std::make_shared<ms::train::Evaluate>(
        [&] { return 0.5 + static_cast<double>(++calls); }, "val", false, 7);
    auto cw = std::make_shared<ms::train::CurveWriter>(
        (tmp.path / "c").string(), ms::train::CurveWriterOptions{.ema_decay = 0.0});
    const auto r = ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {ev, cw}});
    CHECK(ev->calls() == 2);
    CHECK(r.epoch_metrics[0].at("val") == 1.5);
    CHECK(r.epoch_metrics[1].at("val") == 2.5);
    const auto rows = read_csv(tmp.path / "c_steps.csv");
    REQUIRE(rows.size() == 15);
    CHECK(rows[7][4] == "1.5");
    CHECK(rows[14][4] == "2.5");
    for (std::size_t i = 1; i < rows.size(); ++i)
      CHECK(rows[i][3] == rows[i][2]);  // decay 0: the smoothed loss is the raw one
  }

  TEST_CASE("curves_steps_svg: a point per step, accuracy points at the eval steps, checks") {
    const std::string svg =
        ms::train::curves_steps_svg({10, 20, 30}, {2.0, 1.0, 0.5}, {2.0, 1.5, 1.0}, {20}, {0.75});
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.find("</svg>") != std::string::npos);
    // Steps 10..30 span the plot's 520 px from x = 60: step 20 at 320; loss 1 of 2 halfway.
    CHECK(svg.find("points=\"60.0,30.0 320.0,175.0 580.0,247.5 \"") != std::string::npos);
    CHECK(svg.find("points=\"60.0,30.0 320.0,102.5 580.0,175.0 \"") != std::string::npos);
    // 75% accuracy at step 20: 3/4 of the way up the 290 px plot.
    CHECK(svg.find("<circle cx=\"320.0\" cy=\"102.5\"") != std::string::npos);
    CHECK(svg.find("<title>step 20 test accuracy 0.7500</title>") != std::string::npos);
    const std::string no_acc = ms::train::curves_steps_svg({1}, {1.0}, {1.0}, {}, {});
    CHECK(no_acc.find("<circle") == std::string::npos);
    CHECK_THROWS_WITH_AS(ms::train::curves_steps_svg({1, 2}, {1.0}, {1.0, 2.0}, {}, {}),
                         doctest::Contains("one value per step (2), got 1 and 2"), ms::ValueError);
    CHECK_THROWS_AS(ms::train::curves_steps_svg({1}, {1.0}, {1.0}, {1}, {}), ms::ValueError);
    // A validation loss of 1 (of the axis' 2) at step 30: a square halfway up at x = 580.
    const std::string val = ms::train::curves_steps_svg(
        {10, 20, 30}, {2.0, 1.0, 0.5}, {2.0, 1.5, 1.0}, {}, {}, {30}, {1.0}, "val");
    CHECK(val.find("<rect x=\"577.0\" y=\"172.0\" width=\"6\" height=\"6\"") != std::string::npos);
    CHECK(val.find("<title>step 30 val 1.0000</title>") != std::string::npos);
    CHECK_THROWS_WITH_AS(
        ms::train::curves_steps_svg({1}, {1.0}, {1.0}, {}, {}, {1}, {}),
        doctest::Contains(
            "loss_points must hold one value per step of loss_point_steps (1), got 0"),
        ms::ValueError);
  }

  TEST_CASE("CurveWriter: loss_metric draws a step metric as points on the loss axis") {
    const ms::test::TempDir tmp("ms_test_train_loss_metric");
    ms::train::CurveWriter cw((tmp.path / "c").string(), {.loss_metric = "val_loss"});
    ms::train::TrainState s;
    for (std::int64_t i = 1; i <= 4; ++i) {
      s.global_step = i;
      s.loss = 3.0 - 0.5 * static_cast<double>(i);
      s.step_metrics.clear();
      if (i % 2 == 0) s.step_metrics["val_loss"] = 2.0;
      cw.on_step_end(s);
    }
    cw.on_train_end(s);
    std::ifstream in(tmp.path / "c_steps.svg");
    const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(svg.find("<title>step 2 val_loss 2.0000</title>") != std::string::npos);
    CHECK(svg.find("<title>step 4 val_loss 2.0000</title>") != std::string::npos);
    CHECK(svg.find("<title>step 3 val_loss") == std::string::npos);
  }

  TEST_CASE("CurveWriter and Evaluate: options checked; steps = false writes no per-step file") {
    CHECK_THROWS_WITH_AS(
        ms::train::CurveWriter("c", ms::train::CurveWriterOptions{.ema_decay = 1.0}),
        doctest::Contains("CurveWriter: ema_decay must be in [0, 1), got 1"), ms::ValueError);
    CHECK_THROWS_AS(ms::train::CurveWriter("c", ms::train::CurveWriterOptions{.ema_decay = -0.1}),
                    ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::train::Evaluate([] { return 0.0; }, "val", false, -1),
                         doctest::Contains("Evaluate: every_steps must be >= 0"), ms::ValueError);
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_nosteps");
    ms::data::DataLoader loader(ds, {.batch_size = 50, .seed = 2});
    Setup s(7);
    auto cw = std::make_shared<ms::train::CurveWriter>(
        (tmp.path / "c").string(), ms::train::CurveWriterOptions{.steps = false});
    ms::train::fit(s.step, loader, {.epochs = 1, .callbacks = {cw}});
    CHECK(fs::exists(tmp.path / "c.csv"));
    CHECK_FALSE(fs::exists(tmp.path / "c_steps.csv"));
    CHECK_FALSE(fs::exists(tmp.path / "c_steps.svg"));
  }

  TEST_CASE("Checkpoint and CurveWriter write through the registered file system") {
    const auto ds = toy();
    auto mem = std::make_shared<io_test::MemoryFileSystem>();
    io_test::ScopedFileSystem scope(mem);
    const std::string dir = "/nonexistent-ms-train-fs/run";  // never created on disk
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 1});
    Setup s(5);
    auto ck = std::make_shared<ms::train::Checkpoint>(
        [&](const std::string& p, const ms::train::TrainState& st) {
          ms::save_checkpoint(p, s.net, &s.opt, {.global_step = st.global_step});
        },
        dir, "net", 5, 2);
    auto curves = std::make_shared<ms::train::CurveWriter>(dir + "/curves");
    ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {ck, curves}});
    CHECK_FALSE(fs::exists("/nonexistent-ms-train-fs"));
    CHECK(mem->dirs().count(dir) == 1);
    // net-5 was removed through the file system; the last two are kept.
    CHECK(mem->paths() ==
          std::vector<std::string>{dir + "/curves.csv", dir + "/curves.svg",
                                   dir + "/curves_steps.csv", dir + "/curves_steps.svg",
                                   dir + "/net-10.safetensors", dir + "/net-14.safetensors"});
    Setup other(6);
    ms::load_checkpoint(dir + "/net-14.safetensors", other.net, &other.opt);
    CHECK(ms::allclose(other.net.fc1.weight, s.net.fc1.weight, 0, 0));
  }

  TEST_CASE("CosineSchedule: its length is in the checkpoint; resuming with another warns") {
    const auto ds = toy();
    const ms::test::TempDir tmp("ms_test_train_sched");
    const fs::path& dir = tmp.path;
    const std::string ckpt = (dir / "c.safetensors").string();
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 9});  // 7 steps per epoch
    REQUIRE(loader.size() == 7);
    {
      Setup s(2);
      auto sched = std::make_shared<ms::train::CosineSchedule>(s.opt, 0.05, 3, loader.size());
      CHECK(sched->total_steps() == 21);
      ms::train::fit(s.step, loader, {.epochs = 1, .callbacks = {sched}});
      CHECK(s.opt.lr() == doctest::Approx(0.025 * (1.0 + std::cos(std::numbers::pi / 3.0))));
      ms::CheckpointInfo info{.epoch = 1, .global_step = 7};
      sched->save_to(info.extra);
      ms::save_checkpoint(ckpt, s.net, &s.opt, info);
    }
    std::vector<std::string> warnings;
    auto prev = ms::set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
    {  // the same length: silent, and the saved schedule goes on
      Setup s(3);
      const ms::CheckpointInfo at = ms::load_checkpoint(ckpt, s.net, &s.opt);
      CHECK(at.extra.at("lr_schedule_epochs") == "3");
      CHECK(at.extra.at("lr_schedule_steps") == "21");
      ms::train::CosineSchedule sched(s.opt, 0.05, 3, loader.size());
      CHECK(sched.resume_from(at.extra, at.global_step).empty());
      CHECK(warnings.empty());
    }
    {  // 5 epochs: the new length is used, and a warning names both
      Setup s(3);
      const ms::CheckpointInfo at = ms::load_checkpoint(ckpt, s.net, &s.opt);
      auto sched = std::make_shared<ms::train::CosineSchedule>(s.opt, 0.05, 5, loader.size());
      const std::string w = sched->resume_from(at.extra, at.global_step);
      REQUIRE(warnings.size() == 1);
      CHECK(warnings[0] == w);
      CHECK_MESSAGE(w.find("spans 3 epochs (21 steps)") != std::string::npos, w);
      CHECK_MESSAGE(w.find("spans 5 epochs (35 steps)") != std::string::npos, w);
      CHECK_MESSAGE(w.find("at global step 7 the rate is 0.0452") != std::string::npos, w);
      CHECK_MESSAGE(w.find("instead of 0.0375") != std::string::npos, w);
      ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {sched}, .initial_epoch = 1});
      CHECK(s.opt.lr() == doctest::Approx(0.025 * (1.0 + std::cos(std::numbers::pi * 14 / 35))));
    }
    {  // a checkpoint without the entries: the length cannot be checked, and it says so
      warnings.clear();
      Setup s(3);
      ms::save_checkpoint(ckpt, s.net, &s.opt, {.epoch = 1, .global_step = 7});
      const ms::CheckpointInfo at = ms::load_checkpoint(ckpt, s.net, &s.opt);
      ms::train::CosineSchedule sched(s.opt, 0.05, 5, loader.size());
      CHECK_MESSAGE(sched.resume_from(at.extra, at.global_step).find("cannot be checked") !=
                        std::string::npos,
                    (warnings.empty() ? std::string() : warnings[0]));
      CHECK(warnings.size() == 1);
      CHECK_THROWS_WITH_AS(
          sched.resume_from(
              {{"lr_schedule", "cosine"}, {"lr_schedule_epochs", "3"}, {"lr_schedule_steps", "-4"}},
              7),
          doctest::Contains("'lr_schedule_steps' = '-4'"), ms::ValueError);
      CHECK_THROWS_AS(ms::train::CosineSchedule(s.opt, 0.05, 3, 0), ms::ValueError);
    }
    ms::set_warning_handler(prev);
  }

  TEST_CASE("LRSchedule drives WarmupCosineLR by fit's global step, also on resume") {
    const auto ds = toy();
    ms::data::DataLoader loader(ds, {.batch_size = 16, .seed = 9});  // 7 steps per epoch
    struct LrLog : ms::train::Callback {
      ms::optim::Optimizer* opt = nullptr;
      std::vector<double> used;  // the rate each step ran with
      void on_step_end(ms::train::TrainState&) override { used.push_back(opt->lr()); }
    };
    Setup s(4);
    ms::optim::WarmupCosineLR warm(s.opt, 3, 14, 0.005);
    auto log = std::make_shared<LrLog>();
    log->opt = &s.opt;
    auto sched = std::make_shared<ms::train::LRSchedule>(
        s.opt, [&](std::int64_t n) { return warm.lr_at(n); });
    ms::train::fit(s.step, loader, {.epochs = 1, .callbacks = {log, sched}});
    REQUIRE(log->used.size() == 7);
    for (std::size_t n = 0; n < 7; ++n)
      CHECK(log->used[n] == doctest::Approx(warm.lr_at(static_cast<std::int64_t>(n))));
    CHECK(log->used[0] == 0.0);
    CHECK(log->used[3] == doctest::Approx(0.05));  // the top of the warm-up
    // Resuming at epoch 1 continues from global step 7.
    log->used.clear();
    s.opt.set_lr(1.0);
    ms::train::fit(s.step, loader, {.epochs = 2, .callbacks = {log, sched}, .initial_epoch = 1});
    REQUIRE(log->used.size() == 7);
    for (std::size_t n = 0; n < 7; ++n)
      CHECK(log->used[n] == doctest::Approx(warm.lr_at(static_cast<std::int64_t>(n + 7))));
    CHECK(s.opt.lr() == doctest::Approx(0.005));  // min_lr at total_steps
    CHECK_THROWS_AS(ms::train::LRSchedule(s.opt, {}), ms::ValueError);
  }

  TEST_CASE("LossMonitor stops on a NaN loss; bad fit options are errors") {
    const auto ds = toy();
    ms::data::DataLoader loader(ds, {.batch_size = 50});
    int calls = 0;
    auto nan_step = [&](const ms::Tensor&, const ms::Tensor&) {
      ++calls;
      return ms::full({}, calls == 2 ? std::nan("") : 1.0);
    };
    CHECK_THROWS_WITH_AS(
        ms::train::fit(
            nan_step, loader,
            {.epochs = 1, .callbacks = {std::make_shared<ms::train::LossMonitor>(1, false)}}),
        doctest::Contains("LossMonitor: the loss is nan at epoch 1 step 2"), ms::ValueError);
    CHECK_THROWS_AS(ms::train::fit(nan_step, loader, {.epochs = -1}), ms::ValueError);
    CHECK_THROWS_AS(ms::train::fit(nan_step, loader, {.epochs = 1, .initial_step = 3}),
                    ms::ValueError);
    CHECK_THROWS_AS(ms::train::fit(nan_step, loader, {.epochs = 1, .callbacks = {nullptr}}),
                    ms::ValueError);
  }

  TEST_CASE("data parallel: reporting callbacks act on rank 0 only; samples count every rank") {
    const auto ds = toy();
    ms::data::DataLoader loader(ds, {.batch_size = 50});
    auto one = [](const ms::Tensor&, const ms::Tensor&) { return ms::full({}, 1.0); };
    struct Record : ms::train::Callback {
      std::vector<std::int64_t> samples, ranks;
      void on_epoch_end(ms::train::TrainState& s) override {
        samples.push_back(s.samples);
        ranks.push_back(s.rank);
      }
    };
    for (const std::int64_t rank : {0, 1}) {
      CAPTURE(rank);
      const ms::test::TempDir tmp("ms_test_train_rank" + std::to_string(rank));
      const fs::path& dir = tmp.path;
      int saves = 0, evals = 0;
      auto ck = std::make_shared<ms::train::Checkpoint>(
          [&](const std::string&, const ms::train::TrainState&) { ++saves; }, dir.string(), "net",
          1, 2);
      auto curves = std::make_shared<ms::train::CurveWriter>((dir / "curves").string());
      auto ev = std::make_shared<ms::train::Evaluate>([&] { return static_cast<double>(++evals); },
                                                      "acc", false);
      auto rec = std::make_shared<Record>();
      const auto res = ms::train::fit(
          one, loader,
          {.epochs = 2, .callbacks = {ev, ck, curves, rec}, .rank = rank, .world_size = 3});
      CHECK(res.step_loss.size() == 4);
      CHECK(saves == (rank == 0 ? 4 : 0));
      CHECK(evals == (rank == 0 ? 2 : 0));
      CHECK(fs::exists(dir / "curves.csv") == (rank == 0));
      // Other callbacks run on every rank; 100 samples per rank per epoch, 3 ranks.
      CHECK(rec->samples == std::vector<std::int64_t>{300, 300});
      CHECK(rec->ranks == std::vector<std::int64_t>{rank, rank});
    }
    CHECK_THROWS_WITH_AS(ms::train::fit(one, loader, {.rank = 2, .world_size = 2}),
                         doctest::Contains("fit: rank must be in [0, world_size) and world_size "
                                           ">= 1, got rank 2 and world_size 2"),
                         ms::ValueError);
  }
}
