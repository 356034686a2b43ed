// ms::jit: eager and jitted results agree, the compile key and cache, memory
// planning, captured tensors and in-place updates, errors at trace time.
#include <doctest/doctest.h>

#include <ms/ms.hpp>

#include <random>
#include <sstream>
#include <thread>
#include "jit/jit_test_util.hpp"
#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;

namespace {
using ms_test::kTest;
using test::random_tensor;
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("a jitted chain equals the eager one and compiles once per signature") {
    const Tensor b = random_tensor(float32, {3}, {-2, 2}, 2);
    auto fn = [&](const auto& x) { return relu(x * 2.f + b) * 0.5f - x; };
    auto f = jit(fn, kTest);
    const Tensor x = random_tensor(float32, {4, 3}, {-2, 2}, 1);
    const Tensor want = fn(x);
    CHECK(allclose(f(x), want, 0, 0));
    CHECK(allclose(f(x), want, 0, 0));
    CHECK(f.compile_count() == 1);
    CHECK(f(random_tensor(float32, {5, 3}, {-2, 2}, 3)).shape() ==
          Shape{5, 3});  // new shape: new graph
    CHECK(f.compile_count() == 2);
    const Tensor x64 = x.to(float64);
    CHECK(allclose(f(x64), fn(x64), 0, 0));  // new dtype: new graph
    CHECK(f.compile_count() == 3);
    CHECK(f.cache_size() == 3);
    CHECK(f.phase().find("f64[4,3]") != std::string::npos);
  }

  TEST_CASE("O1 fuses the elementwise chain into one region; O0 does not") {
    const Tensor x = random_tensor(float32, {8, 8}, {-2, 2}, 1),
                 y = random_tensor(float32, {8, 8}, {-2, 2}, 2);
    auto fn = [](const auto& a, const auto& b) { return ms::tanh(a * b + 1.f) - a; };
    auto f1 = jit(fn, kTest);
    auto f0 = jit(fn, {.jit_level = JitLevel::O0, .verify = true});
    CHECK(allclose(f1(x, y), fn(x, y), 0, 0));
    CHECK(allclose(f0(x, y), fn(x, y), 1e-6, 1e-6));
    CHECK(f1.dump().find("Fused[Mul, Add, Tanh, Sub]") != std::string::npos);
    CHECK(f0.dump().find("Fused") == std::string::npos);
    CHECK(f0.dump().find("= Tanh(") != std::string::npos);
  }

  TEST_CASE("non-elementwise ops are their own nodes; results match eager") {
    const Tensor w = random_tensor(float32, {6, 4}, {-2, 2}, 7),
                 x = random_tensor(float32, {5, 6}, {-2, 2}, 8);
    auto fn = [&](const auto& in) {
      Tensor h = matmul(in, w);
      return log_softmax(relu(h) + 1.f, -1);
    };
    auto f = jit(fn, kTest);
    CHECK(allclose(f(x), fn(x), 1e-6, 1e-6));
    const std::string d = f.dump();
    CHECK(d.find("MatMul(%arg0, %cap0) : (f32[5,6], f32[6,4]) -> f32[5,4]") != std::string::npos);
    CHECK(d.find("LogSoftmax") != std::string::npos);
  }

  TEST_CASE("a cache hit allocates only its outputs") {
    const Tensor w = random_tensor(float32, {32, 32}, {-2, 2}, 1);
    auto f = jit([&](const auto& x) { return sum(relu(matmul(x, w) * 2.f) + x, {1}); }, kTest);
    const Tensor x = random_tensor(float32, {16, 32}, {-2, 2}, 2);
    const Tensor r1 = f(x);  // compile + record
    const Tensor r2 = f(x);  // planned
    const auto before = memory_stats().alloc_count;
    const Tensor r3 = f(x);
    CHECK(memory_stats().alloc_count - before == 1);  // the result only
    CHECK(allclose(r1, r3, 0, 0));
    CHECK(allclose(r2, r3, 0, 0));
  }

