// Training modes under ms::jit: the training flags a trace read are part of
// the graph's key, so set_train switches graphs instead of recompiling, and
// graphs that read no flag (or other cells' flags) are left alone.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

#include "jit/jit_test_util.hpp"
#include "random.hpp"

using namespace ms;

namespace {
using ms_test::kTest;
using test::random_tensor;

struct DenseDropout : Cell<DenseDropout> {
  nn::Dense fc{4, 4};
  nn::Dropout drop;
  explicit DenseDropout(Generator* g) : drop(0.5, g) { register_cells("fc", fc, "drop", drop); }
  Tensor construct(const Tensor& x) { return drop(fc(x)); }
};
// Calls its dropout child only on rank-3 inputs: graphs of other ranks read no training flag.
struct RankGate : Cell<RankGate> {
  nn::Dropout drop;
  explicit RankGate(Generator* g) : drop(0.5, g) { register_cells("drop", drop); }
  Tensor construct(const Tensor& x) { return x.rank() == 3 ? drop(x) : Tensor(x * 1.0f); }
};
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("set_train alternating every epoch compiles one graph per mode") {
    Generator g(3);
    nn::Dense fc(4, 3);
    nn::Dropout drop(0.5, &g);
    auto fwd = [&](const Tensor& x) -> Tensor { return drop(fc(x)); };
    auto f = jit(fwd, kTest);
    const Tensor x = random_tensor(float32, {8, 4}, {-2, 2}, 1);
    for (int epoch = 0; epoch < 5; ++epoch) {
      drop.set_train(true);
      g.manual_seed(static_cast<std::uint64_t>(epoch));
      const Tensor eager = fwd(x);
      g.manual_seed(static_cast<std::uint64_t>(epoch));
      const Tensor jitted = f(x);
      CHECK(allclose(jitted, eager, 0, 0));  // the same mask as eager in training mode
      CHECK_FALSE(allclose(jitted, fc(x), 0, 0));
      CHECK(f.phase().find("training flags 1") != std::string::npos);
      drop.set_train(false);
      CHECK(allclose(f(x), fc(x), 0, 0));  // eval mode: no dropout
      CHECK(f.phase().find("training flags 0") != std::string::npos);
    }
    CHECK(f.compile_count() == 2);
    CHECK(f.cache_size() == 2);
  }

  TEST_CASE("set_train leaves graphs that read no training flag, or another cell's, alone") {
    nn::Dense fc(4, 3);
    nn::Dropout drop(0.5);
    nn::Dropout other(0.5);
    auto plain = jit([&](const Tensor& x) -> Tensor { return relu(x) * 2.f; }, kTest);
    auto dense = jit([&](const Tensor& x) -> Tensor { return fc(x); }, kTest);
    auto with_other = jit([&](const Tensor& x) -> Tensor { return other(x); }, kTest);
    const Tensor x = random_tensor(float32, {2, 4}, {-2, 2}, 2);
    plain(x);
    dense(x);
    with_other(x);
    for (int i = 0; i < 4; ++i) {
      drop.set_train(i % 2 == 0);
      fc.set_train(i % 2 == 0);  // Dense does not read its mode
      CHECK(allclose(plain(x), relu(x) * 2.f, 0, 0));
      CHECK(allclose(dense(x), fc(x), 0, 0));
      CHECK(allclose(with_other(x), x, 0, 0));
    }
    CHECK(plain.compile_count() == 1);
    CHECK(dense.compile_count() == 1);
    CHECK(with_other.compile_count() == 1);
  }

  TEST_CASE("a generalized (dynamic) graph survives a mode switch") {
    Generator g(7);
    nn::Dense fc(4, 3);
    nn::Dropout drop(0.5, &g);
    auto fwd = [&](const Tensor& x) -> Tensor { return drop(fc(x)); };
    auto f = jit(fwd, {.dynamic = 1, .verify = true});
    auto check_train = [&](std::int64_t n, std::uint64_t seed) {
      const Tensor x = random_tensor(float32, {n, 4}, {-2, 2}, seed);
      g.manual_seed(seed);
      const Tensor eager = fwd(x);
      g.manual_seed(seed);
      CHECK(allclose(f(x), eager, 1e-6, 1e-6));
    };
    auto check_eval = [&](std::int64_t n, std::uint64_t seed) {
      const Tensor x = random_tensor(float32, {n, 4}, {-2, 2}, seed);
      CHECK(allclose(f(x), fc(x), 1e-6, 1e-6));
    };
    drop.set_train(true);
    check_train(2, 1);
    check_train(3, 2);
    check_train(4, 3);  // 2 static graphs, then a generalized one
    const int train_compiles = f.compile_count();
    CHECK(f.generalized_count() == 1);
    drop.set_train(false);
    check_eval(5, 4);  // the eval mode's own generalized graph
    check_eval(9, 5);
    const int both = f.compile_count();
    CHECK(both == train_compiles + 1);
    CHECK(f.generalized_count() == 2);
    drop.set_train(true);
    check_train(6, 6);  // the training graph serves a new size: no compile
    check_train(11, 7);
    drop.set_train(false);
    check_eval(12, 8);
    CHECK(f.compile_count() == both);
    CHECK(f.generalized_count() == 2);
  }

