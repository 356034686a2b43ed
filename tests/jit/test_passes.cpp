// Graph passes one by one on small traced graphs: each does its job, leaves a
// valid graph, and the graph still computes the same values.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <string>

#include <ms/ms.hpp>
#include "pool_calls.hpp"
#include "random.hpp"

using namespace ms;
using compiler::TraceContext;
using ir::NodeKind;

namespace {
// Traces fn on symbolic inputs of the given shapes (float32).
template <class F>
ir::Graph trace(F&& fn, const std::vector<Shape>& shapes) {
  TraceContext tc;
  std::vector<Tensor> in;
  for (const Shape& s : shapes) in.push_back(tc.add_input(float32, s));
  std::vector<Tensor> out = fn(in);
  return tc.finish(out);
}

std::vector<Tensor> run(const ir::Graph& g, const std::vector<Tensor>& in) {
  return compiler::Executable(g).run(in);
}

// float32 inputs of `shapes`, uniform in [-2, 2], input i drawn with seed + i.
std::vector<Tensor> random_inputs(const std::vector<Shape>& shapes, unsigned seed) {
  std::vector<Tensor> x;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    x.push_back(
        ms::test::random_tensor(float32, shapes[i], {-2, 2}, seed + static_cast<unsigned>(i)));
  return x;
}

bool same(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!allclose(a[i], b[i], 1e-6, 1e-6)) return false;
  return true;
}

// The bits of each element (as double: a float's sign of zero is kept).
std::vector<std::uint64_t> bits(const Tensor& t) {
  std::vector<std::uint64_t> b;
  for (double d : t.to_vector<double>()) b.push_back(std::bit_cast<std::uint64_t>(d));
  return b;
}

std::int64_t nonzeros(const Tensor& t) {
  const auto v = t.to_vector<double>();
  return std::count_if(v.begin(), v.end(), [](double d) { return d != 0; });
}

// An optimizer-like update `step(v, w, a, b, lr)` (writing v and w) jitted
// and run eagerly on copies of v and w, twice: the results and both updated
// tensors bitwise the same. Returns the jitted function's dump.
template <class Step>
std::string update_as_eager(Step step, Tensor& v, Tensor& w, const Tensor& a, const Tensor& b,
                            const Tensor& lr) {
  Tensor ve = v.clone(), we = w.clone();
  auto jitted = jit([&](const Tensor& x, const Tensor& y) { return step(v, w, x, y, lr); });
  for (int i = 0; i < 2; ++i) {
    const Tensor got = jitted(a, b), want = step(ve, we, a, b, lr);
    CHECK(bits(got) == bits(want));
    CHECK(bits(v) == bits(ve));
    CHECK(bits(w) == bits(we));
  }
  return jitted.dump();
}
}  // namespace