  TEST_CASE("captured tensors are inputs bound by identity; in-place updates are seen") {
    Tensor w = ones({3});
    auto f = jit([&](const auto& x) { return x * w; }, kTest);
    CHECK(f(full({3}, 2.f)).to_vector<float>() == std::vector<float>{2, 2, 2});
    w += 1.f;  // in place
    CHECK(f(full({3}, 2.f)).to_vector<float>() == std::vector<float>{4, 4, 4});
    CHECK(f.compile_count() == 1);
    CHECK(f.dump().find("captures(%cap0: f32[3])") != std::string::npos);
  }

  TEST_CASE("tensors created inside the function are constants and get folded") {
    auto f = jit([](const auto& x) { return x + ones({3}) * 2.f; }, kTest);
    CHECK(f(zeros({3})).to_vector<float>() == std::vector<float>{2, 2, 2});
    CHECK(f.dump().find("Const") != std::string::npos);
    CHECK(f.dump().find("Mul") == std::string::npos);  // ones * 2 folded
  }

  TEST_CASE("literals inside the function: 1-D and 2-D, every kind of value") {
    // A 2-D literal used to be built by row copies, which a trace records as
    // writes into graph values (an error); it is a constant like the 1-D one.
    auto f = jit(
        [](const auto& x) {
          return std::make_tuple(Tensor(x + tensor({{1.f, 2.f}, {3.f, 4.f}})),
                                 Tensor(x * tensor({{1, -2}, {3, 4}}, float64)),
                                 Tensor(x + tensor({0.5, 1.5})));
        },
        kTest);
    const Tensor x = full({2, 2}, 1.0, float64);
    const auto [a, b, c] = f(x);
    CHECK(a.dtype() == float64);
    CHECK(a.to_vector<double>() == std::vector<double>{2, 3, 4, 5});
    CHECK(b.to_vector<double>() == std::vector<double>{1, -2, 3, 4});
    CHECK(c.to_vector<double>() == std::vector<double>{1.5, 2.5, 1.5, 2.5});
    // the same values eagerly; integers above 2^53 stay exact; ragged rows are refused
    CHECK(tensor({{1.f, 2.f}, {3.f, 4.f}}).shape() == Shape{2, 2});
    CHECK(tensor({{std::int64_t{1} << 60, 1}}).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{std::int64_t{1} << 60, 1});
    CHECK(tensor({{true, false}}).dtype() == bool_);
    CHECK_THROWS_WITH_AS(tensor({{1, 2}, {3}}), doctest::Contains("tensor: row 1 has 1 values"),
                         ShapeError);
    auto g = jit([](const auto& x) { return x + tensor({{1, 2}, {3}}); }, kTest);
    CHECK_THROWS_WITH_AS(g(x), doctest::Contains("tensor: row 1 has 1 values"), ShapeError);
  }

  TEST_CASE("updates of captured parameters are side effects of the graph") {
    Tensor w = full({2}, 1.f);
    auto step = jit(
        [&](const auto& g) {
          auto loss = sum(w * w);
          assign(w, w - g * 0.5f);
          return loss;
        },
        kTest);
    const Tensor g = full({2}, 1.f);
    CHECK(step(g).item<float>() == 2.f);
    CHECK(w.to_vector<float>() == std::vector<float>{0.5f, 0.5f});
    CHECK(step(g).item<float>() == 0.5f);
    CHECK(w.to_vector<float>() == std::vector<float>{0.f, 0.f});
    CHECK(step.dump().find("Assign(%cap0") != std::string::npos);
  }

