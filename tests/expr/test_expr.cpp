// Expression templates: laziness, one fused pass with one allocation, dtype
// promotion of trees, operand lifetimes, assignment in place; an expression
// behaves like a tensor (shape, dtype, values, printing) and reports bad
// operands where it is built.
#include <doctest/doctest.h>
#include <algorithm>

#include "random.hpp"

#include <cstring>
#include <ms/ms.hpp>
#include <random>
#include <sstream>

using namespace ms;

TEST_SUITE("expr") {
  TEST_CASE("small ops: the dense path computes the interpreter's values, bitwise") {
    // Every unary and binary op in every register dtype: expr::eval_dense
    // (what `a + b` or `relu(x)` on dense tensors of one shape and dtype runs)
    // against the op table's entry (the program interpreter), bit for bit,
    // on values with zeros, ties and negatives (and NaN and infinities in floats).
    int taken = 0;
    for (int id = 0; id < ops::ElementwiseOps::size; ++id) {
      const ops::EwOpInfo& info = ops::ew_op_info(id);
      if (info.arity > 2) continue;
      for (DType dt : {bool_, int32, int64, float32, float64}) {
        CAPTURE(info.name);
        CAPTURE(dt);
        std::vector<double> va(1000), vb(1000);
        for (std::size_t i = 0; i < va.size(); ++i) {
          va[i] = static_cast<double>(static_cast<int>(i % 7) - 3) * 0.5;
          vb[i] = static_cast<double>(static_cast<int>(i % 5) - 2);
        }
        if (dtype_is_float(dt)) va[3] = std::nan(""), va[10] = INFINITY, vb[11] = -INFINITY;
        const Tensor a = from_vector(va, {10, 100}).to(dt), b = from_vector(vb, {10, 100}).to(dt);
        const std::vector<Tensor> in =
            info.arity == 1 ? std::vector<Tensor>{a} : std::vector<Tensor>{a, b};
        const std::vector<const Tensor*> ptrs =
            info.arity == 1 ? std::vector<const Tensor*>{&a} : std::vector<const Tensor*>{&a, &b};
        Tensor fast, slow;
        bool took = false, slow_threw = false;
        try {
          slow = ops::call1(ops::op(info.name), in);
        } catch (const Error&) {
          slow_threw = true;
        }
        if (slow_threw) {  // a dtype the op refuses: the dense path refuses it as well
          CHECK_THROWS_AS(expr::eval_dense(id, ptrs, fast), Error);
          continue;
        }
        took = expr::eval_dense(id, ptrs, fast);
        // It takes every op whose value keeps the operands' dtype (bool
        // operands: only where the op also computes in bool, as logical_and).
        if (dt != bool_)
          CHECK(took == (slow.dtype() == dt));
        else
          CHECK((!took || slow.dtype() == dt));
        if (!took) continue;
        ++taken;
        REQUIRE(fast.dtype() == slow.dtype());
        REQUIRE(fast.shape() == slow.shape());
        CHECK(std::memcmp(fast.raw_data(), slow.raw_data(),
                          static_cast<std::size_t>(fast.numel() * dtype_itemsize(dt))) == 0);
      }
    }
    CHECK(taken > 60);
    MESSAGE(taken, " (op, dtype) pairs on the dense path");
  }

  TEST_CASE("small ops: the dense path declines what the interpreter must do") {
    const Tensor a = ones({4, 8}), b = ones({4, 8});
    Tensor out;
    const int add = ops::ew_op_find("add");
    const Tensor* two[] = {&a, &b};
    CHECK(expr::eval_dense(add, two, out));
    CHECK(out.to_vector<float>() == std::vector<float>(32, 2.f));
    const Tensor d = ones({4, 8}, float64), bc = ones({8}), t = ones({8, 4}).transpose(0, 1);
    const Tensor big = ones({(1 << 16) + 1}), big2 = ones({(1 << 16) + 1}), i = ones({4, 8}, int32);
    for (const auto& [x, y] : std::vector<std::pair<const Tensor*, const Tensor*>>{
             {&a, &d},       // dtypes differ (promotion)
             {&a, &bc},      // shapes differ (broadcasting)
             {&a, &t},       // a strided operand
             {&big, &big2},  // over 2^16 elements: the threaded interpreter
         }) {
      const Tensor* ops2[] = {x, y};
      Tensor r;
      CHECK_FALSE(expr::eval_dense(add, ops2, r));
      CHECK_FALSE(r.defined());
    }
    const Tensor* ints[] = {&i, &i};
    Tensor r;
    CHECK_FALSE(expr::eval_dense(ops::ew_op_find("div"), ints, r));  // int / int is float
    CHECK_FALSE(expr::eval_dense(ops::ew_op_find("lt"), two, r));    // a bool result
    // The interpreter still computes them, with the same values a + b has.
    CHECK(allclose(Tensor(a + d), full({4, 8}, 2.0, float64)));
    CHECK(allclose(Tensor(a + t), full({4, 8}, 2.f)));
    CHECK((big + big2).to_vector<float>() == std::vector<float>((1 << 16) + 1, 2.f));
  }

  TEST_CASE("expressions are types, not computations") {
    const Tensor a = ones({3}), b = ones({3});
    static_assert(TensorExpr<decltype(a + b)>);
    static_assert(TensorExpr<decltype(relu(a * b + 1.f) * 0.5f)>);
    static_assert(!TensorExpr<Tensor>);
    static_assert(TensorLike<Tensor>);
    static_assert(!Operand<std::string>);
    const auto before = memory_stats().alloc_count;
    auto e = a + b * 2;  // nothing computed yet
    CHECK(memory_stats().alloc_count == before);
    CHECK(e.shape() == Shape{3});
    CHECK(e.dtype() == float32);
    Tensor r = e;
    CHECK(memory_stats().alloc_count == before + 1);
    CHECK(r.to_vector<float>() == std::vector<float>{3, 3, 3});
  }

  TEST_CASE("an expression answers like a tensor: shape and dtype from construction") {
    using E = decltype(ones({3}) + ones({3}));
    static_assert(std::is_same_v<decltype(std::declval<const E&>().shape()), const Shape&>);
    static_assert(std::is_same_v<decltype(std::declval<const E&>().dtype()), DType>);
    static_assert(
        std::is_same_v<decltype(std::declval<const E&>().to_vector<float>()), std::vector<float>>);
    static_assert(std::is_same_v<decltype(std::declval<const E&>().item<double>()), double>);
    static_assert(
        std::is_same_v<decltype(std::declval<std::ostream&>() << std::declval<const E&>()),
                       std::ostream&>);
    static_assert(std::is_same_v<decltype(std::declval<const E&>().rank()), std::int64_t>);
    static_assert(!std::is_convertible_v<E, int>);  // values only through item / to_vector

    const Tensor col = arange(0, 3).reshape({3, 1}), row = tensor({10.f, 20.f, 30.f, 40.f});
    const Tensor i = tensor({1, 2, 3, 4}, int32), h = ones({2, 1}, float16);
    const auto before = memory_stats().alloc_count;
    auto outer = col + row;                // broadcasting makes a shape no operand has
    auto chain = ms::relu(outer * i) - 1;  // nested: the child is moved into its parent
    auto cmp = ms::where(chain > 5.f, chain, i);
    CHECK(outer.shape() == Shape{3, 4});
    CHECK(chain.shape() == Shape{3, 4});
    CHECK(chain.rank() == 2);
    CHECK(chain.dim(-1) == 4);
    CHECK(chain.numel() == 12);
    CHECK(chain.dtype() == float32);
    CHECK((i + i).shape() == Shape{4});
    CHECK((i + i).dtype() == int32);
    CHECK((i / 2).dtype() == float32);
    CHECK((i > 2).dtype() == bool_);
    CHECK((2.5 * h).shape() == Shape{2, 1});
    CHECK((2.5 * h).dtype() == float16);
    CHECK(cmp.shape() == Shape{3, 4});
    CHECK(cmp.dtype() == float32);
    CHECK(memory_stats().alloc_count == before);  // none of this computed anything
    // Temporaries inside the tree (held by value, moved with their parents).
    auto held = ms::exp(ones({2, 3}) * 2) + ones({3});
    auto moved = std::move(held) * zeros({2, 1});
    CHECK(moved.shape() == Shape{2, 3});
    CHECK((ones({4, 1}) - ones({1, 5})).shape() == Shape{4, 5});
    // The same op on other dtypes right after: each node has its own types.
    CHECK((i + i).dtype() == int32);
    CHECK((h + h).dtype() == float16);
    CHECK((i + 1.5).dtype() == float32);
    CHECK((i + true).dtype() == int32);
    CHECK((i + i).dtype() == int32);
    // The values agree with the tensor the expression becomes.
    const Tensor t = chain;
    CHECK(t.shape() == chain.shape());
    CHECK(t.dtype() == chain.dtype());
  }

  TEST_CASE("an expression's values: item, to_vector, printing, each computing the tree once") {
    const Tensor a = tensor({1.f, -2.f, 3.f}), b = tensor({2.f, 2.f, 2.f});
    auto e = ms::relu(a * b) + 1;
    auto before = memory_stats().alloc_count;
    CHECK(e.to_vector<float>() == std::vector<float>{3, 1, 7});
    CHECK(memory_stats().alloc_count == before + 1);  // the one result of one evaluation
    CHECK(e.to_vector<double>() == std::vector<double>{3, 1, 7});
    auto one = a.slice(0, 1, 2) * b.slice(0, 1, 2);
    before = memory_stats().alloc_count;
    CHECK(one.item<float>() == -4.f);
    CHECK(memory_stats().alloc_count == before + 1);
    CHECK(one.item<int>() == -4);
    CHECK_THROWS_WITH_AS(e.item<float>(), doctest::Contains("item() needs exactly one"),
                         ValueError);
    std::ostringstream printed, want;
    printed << e;
    want << Tensor(e);
    CHECK(printed.str() == want.str());
    CHECK(printed.str().find("shape=[3]") != std::string::npos);
    CHECK(e.to_string() == Tensor(e).to_string());
    // An lvalue operand is read when the values are asked for, not when built.
    Tensor x = ones({2});
    auto f = x * 3;
    x.fill_(2.0);
    CHECK(f.to_vector<float>() == std::vector<float>{6, 6});
  }

  TEST_CASE("a bad operand is an error on the line that builds the expression") {
    CHECK_THROWS_WITH_AS(
        (void)(zeros({3, 4}) + zeros({5, 4})),
        doctest::Contains("add: shapes do not broadcast\n  lhs: [3, 4]\n  rhs: [5, 4]"
                          "\n  axis -2: 3 vs 5 (neither is 1)"),
        ShapeError);
    // Inside a tree: the node that cannot broadcast names its op and both shapes.
    const Tensor a = zeros({3, 4}), b = zeros({4}), c = zeros({5});
    auto ok = a * b;  // [3, 4]
    CHECK(ok.shape() == Shape{3, 4});
    CHECK_THROWS_WITH_AS(
        (void)(ms::relu(a * b) - c),
        doctest::Contains("sub: shapes do not broadcast\n  lhs: [3, 4]\n  rhs: [5]"), ShapeError);
    CHECK_THROWS_WITH_AS((void)ms::where(zeros({2}, bool_), a, b),
                         doctest::Contains("where: shapes do not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS((void)ms::exp(zeros({2}, complex64)),
                         doctest::Contains("exp: dtype Complex64 is not supported"), TypeError);
    CHECK_THROWS_WITH_AS((void)(Tensor() * 2.f),
                         doctest::Contains("mul: operand 0 is an undefined tensor"), ValueError);
    // Nothing was left half-built: the allocations are the operands' only.
    const auto before = memory_stats().alloc_count;
    CHECK_THROWS_AS((void)(a + c), ShapeError);
    CHECK(memory_stats().alloc_count == before);
  }

  TEST_CASE("under ms::jit an expression over traced tensors has the traced shape and dtype") {
    Shape seen;
    DType seen_dtype = bool_;
    auto f = jit([&](const auto& x, const auto& y) {
      auto e = x * y + 1;
      seen = e.shape();
      seen_dtype = e.dtype();
      return e;
    });
    const Tensor x = ones({2, 3}, float64), y = tensor({1.0, 2.0, 3.0}, float64);
    CHECK(f(x, y).to_vector<double>() == std::vector<double>{2, 3, 4, 2, 3, 4});
    CHECK(seen == Shape{2, 3});
    CHECK(seen_dtype == float64);
    auto bad = jit([](const auto& x, const auto& y) { return x + y; });
    CHECK_THROWS_WITH_AS(bad(ones({2, 3}), ones({4})),
                         doctest::Contains("add: shapes do not broadcast"), ShapeError);
  }

  TEST_CASE("a fused chain is one pass with one allocation") {
    const Shape s{1000, 100};
    const Tensor a = test::random_tensor(float32, s, {-2, 2}, 1),
                 b = test::random_tensor(float32, s, {-2, 2}, 2),
                 c = test::random_tensor(float32, s, {-2, 2}, 3);
    memory_stats_reset_peak();
    const auto before = memory_stats();
    Tensor y = relu(a * b + c) * 0.5f;
    const auto after = memory_stats();
    CHECK(after.alloc_count == before.alloc_count + 1);
    CHECK(after.peak_bytes - before.live_bytes == s[0] * s[1] * 4);  // only the result
    const auto va = a.to_vector<float>(), vb = b.to_vector<float>(), vc = c.to_vector<float>(),
               vy = y.to_vector<float>();
    // within an ulp or two: the reference may be contracted into an FMA
    for (std::size_t i = 0; i < vy.size(); ++i)
      CHECK(vy[i] == doctest::Approx(std::max(va[i] * vb[i] + vc[i], 0.f) * 0.5f).epsilon(1e-6));
  }

  TEST_CASE("temporaries are held by value, lvalues by reference") {
    auto e = ms::exp(ones({4}) * 0.f) + 1;  // the temporary lives inside e
    Tensor r = e;
    CHECK(r.to_vector<float>() == std::vector<float>(4, 2.f));
    Tensor x = ones({2});
    auto f = x * 3;  // refers to x
    x.fill_(2.0);
    CHECK(f.to_vector<float>() == std::vector<float>{6, 6});
  }

  TEST_CASE("dtype promotion of trees and weak scalars") {
    const Tensor i32 = tensor({1, 2, 3}, int32), i64 = tensor({1, 2, 3}, int64);
    const Tensor f16 = ones({3}, float16), f32 = ones({3}), b = tensor({true, false, true});
    CHECK((i32 + 1).dtype() == int32);
    CHECK((i32 + 0.5).dtype() == float32);
    CHECK((i32 + i64).dtype() == int64);
    CHECK((f16 * 2.0).dtype() == float16);
    CHECK((f16 + f32).dtype() == float32);
    CHECK((i32 / i32).dtype() == float32);
    CHECK((b + b).dtype() == bool_);
    CHECK((i32 > 1).dtype() == bool_);
    CHECK(where(b, i32, 0.5).dtype() == float32);
    CHECK(ms::exp(i32).dtype() == float32);
    CHECK(ms::relu(i64).dtype() == int64);
    CHECK((i32 / 2).to_vector<float>() == std::vector<float>{0.5f, 1.f, 1.5f});
    CHECK(ms::pow(i32, 2).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 4, 9});
    CHECK((!b).to_vector<bool>() == std::vector<bool>{false, true, false});
    CHECK(logical_and(b, i32 > 1).to_vector<bool>() == std::vector<bool>{false, false, true});
    // int8 arithmetic inside a tree, then a float: values as computed in int32
    const Tensor i8 = tensor({100, -100}, int8);
    CHECK(((i8 + i8) * f32.slice(0, 0, 2)).to_vector<float>() == std::vector<float>{200.f, -200.f});
    CHECK((i8 + i8).to_vector<std::int8_t>() == std::vector<std::int8_t>{-56, 56});
    // float16 stores round; the computation runs in float32
    const Tensor third = f16 / 3.0;
    CHECK(third.dtype() == float16);
    CHECK(third.to(float32).to_vector<float>()[0] == static_cast<float>(float16_t(1.0f / 3.0f)));
  }

  TEST_CASE("mixing views, broadcasting and scalars in one tree") {
    const Tensor m = arange(0, 6).reshape({2, 3});
    const Tensor row = tensor({10.f, 20.f, 30.f});
    Tensor r = m.transpose(0, 1) * 2 + row.reshape({3, 1}) - 1;
    CHECK(r.to_vector<float>() == std::vector<float>{9, 15, 21, 27, 33, 39});
    Tensor bc = m + tensor(100.f);
    CHECK(bc.to_vector<float>() == std::vector<float>{100, 101, 102, 103, 104, 105});
  }

  TEST_CASE("assign and compound assignment write in place") {
    Tensor x = arange(0, 4);
    const Tensor y = ones({4});
    const auto before = memory_stats().alloc_count;
    x += y;
    x *= 2;
    assign(x, x - 1);
    CHECK(memory_stats().alloc_count == before);
    CHECK(x.to_vector<float>() == std::vector<float>{1, 3, 5, 7});
    Tensor m = zeros({2, 2}, float64);
    assign(m, tensor({1.f, 2.f}));  // broadcast and cast
    CHECK(m.to_vector<double>() == std::vector<double>{1, 2, 1, 2});
    Tensor mt = m.transpose(0, 1);  // strided destination
    assign(mt, tensor({5.f, 6.f}));
    CHECK(m.to_vector<double>() == std::vector<double>{5, 5, 6, 6});
    assign(m, 3.5);
    CHECK(m.to_vector<double>() == std::vector<double>(4, 3.5));
  }

  TEST_CASE("long chains and repeated operands") {
    const Tensor a = test::random_tensor(float32, {32, 32}, {-2, 2}, 5);
    Tensor acc = a;
    auto e = ((((a + 1) * a - 2) / (ms::abs(a) + 1)) + ms::square(a)) * ms::sigmoid(a);
    const Tensor r = e;
    const auto v = a.to_vector<float>(), got = r.to_vector<float>();
    for (std::size_t i = 0; i < v.size(); ++i) {
      const float x = v[i];
      const float want = ((((x + 1) * x - 2) / (std::fabs(x) + 1)) + x * x) / (1 + std::exp(-x));
      CHECK(got[i] == doctest::Approx(want).epsilon(1e-5));
    }
  }

  TEST_CASE("constants keep their registers across tiles (several constants, > 1 tile)") {
    // Regression: a constant's register was released after its first use and
    // reused, so tiles after the first read a clobbered constant.
    const Tensor x = test::random_tensor(float32, {3, 1000}, {-2, 2}, 5);
    const Tensor y = neg(x * 0.5f + 0.25f) * 2.f - 1.f;
    const std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
    for (std::size_t i = 0; i < xv.size(); ++i)
      REQUIRE(yv[i] == -(xv[i] * 0.5f + 0.25f) * 2.f - 1.f);
  }
}