  TEST_CASE("BatchNorm under jit equals eager in each mode, with its moving statistics") {
    nn::BatchNorm1d eager_bn(3), jit_bn(3);
    auto f = jit(jit_bn, kTest);
    for (int epoch = 0; epoch < 3; ++epoch) {
      const Tensor x = random_tensor(float32, {6, 3}, {-2, 2}, 10 + epoch);
      eager_bn.set_train(true);
      jit_bn.set_train(true);
      CHECK(allclose(f(x), eager_bn(x), 1e-5, 1e-5));
      CHECK(allclose(jit_bn.moving_mean, eager_bn.moving_mean, 1e-6, 1e-6));
      CHECK(allclose(jit_bn.moving_variance, eager_bn.moving_variance, 1e-6, 1e-6));
      eager_bn.set_train(false);
      jit_bn.set_train(false);
      CHECK(allclose(f(x), eager_bn(x), 1e-5, 1e-5));
    }
    CHECK_FALSE(allclose(jit_bn.moving_mean, zeros({3}), 0, 0));  // training updated them
    CHECK(f.compile_count() == 2);
  }

  TEST_CASE("a sub-cell's own mode keys the graph of its parent's call") {
    Generator g(1);
    DenseDropout net(&g);
    auto f = jit(net, kTest);
    const Tensor x = random_tensor(float32, {3, 4}, {-2, 2}, 3);
    net.set_train(true);
    f(x);
    net.drop.set_train(false);  // only the dropout is in eval mode now
    CHECK(allclose(f(x), net.fc(x), 0, 0));
    CHECK(f.compile_count() == 2);
    net.set_train(true);
    f(x);
    CHECK(f.compile_count() == 2);
  }

  TEST_CASE("a generalized graph's new rank family keys the training flags it reads") {
    Generator g(5);
    RankGate net(&g);
    net.set_train(true);
    auto f = jit(net, {.dynamic = 1, .verify = true});
    const Tensor a = random_tensor(float32, {2, 4}, {-2, 2}, 1);
    const Tensor b = random_tensor(float32, {2, 3, 4}, {-2, 2}, 2);
    const Tensor c = random_tensor(float32, {2, 3, 4, 5}, {-2, 2}, 3);
    CHECK(allclose(f(a), a, 0, 0));
    g.manual_seed(1);
    f(b);
    CHECK(allclose(f(c), c, 0, 0));  // a third rank: one any-rank generalized graph
    REQUIRE(f.generalized_count() == 1);
    const Tensor x = random_tensor(float32, {4, 5, 4}, {-2, 2}, 4);
    net.set_train(false);
    CHECK(allclose(f(x), x, 0, 0));  // rank 3 traced in eval mode: dropout is the identity
    net.set_train(true);
    g.manual_seed(9);
    const Tensor eager = net(x);
    CHECK_FALSE(allclose(eager, x, 0, 0));
    g.manual_seed(9);
    CHECK(allclose(f(x), eager, 1e-6, 1e-6));  // the training mode's graph, not the eval one
    net.set_train(false);
    CHECK(allclose(f(x), x, 0, 0));
  }

  TEST_CASE("generalized graphs keyed with a destroyed cell's training flag are deleted") {
    Generator g(5);
    auto drop = std::make_unique<nn::Dropout>(0.5, &g);
    auto fwd = [&](const Tensor& x) -> Tensor { return (*drop)(x); };
    auto f = jit(fwd, {.dynamic = 1, .verify = true});
    auto run_sizes = [&](std::int64_t first) {
      for (std::int64_t n = first; n < first + 3; ++n)
        f(random_tensor(float32, {n, 4}, {-2, 2}, 1));
    };
    drop->set_train(false);
    run_sizes(2);
    REQUIRE(f.generalized_count() == 1);
    for (int round = 0; round < 3; ++round) {
      // A new cell in place of the old one: the old graphs read a flag that is gone.
      drop = std::make_unique<nn::Dropout>(0.5, &g);
      drop->set_train(false);
      run_sizes(10 + 10 * round);
      CHECK(f.generalized_count() == 1);
    }
  }
}