  TEST_CASE("in-place parameter updates never change what the old value's readers see") {
    // In a graph, values computed before an Assign (views included) see the
    // parameter as it was; the executor writes a fused update straight into
    // the parameter only when no such reader runs after it. Expected values
    // are computed from a snapshot of the old parameter.
    auto run = [](auto body, auto expect, auto update) {
      Tensor w = arange(0, 6).reshape({2, 3});
      const Tensor x = arange(0, 4).reshape({2, 2});
      auto f = jit([&](const Tensor& a) { return body(w, a); }, kTest);
      for (int i = 0; i < 3; ++i) {
        const Tensor old = w.clone();
        const Tensor j = f(x);
        CHECK(allclose(j, expect(old, x), 0, 0));
        CHECK(allclose(w, update(old), 0, 0));
      }
    };
    auto twice_plus_one = [](const Tensor& o) { return Tensor(o * 2.f + 1.f); };
    SUBCASE("old value read through a transpose view by a later matmul") {
      run(
          [](Tensor& w, const Tensor& a) {
            const Tensor t = w.transpose(0, 1);  // [3, 2], a view of the old w
            assign(w, w * 2.f + 1.f);
            return matmul(t, a);
          },
          [](const Tensor& o, const Tensor& a) { return matmul(o.transpose(0, 1), a); },
          twice_plus_one);
    }
    SUBCASE("old value reduced before the update, new value returned") {
      run(
          [](Tensor& w, const Tensor& a) {
            const Tensor s = sum(w);
            assign(w, w - s * 0.01f);
            return Tensor(w + sum(a));
          },
          [](const Tensor& o, const Tensor& a) { return Tensor(o - sum(o) * 0.01f + sum(a)); },
          [](const Tensor& o) { return Tensor(o - sum(o) * 0.01f); });
    }
    SUBCASE("old value returned as a view") {
      run(
          [](Tensor& w, const Tensor&) {
            const Tensor r = w.reshape({3, 2});
            assign(w, w * 2.f + 1.f);
            return r;
          },
          [](const Tensor& o, const Tensor&) {
            return o.reshape({3, 2});
          },
          twice_plus_one);
    }
  }

  TEST_CASE("concat of adjacent pieces of a graph's own value is a view; of anything else a copy") {
    // Values a compiled graph makes are not written while it runs, so
    // concatenating adjacent pieces of one (split's gradient over q, k and v
    // that attention's backward wrote into one buffer) need not copy. A
    // tensor from outside (an input, or any eager tensor) may be written in
    // place later: concat copies it, as PyTorch's cat.
    const Tensor x = arange(0, 24, 1, float32).reshape({2, 12});
    const auto pieces = [](const Tensor& t) { return split(t, 4, -1); };
    auto f = jit(
        [&](const Tensor& a) {
          const Tensor p = a * 2.f;
          return std::make_tuple(p, concat(pieces(p), -1));
        },
        kTest);
    for (int call = 0; call < 2; ++call) {
      const auto [p, c] = f(x);
      CHECK(c.storage() == p.storage());
      CHECK(ms::test::bitwise_equal(c, x * 2.f));
    }
    auto g = jit([&](const Tensor& a) { return concat(pieces(a), -1); }, kTest);
    Tensor y = x.clone();
    const Tensor gy = g(y), eager = concat(pieces(y), -1);
    CHECK(gy.storage() != y.storage());
    CHECK(eager.storage() != y.storage());
    y.fill_(0.f);
    CHECK(ms::test::bitwise_equal(gy, x));
    CHECK(ms::test::bitwise_equal(eager, x));
  }

  TEST_CASE("scalars are baked into the key unless mutable") {
    auto f = jit([](const auto& x, auto s) { return x * s; }, kTest);
    const Tensor x = ones({2});
    CHECK(f(x, 2.f).to_vector<float>() == std::vector<float>{2, 2});
    CHECK(f(x, 3.f).to_vector<float>() == std::vector<float>{3, 3});
    CHECK(f.compile_count() == 2);
    auto g = jit([](const auto& x, const auto& s) { return x * s; }, kTest);
    CHECK(g(x, mutable_(2.f)).to_vector<float>() == std::vector<float>{2, 2});
    CHECK(g(x, mutable_(3.f)).to_vector<float>() == std::vector<float>{3, 3});
    CHECK(g.compile_count() == 1);
    CHECK(g.phase().find("mutable f32") != std::string::npos);
  }

