// Data parallelism: the reducer's buckets, rank 0's model on every rank, a
// different model named, and p ranks x batch 32 == 1 process x batch 32 p
// after 20 Momentum steps of the Fashion-MNIST MLP (in float64) and 5 of the
// CNN, eagerly and jitted; ms::train::fit checkpoints of p ranks resumed by 1 process and
// the reverse, and a mid-epoch position refused with another world size.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <ms/cell.hpp>
#include <ms/data/dataloader.hpp>
#include <ms/parallel/collective.hpp>
#include <ms/parallel/grad_reducer.hpp>
#include <ms/train/checkpoint.hpp>
#include <ms/train/fit.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1, fc2, fc3;
  explicit MLP(std::int64_t hidden = 512, ms::DType dtype = ms::float32)
      : fc1(784, hidden, {.dtype = dtype}),
        fc2(hidden, 256, {.dtype = dtype}),
        fc3(256, 10, {.dtype = dtype}) {
    register_cells("fc1", fc1, "fc2", fc2, "fc3", fc3);
  }
  ms::Tensor construct(const ms::Tensor& x) { return fc3(ms::relu(fc2(ms::relu(fc1(x))))); }
};

// Largest |a - b| over the largest |b|.
double rel_diff(const ms::Tensor& a, const ms::Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  double d = 0, m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    d = std::max(d, std::abs(x[i] - y[i]));
    m = std::max(m, std::abs(y[i]));
  }
  return m > 0 ? d / m : d;
}

struct CNN : ms::Cell<CNN> {
  ms::nn::Conv2d conv1{1, 32, 3, {}, {.has_bias = true}}, conv2{32, 64, 3, {}, {.has_bias = true}};
  ms::nn::MaxPool2d pool{2};
  ms::nn::Dense fc1{3136, 128}, fc2{128, 10};
  CNN() { register_cells("conv1", conv1, "conv2", conv2, "pool", pool, "fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) {
    ms::Tensor h = pool(ms::relu(conv1(x)));
    h = pool(ms::relu(conv2(h)));
    return fc2(ms::relu(fc1(h.flatten(1))));
  }
};

template <class Net>
struct Trainer {
  Net net;
  ms::optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
  explicit Trainer(const auto&... net_args) : net(net_args...) {}
  ms::Tensor step(const ms::Tensor& x, const ms::Tensor& y,
                  const ms::parallel::DistributedGradReducer* reducer) {
    auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
      return ms::nn::cross_entropy(net(a), b);
    };
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
    opt.apply(reducer != nullptr ? (*reducer)(grads) : grads);
    return loss;
  }
};

