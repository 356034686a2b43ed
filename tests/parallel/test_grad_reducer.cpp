// Data parallelism: the reducer's buckets, rank 0's model on every rank, a
// different model named, and p ranks x batch 32 == 1 process x batch 32 p
// after 20 Momentum steps of the Fashion-MNIST MLP and 5 of the CNN, eagerly
// and jitted.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ms/cell.hpp>
#include <ms/parallel/collective.hpp>
#include <ms/parallel/grad_reducer.hpp>
#include <vector>

namespace {

struct MLP : ms::Cell<MLP> {
  ms::nn::Dense fc1, fc2, fc3;
  explicit MLP(std::int64_t hidden = 512) : fc1(784, hidden), fc2(hidden, 256), fc3(256, 10) {
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
  ms::nn::Conv2d conv1{1, 32, 3, {.has_bias = true}}, conv2{32, 64, 3, {.has_bias = true}};
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
  ms::Tensor step(const ms::Tensor& x, const ms::Tensor& y,
                  const ms::parallel::DistributedGradReducer* reducer) {
    auto loss_fn = [&](const ms::Tensor& a, const ms::Tensor& b) {
      return ms::nn::cross_entropy(net(a), b);
    };
    auto [loss, grads] = ms::value_and_grad(loss_fn, std::nullopt, opt.parameters())(x, y);
    opt.apply(reducer != nullptr ? (*reducer)(grads) : grads);
    return loss;
  }
};

// `steps` steps of p ranks x 32 samples against 1 process x 32 p samples.
template <class Net>
void check_equivalence(bool jitted, std::int64_t bucket_bytes, std::int64_t steps,
                       std::vector<std::int64_t> sample) {
  const int p = ms::parallel::world_size(), r = ms::parallel::rank();
  const std::int64_t local = 32, global = local * p;
  ms::Generator data(7);  // the same data on every rank
  sample.insert(sample.begin(), {steps, global});
  const ms::Tensor xs = ms::normal(ms::Shape(sample), 0.0, 1.0, data);
  const ms::Tensor ys = ms::randint(0, 10, {steps, global}, data, ms::int32);

  ms::manual_seed(1);
  Trainer<Net> single;
  ms::manual_seed(100 + static_cast<std::uint64_t>(r));  // another model on every rank
  Trainer<Net> dp;
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
    CHECK(rel_diff(a[i], b[i]) < 1e-5);
    // Every rank holds the very same bits.
    CHECK(ms::parallel::broadcast(a[i], 0).to_vector<float>() == a[i].to_vector<float>());
  }
  // The model moved: the checks above compare trained parameters.
  CHECK(rel_diff(first, a[0]) > 1e-4);
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

  TEST_CASE("20 Momentum steps: p ranks x batch 32 equal 1 process x batch 32 p, eagerly") {
    check_equivalence<MLP>(false, std::int64_t{25} << 20, 20, {784});
  }

  TEST_CASE(
      "20 Momentum steps: p ranks x batch 32 equal 1 process x batch 32 p, jitted, 4 buckets") {
    check_equivalence<MLP>(true, 300 << 10, 20, {784});
  }

  TEST_CASE("5 Momentum steps of the CNN: p ranks x batch 32 equal 1 process x batch 32 p") {
    check_equivalence<CNN>(false, std::int64_t{25} << 20, 5, {1, 28, 28});
    check_equivalence<CNN>(true, 64 << 10, 5, {1, 28, 28});
  }
}