  TEST_CASE("vector and tuple arguments; tuple, vector and struct results") {
    auto f = jit(
        [](const std::vector<Tensor>& xs, const std::tuple<Tensor, int>& t) {
          Tensor s = xs[0];
          for (std::size_t i = 1; i < xs.size(); ++i) s = s + xs[i];
          return std::make_tuple(s * std::get<1>(t), std::vector<Tensor>{s, std::get<0>(t)});
        },
        kTest);
    const std::vector<Tensor> xs{ones({2}), ones({2}), ones({2})};
    auto [a, v] = f(xs, std::make_tuple(full({2}, 5.f), 2));
    CHECK(a.to_vector<float>() == std::vector<float>{6, 6});
    REQUIRE(v.size() == 2);
    CHECK(v[1].to_vector<float>() == std::vector<float>{5, 5});
    auto [a2, v2] = f(xs, std::make_tuple(full({2}, 5.f), 2));  // a hit keeps the structure
    CHECK(v2.size() == 2);
    CHECK(f.compile_count() == 1);
    f(std::vector<Tensor>{ones({2})}, std::make_tuple(full({2}, 5.f), 2));
    CHECK(f.compile_count() == 2);  // another vector length

    struct Out {
      Tensor sum, prod;
    };
    auto g = jit([](const auto& x, const auto& y) { return Out{x + y, x * y}; }, kTest);
    const Out o = g(full({2}, 2.f), full({2}, 3.f));
    CHECK(o.sum.to_vector<float>() == std::vector<float>{5, 5});
    CHECK(o.prod.to_vector<float>() == std::vector<float>{6, 6});
  }

  TEST_CASE("trace-time errors") {
    auto bad_shape = jit([](const auto& a, const auto& b) { return matmul(a, b); }, kTest);
    CHECK_THROWS_WITH_AS(bad_shape(ones({2, 3}), ones({4, 5})), doctest::Contains("matmul"),
                         ShapeError);
    CHECK(bad_shape.compile_count() == 0);
    auto reads = jit([](const auto& a) { return a * a.template item<float>(); }, kTest);
    CHECK_THROWS_WITH_AS(reads(ones({1})), doctest::Contains("symbolic tensor"), ValueError);
    Tensor leaked;
    auto keep = jit(
        [&](const auto& a) {
          leaked = a + 1.f;
          return leaked;
        },
        kTest);
    keep(ones({1}));
    CHECK(leaked.is_symbolic());
    CHECK_THROWS_WITH_AS(Tensor(leaked * 2.f), doctest::Contains("symbolic tensor"), ValueError);
    auto infer_classes = jit([](const auto& i) { return one_hot(i); }, kTest);
    CHECK_THROWS_WITH_AS(infer_classes(tensor({1, 2})),
                         doctest::Contains("one_hot: num_classes -1"), ValueError);
    CHECK_THROWS_AS(jit([](const auto& a) { return a; }, {.jit_level = static_cast<JitLevel>(3)}),
                    ValueError);
    CHECK_THROWS_AS(jit([](const auto& a) { return a; }, {.exec_order = static_cast<ExecOrder>(3)}),
                    ValueError);
  }

  TEST_CASE("jit options are enums; text from a config or a command line parses into them") {
    static_assert(std::is_same_v<decltype(JitConfig{}.jit_level), JitLevel>);
    static_assert(std::is_same_v<decltype(JitConfig{}.exec_order), ExecOrder>);
    static_assert(std::is_same_v<decltype(JitConfig{}.dynamic_policy), DynamicPolicy>);
    CHECK(JitConfig{}.jit_level == JitLevel::O1);
    CHECK(JitConfig{}.exec_order == ExecOrder::Bfs);
    CHECK(JitConfig{}.dynamic_policy == DynamicPolicy::AllDims);
    CHECK(parse_jit_level("O0") == JitLevel::O0);
    CHECK(parse_jit_level("o1") == JitLevel::O1);
    CHECK(parse_exec_order("dfs") == ExecOrder::Dfs);
    CHECK(parse_exec_order("BFS") == ExecOrder::Bfs);
    CHECK(parse_dynamic_policy("changed_dims") == DynamicPolicy::ChangedDims);
    CHECK(parse_dynamic_policy("All_Dims") == DynamicPolicy::AllDims);
    for (JitLevel l : {JitLevel::O0, JitLevel::O1}) CHECK(parse_jit_level(to_string(l)) == l);
    for (ExecOrder o : {ExecOrder::Bfs, ExecOrder::Dfs}) CHECK(parse_exec_order(to_string(o)) == o);
    for (DynamicPolicy p : {DynamicPolicy::AllDims, DynamicPolicy::ChangedDims})
      CHECK(parse_dynamic_policy(to_string(p)) == p);
    std::ostringstream os;
    os << JitLevel::O0 << " " << ExecOrder::Dfs << " " << DynamicPolicy::ChangedDims;
    CHECK(os.str() == "O0 dfs changed_dims");
    CHECK_THROWS_WITH_AS(
        parse_jit_level("O3"),
        doctest::Contains("parse_jit_level: expected \"O0\" or \"O1\", got \"O3\""), ValueError);
    CHECK_THROWS_WITH_AS(
        parse_exec_order("random"),
        doctest::Contains("parse_exec_order: expected \"bfs\" or \"dfs\", got \"random\""),
        ValueError);
    CHECK_THROWS_WITH_AS(
        parse_dynamic_policy("some"),
        doctest::Contains(
            "parse_dynamic_policy: expected \"all_dims\" or \"changed_dims\", got \"some\""),
        ValueError);
    CHECK_THROWS_AS(parse_jit_level(""), ValueError);
    CHECK_THROWS_AS(parse_dynamic_policy("changed_dimsx"), ValueError);
    // A parsed config compiles as the enum would.
    auto f = jit([](const auto& a) { return ms::relu(a) * 2.f; },
                 {.jit_level = parse_jit_level("O0"), .exec_order = parse_exec_order("dfs")});
    CHECK(f(tensor({-1.f, 2.f})).to_vector<float>() == std::vector<float>{0, 4});
    CHECK(f.dump().find("Fused") == std::string::npos);  // O0 fuses nothing
  }