// `steps` steps of p ranks x 32 samples against 1 process x 32 p samples;
// `net_args` construct both models.
template <class Net>
void check_equivalence(bool jitted, std::int64_t bucket_bytes, std::int64_t steps,
                       std::vector<std::int64_t> sample, ms::DType dtype = ms::float32,
                       const auto&... net_args) {
  const int p = ms::parallel::world_size(), r = ms::parallel::rank();
  const std::int64_t local = 32, global = local * p;
  ms::Generator data(7);  // the same data on every rank
  sample.insert(sample.begin(), {steps, global});
  const ms::Tensor xs = ms::normal(ms::Shape(sample), 0.0, 1.0, data, dtype);
  const ms::Tensor ys = ms::randint(0, 10, {steps, global}, data, ms::int32);

  ms::manual_seed(1);
  Trainer<Net> single(net_args...);
  ms::manual_seed(100 + static_cast<std::uint64_t>(r));  // another model on every rank
  Trainer<Net> dp(net_args...);
  ms::parallel::DistributedGradReducer reducer(dp.opt.parameters(), {.bucket_bytes = bucket_bytes});
  // Rank 0's model is everywhere now; the single-process reference starts from it too.
  for (std::size_t i = 0; i < single.opt.parameters().size(); ++i) {
    ms::Parameter w = single.opt.parameters()[i];
    w.set_data(ms::parallel::broadcast(dp.opt.parameters()[i], 0));
  }
  const ms::Tensor first = dp.opt.parameters()[0].clone();

  auto fn_dp = [&](const ms::Tensor& x, const ms::Tensor& y) { return dp.step(x, y, &reducer); };
  auto fn_single = [&](const ms::Tensor& x, const ms::Tensor& y) {
    return single.step(x, y, nullptr);
  };
  auto jit_dp = ms::jit(fn_dp);
  auto jit_single = ms::jit(fn_single);
  for (std::int64_t s = 0; s < steps; ++s) {
    const ms::Tensor x = xs.select(0, s), y = ys.select(0, s);
    const ms::Tensor xr = x.slice(0, r * local, (r + 1) * local).contiguous();
    const ms::Tensor yr = y.slice(0, r * local, (r + 1) * local).contiguous();
    if (jitted) {
      (void)jit_dp(xr, yr);
      (void)jit_single(x, y);
    } else {
      (void)fn_dp(xr, yr);
      (void)fn_single(x, y);
    }
  }
  if (jitted) CHECK(jit_dp.compile_count() == 1);
  if (ms::parallel::mpi_active()) {
    CHECK(reducer.steps() == steps);
    // Buckets start while backward still computes the first layers' gradients.
    if (reducer.buckets().size() > 1) {
      MESSAGE("buckets started early: " << reducer.early_starts() << " in " << steps << " steps of "
                                        << reducer.buckets().size() << " buckets");
      CHECK(reducer.early_starts() >= steps);
    }
  }
  const ms::ParameterList a = dp.opt.parameters(), b = single.opt.parameters();
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(a[i].name());
    CHECK(rel_diff(a[i], b[i]) < (dtype == ms::float64 ? 1e-10 : 1e-5));
    // Every rank holds the very same bits.
    CHECK(ms::parallel::broadcast(a[i], 0).to_vector<double>() == a[i].to_vector<double>());
  }
  // The model moved: the checks above compare trained parameters.
  CHECK(rel_diff(first, a[0]) > 1e-4);
}

// ---- resuming ms::train::fit across world sizes

struct Small : ms::Cell<Small> {
  ms::nn::Dense fc1{8, 16}, fc2{16, 4};
  Small() { register_cells("fc1", fc1, "fc2", fc2); }
  ms::Tensor construct(const ms::Tensor& x) { return fc2(ms::relu(fc1(x))); }
};

// 384 samples of 8 features, the class the argmax of the first 4: 384 is a
// multiple of every global batch 16 p below (p = 1, 2, 3), so no shard pads.
ms::data::TensorDataset resume_data() {
  ms::Generator g(11);
  const ms::Tensor x = ms::normal({384, 8}, 0.0, 1.0, g);
  return ms::data::TensorDataset(x, ms::argmax(x.slice(1, 0, 4), 1).to(ms::int32));
}

// What a training run ended with.
struct Outcome {
  std::vector<ms::Tensor> params;
  std::int64_t optimizer_steps = 0;     // the optimizer's step count at the end
  std::int64_t first_epoch = -1;        // the epoch fit started at
  std::int64_t first_global_step = -1;  // TrainState::global_step when fit began
  std::int64_t epochs_run = 0;
};

struct Watch : ms::train::Callback {
  Outcome* out = nullptr;
  void on_train_begin(ms::train::TrainState& s) override { out->first_global_step = s.global_step; }
  void on_epoch_begin(ms::train::TrainState& s) override {
    if (out->first_epoch < 0) out->first_epoch = s.epoch;
    ++out->epochs_run;
  }
};

