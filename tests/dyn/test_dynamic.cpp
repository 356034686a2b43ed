// Dynamic shapes under ms::jit: the auto-dynamic-shape manager (MindSpore's
// trace, pinned row by row), the "changed_dims" policy, explicit specs
// (input_signature), symbolic graphs, guards, errors, threads.
#include <doctest/doctest.h>

#include <cstdlib>
#include <ms/ms.hpp>

#include <random>
#include <set>
#include <thread>
#include "random.hpp"

using namespace ms;

namespace {
using test::random_tensor;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Collects the recompile log of a jitted function.
struct Log {
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& l) { lines.push_back(l); };
  }
  std::string last() const { return lines.empty() ? std::string() : lines.back(); }
  std::string all() const {
    std::string s;
    for (const auto& l : lines) s += l + "\n";
    return s;
  }
};

JitConfig dyn_config(Log* log = nullptr, DynamicPolicy policy = DynamicPolicy::AllDims) {
  JitConfig c;
  c.dynamic = 1;
  c.dynamic_policy = policy;
  c.verify = true;
  if (log) c.on_recompile = log->sink();
  return c;
}
}  // namespace

TEST_SUITE("jit.dynamic") {
  TEST_CASE("MindSpore's trace: 2 static graphs, one generalized graph, -1 then -2, switch-off") {
    Log log;
    auto fn = [](const auto& x, int k) { return relu(x) * 2.f + static_cast<float>(k); };
    auto f = jit(fn, dyn_config(&log));
    auto step = [&](const Shape& s, int k, unsigned seed) {
      const Tensor x = random_tensor(float32, s, {-2, 2}, seed);
      const Tensor y = f(x, k);
      CHECK(allclose(y, fn(x, k), 0, 0));
    };
    // 1: static compile P1
    step({2, 3}, 1, 1);
    CHECK(f.compile_count() == 1);
    CHECK(f.generalized_count() == 0);
    // 2: hit P1
    step({2, 3}, 1, 2);
    CHECK(f.compile_count() == 1);
    // 3: static compile P2
    step({4, 3}, 1, 3);
    CHECK(f.compile_count() == 2);
    CHECK(f.generalized_count() == 0);
    CHECK(contains(log.last(), "argument 0 dim 0: 2 -> 4"));
    // 4: hit P1
    step({2, 3}, 1, 4);
    CHECK(f.compile_count() == 2);
    // 5: generalized (-1,-1) P3
    step({8, 3}, 1, 5);
    CHECK(f.compile_count() == 3);
    CHECK(f.generalized_count() == 1);
    CHECK(contains(f.phase(), "(f32[-1,-1])"));
    CHECK(contains(log.all(), "generalized graph #1 (f32[-1,-1])"));
    // 6: hit P3 (a new size, no compile)
    step({16, 3}, 1, 6);
    CHECK(f.compile_count() == 3);
    CHECK(contains(f.phase(), "(f32[-1,-1])"));
    CHECK(contains(f.phase(), "s0=16"));
    // 7: generalized to (-2,): compile P4, P3 deleted
    step({5, 3, 2}, 1, 7);
    CHECK(f.compile_count() == 4);
    CHECK(f.generalized_count() == 1);
    CHECK(contains(f.phase(), "(f32[-2])"));
    CHECK(contains(log.all(), "generalized graph #1 (f32[-1,-1]) deleted"));
    // 8: (8,3) generalizes against (-2,): hit P4
    step({8, 3}, 1, 8);
    CHECK(f.compile_count() == 4);
    CHECK(contains(f.phase(), "(f32[-2])"));
    CHECK(f.auto_dynamic_active());
    // 9: an int argument changes: auto-dynamic off; new shapes compile static
    step({8, 3}, 2, 9);
    CHECK(f.compile_count() == 5);
    CHECK(!f.auto_dynamic_active());
    CHECK(contains(log.last(), "switched off"));
    step({32, 3}, 2, 10);
    CHECK(f.compile_count() == 6);
    step({33, 3}, 2, 11);
    CHECK(f.compile_count() == 7);
    CHECK(f.generalized_count() == 0);
  }

  TEST_CASE("compile counts over batch sizes: all_dims 3, changed_dims 2, off: one per shape") {
    const Tensor w = random_tensor(float32, {20, 7}, {-2, 2}, 1),
                 b = random_tensor(float32, {7}, {-2, 2}, 2);
    auto fn = [&](const auto& x) { return sum(relu(matmul(x, w) + b), {1}); };
    std::vector<std::int64_t> sizes{8, 16, 32, 64};
    std::mt19937 rng(7);
    for (int i = 0; i < 100; ++i) sizes.push_back(std::uniform_int_distribution<int>(1, 256)(rng));
    const std::set<std::int64_t> distinct(sizes.begin(), sizes.end());

    auto stat = jit(fn, {.cache_capacity = 256, .verify = true});
    Log log;
    auto all = jit(fn, dyn_config(&log));
    auto changed = jit(fn, dyn_config(nullptr, DynamicPolicy::ChangedDims));
    unsigned seed = 100;
    for (std::int64_t n : sizes) {
      const Tensor x = random_tensor(float32, {n, 20}, {-2, 2}, ++seed);
      const Tensor want = stat(x);
      CHECK(allclose(want, fn(x), 1e-5, 1e-5));
      CHECK(allclose(all(x), want, 0, 0));  // the same graph, instantiated for n
      CHECK(allclose(changed(x), want, 0, 0));
    }
    CHECK(all.compile_count() == 3);
    CHECK(changed.compile_count() == 2);
    CHECK(stat.compile_count() == static_cast<int>(distinct.size()));
    // all_dims made both dims of x symbols; the weight pins s1 to 20.
    CHECK(contains(all.phase(), "(f32[-1,-1])"));
    CHECK(contains(log.all(), "guards: s1 == 20"));
    CHECK(contains(all.dump(), "MatMul(%arg0, %cap0) : (f32[s0,20], f32[20,7]) -> f32[s0,7]"));
    CHECK(contains(changed.phase(), "(f32[-1,20])"));
    CHECK(contains(changed.dump(), "Sum(%2) {axes=[1], keepdims=false} : (f32[s0,7]) -> f32[s0]"));
  }

  TEST_CASE("a second call with a size costs what the static graph costs") {
    const Tensor w = random_tensor(float32, {16, 16}, {-2, 2}, 1);
    auto fn = [&](const auto& x) { return relu(matmul(x, w)) * 2.f + 1.f; };
    auto stat = jit(fn, {.verify = true});
    auto dyn = jit(fn, dyn_config());
    for (std::int64_t n : {2, 4, 8}) dyn(random_tensor(float32, {n, 16}, {-2, 2}, 1));
    const Tensor x = random_tensor(float32, {24, 16}, {-2, 2}, 2);
    for (int i = 0; i < 3; ++i) {  // record, plan, steady
      stat(x);
      dyn(x);
    }
    const int traces = dyn.trace_count();
    auto allocs = [](auto& f, const Tensor& in) {
      const std::int64_t before = memory_stats().alloc_count;
      f(in);
      return memory_stats().alloc_count - before;
    };
    CHECK(allocs(dyn, x) == allocs(stat, x));
    CHECK(dyn.trace_count() == traces);
  }

  TEST_CASE("the deleted generalized graph frees its memory") {
    // The [n, 3000] intermediate lives in the planned arena of each size.
    auto fn = [](const auto& x) { return sum(ms::exp(x) * 2.f + x, {1}) * 3.f; };
    auto f = jit(fn, dyn_config());
    f(random_tensor(float32, {2, 3000}, {-2, 2}, 1));
    f(random_tensor(float32, {4, 3000}, {-2, 2}, 2));
    for (std::int64_t n : {64, 128})
      for (int i = 0; i < 3; ++i)
        f(random_tensor(float32, {n, 3000}, {-2, 2}, 3));  // P3 with planned arenas
    storage_cache_clear();
    const std::int64_t before = memory_stats().live_bytes;
    f(random_tensor(float32, {2, 3, 2}, {-2, 2}, 4));  // (-2,): P3 deleted
    storage_cache_clear();
    CHECK(f.generalized_count() == 1);
    CHECK(memory_stats().live_bytes < before - 128 * 3000 * 4);
  }

  TEST_CASE("rule by rule: scalars, dtypes, 0-d tensors, kinds, sequences") {
    SUBCASE(
        "a float scalar equal by isclose keeps auto-dynamic on; another value switches it off") {
      auto f = jit([](const auto& x, double a) { return x * a; }, dyn_config());
      for (std::int64_t n : {2, 4, 8, 16}) f(random_tensor(float32, {n, 2}, {-2, 2}, 1), 0.5);
      CHECK(f.compile_count() == 3);
      CHECK(f.auto_dynamic_active());
      f(random_tensor(float32, {16, 2}, {-2, 2}, 1), 0.75);
      CHECK(!f.auto_dynamic_active());
      CHECK(f.compile_count() == 4);
    }
    SUBCASE("a dtype change switches auto-dynamic off") {
      auto f = jit([](const auto& x) { return x * 2; }, dyn_config());
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1));
      f(random_tensor(float64, {2, 2}, {-2, 2}, 1));
      CHECK(!f.auto_dynamic_active());
    }
    SUBCASE("a 0-d tensor argument switches auto-dynamic off") {
      auto f = jit([](const auto& x, const auto& s) { return x * s; }, dyn_config());
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1), tensor(2.f));
      CHECK(!f.auto_dynamic_active());
      f(random_tensor(float32, {4, 2}, {-2, 2}, 1), tensor(2.f));
      f(random_tensor(float32, {8, 2}, {-2, 2}, 1), tensor(2.f));
      CHECK(f.compile_count() == 3);
      CHECK(f.generalized_count() == 0);
    }
    SUBCASE("an argument kind change (int then float) switches it off") {
      auto f = jit([](const auto& x, auto a) { return x * static_cast<float>(a); }, dyn_config());
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1), 2);
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1), 2.0);
      CHECK(!f.auto_dynamic_active());
    }
    SUBCASE("a mutable scalar does not switch it off") {
      auto f = jit([](const auto& x, const auto& a) { return x * a; }, dyn_config());
      for (std::int64_t n : {2, 4, 8})
        f(random_tensor(float32, {n, 2}, {-2, 2}, 1), mutable_(1.5f));
      const Tensor x = random_tensor(float32, {9, 2}, {-2, 2}, 2);
      CHECK(allclose(f(x, mutable_(3.f)), x * 3.f, 0, 0));
      CHECK(f.compile_count() == 3);
      CHECK(f.auto_dynamic_active());
    }
    SUBCASE("a non-mutable vector of tensors with a new shape compiles static") {
      auto fn = [](const std::vector<Tensor>& v) { return v[0] + v[1]; };
      auto f = jit(fn, dyn_config());
      for (std::int64_t n : {2, 4, 8, 16}) {
        const std::vector<Tensor> v{random_tensor(float32, {n, 3}, {-2, 2}, 1),
                                    random_tensor(float32, {n, 3}, {-2, 2}, 2)};
        CHECK(allclose(f(v), fn(v), 0, 0));
      }
      CHECK(f.compile_count() == 4);
      CHECK(f.generalized_count() == 0);
      CHECK(f.auto_dynamic_active());
    }
    SUBCASE("a mutable vector generalizes element-wise") {
      auto fn = [](const std::vector<Tensor>& v) { return v[0] * v[1]; };
      auto f = jit(fn, dyn_config());
      for (std::int64_t n : {2, 4, 8, 16, 32}) {
        const std::vector<Tensor> v{random_tensor(float32, {n, 3}, {-2, 2}, 1),
                                    random_tensor(float32, {n, 3}, {-2, 2}, 2)};
        CHECK(allclose(f(mutable_(v)), fn(v), 0, 0));
      }
      CHECK(f.compile_count() == 3);
      CHECK(contains(f.phase(), "(f32[-1,-1], f32[-1,-1])"));
    }
    SUBCASE("a changed argument count switches it off") {
      auto f = jit([](const auto&... xs) { return (xs + ...); }, dyn_config());
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1));
      f(random_tensor(float32, {2, 2}, {-2, 2}, 1), random_tensor(float32, {2, 2}, {-2, 2}, 2));
      CHECK(!f.auto_dynamic_active());
    }
    SUBCASE("MS_AUTO_DYNAMIC_SHAPE_ENABLE=1 turns it on for functions made afterwards") {
      auto off = jit([](const auto& x) { return x + 1; });
      CHECK(!off.auto_dynamic_active());
      setenv("MS_AUTO_DYNAMIC_SHAPE_ENABLE", "1", 1);
      auto on = jit([](const auto& x) { return x + 1; });
      unsetenv("MS_AUTO_DYNAMIC_SHAPE_ENABLE");
      CHECK(on.auto_dynamic_active());
      for (std::int64_t n : {2, 4, 8, 16}) on(random_tensor(float32, {n}, {-2, 2}, 1));
      CHECK(on.compile_count() == 3);
    }
  }

  TEST_CASE(
      "changed_dims: only changed dims are symbols, equal changes share one, a rank change is -2") {
    Log log;
    auto fn = [](const auto& x, const auto& y) { return sum(x, {1}) + sum(y, {1}); };
    auto f = jit(fn, dyn_config(&log, DynamicPolicy::ChangedDims));
    f(random_tensor(float32, {4, 5}, {-2, 2}, 1), random_tensor(float32, {4, 6}, {-2, 2}, 2));
    f(random_tensor(float32, {8, 5}, {-2, 2}, 1), random_tensor(float32, {8, 6}, {-2, 2}, 2));
    CHECK(f.compile_count() == 2);
    CHECK(contains(f.phase(), "(f32[s0,5], f32[s0,6])"));
    CHECK(contains(log.all(), "argument 0 dim 0: 4 -> 8"));
    CHECK(contains(log.all(), "argument 1 dim 0: 4 -> 8"));
    const Tensor x = random_tensor(float32, {11, 5}, {-2, 2}, 3),
                 y = random_tensor(float32, {11, 6}, {-2, 2}, 4);
    CHECK(allclose(f(x, y), fn(x, y), 1e-6, 1e-6));
    CHECK(f.compile_count() == 2);
    // A changed inner dim: a new generalized graph where it is a symbol too.
    f(random_tensor(float32, {11, 9}, {-2, 2}, 3), random_tensor(float32, {11, 6}, {-2, 2}, 4));
    CHECK(f.compile_count() == 3);
    CHECK(contains(f.phase(), "(f32[s0,-1], f32[s0,6])"));
    CHECK(f.generalized_count() == 2);
    // Bounded: max_generalized graphs are kept.
    JitConfig c = dyn_config(nullptr, DynamicPolicy::ChangedDims);
    c.max_generalized = 1;
    auto g = jit([](const auto& x) { return x * 2.f; }, c);
    g(random_tensor(float32, {2, 3}, {-2, 2}, 1));
    g(random_tensor(float32, {4, 3}, {-2, 2}, 1));
    g(random_tensor(float32, {4, 5}, {-2, 2}, 1));
    g(random_tensor(float32, {4, 5, 6}, {-2, 2}, 1));
    CHECK(g.generalized_count() == 1);
    CHECK(contains(g.phase(), "(f32[-2])"));
  }

  TEST_CASE("input_signature: one graph for every size; named dims shared; symbolic dims printed") {
    Dim batch("batch");
    auto fn = [](const auto& x, const auto& y) {
      return concat({reshape(x, {x.dim(0), 784}), y}, 0);
    };
    auto f = jit(fn, {.input_signature = {TensorSpec({batch, 28, 28}, float32),
                                          TensorSpec({-1, 784}, float32)},
                      .verify = true});
    for (std::int64_t n : {3, 5, 1, 64}) {
      const Tensor x = random_tensor(float32, {n, 28, 28}, {-2, 2}, 1),
                   y = random_tensor(float32, {n + 2, 784}, {-2, 2}, 2);
      const Tensor r = f(x, y);
      CHECK(r.shape() == Shape{2 * n + 2, 784});
      CHECK(allclose(r, fn(x, y), 0, 0));
    }
    CHECK(f.compile_count() == 1);
    const std::string d = f.dump();
    CHECK(contains(d, "f32[batch,784]"));     // reshape of [batch, 28, 28]
    CHECK(contains(d, "f32[batch+s1,784]"));  // concat adds
    CHECK(contains(f.phase(), "(f32[batch,28,28], f32[-1,784])"));
  }

  TEST_CASE("a guard: a dim pinned by a weight, dims tied by broadcasting") {
    const Tensor w = random_tensor(float32, {3, 4}, {-2, 2}, 1);
    Log log;
    JitConfig c;
    c.input_signature = {TensorSpec({-1, -1}, float32), TensorSpec({-1, 4}, float32)};
    c.on_recompile = log.sink();
    auto fn = [&](const auto& x, const auto& z) { return matmul(x, w) + z; };
    auto f = jit(fn, c);
    const Tensor x = random_tensor(float32, {5, 3}, {-2, 2}, 2),
                 z = random_tensor(float32, {5, 4}, {-2, 2}, 3);
    CHECK(allclose(f(x, z), fn(x, z), 1e-6, 1e-6));
    CHECK(contains(log.all(), "s1 == 3"));   // x's dim 1 is pinned by w
    CHECK(contains(log.all(), "s2 == s0"));  // z's batch must equal x's
    const Tensor x2 = random_tensor(float32, {7, 3}, {-2, 2}, 4),
                 z2 = random_tensor(float32, {7, 4}, {-2, 2}, 5);
    CHECK(allclose(f(x2, z2), fn(x2, z2), 1e-6, 1e-6));
    // Breaking a guard traces the call itself: here the op's own error.
    CHECK_THROWS_AS(f(random_tensor(float32, {5, 6}, {-2, 2}, 1), z), ShapeError);
    CHECK_THROWS_WITH_AS(f(random_tensor(float32, {5, 6}, {-2, 2}, 1), z),
                         doctest::Contains("matmul"), ShapeError);
    CHECK_THROWS_AS(f(random_tensor(float32, {6, 3}, {-2, 2}, 1), z), ShapeError);
  }

  TEST_CASE("bad calls against an input_signature are errors, not recompiles") {
    Dim batch("batch");
    auto f =
        jit([](const auto& x, const auto& y) { return sum(x, {1}) + y; },
            {.input_signature = {TensorSpec({batch, 4}, float32), TensorSpec({batch}, float32)}});
    f(random_tensor(float32, {3, 4}, {-2, 2}, 1), random_tensor(float32, {3}, {-2, 2}, 2));
    CHECK_THROWS_WITH_AS(
        f(random_tensor(float32, {3, 5}, {-2, 2}, 1), random_tensor(float32, {3}, {-2, 2}, 2)),
        doctest::Contains("argument 0 dim 1 is 5 but its spec Float32[batch,4] needs 4"),
        ShapeError);
    CHECK_THROWS_WITH_AS(
        f(random_tensor(float32, {3, 4}, {-2, 2}, 1), random_tensor(float32, {2}, {-2, 2}, 2)),
        doctest::Contains("argument 1 dim 0 is 2 but symbol batch"), ShapeError);
    CHECK_THROWS_WITH_AS(
        f(random_tensor(float32, {3, 4, 1}, {-2, 2}, 1), random_tensor(float32, {3}, {-2, 2}, 2)),
        doctest::Contains("rank 3"), ShapeError);
    CHECK_THROWS_WITH_AS(
        f(random_tensor(float64, {3, 4}, {-2, 2}, 1), random_tensor(float32, {3}, {-2, 2}, 2)),
        doctest::Contains("argument 0 has dtype Float64"), TypeError);
    auto g = jit([](const auto& x) { return x * 2; },
                 {.input_signature = {TensorSpec({-1}, float32), TensorSpec({-1}, float32)}});
    CHECK_THROWS_WITH_AS(g(random_tensor(float32, {3}, {-2, 2}, 1)),
                         doctest::Contains("2 input specs for a call with 1 arguments"),
                         ValueError);
    auto h = jit([](const auto& x, int k) { return x * k; },
                 {.input_signature = {TensorSpec({-1}, float32), TensorSpec({-1}, float32)}});
    CHECK_THROWS_WITH_AS(h(random_tensor(float32, {3}, {-2, 2}, 1), 2),
                         doctest::Contains("argument 1 is not a tensor (a number)"), TypeError);
    CHECK(f.compile_count() == 1);
    CHECK_THROWS_AS(TensorSpec({-3}, float32), ValueError);
    CHECK_THROWS_AS(TensorSpec({-2, 3}, float32), ValueError);
    CHECK_THROWS_AS(jit([](const auto& x) { return x; }, {.dynamic = 2}), ValueError);
    JitConfig zero_bindings;
    zero_bindings.binding_cache_capacity = 0;
    CHECK_THROWS_WITH_AS(jit([](const auto& x) { return x; }, zero_bindings),
                         doctest::Contains("binding_cache_capacity must be >= 1"), ValueError);
    JitConfig zero_kept;
    zero_kept.max_generalized = 0;
    CHECK_THROWS_WITH_AS(jit([](const auto& x) { return x; }, zero_kept),
                         doctest::Contains("max_generalized must be >= 1"), ValueError);
    CHECK_THROWS_WITH_AS(
        jit([](const auto& x) { return x; },
            {.dynamic = 1, .dynamic_policy = static_cast<DynamicPolicy>(7)}),
        doctest::Contains("dynamic_policy must be ms::DynamicPolicy::AllDims or ChangedDims"),
        ValueError);
  }

  TEST_CASE(
      "a size the graph cannot be expressed over: every size gets its own graph, results stay "
      "right") {
    Log log;
    // sqrt of a size is no affine, product or inverse-product form.
    auto fn = [](const auto& x) {
      return x * static_cast<float>(1.0 / std::sqrt(double(x.dim(0))));
    };
    auto f = jit(fn, dyn_config(&log));
    for (std::int64_t n : {2, 4, 8, 9, 10}) {
      const Tensor x = random_tensor(float32, {n, 3}, {-2, 2}, 1);
      CHECK(allclose(f(x), fn(x), 0, 0));
    }
    CHECK(contains(log.all(), "cannot be generalized"));
    CHECK(f.compile_count() == 3);
  }

  TEST_CASE("a mean's 1/N and a reshape to the batch size follow the symbol") {
    auto fn = [](const auto& x) { return mean(reshape(x, {x.dim(0), -1}) * 3.f); };
    auto f = jit(fn, dyn_config());
    for (std::int64_t n : {2, 4, 8, 5, 1, 100}) {
      const Tensor x = random_tensor(float32, {n, 2, 3}, {-2, 2}, static_cast<unsigned>(n));
      CHECK(allclose(f(x), fn(x), 1e-6, 1e-6));
    }
    CHECK(f.compile_count() == 3);
  }

  TEST_CASE("gradients through a generalized graph equal the static ones for every size") {
    const Tensor w = random_tensor(float32, {6, 4}, {-2, 2}, 1);
    auto loss = [&](const auto& x, const auto& t) { return mean(square(matmul(x, w) - t)); };
    auto dyn = jit(value_and_grad(loss, {.position = {0, 1}}), dyn_config());
    auto stat = jit(value_and_grad(loss, {.position = {0, 1}}), {.verify = true});
    for (std::int64_t n : {2, 4, 8, 3, 1, 17}) {
      const Tensor x = random_tensor(float32, {n, 6}, {-2, 2}, 2),
                   t = random_tensor(float32, {n, 4}, {-2, 2}, 3);
      auto [v1, g1] = dyn(x, t);
      auto [v2, g2] = stat(x, t);
      CHECK(allclose(v1, v2, 0, 0));
      REQUIRE(g1.size() == 2);
      CHECK(allclose(g1[0], g2[0], 0, 0));
      CHECK(allclose(g1[1], g2[1], 0, 0));
    }
    CHECK(dyn.compile_count() == 3);
  }

  TEST_CASE("two threads with new shapes compile each generalized graph once") {
    const Tensor w = random_tensor(float32, {8, 8}, {-2, 2}, 1);
    auto fn = [&](const auto& x) { return relu(matmul(x, w)); };
    auto f = jit(fn, dyn_config());
    f(random_tensor(float32, {2, 8}, {-2, 2}, 1));
    f(random_tensor(float32, {3, 8}, {-2, 2}, 1));
    std::atomic<int> bad{0};
    auto worker = [&](int id) {
      for (int i = 0; i < 20; ++i) {
        const Tensor x = random_tensor(float32, {4 + (i * 7 + id * 3) % 29, 8}, {-2, 2},
                                       static_cast<unsigned>(i + 50 * id));
        if (!allclose(f(x), fn(x), 1e-6, 1e-6)) ++bad;
      }
    };
    std::thread a(worker, 0), b(worker, 1);
    a.join();
    b.join();
    CHECK(bad == 0);
    CHECK(f.compile_count() == 3);
  }

  TEST_CASE("a hook change makes generalized graphs trace again") {
    auto f = jit([](const auto& x) { return x + 1.f; }, dyn_config());
    for (std::int64_t n : {2, 4, 8}) f(random_tensor(float32, {n, 2}, {-2, 2}, 1));
    const int traces = f.trace_count();
    compiler::bump_hook_version();
    f(random_tensor(float32, {8, 2}, {-2, 2}, 1));
    CHECK(f.trace_count() > traces);
  }
}