TEST_SUITE("jit") {
  TEST_CASE("dead-code elimination removes what reaches no output") {
    ir::Graph g = trace(
        [](auto& in) {
          Tensor unused = ms::exp(in[0]);
          (void)unused;
          return std::vector<Tensor>{in[0] * 2.f};
        },
        {{3}});
    CHECK(g.count_op("exp") == 1);
    compiler::eliminate_dead_code(g);
    ir::verify(g);
    CHECK(g.count_op("exp") == 0);
    CHECK(g.count_op("mul") == 1);
    CHECK(g.count(NodeKind::Input) == 1);
  }

  TEST_CASE("common-subexpression elimination merges duplicates") {
    ir::Graph g = trace(
        [](auto& in) {
          Tensor a = in[0] * 2.f, b = in[0] * 2.f, c = in[0] * 3.f;
          return std::vector<Tensor>{a + b + c, sum(in[0], {0}) + sum(in[0], {0})};
        },
        {{4, 3}});
    const auto x = std::vector<Tensor>{arange(0, 12).reshape({4, 3})};
    const auto want = run(g, x);
    CHECK(g.count_op("mul") == 3);
    CHECK(g.count_op("sum") == 2);
    compiler::eliminate_common_subexpressions(g);
    ir::verify(g);
    CHECK(g.count_op("mul") == 2);  // x*2 once; x*3 differs by its scalar
    CHECK(g.count_op("sum") == 1);
    CHECK(same(run(g, x), want));
  }

  TEST_CASE("constant folding evaluates ops on constants only") {
    ir::Graph g = trace(
        [](auto& in) {
          Tensor c = ones({3}) * 3.f + 1.f;  // constants made inside: folded
          return std::vector<Tensor>{in[0] + c, sum(full({2, 2}, 2.f))};
        },
        {{3}});
    const auto x = std::vector<Tensor>{arange(0, 3)};
    const auto want = run(g, x);
    compiler::fold_constants(g);
    ir::verify(g);
    CHECK(g.count(NodeKind::Op) == 1);  // only in + c is left
    CHECK(g.count_op("add") == 1);
    CHECK(same(run(g, x), want));
    CHECK(want[0].to_vector<float>() == std::vector<float>{4, 5, 6});
    CHECK(want[1].item<float>() == 8);
  }

  TEST_CASE("captured tensors are never folded") {
    const Tensor w = ones({3});
    ir::Graph g = trace([&](auto& in) { return std::vector<Tensor>{in[0] + w * 2.f}; }, {{3}});
    compiler::fold_constants(g);
    CHECK(g.count_op("mul") == 1);
    CHECK(g.count(NodeKind::Capture) == 1);
  }

  TEST_CASE("algebraic simplification removes identities but keeps type changes") {
    ir::Graph g = trace(
        [](auto& in) {
          Tensor a = (in[0] * 1.f + 0.f) / 1.f - 0.f;
          Tensor b = -(-a);
          return std::vector<Tensor>{b.reshape({2, 3}) + 1.f, cast(in[0], int32) * 1 + 0,
                                     transpose(b * 2.f, 1, 1), transpose(b * 3.f, 0, 1)};
        },
        {{2, 3}});
    const auto x = std::vector<Tensor>{arange(0, 6).reshape({2, 3})};
    const auto want = run(g, x);
    compiler::simplify(g);
    ir::verify(g);
    CHECK(g.count_op("neg") == 0);
    CHECK(g.count_op("reshape") == 0);
    CHECK(g.count_op("sub") == 0);
    CHECK(g.count_op("div") == 0);
    // The + 1 stays, and so does the float + 0 (-0.0 + 0 is +0.0); the int + 0 goes.
    CHECK(g.count_op("add") == 2);
    CHECK(g.count_op("mul") == 2);  // b * 2, b * 3
    CHECK(g.count_op("cast") == 1);
    // a transpose of an axis with itself goes, a real one stays
    CHECK(g.count_op("transpose") == 1);
    CHECK(same(run(g, x), want));
  }

  TEST_CASE("a transposed product of a transpose becomes a product of the untransposed operand") {
    // The weight gradient of x @ W^T: Transpose(MatMul(Transpose(x), g)).
    ir::Graph g = trace(
        [](auto& in) {
          const Tensor dw = matmul(in[0].transpose(0, 1), in[1]).transpose(0, 1);
          const Tensor other = matmul(in[1].transpose(0, 1) * 1.5f, in[0]);  // not a candidate
          return std::vector<Tensor>{dw * 2.f, other,
                                     matmul(in[1], in[2].transpose(0, 1)).transpose(0, 1)};
        },
        {{4, 3}, {4, 5}, {2, 5}});
    const auto x =
        std::vector<Tensor>{arange(0, 12).reshape({4, 3}), arange(0, 20).reshape({4, 5}) * 0.5f,
                            arange(0, 10).reshape({2, 5}) - 3.f};
    const auto want = run(g, x);
    const auto before = g.count_op("transpose");
    compiler::fold_transposed_matmuls(g);
    ir::verify(g);
    compiler::eliminate_dead_code(g);
    // Each of the two candidates trades two transposes for one (of the other operand).
    CHECK(g.count_op("transpose") == before - 2);
    CHECK(g.count_op("matmul") == 3);
    CHECK(same(run(g, x), want));
  }

  TEST_CASE("int tensor * 1.0 is not an identity (it changes the dtype)") {
    TraceContext tc;
    Tensor x = tc.add_input(int32, {3});
    Tensor y = x * 1.0;
    ir::Graph g = tc.finish(std::vector<Tensor>{y});
    compiler::simplify(g);
    CHECK(g.count_op("mul") == 1);
    CHECK(g.value(g.outputs[0]).type.dtype == float32);
  }

  TEST_CASE("fusion groups single-use elementwise chains; shared values are materialized") {
    ir::Graph g = trace(
        [](auto& in) {
          Tensor t = in[0] * in[1];                      // used twice: its own value
          Tensor u = relu(t + 1.f) * 2.f;                // one region: Add, Relu, Mul
          Tensor v = sigmoid(t) - matmul(in[0], in[1]);  // Sigmoid, Sub around a MatMul
          return std::vector<Tensor>{u, v};
        },
        {{4, 4}, {4, 4}});
    const auto x = std::vector<Tensor>{arange(0, 16).reshape({4, 4}) / 8.f,
                                       arange(16, 0, -1).reshape({4, 4}) / 8.f};
    const auto want = run(g, x);
    compiler::fuse_elementwise(g);
    ir::verify(g);
    CHECK(g.count(NodeKind::Fused) == 2);
    CHECK(g.count_op("mul") == 1);  // t
    CHECK(g.count_op("matmul") == 1);
    const std::string d = ir::to_string(g);
    CHECK(d.find("Fused[Add, Relu, Mul]") != std::string::npos);
    CHECK(d.find("Fused[Sigmoid, Sub]") != std::string::npos);
    CHECK(same(run(g, x), want));
  }

  TEST_CASE("execution order: bfs goes level by level, dfs finishes a branch first") {
    const Tensor w = ones({2, 2});
    ir::Graph g = trace(
        [&](auto& in) {
          Tensor a1 = matmul(in[0], w), b1 = matmul(in[1], w);
          Tensor a2 = matmul(a1, w), b2 = matmul(b1, w);
          return std::vector<Tensor>{concat({a2, b2}, 0)};
        },
        {{2, 2}, {2, 2}});
    auto op_inputs = [](const ir::Graph& gr) {  // which input each matmul reads, in order
      std::vector<ir::ValueId> order;
      for (const ir::Node& n : gr.nodes)
        if (n.kind == NodeKind::Op && n.def->name == "matmul") order.push_back(n.inputs[0]);
      return order;
    };
    const auto x = std::vector<Tensor>{ones({2, 2}), full({2, 2}, 2.f)};
    const auto want = run(g, x);
    ir::Graph bfs = g, dfs = g;
    compiler::order_nodes(bfs, ExecOrder::Bfs);
    compiler::order_nodes(dfs, ExecOrder::Dfs);
    ir::verify(bfs);
    ir::verify(dfs);
    // bfs: a1, b1, a2, b2 — the first two matmuls read the two inputs.
    const auto ob = op_inputs(bfs);
    CHECK(bfs.producer(ob[0]).kind == NodeKind::Input);
    CHECK(bfs.producer(ob[1]).kind == NodeKind::Input);
    // dfs: a1, a2, b1, b2 — the second matmul reads the first one's result.
    const auto od = op_inputs(dfs);
    CHECK(dfs.producer(od[1]).kind == NodeKind::Op);
    CHECK(same(run(bfs, x), want));
    CHECK(same(run(dfs, x), want));
    CHECK_THROWS_AS(compiler::order_nodes(g, static_cast<ExecOrder>(7)), ValueError);
  }

  TEST_CASE("updates stay after every read of the old value, in trace order") {
    Tensor w = full({2}, 1.f);
    ir::Graph g = trace(
        [&](auto& in) {
          Tensor before = w * 1.f + 0.f;
          assign(w, w + in[0]);
          Tensor after = w * 2.f;  // reads the updated value
          assign(w, after);
          return std::vector<Tensor>{before + 0.f, after};
        },
        {{2}});
    compiler::optimize(g, {.verify = true});
    CHECK(g.nodes.back().kind == NodeKind::Assign);
    CHECK(g.count(NodeKind::Assign) == 2);
    const auto out = compiler::Executable(g).run(std::vector<Tensor>{full({2}, 1.f)});
    CHECK(out[0].to_vector<float>() == std::vector<float>{1, 1});
    CHECK(out[1].to_vector<float>() == std::vector<float>{4, 4});
    CHECK(w.to_vector<float>() == std::vector<float>{4, 4});
  }

  TEST_CASE("an index_copy update of a capture is written in place when the old value is dead") {
    // c[at] = x on a captured [256, 64] c (64 KiB), then the sum of the
    // updated c: in place, the arena holds no copy of c.
    Tensor c = full({256, 64}, 1.f);
    const Tensor at = tensor({5});
    auto update = [&](auto& in) {
      assign(c, index_copy(c, 0, at, in[0]));
      return std::vector<Tensor>{sum(c)};
    };
    ir::Graph g = trace(update, {{1, 64}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    for (float x : {3.f, 4.f}) {
      const auto out = e.run(std::vector<Tensor>{full({1, 64}, x)});
      CHECK(out[0].item<float>() == 255 * 64 + 64 * x);
      CHECK(c.select(0, 5).to_vector<float>() == std::vector<float>(64, x));
      CHECK(c.select(0, 4).to_vector<float>() == std::vector<float>(64, 1.f));
    }
    CHECK(e.arena_bytes() < 256 * 64 * 4);
    // The old value read after the update, or a strided capture: a copy, the
    // same values.
    Tensor d = full({4, 3}, 1.f), dt = full({3, 4}, 1.f).transpose(0, 1);
    for (Tensor* cap : {&d, &dt}) {
      ir::Graph h = trace(
          [&](auto& in) {
            Tensor before = *cap * 1.f;
            assign(*cap, index_copy(*cap, 0, tensor({2, 0}), in[0]));
            return std::vector<Tensor>{before + 0.f, *cap * 1.f};
          },
          {{2, 3}});
      compiler::optimize(h, {.verify = true});
      const auto out = compiler::Executable(h).run(std::vector<Tensor>{full({2, 3}, 7.f)});
      CHECK(out[0].to_vector<float>() == std::vector<float>(12, 1.f));
      CHECK(out[1].to_vector<float>() == std::vector<float>{7, 7, 7, 1, 1, 1, 7, 7, 7, 1, 1, 1});
      CHECK(cap->to_vector<float>() == out[1].to_vector<float>());
    }
  }

  TEST_CASE("a steady-state run serves every intermediate from the planned arena") {
    const Tensor w = ones({8, 8});
    ir::Graph g = trace(
        [&](auto& in) {
          Tensor h = in[0];
          for (int i = 0; i < 4; ++i) h = relu(matmul(h, w)) * 0.5f;
          return std::vector<Tensor>{softmax(h, -1)};
        },
        {{4, 8}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    const std::vector<Tensor> x{ones({4, 8})};
    const auto r0 = e.run(x);
    CHECK(e.planned_allocations() >= 8);
    // Intermediates share bytes: the arena is smaller than all of them together.
    CHECK(e.arena_bytes() < e.planned_allocations() * 4 * 8 * 4);
    const auto before = memory_stats().alloc_count;
    const auto r1 = e.run(x);
    CHECK(memory_stats().alloc_count - before == 1);
    CHECK(allclose(r0[0], r1[0], 0, 0));
  }

  TEST_CASE("an output nothing reads is released after its step (conv2d's pre-pool value)") {
    // conv (y: 1 MiB) -> pool (256 KiB) -> conv (z: 1 MiB) -> sum: after the
    // fusion nothing reads y, which must not live on beside z.
    ir::Graph g = trace(
        [&](auto& in) {
          const Conv2dOptions o{.padding = {1}};
          const Tensor p = ms::test::max_pool(relu(conv2d(in[0], in[1], std::nullopt, o)), {2});
          return std::vector<Tensor>{sum(conv2d(p, in[2], std::nullopt, o))};
        },
        {{1, 1, 128, 128}, {16, 1, 3, 3}, {64, 16, 3, 3}});
    compiler::optimize(g, {.verify = true});
    REQUIRE(ir::to_string(g).find("max_pool2x2=true") != std::string::npos);
    compiler::Executable e(g);
    const std::vector<Tensor> x{ones({1, 1, 128, 128}), ones({16, 1, 3, 3}), ones({64, 16, 3, 3})};
    e.run(x);  // records the allocations and plans the arena
    e.run(x);
    // A steady-state run allocates only its result: y comes from the arena,
    // where it may share bytes with z because it dies at its own step (held
    // to the end of the run, it would be a 1 MiB system allocation).
    memory_stats_reset_peak();
    const std::int64_t live = memory_stats().live_bytes;
    e.run(x);
    CHECK(memory_stats().peak_bytes - live < 4096);
    CHECK(e.arena_bytes() < 3 << 20);
  }

  TEST_CASE("a result kept alive across runs is never overwritten") {
    ir::Graph g = trace([](auto& in) { return std::vector<Tensor>{ms::exp(in[0]) + 1.f}; }, {{4}});
    compiler::Executable e(g);
    const auto a = e.run(std::vector<Tensor>{zeros({4})});
    const auto b = e.run(std::vector<Tensor>{ones({4})});
    const auto c = e.run(std::vector<Tensor>{zeros({4})});
    CHECK(a[0].to_vector<float>() == std::vector<float>(4, 2.f));
    CHECK(c[0].to_vector<float>() == std::vector<float>(4, 2.f));
    CHECK(b[0].to_vector<float>()[0] == doctest::Approx(std::exp(1.f) + 1));
  }

  TEST_CASE("an intermediate a callback keeps past the run is not overwritten by the next") {
    // The first run (the recording) drops the intermediate, so the plan puts
    // it in the arena; later runs stash it: each must then serve neither that
    // block nor one sharing its bytes while the stash holds it.
    std::vector<Tensor> kept;
    bool keep = false;
    auto body = [&](const Tensor& x) {
      Tensor h = ms::exp(x) * 2.f;
      h = ops::host_call(
          [&](std::vector<Tensor> v) {
            if (keep) kept.push_back(v[0]);
            return v;
          },
          {h}, "keep")[0];
      // h dies here: the product's block may share its bytes (the plan's view).
      const Tensor z = reshape(h + 1.f, {8, 8});
      const Tensor p = matmul(z, z);
      return std::vector<Tensor>{sum(matmul(p, z))};
    };
    ir::Graph g = trace([&](auto& in) { return body(in[0]); }, {{64}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    e.run(std::vector<Tensor>{zeros({64})});
    REQUIRE(e.planned_allocations() > 0);
    keep = true;
    std::vector<Tensor> xs;
    for (int r = 0; r < 5; ++r) {
      xs.push_back(full({64}, 0.1f * static_cast<float>(r)));
      e.run(std::vector<Tensor>{xs.back()});
    }
    REQUIRE(kept.size() == 5);
    for (std::size_t r = 0; r < kept.size(); ++r) {
      CAPTURE(r);
      CHECK(allclose(kept[r], ms::exp(xs[r]) * 2.f, 0, 0));
    }
  }

  TEST_CASE("the executor checks its inputs") {
    ir::Graph g = trace([](auto& in) { return std::vector<Tensor>{in[0] + 1.f}; }, {{4}});
    compiler::Executable e(g);
    CHECK_THROWS_WITH_AS(e.run(std::vector<Tensor>{zeros({5})}), doctest::Contains("compiled for"),
                         ShapeError);
    CHECK_THROWS_AS(e.run(std::vector<Tensor>{}), ValueError);
  }
  TEST_CASE("activation fusion: relu into conv2d, relu_grad into max_pool2d_grad") {
    const Conv2dOptions o{.padding = {1}};
    auto block = [&](const std::vector<Tensor>& in, DType dt) {
      // conv -> relu -> pool and its gradient, as autodiff writes it
      const Tensor x = in[0].to(dt), w = in[1].to(dt), g = in[2].to(dt);
      const Tensor y = conv2d(x, w, std::nullopt, o), r = relu(y), p = ms::test::max_pool(r, {2});
      const Tensor dy = relu_grad(ms::test::max_pool_grad(r, g, {2}), y);
      return std::vector<Tensor>{p, dy};
    };
    // Inputs with exact zeros and ties: relu's 0 outputs tie in the windows.
    auto ints = [](const Shape& shape, int period, double shift, double scale) {
      std::vector<double> v(static_cast<std::size_t>(shape_numel(shape)));
      for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = (static_cast<double>(static_cast<int>(i) % period) - shift) * scale;
      return from_vector(v, shape).to(float32);
    };
    // 6x8 planes, and 7x9 (a last row and column in no window)
    for (const std::int64_t odd : {0, 1})
      for (DType dt : {float32, float64}) {
        CAPTURE(odd);
        CAPTURE(dt);
        const std::vector<Shape> shapes{{2, 3, 6 + odd, 8 + odd}, {4, 3, 3, 3}, {2, 4, 3, 4}};
        const std::vector<Tensor> x{ints(shapes[0], 7, 3, 1), ints(shapes[1], 3, 1, 1),
                                    ints(shapes[2], 11, 5, 0.25)};
        ir::Graph g = trace([&](auto& in) { return block(in, dt); }, shapes);
        const auto want = run(g, x);
        compiler::fuse_activations(g);
        ir::verify(g);
        CHECK(g.count_op("relu") == 0);
        CHECK(g.count_op("relu_grad") == 0);
        CHECK(g.count_op("conv2d") == 0);  // the jit's fused conv now
        CHECK(g.count_op("conv2d_fused") == 1);
        CHECK(g.count_op("max_pool2d") == 0);  // the fused conv's second output now
        // the pooling's gradient reads the taps the conv noted, not its output
        CHECK(g.count_op("max_pool2d_grad") == 0);
        CHECK(g.count_op("max_pool2x2_grad_index") == 1);
        const std::string d = ir::to_string(g);
        CHECK(d.find("Conv2DFused(") != std::string::npos);
        CHECK(d.find("groups=1, relu=true, max_pool2x2=true, max_pool2x2_index=true} : (") !=
              std::string::npos);
        CHECK(d.find(odd ? "{input_hw=[7, 9], relu=true}" : "{input_hw=[6, 8], relu=true}") !=
              std::string::npos);
        const auto got = run(g, x);
        REQUIRE(got.size() == 2);
        for (std::size_t i = 0; i < 2; ++i) CHECK(bits(got[i]) == bits(want[i]));
        // some gradient passes, and some is masked by relu
        const Tensor plain = ms::test::max_pool_grad(
            relu(conv2d(x[0].to(dt), x[1].to(dt), std::nullopt, o)), x[2].to(dt), {2});
        CHECK(nonzeros(got[1]) > 0);
        CHECK(nonzeros(got[1]) < nonzeros(plain));
      }
  }

  TEST_CASE("activation fusion leaves what it cannot fuse exactly") {
    const Conv2dOptions o{.padding = {1}};
    const std::vector<Shape> shapes{{1, 2, 4, 4}, {2, 2, 3, 3}, {1, 2, 2, 2}};
    // The conv output is also a result: relu(conv) stays, and so does the
    // relu_grad (its y is read elsewhere, but the pattern itself is fine).
    ir::Graph g = trace(
        [&](auto& in) {
          const Tensor y = conv2d(in[0], in[1], std::nullopt, o), r = relu(y);
          return std::vector<Tensor>{y, relu_grad(ms::test::max_pool_grad(r, in[2], {2}), y)};
        },
        shapes);
    compiler::fuse_activations(g);
    CHECK(g.count_op("relu") == 1);
    CHECK(g.count_op("relu_grad") == 0);
    // relu_grad against another tensor than relu's input; the pooled gradient
    // read twice; float16 convolution (rounding after relu differs).
    g = trace(
        [&](auto& in) {
          const Tensor y = conv2d(in[0], in[1], std::nullopt, o), r = relu(y);
          const Tensor pg1 = ms::test::max_pool_grad(r, in[2], {2});
          const Tensor pg2 = ms::test::max_pool_grad(r, in[2] * 3.f, {2});
          return std::vector<Tensor>{relu_grad(pg1, y * 2.f), relu_grad(pg2, y) + pg2,
                                     relu(conv2d(in[0].to(float16), in[1].to(float16)))};
        },
        shapes);
    compiler::fuse_activations(g);
    CHECK(g.count_op("relu_grad") == 2);
    CHECK(g.count_op("relu") == 2);
    CHECK(g.count_op("conv2d_fused") == 0);
    CHECK(g.count_op("max_pool2d_grad_relu") == 0);
  }
  TEST_CASE("matmul fusion: a bias added to a product joins the product, bitwise") {
    // Dense layers as traced (x W^T + b, b + x W): batches folded into one
    // product (libxsmm's sizes and Eigen's), a single row, a 2-D lhs.
    const std::vector<std::vector<Shape>> cases{{{4, 64, 48}, {32, 48}, {48, 32}, {32}},
                                                {{3, 5, 4}, {6, 4}, {4, 6}, {6}},
                                                {{1, 48}, {40, 48}, {48, 40}, {40}},
                                                {{130, 70}, {90, 70}, {70, 90}, {90}}};
    for (const auto& shapes : cases) {
      CAPTURE(shapes[0]);
      ir::Graph g = trace(
          [](auto& in) {
            return std::vector<Tensor>{matmul(in[0], in[1].transpose(0, 1)) + in[3],
                                       in[3] + matmul(in[0], in[2])};
          },
          shapes);
      const std::vector<Tensor> x = random_inputs(shapes, 70);
      const auto want = run(g, x);
      compiler::fuse_activations(g);
      ir::verify(g);
      CHECK(g.count_op("matmul") == 0);
      CHECK(g.count_op("matmul_bias") == 2);
      CHECK(ir::to_string(g).find("MatMulBias(") != std::string::npos);
      const auto got = run(g, x);
      REQUIRE(got.size() == 2);
      for (std::size_t i = 0; i < 2; ++i) CHECK(bits(got[i]) == bits(want[i]));
    }
  }

  TEST_CASE("matmul fusion: relu of a product with its bias joins it, with relu_grad, bitwise") {
    // Dense layers with relu as a training step traces them: value_and_grad
    // of relu(x W + b) . c, whose backward reads the sum in relu_grad.
    const std::vector<std::vector<Shape>> cases{{{64, 48}, {48, 40}, {40}, {64, 40}},
                                                {{1, 48}, {48, 40}, {40}, {1, 40}},
                                                {{3, 5}, {5, 6}, {6}, {3, 6}}};
    for (const auto& shapes : cases) {
      CAPTURE(shapes[0]);
      auto loss = [](const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& c) {
        return sum(relu(matmul(x, w) + b) * c);
      };
      ir::Graph g = trace(
          [&](auto& in) {
            auto [l, grads] = value_and_grad(loss, {.position = std::vector<int>{0, 1, 2}})(
                in[0], in[1], in[2], in[3]);
            std::vector<Tensor> out{l, relu(matmul(in[0], in[1]) + in[2])};
            out.insert(out.end(), grads.begin(), grads.end());
            return out;
          },
          shapes);
      const std::vector<Tensor> x = random_inputs(shapes, 90);
      const auto want = run(g, x);
      compiler::fuse_activations(g);
      ir::verify(g);
      CHECK(g.count_op("relu") == 0);
      CHECK(ir::to_string(g).find("{relu=true}") != std::string::npos);
      const auto got = run(g, x);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(bits(got[i]) == bits(want[i]));
    }
  }

  TEST_CASE("matmul fusion leaves a product read elsewhere, other biases and other dtypes") {
    const std::vector<Shape> shapes{{2, 8, 16}, {16, 12}, {8, 12}, {12}};
    ir::Graph g = trace(
        [](auto& in) {
          const Tensor y = matmul(in[0], in[1]);
          return std::vector<Tensor>{
              y + in[3], y * 2.f,                                           // y read twice
              matmul(in[0], in[1]) + in[2],                                 // a [rows, n] addend
              matmul(in[0].to(float64), in[1].to(float64)) + in[3],         // float64
              matmul(in[1].transpose(0, 1), in[0].transpose(1, 2)) + 1.f};  // batched rhs
        },
        shapes);
    compiler::fuse_activations(g);
    CHECK(g.count_op("matmul_bias") == 0);
  }

  TEST_CASE("matmul fusion: a scaled addend joins the product, bitwise") {
    // c * s + a b in either order of the add and of the mul: weight gradients
    // (A^T B, libxsmm's sizes with k in one group), a deeper product and
    // Eigen's sizes (the product made, then added).
    const std::vector<std::vector<Shape>> cases{
        {{96, 80}, {32, 96}, {32, 80}}, {{40, 30}, {700, 40}, {700, 30}}, {{6, 5}, {4, 6}, {4, 5}}};
    for (const auto& shapes : cases) {
      CAPTURE(shapes[0]);
      ir::Graph g = trace(
          [](auto& in) {
            const Tensor at = in[1].transpose(0, 1);
            return std::vector<Tensor>{in[0] * 0.9f + matmul(at, in[2]),
                                       matmul(at, in[2]) + 3 * in[0]};
          },
          shapes);
      const std::vector<Tensor> x = random_inputs(shapes, 80);
      const auto want = run(g, x);
      compiler::fuse_activations(g);
      ir::verify(g);
      CHECK(g.count_op("matmul") == 0);
      CHECK(g.count_op("matmul_scale_add") == 2);
      CHECK(ir::to_string(g).find("MatMulScaleAdd(") != std::string::npos);
      const auto got = run(g, x);
      REQUIRE(got.size() == 2);
      for (std::size_t i = 0; i < 2; ++i) CHECK(bits(got[i]) == bits(want[i]));
    }
  }

  TEST_CASE("matmul fusion leaves an addend scaled by a tensor, read elsewhere or broadcast") {
    const std::vector<Shape> shapes{{16, 12}, {16, 8}, {8, 12}, {12}, {}};
    ir::Graph g = trace(
        [](auto& in) {
          const Tensor cs = in[0] * 2.f;
          return std::vector<Tensor>{
              in[0] * in[4] + matmul(in[1], in[2]),  // a tensor scale
              cs + matmul(in[1], in[2]), cs,         // c * s read twice
              in[3] * 2.f + matmul(in[1], in[2]),    // c broadcast
              in[0].to(float64) * 2.f + matmul(in[1].to(float64), in[2].to(float64))};  // float64
        },
        shapes);
    compiler::fuse_activations(g);
    CHECK(g.count_op("matmul_scale_add") == 0);
  }

  TEST_CASE("matmul fusion: a learning-rate step from the scaled sum joins it, bitwise") {
    // d - t * (c * 0.9 + a^T b), the sum also returned; t a 0-d tensor.
    for (const auto& shapes : std::vector<std::vector<Shape>>{
             {{96, 80}, {96, 80}, {32, 96}, {32, 80}, {}}, {{6, 5}, {6, 5}, {4, 6}, {4, 5}, {}}}) {
      CAPTURE(shapes[0]);
      ir::Graph g = trace(
          [](auto& in) {
            const Tensor sum = in[0] * 0.9f + matmul(in[2].transpose(0, 1), in[3]);
            return std::vector<Tensor>{in[1] - in[4] * sum, sum};
          },
          shapes);
      const std::vector<Tensor> x = random_inputs(shapes, 90);
      const auto want = run(g, x);
      compiler::fuse_activations(g);
      ir::verify(g);
      CHECK(g.count_op("matmul_scale_add") == 1);
      CHECK(g.count_op("sub") == 0);
      const auto got = run(g, x);
      REQUIRE(got.size() == 2);
      for (std::size_t i = 0; i < 2; ++i) CHECK(bits(got[i]) == bits(want[i]));
    }
  }

  TEST_CASE("matmul fusion leaves a step by a number, or from a sum read before it") {
    const std::vector<Shape> shapes{{16, 12}, {16, 12}, {8, 16}, {8, 12}, {}};
    ir::Graph g = trace(
        [](auto& in) {
          const Tensor at = in[2].transpose(0, 1);
          const Tensor s1 = in[0] * 0.9f + matmul(at, in[3]);
          const Tensor s2 = in[0] * 0.5f + matmul(at, in[3]);
          const Tensor early = ms::exp(s2);  // read before the sub
          return std::vector<Tensor>{in[1] - 0.1f * s1, early, in[1] - in[4] * s2};
        },
        shapes);
    compiler::fuse_activations(g);
    ir::verify(g);
    CHECK(g.count_op("matmul_scale_add") == 2);
    CHECK(g.count_op("sub") == 2);
  }

  TEST_CASE("an update form with two outputs runs in place only when both can") {
    // v = v * 0.9 + a^T b; w = w - lr * v, both assigned. With the old w read
    // after the update (its sum), w cannot be written in place, so neither is
    // (the update form writes both); the results equal the eager ones either way.
    Generator g(8);
    const Tensor a = normal({32, 96}, 0.0, 1.0, g), b = normal({32, 80}, 0.0, 1.0, g);
    const Tensor lr = full({}, 0.05);
    for (const bool read_old_w : {false, true}) {
      CAPTURE(read_old_w);
      Tensor v = normal({96, 80}, 0.0, 1.0, g), w = normal({96, 80}, 0.0, 1.0, g);
      auto step = [read_old_w](Tensor& vv, Tensor& ww, const Tensor& x, const Tensor& y,
                               const Tensor& rate) {
        const Tensor nv = vv * 0.9f + matmul(x.transpose(0, 1), y);
        const Tensor nw = ww - rate * nv;
        vv.copy_(nv);
        const Tensor out = ms::sum(read_old_w ? ww : nv);
        ww.copy_(nw);
        return out;
      };
      CHECK(update_as_eager(step, v, w, a, b, lr).find("MatMulScaleAdd(") != std::string::npos);
    }
  }

  TEST_CASE(
      "a bfloat16 product cast to float32 joins matmul_scale_add (amp O2's update), bitwise") {
    // v = v * 0.9 + float(a^T b) with a, b bfloat16 (the product rounded to
    // bfloat16, as matmul rounds it); w = w - lr * v; both assigned. With the
    // bfloat16 product also read by a sum (a second reader), nothing fuses.
    Generator g(9);
    const Tensor a = cast(normal({32, 96}, 0.0, 1.0, g), bfloat16);
    const Tensor b = cast(normal({32, 80}, 0.0, 1.0, g), bfloat16);
    const Tensor lr = full({}, 0.05);
    for (const bool product_read : {false, true}) {
      CAPTURE(product_read);
      Tensor v = normal({96, 80}, 0.0, 1.0, g), w = normal({96, 80}, 0.0, 1.0, g);
      auto step = [product_read](Tensor& vv, Tensor& ww, const Tensor& x, const Tensor& y,
                                 const Tensor& rate) {
        const Tensor p = matmul(x.transpose(0, 1), y);
        const Tensor nv = vv * 0.9f + cast(p, float32);
        const Tensor nw = ww - rate * nv;
        vv.copy_(nv);
        ww.copy_(nw);
        return product_read ? cast(ms::sum(p), float32) : ms::sum(nw);
      };
      const std::string dump = update_as_eager(step, v, w, a, b, lr);
      CHECK((dump.find("MatMulScaleAdd(") != std::string::npos) == !product_read);
      if (!product_read) CHECK(dump.find("bf16[96,32], bf16[32,80]") != std::string::npos);
    }
  }

  TEST_CASE("a jitted Momentum step updates moments and weights in its products, bitwise eager") {
    // fc1's weight gradient [64, 48] (k = the batch, 32) is libxsmm's size,
    // fc2's [10, 64] Eigen's; each product updates its moment and its weight
    // in place (matmul_scale_add's two outputs).
    struct Net : Cell<Net> {
      nn::Dense fc1{48, 64}, fc2{64, 10};
      Net() { register_cells("fc1", fc1, "fc2", fc2); }
      Tensor construct(const Tensor& x) { return fc2(relu(fc1(x))); }
    };
    struct Side {
      Net net;
      optim::Momentum opt{net.trainable_params(), {.lr = 0.05, .momentum = 0.9}};
      explicit Side(std::uint64_t seed) {
        Generator g(seed);
        for (auto& p : net.parameters()) p.set_data(normal(p.shape(), 0.0, 0.3, g));
      }
      std::function<Tensor(const Tensor&, const Tensor&)> fn() {
        return [this](const Tensor& x, const Tensor& y) {
          auto loss_fn = [this](const Tensor& a, const Tensor& b) {
            return nn::cross_entropy(net(a), b);
          };
          auto [loss, grads] = value_and_grad(
              loss_fn, {.position = std::nullopt, .weights = opt.parameters()})(x, y);
          opt.apply(grads);
          return loss;
        };
      }
    };
    Side jitted(4), eager(4);
    auto step = jit(jitted.fn());
    auto eager_step = eager.fn();
    Generator g(6);
    for (int i = 0; i < 3; ++i) {
      const Tensor x = normal({32, 48}, 0.0, 1.0, g);
      const Tensor y = randint(0, 10, {32}, g).to(int32);
      CHECK(bits(step(x, y)) == bits(eager_step(x, y)));
    }
    const std::string dump = step.dump();
    int fused = 0;
    for (auto at = dump.find("MatMulScaleAdd("); at != std::string::npos;
         at = dump.find("MatMulScaleAdd(", at + 1))
      ++fused;
    CHECK(fused == 2);  // fc1's and fc2's moments and weights
    CHECK(dump.find("Fused[Mul, Sub]") != std::string::npos);  // the biases' updates stay
    const auto pj = jitted.net.parameters(), pe = eager.net.parameters();
    REQUIRE(pj.size() == pe.size());
    for (std::size_t i = 0; i < pj.size(); ++i) CHECK(bits(pj[i]) == bits(pe[i]));
  }

  TEST_CASE("matmul fusion leaves split points and products of another recompute region") {
    const std::vector<Shape> shapes{{2, 8, 16}, {16, 12}, {12}};
    auto count_after_fusion = [&](const ops::Attrs& add_attrs, int matmul_region) {
      ir::Graph g = trace(
          [&](auto& in) {
            const Tensor y = matmul(in[0], in[1]);
            return std::vector<Tensor>{ops::call1(ops::op("add"), {y, in[2]}, add_attrs)};
          },
          shapes);
      for (ir::Node& n : g.nodes)
        if (n.kind == NodeKind::Op && n.def->name == "matmul") n.recompute_region = matmul_region;
      compiler::fuse_activations(g);
      ir::verify(g);
      for (const ir::Node& n : g.nodes)  // the add's attributes stay with the add
        if (n.kind == NodeKind::Op && n.def->name == "matmul_bias") CHECK(!n.attrs.has("func_id"));
      return g.count_op("matmul_bias");
    };
    CHECK(count_after_fusion({}, -1) == 1);
    CHECK(count_after_fusion({{"func_id", std::string("add_func")}}, -1) == 1);
    CHECK(count_after_fusion({{"split_op", true}, {"func_id", std::string("add_func")}}, -1) == 0);
    CHECK(count_after_fusion({}, 0) == 0);  // the add is in no region, the matmul in region 0
  }

  TEST_CASE("a CNN's loss and gradients: O1 (fused activations, Winograd) == O0, bitwise") {
    // conv(16->16, Winograd) -> relu -> pool -> conv(16->3, im2col) -> relu -> pool -> sum
    Generator gen(3);
    const Tensor x = uniform({3, 16, 10, 10}, -1, 1, gen), w1 = uniform({16, 16, 3, 3}, -1, 1, gen);
    const Tensor b1 = uniform({16}, -1, 1, gen), w2 = uniform({3, 16, 3, 3}, -1, 1, gen);
    auto loss = [](const Tensor& x, const Tensor& w1, const Tensor& b1, const Tensor& w2) {
      const Conv2dOptions o{.padding = {1}};
      const Tensor h = ms::test::max_pool(relu(conv2d(x, w1, b1, o)), {2});
      return sum(square(ms::test::max_pool(relu(conv2d(h, w2, std::nullopt, o)), {2})));
    };
    auto vg = value_and_grad(loss, {.position = {0, 1, 2, 3}});
    auto f0 = jit(vg, {.jit_level = JitLevel::O0, .verify = true});
    auto f1 = jit(vg, {.jit_level = JitLevel::O1, .verify = true});
    const auto [l0, g0] = f0(x, w1, b1, w2);
    const auto [l1, g1] = f1(x, w1, b1, w2);
    CHECK(f1.dump().find("max_pool2x2=true") != std::string::npos);
    CHECK(f1.dump().find("MaxPool2x2GradIndex(") != std::string::npos);
    CHECK(bits(l0) == bits(l1));
    REQUIRE(g0.size() == 4);
    for (std::size_t i = 0; i < 4; ++i) CHECK(bits(g0[i]) == bits(g1[i]));
  }
}

TEST_SUITE("jit") {
  TEST_CASE(
      "a cast of a capture is kept across runs, rewritten by its update, recast after writes") {
    Generator gen(5);
    Tensor w = uniform({16, 8}, -1.0, 1.0, gen, float32);
    const Tensor x = uniform({4, 16}, -1.0, 1.0, gen, float32);
    // The low-precision product reads cast(w) before the in-place update of
    // w, which depends on it (as a training step's update on its gradient).
    auto update = [](const Tensor& w0, const Tensor& x0, const Tensor& y0) {
      return Tensor(w0 * 0.5f - matmul(transpose(x0, 0, 1), cast(y0, float32)) * 0.125f);
    };
    auto step = [&](auto& in) {
      Tensor y = matmul(cast(in[0], bfloat16), cast(w, bfloat16));
      assign(w, update(w, in[0], y));
      return std::vector<Tensor>{y};
    };
    ir::Graph g = trace(step, {{4, 16}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    CHECK(e.kept_casts() == 1);
    // A forward-only graph on the same w keeps its own copy (never rewritten).
    ir::Graph g2 = trace(
        [&](auto& in) {
          return std::vector<Tensor>{matmul(cast(in[0], bfloat16), cast(w, bfloat16))};
        },
        {{4, 16}});
    compiler::optimize(g2, {.verify = true});
    compiler::Executable e2(g2);
    CHECK(e2.kept_casts() == 1);
    const std::vector<Tensor> in{x};
    // Each run reads cast(w) of the w at its start, whoever wrote w last.
    auto expect_current = [&](const compiler::Executable& ex) {
      const Tensor want = matmul(cast(x, bfloat16), cast(w, bfloat16));
      const Tensor w_before = w.clone();
      const Tensor got = ex.run(in)[0];
      CHECK(got.dtype() == bfloat16);
      CHECK(allclose(got, want, 0, 0));
      return std::pair{w_before, want};
    };
    for (int i = 0; i < 3; ++i) {
      const auto [before, y] = expect_current(e);
      // float32 master, float32 update arithmetic
      CHECK(allclose(w, update(before, x, y), 1e-6, 1e-6));
      expect_current(e2);
    }
    w.copy_(full({16, 8}, 2.f));  // set_data and checkpoint loads write this way
    expect_current(e);
    assign(w, w - 1.5f);  // an eager optimizer step or a hand update
    expect_current(e2);
    expect_current(e);
    w.data<float>()[3] = 7.f;  // a raw write, declared
    w.storage()->note_write();
    expect_current(e);
    expect_current(e2);
  }

  TEST_CASE("matmul_scale_add of a bfloat16 product rewrites the kept bfloat16 copy of its d") {
    // amp O2's Momentum step on one weight: y = cast(x) cast(w); v = v * 0.9
    // + float(cast(x)^T y); w = w - lr * v (v and w assigned). The cast of w is kept
    // and written by the update's pass; every run equals the eager ops.
    Generator gen(12);
    Tensor w = uniform({16, 8}, -1.0, 1.0, gen, float32), v = zeros({16, 8});
    Tensor we = w.clone(), ve = v.clone();
    const Tensor lr = full({}, 0.25);
    const Tensor x = uniform({4, 16}, -1.0, 1.0, gen, float32);
    auto step = [&lr](const Tensor& x32, Tensor& ww, Tensor& vv) {
      const Tensor xx = cast(x32, bfloat16);
      const Tensor y = matmul(xx, cast(ww, bfloat16));
      const Tensor nv = vv * 0.9f + cast(matmul(transpose(xx, 0, 1), y), float32);
      const Tensor nw = ww - lr * nv;
      assign(vv, nv);
      assign(ww, nw);
      return y;
    };
    ir::Graph g =
        trace([&](auto& in) { return std::vector<Tensor>{step(in[0], w, v)}; }, {{4, 16}});
    compiler::optimize(g, {.verify = true});
    CHECK(g.count_op("matmul_scale_add") == 1);
    compiler::Executable e(g);
    CHECK(e.kept_casts() == 1);
    const std::vector<Tensor> in{x};
    auto expect_eager = [&] {
      const Tensor got = e.run(in)[0], want = step(x, we, ve);
      CHECK(bits(got) == bits(want));
      CHECK(bits(w) == bits(we));
      CHECK(bits(v) == bits(ve));
    };
    for (int i = 0; i < 3; ++i) expect_eager();
    w.copy_(full({16, 8}, 0.5f));  // a write elsewhere: the copy is recast
    we.copy_(w);
    expect_eager();
    expect_eager();
  }

  TEST_CASE("views of captures are made once and read the capture's current values") {
    Generator gen(7);
    Tensor w = uniform({8, 6}, -1.0, 1.0, gen, float32);
    const Tensor x = uniform({3, 6}, -1.0, 1.0, gen, float32);
    auto body = [&](const Tensor& in) {
      const Tensor wt = transpose(w, 0, 1);  // a view: made once
      return std::vector<Tensor>{
          matmul(in, wt), sum(reshape(w, {2, 24}) * 3.f),  // a view of w: made once
          Tensor(reshape(wt, {48}) * 2.f),  // wt is not contiguous: a copy, made every run
      };
    };
    ir::Graph g = trace([&](auto& in) { return body(in[0]); }, {{3, 6}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    CHECK(e.bound_views() == 2);
    auto expect_current = [&] {
      const std::vector<Tensor> got = e.run(std::vector<Tensor>{x}), want = body(x);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(allclose(got[i], want[i], 0, 0));
    };
    expect_current();
    expect_current();
    w.copy_(uniform({8, 6}, -2.0, 2.0, gen, float32));  // new values in w's storage
    expect_current();
    assign(w, w * 0.5f);
    expect_current();
    // A view that is a graph output is made by its step every run (a frame
    // drops its outputs after a run).
    ir::Graph g2 = trace([&](auto&) { return std::vector<Tensor>{transpose(w, 0, 1)}; }, {{3, 6}});
    compiler::optimize(g2, {.verify = true});
    compiler::Executable e2(g2);
    CHECK(e2.bound_views() == 0);
    for (int i = 0; i < 2; ++i)
      CHECK(allclose(e2.run(std::vector<Tensor>{x})[0], transpose(w, 0, 1), 0, 0));
  }

  TEST_CASE("layout steps' views are replayed only for the input layouts they were made for") {
    // Views of the graph's input: a frame replays them when the next input has
    // the same dtype, shape and strides, at the new input's storage and offset.
    auto body = [](const Tensor& x) {
      const std::vector<Tensor> parts = split(x, 2, 1);
      return std::vector<Tensor>{Tensor(reshape(x, {24}) * 2.f), Tensor(transpose(x, 0, 1) + 1.f),
                                 Tensor(parts[1] * 3.f), Tensor(unsqueeze(parts[2], 0) - 1.f)};
    };
    ir::Graph g = trace([&](auto& in) { return body(in[0]); }, {{4, 6}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    Generator gen(11);
    const Tensor big = uniform({8, 6}, -1.0, 1.0, gen, float32);
    const Tensor wide = uniform({6, 4}, -1.0, 1.0, gen, float32);
    const std::vector<Tensor> xs{
        big.slice(0, 2, 6),                        // strides [6, 1] at offset 12
        uniform({4, 6}, -1.0, 1.0, gen, float32),  // the same strides at offset 0
        big.slice(0, 4, 8),                        // again, at offset 24
        transpose(wide, 0, 1),                     // strides [1, 4]: reshape copies
        big.slice(0, 1, 5),                        // back to [6, 1]
        uniform({4, 6}, -1.0, 1.0, gen, float32),
    };
    for (int round = 0; round < 2; ++round)
      for (std::size_t i = 0; i < xs.size(); ++i) {
        CAPTURE(round);
        CAPTURE(i);
        const std::vector<Tensor> got = e.run(std::vector<Tensor>{xs[i]}), want = body(xs[i]);
        REQUIRE(got.size() == want.size());
        for (std::size_t k = 0; k < got.size(); ++k) {
          CHECK(got[k].shape() == want[k].shape());
          CHECK(allclose(got[k], want[k], 0, 0));
        }
      }
  }

  TEST_CASE("each instantiation of a dynamic graph replays the views of its own shapes") {
    auto fn = [](const Tensor& x) {
      const Tensor t = transpose(reshape(x, {-1, 2, 3}), 0, 1);  // [2, n, 3]
      return Tensor(t.select(1, 0) * 2.f + sum(t));
    };
    auto f = jit(fn, JitConfig{.dynamic = 1, .verify = true});
    Generator gen(12);
    for (std::int64_t n : {2, 3, 5, 3, 2, 7, 7}) {
      CAPTURE(n);
      const Tensor x = uniform({n, 6}, -1.0, 1.0, gen, float32);
      CHECK(allclose(f(x), fn(x), 1e-6, 1e-6));
    }
  }

  TEST_CASE("steps of ops with a run form write outputs of their own instantiation's types") {
    Generator gen(13);
    const Tensor table = uniform({9, 4}, -1.0, 1.0, gen, float32);
    const Tensor gamma = uniform({4}, 0.5, 1.5, gen, float32), beta = uniform({4}, -1.0, 1.0, gen);
    auto fn = [&](const Tensor& ids, const Tensor& x) {
      const Tensor rows = index_select(table, 0, ids);  // [n, 4]
      const Tensor y = layer_norm(x + rows, gamma, beta);
      return Tensor(cumsum(y, {.axis = 0}) * 2.f);
    };
    auto f = jit(fn, JitConfig{.dynamic = 1, .verify = true});
    for (std::int64_t n : {2, 3, 5, 3, 2, 7, 7}) {
      CAPTURE(n);
      std::vector<std::int64_t> ids(static_cast<std::size_t>(n));
      for (std::int64_t i = 0; i < n; ++i) ids[static_cast<std::size_t>(i)] = (i * 5 + n) % 9;
      const Tensor idx = from_vector(ids, Shape{n});
      const Tensor x = uniform({n, 4}, -1.0, 1.0, gen, float32);
      const Tensor got = f(idx, x), want = fn(idx, x);
      CHECK(got.shape() == want.shape());
      CHECK(allclose(got, want, 0, 0));
    }
  }

  TEST_CASE("a run-form step that raises leaves the next call of its graph whole") {
    const Tensor table = arange(0, 12).to(float32).reshape({6, 2});
    auto f = jit([&](const Tensor& ids) { return Tensor(index_select(table, 0, ids) * 2.f); });
    const Tensor good = tensor({5, 0, 3}), bad = tensor({1, 6, 2});
    const Tensor want = index_select(table, 0, good) * 2.f;
    CHECK(allclose(f(good), want, 0, 0));
    CHECK(allclose(f(good), want, 0, 0));  // the planned arena
    CHECK_THROWS_WITH_AS(f(bad), doctest::Contains("index_select: index[1] = 6 is out of range"),
                         IndexError);
    CHECK(allclose(f(good), want, 0, 0));
    CHECK(allclose(f(tensor({4, 4, 1})), index_select(table, 0, tensor({4, 4, 1})) * 2.f, 0, 0));
    CHECK(f.compile_count() == 1);
  }

  TEST_CASE("an in-place op update of a capture recasts another graph's kept cast of it") {
    Generator gen(6);
    Tensor c = uniform({4, 8}, -1.0, 1.0, gen, float32);
    const Tensor at = tensor({1});
    // A writes row 1 of c with index_copy's in-place form.
    ir::Graph ga = trace(
        [&](auto& in) {
          assign(c, index_copy(c, 0, at, in[0]));
          return std::vector<Tensor>{sum(in[0])};
        },
        {{1, 8}});
    compiler::optimize(ga, {.verify = true});
    compiler::Executable a(ga);
    // B reads a kept bfloat16 copy of c.
    ir::Graph gb = trace(
        [&](auto& in) {
          return std::vector<Tensor>{matmul(cast(in[0], bfloat16), cast(c, bfloat16))};
        },
        {{3, 4}});
    compiler::optimize(gb, {.verify = true});
    compiler::Executable b(gb);
    CHECK(b.kept_casts() == 1);
    const Tensor xb = uniform({3, 4}, -1.0, 1.0, gen, float32);
    auto eager = [&] { return matmul(cast(xb, bfloat16), cast(c, bfloat16)); };
    CHECK(allclose(b.run(std::vector<Tensor>{xb})[0], eager(), 0, 0));
    a.run(std::vector<Tensor>{full({1, 8}, 3.f)});
    CHECK(c.select(0, 1).to_vector<float>() == std::vector<float>(8, 3.f));
    CHECK(allclose(b.run(std::vector<Tensor>{xb})[0], eager(), 0, 0));
  }

  TEST_CASE("a cast of a strided capture updated in place is recast each run, not kept") {
    Generator gen(7);
    Tensor w = full({8, 16}, 1.f).transpose(0, 1);  // [16, 8], not contiguous
    const Tensor x = uniform({4, 16}, -1.0, 1.0, gen, float32);
    auto update = [](const Tensor& w0, const Tensor& x0, const Tensor& y0) {
      return Tensor(w0 * 0.5f - matmul(transpose(x0, 0, 1), cast(y0, float32)) * 0.125f);
    };
    ir::Graph g = trace(
        [&](auto& in) {
          Tensor y = matmul(cast(in[0], bfloat16), cast(w, bfloat16));
          assign(w, update(w, in[0], y));
          return std::vector<Tensor>{y};
        },
        {{4, 16}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    CHECK(e.kept_casts() == 0);
    for (int i = 0; i < 3; ++i) {
      const Tensor before = w.clone();
      const Tensor want = matmul(cast(x, bfloat16), cast(before, bfloat16));
      const Tensor got = e.run(std::vector<Tensor>{x})[0];
      CHECK(allclose(got, want, 0, 0));
      CHECK(allclose(w, update(before, x, want), 1e-6, 1e-6));
    }
  }

  TEST_CASE("a cast read after the update of its capture is not kept") {
    Tensor w = full({4}, 1.f);
    ir::Graph g = trace(
        [&](auto& in) {
          Tensor c = cast(w, bfloat16);
          assign(w, w + in[0]);
          return std::vector<Tensor>{c * 2.f + cast(w, bfloat16)};
        },
        {{4}});
    compiler::optimize(g, {.verify = true});
    compiler::Executable e(g);
    const auto out = e.run(std::vector<Tensor>{full({4}, 0.5f)});
    // c is the cast of the old w, the second cast of the updated one.
    CHECK(out[0].to(float32).to_vector<float>() == std::vector<float>{3.5f, 3.5f, 3.5f, 3.5f});
    CHECK(w.to_vector<float>() == std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f});
    const auto out2 = e.run(std::vector<Tensor>{full({4}, 0.5f)});
    CHECK(out2[0].to(float32).to_vector<float>() == std::vector<float>{5, 5, 5, 5});
  }

  TEST_CASE("floating casts fuse: widening ones inside regions, narrowing ones as roots") {
    auto fn = [](auto& in) {
      const Tensor h = relu(cast(in[0], bfloat16));  // bf16
      const Tensor a = cast(h, float32) * 2.f + in[1];
      const Tensor b = cast(cast(h, float32), bfloat16);  // exact round trip: h
      const Tensor c = cast(in[1] * 3.f + 1.f, bfloat16);
      return std::vector<Tensor>{a, b * 1.5f, c};
    };
    ir::Graph g = trace(fn, {{3, 5}, {3, 5}});
    compiler::optimize(g, {.verify = true});
    const std::string d = ir::to_string(g);
    CHECK(d.find("Fused[Cast, Mul, Add]") != std::string::npos);
    CHECK(d.find("Fused[Mul, Add, Cast]") != std::string::npos);
    CHECK(g.count_op("cast") == 1);  // cast(in[0]) alone; the round trip is gone
    Generator gen(9);
    const std::vector<Tensor> x{uniform({3, 5}, -2.0, 2.0, gen, float32),
                                uniform({3, 5}, -2.0, 2.0, gen, float32)};
    std::vector<Tensor> xe = x;
    const auto want = fn(xe);
    const auto got = run(g, x);
    REQUIRE(got.size() == 3);
    for (std::size_t i = 0; i < 3; ++i) {
      CAPTURE(i);
      CHECK(got[i].dtype() == want[i].dtype());
      CHECK(allclose(got[i], want[i], 0, 0));
    }
  }
}