// Trains Small with fit for `epochs` epochs in all, 16 samples a step per
// rank, as every rank of the run (`distributed`: sharded loader, gradients
// averaged by a DistributedGradReducer) or as this process alone (1 process
// x 16 p samples a step, the same global batch). `resume`: a checkpoint to
// start from; `save_every` > 0: rank 0 saves `<dir>/ck-<global_step>` every
// that many steps, with the position and the world size.
Outcome fit_small(bool distributed, std::int64_t epochs, const std::string& resume,
                  const std::string& dir = "", std::int64_t save_every = 0) {
  const int p = ms::parallel::world_size();
  const int world = distributed ? p : 1, rank = distributed ? ms::parallel::rank() : 0;
  ms::manual_seed(5);
  Small net;
  ms::optim::Momentum opt(net.trainable_params(), {.lr = 0.05, .momentum = 0.9});
  ms::CheckpointInfo at;
  if (!resume.empty()) at = ms::load_checkpoint(resume, net, &opt);
  std::optional<ms::parallel::DistributedGradReducer> reducer;
  if (distributed) reducer.emplace(opt.parameters());
  const ms::data::TensorDataset data = resume_data();
  ms::data::DataLoader loader(
      data, {.batch_size = 16 * p / world, .seed = 3, .num_shards = world, .shard_id = rank});
  auto loss_fn = [&](const ms::Tensor& x, const ms::Tensor& y) {
    return ms::nn::cross_entropy(net(x), y);
  };
  auto step = ms::jit([&](const ms::Tensor& x, const ms::Tensor& y) {
    auto [loss, grads] =
        ms::value_and_grad(loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
    opt.apply(reducer ? (*reducer)(grads) : grads);
    return loss;
  });
  Outcome out;
  auto watch = std::make_shared<Watch>();
  watch->out = &out;
  std::vector<std::shared_ptr<ms::train::Callback>> callbacks{watch};
  if (save_every > 0)
    callbacks.push_back(std::make_shared<ms::train::Checkpoint>(
        [&](const std::string& path, const ms::train::TrainState& s) {
          const bool end = s.step == s.steps_per_epoch;  // an epoch's end: the next one's start
          ms::save_checkpoint(path, net, &opt,
                              {.epoch = end ? s.epoch + 1 : s.epoch,
                               .step = end ? 0 : s.step,
                               .global_step = s.global_step,
                               .extra = {{"world_size", std::to_string(s.world_size)}}});
        },
        dir, "ck", save_every, 1000));
  const auto saved_world = at.extra.find("world_size");
  (void)ms::train::fit(
      step, loader,
      {.epochs = epochs,
       .callbacks = callbacks,
       .initial_epoch = at.epoch,
       .initial_step = at.step,
       .initial_world_size = saved_world == at.extra.end() ? 0 : std::stoll(saved_world->second),
       .rank = rank,
       .world_size = world});
  for (const ms::Parameter& w : opt.parameters()) out.params.push_back(w.clone());
  out.optimizer_steps = opt.step_count();
  return out;
}

// A directory every rank names alike (rank 0's pid), created by rank 0.
std::string shared_dir(const std::string& what) {
  const auto pid = ms::parallel::broadcast(ms::full({}, ::getpid(), ms::int64), 0);
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() /
      ("ms_test_parallel_" + what + "_" + std::to_string(pid.item<std::int64_t>()));
  if (ms::parallel::rank() == 0) {
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
  }
  ms::parallel::barrier();
  return d.string();
}

void check_same(const Outcome& a, const Outcome& b) {
  REQUIRE(a.params.size() == b.params.size());
  for (std::size_t i = 0; i < a.params.size(); ++i) {
    CAPTURE(i);
    CHECK(rel_diff(a.params[i], b.params[i]) < 1e-5);
  }
}

}  // namespace