  TEST_CASE("the cache is bounded and evicts the least recently used graph") {
    auto f = jit([](const auto& x) { return x + 1.f; }, {.cache_capacity = 2, .verify = true});
    f(ones({1}));
    f(ones({2}));
    f(ones({1}));  // {1} is now the most recent
    f(ones({3}));  // evicts {2}
    CHECK(f.cache_size() == 2);
    CHECK(f.compile_count() == 3);
    f(ones({1}));
    CHECK(f.compile_count() == 3);
    f(ones({2}));
    CHECK(f.compile_count() == 4);
  }

  TEST_CASE("a hook version change recompiles") {
    auto f = jit([](const auto& x) { return x * 2.f; }, kTest);
    f(ones({2}));
    f(ones({2}));
    compiler::bump_hook_version();
    f(ones({2}));
    CHECK(f.compile_count() == 2);
  }

  TEST_CASE("hook churn: graphs keyed with an old hook version are dropped") {
    auto f = jit([](const auto& x) { return x * 2.f; }, kTest);
    f(ones({2}));
    f(ones({3}));
    CHECK(f.cache_size() == 2);
    for (int i = 0; i < 100; ++i) {
      compiler::bump_hook_version();  // as registering or removing any hook does
      f(ones({2}));
      CHECK(f.cache_size() == 1);  // not 2, 3, ... up to the capacity of 64
    }
    CHECK(f.compile_count() == 102);
    f(ones({3}));
    CHECK(f.cache_size() == 2);  // graphs of the current version stay
    f(ones({2}));
    CHECK(f.compile_count() == 103);
  }

  TEST_CASE("two threads calling at once: one compile, both correct") {
    const Tensor w = random_tensor(float32, {64, 64}, {-2, 2}, 3);
    auto f = jit([&](const auto& x) { return relu(matmul(x, w)) * 0.5f; }, kTest);
    const Tensor x = random_tensor(float32, {64, 64}, {-2, 2}, 4);
    const Tensor want = relu(matmul(x, w)) * 0.5f;
    std::atomic<int> bad{0};
    auto work = [&] {
      for (int i = 0; i < 20; ++i)
        if (!allclose(f(x), want, 0, 0)) ++bad;
    };
    std::thread t1(work), t2(work);
    t1.join();
    t2.join();
    CHECK(bad == 0);
    CHECK(f.compile_count() == 1);
  }

  TEST_CASE("views of traced tensors become layout ops") {
    auto f = jit(
        [](const auto& x) {
          Tensor t = x.reshape({3, 4}).transpose(0, 1);
          return t.slice(0, 1, 3) * 2.f + t.select(0, 0).unsqueeze(0);
        },
        kTest);
    const Tensor x = arange(0, 12);
    const Tensor t = x.reshape({3, 4}).transpose(0, 1);
    const Tensor want = t.slice(0, 1, 3) * 2.f + t.select(0, 0).unsqueeze(0);
    CHECK(allclose(f(x), want, 0, 0));
  }
}