TEST_SUITE("jit.dynamic") {
  TEST_CASE("enable_dynamic: specs travel with the function and win over input_signature") {
    auto fn = [](const auto& x) { return sum(x * 2.f, {1}); };
    JitConfig c;
    c.input_signature = {TensorSpec({4, -1}, float32)};  // would reject batch 3
    auto f = jit(enable_dynamic(fn, {TensorSpec({Dim("n"), 5}, float32)}), c);
    for (std::int64_t n : {3, 7, 1}) {
      const Tensor x = random_tensor(float32, {n, 5}, {-2, 2}, 1);
      CHECK(allclose(f(x), fn(x), 1e-6, 1e-6));
    }
    CHECK(f.compile_count() == 1);
    CHECK(contains(f.phase(), "(f32[n,5])"));
    CHECK_THROWS_WITH_AS(f(random_tensor(float32, {3, 6}, {-2, 2}, 1)),
                         doctest::Contains("ms::jit enable_dynamic: argument 0 dim 1 is 6"),
                         ShapeError);
  }

  TEST_CASE("enable_dynamic: specs one after the other are the list form") {
    auto fn = [](const auto& x, const auto& y) { return sum(x, {1}) + y; };
    const Dim n("n");
    auto listed = enable_dynamic(fn, {TensorSpec({n, 5}, float32), TensorSpec({n}, float32)});
    auto variadic = enable_dynamic(fn, TensorSpec({n, 5}, float32), TensorSpec({n}, float32));
    static_assert(std::is_same_v<decltype(listed), decltype(variadic)>);
    CHECK(variadic.specs == listed.specs);
    auto f = jit(variadic);
    for (std::int64_t b : {2, 6}) {
      const Tensor x = random_tensor(float32, {b, 5}, {}, 2),
                   y = random_tensor(float32, {b}, {}, 3);
      CHECK(allclose(f(x, y), fn(x, y), 1e-6, 1e-6));
    }
    CHECK(f.compile_count() == 1);
    CHECK(contains(f.phase(), "(f32[n,5], f32[n])"));
    CHECK_THROWS_WITH_AS(
        f(random_tensor(float32, {2, 5}, {}, 2), random_tensor(float32, {3}, {}, 3)),
        doctest::Contains("ms::jit enable_dynamic: argument 1 dim 0 is 3"), ShapeError);
  }
}