TEST_SUITE("parallel") {
  TEST_CASE("buckets hold the parameters from the last one backwards, up to bucket_bytes") {
    MLP net;
    const ms::ParameterList ps =
        net.trainable_params();  // fc1.w, fc1.b, fc2.w, fc2.b, fc3.w, fc3.b
    // fc3: 10 KB, fc2: 512 KB, fc1: 1.5 MB.
    ms::parallel::DistributedGradReducer small(ps, {.bucket_bytes = 200 << 10});
    CHECK(small.buckets() == std::vector<std::vector<std::size_t>>{{5, 4, 3}, {2}, {1}, {0}});
    ms::parallel::DistributedGradReducer all(ps);
    CHECK(all.options().bucket_bytes == 25 << 20);
    CHECK(all.buckets() == std::vector<std::vector<std::size_t>>{{5, 4, 3, 2, 1, 0}});
    CHECK_THROWS_WITH_AS(ms::parallel::DistributedGradReducer(ps, {.bucket_bytes = 0}),
                         doctest::Contains("bucket_bytes must be > 0, got 0"), ms::ValueError);
    CHECK_THROWS_WITH_AS(all(std::vector<ms::Tensor>(5)),
                         doctest::Contains("got 5 gradients for 6 parameters"), ms::ValueError);
  }

  TEST_CASE("the reducer gives every rank rank 0's parameters") {
    const int r = ms::parallel::rank();
    ms::manual_seed(10 + static_cast<std::uint64_t>(r));
    MLP net;
    ms::parallel::DistributedGradReducer reducer(net.trainable_params());
    ms::manual_seed(10);
    MLP rank0;
    for (std::size_t i = 0; i < 6; ++i)
      CHECK(net.trainable_params()[i].to_vector<float>() ==
            rank0.trainable_params()[i].to_vector<float>());
  }

  TEST_CASE("broadcast_parameters counts its writes into the parameters of other ranks") {
    // Storage::write_count tells compiled graphs to recast their kept casts of a parameter.
    if (ms::parallel::world_size() == 1) return;  // nothing is sent
    MLP net;
    const ms::ParameterList ps = net.trainable_params();
    std::vector<std::uint64_t> before;
    for (const ms::Parameter& p : ps) before.push_back(p.storage()->write_count());
    ms::parallel::broadcast_parameters(ps);  // collective: every rank calls it
    if (ms::parallel::rank() == 0) return;   // the root's parameters are only read
    for (std::size_t i = 0; i < ps.size(); ++i) CHECK(ps[i].storage()->write_count() > before[i]);
  }

  TEST_CASE("a rank with a different model is an error naming the first mismatching parameter") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    if (p == 1) return;
    MLP net(r == 1 ? 128 : 512);
    CHECK_THROWS_WITH_AS(
        ms::parallel::DistributedGradReducer(net.trainable_params()),
        doctest::Contains("broadcast_parameters: rank 1's model differs from rank 0's at "
                          "parameter 0: rank 1 has 'fc1.weight' Float32[128, 784], rank 0 has "
                          "'fc1.weight' Float32[512, 784]"),
        ms::ValueError);
    // A missing parameter: rank 1 leaves the last one out.
    MLP same;
    ms::ParameterList ps = same.trainable_params();
    if (r == 1) ps.pop_back();
    CHECK_THROWS_WITH_AS(ms::parallel::broadcast_parameters(ps),
                         doctest::Contains("at parameter 5: rank 1 has no parameter, rank 0 has "
                                           "'fc3.bias' Float32[10] (5 and 6 parameters)"),
                         ms::ValueError);
  }

  // In float64: over 20 steps a relu unit whose input lies within float32's
  // rounding of 0 decides differently in the two runs, whose sums differ in
  // order (the GEMM backends block a batch of 32 p and of 32 differently), and
  // moves its weights' row by 1e-4 of the largest weight in one step.
  TEST_CASE("20 Momentum steps: p ranks x batch 32 equal 1 process x batch 32 p, eagerly") {
    check_equivalence<MLP>(false, std::int64_t{25} << 20, 20, {784}, ms::float64, 512, ms::float64);
  }

  TEST_CASE(
      "20 Momentum steps: p ranks x batch 32 equal 1 process x batch 32 p, jitted, 4 buckets") {
    check_equivalence<MLP>(true, 600 << 10, 20, {784}, ms::float64, 512, ms::float64);
  }

  TEST_CASE("5 Momentum steps of the CNN: p ranks x batch 32 equal 1 process x batch 32 p") {
    check_equivalence<CNN>(false, std::int64_t{25} << 20, 5, {1, 28, 28});
    check_equivalence<CNN>(true, 64 << 10, 5, {1, 28, 28});
  }

  TEST_CASE("fit: an epoch-end checkpoint of p ranks resumes in 1 process, and the reverse") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    const std::int64_t steps = 24 / p;  // per epoch: 384 samples, 16 p a step
    const std::string dir = shared_dir("resume");
    // p ranks train epoch 1; rank 0 saves its end (epoch 1, step 0).
    const Outcome first = fit_small(true, 1, "", dir + "/dp", steps);
    CHECK(first.optimizer_steps == steps);
    ms::parallel::barrier();
    const std::string dp_ck = dir + "/dp/ck-" + std::to_string(steps) + ".safetensors";
    // Uninterrupted: p ranks, 2 epochs.
    const Outcome dp_both = fit_small(true, 2, "");
    // 1 process (rank 0 alone; the others wait) resumes at epoch 2 with the same global batch.
    if (r == 0) {
      const Outcome resumed = fit_small(false, 2, dp_ck);
      CHECK(resumed.first_epoch == 1);
      CHECK(resumed.epochs_run == 1);
      CHECK(resumed.first_global_step == steps);
      CHECK(resumed.optimizer_steps == 2 * steps);  // the optimizer's step count continues
      check_same(resumed, dp_both);
      // The second epoch trained: the resumed model is not the checkpoint's.
      CHECK(rel_diff(resumed.params[0], first.params[0]) > 1e-4);
      // 1 process saves an epoch's end for the reverse.
      (void)fit_small(false, 1, "", dir + "/one", steps);
    }
    ms::parallel::barrier();
    // Every rank: 1 process for 2 epochs uninterrupted, then p ranks resume 1 process's checkpoint.
    const Outcome one_both = fit_small(false, 2, "");
    const Outcome resumed =
        fit_small(true, 2, dir + "/one/ck-" + std::to_string(steps) + ".safetensors");
    CHECK(resumed.first_epoch == 1);
    CHECK(resumed.first_global_step == steps);
    CHECK(resumed.optimizer_steps == 2 * steps);
    check_same(resumed, one_both);
    ms::parallel::barrier();
    if (r == 0) std::filesystem::remove_all(dir);
  }

  TEST_CASE("fit: a mid-epoch checkpoint resumes exactly with its world size, else an error") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    const std::string dir = shared_dir("midepoch");
    // p ranks train epoch 1; rank 0 saves after steps 3, 6, ... (epoch 0, step 3: mid-epoch).
    const Outcome whole = fit_small(true, 1, "", dir, 3);
    ms::parallel::barrier();
    const std::string mid = dir + "/ck-3.safetensors";
    // The same world size: the rest of the epoch, as if never interrupted.
    const Outcome resumed = fit_small(true, 1, mid);
    CHECK(resumed.first_epoch == 0);
    CHECK(resumed.first_global_step == 3);
    CHECK(resumed.optimizer_steps == 24 / p);
    check_same(resumed, whole);
    // Another world size: rank 0 alone as 1 process (on 1 rank: a position
    // claimed to come from 2 ranks) is refused before any step.
    if (r == 0) {
      const std::string want =
          "fit: the mid-epoch position initial_step = 3 was counted with initial_world_size = " +
          std::to_string(p == 1 ? 2 : p) +
          " and resumes exactly only with that world size, got world_size = 1";
      if (p > 1) {
        CHECK_THROWS_WITH_AS((void)fit_small(false, 1, mid), doctest::Contains(want.c_str()),
                             ms::ValueError);
      } else {
        const ms::data::TensorDataset data = resume_data();
        ms::data::DataLoader loader(data, {.batch_size = 16});
        std::int64_t calls = 0;
        auto step = [&](const ms::Tensor&, const ms::Tensor&) {
          ++calls;
          return ms::zeros({});
        };
        CHECK_THROWS_WITH_AS(
            (void)ms::train::fit(step, loader, {.initial_step = 3, .initial_world_size = 2}),
            doctest::Contains(want.c_str()), ms::ValueError);
        CHECK(calls == 0);
      }
    }
    ms::parallel::barrier();
    if (r == 0) std::filesystem::remove_all(dir);
  }
}
