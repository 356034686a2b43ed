// Ranged dims: ms::Dim(name, min, max, divisor) in input_signature,
// enable_dynamic and Cell::set_inputs, checked on every call.
#include <doctest/doctest.h>

#include <ms/cell.hpp>
#include <string>

namespace {

ms::Tensor rows(std::int64_t n) { return ms::ones({n, 4}); }

}  // namespace

TEST_SUITE("dyn") {
  TEST_CASE("Dim: min, max and divisor, their checks and their text") {
    const ms::Dim batch("batch", 8, 64, 8);
    CHECK(batch.is_named());
    CHECK(batch.min() == 8);
    CHECK(batch.max() == 64);
    CHECK(batch.divisor() == 8);
    CHECK(batch.constrained());
    CHECK(batch.to_string() == "batch{min=8, max=64, divisor=8}");
    CHECK(batch.violated_by(16).empty());
    CHECK(batch.violated_by(4) == "min = 8");
    CHECK(batch.violated_by(72) == "max = 64");
    CHECK(batch.violated_by(12) == "divisor = 8");
    const ms::Dim len(1, 512);  // unnamed
    CHECK(len.is_any());
    CHECK(len.to_string() == "-1{min=1, max=512}");
    CHECK(ms::Dim("n", 2).to_string() == "n{min=2}");
    CHECK(!ms::Dim("n").constrained());
    CHECK(ms::Dim("n").to_string() == "n");
    CHECK(ms::Dim("n", 0) == ms::Dim("n"));
    CHECK(!(ms::Dim("n", 1) == ms::Dim("n")));
    CHECK_THROWS_WITH_AS(ms::Dim("n", -1, 4), doctest::Contains("min must be >= 0, got -1"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::Dim("n", 8, 4), doctest::Contains("max must be >= min"),
                         ms::ValueError);
    CHECK_THROWS_WITH_AS(ms::Dim(1, 4, 0), doctest::Contains("divisor must be >= 1, got 0"),
                         ms::ValueError);
  }

  TEST_CASE("input_signature: a size outside a Dim's range is a ShapeError naming it") {
    auto fn = [](const ms::Tensor& x) { return x * 2.f; };
    auto f = ms::jit(
        fn, {.input_signature = {ms::TensorSpec({ms::Dim("batch", 8, 32, 8), 4}, ms::float32)}});
    CHECK(ms::allclose(f(rows(8)), rows(8) * 2.f, 0, 0));
    // Valid sizes share the one generalized graph: no recompile.
    (void)f(rows(16));
    (void)f(rows(32));
    CHECK(f.compile_count() == 1);
    CHECK_THROWS_WITH_AS((void)f(rows(4)),
                         doctest::Contains("ms::jit input_signature: argument 0 axis 0 is 4 but "
                                           "its spec Float32[batch{min=8, max=32, divisor=8},4] "
                                           "requires batch{min=8, max=32, divisor=8} (min = 8)"),
                         ms::ShapeError);
    CHECK_THROWS_WITH_AS((void)f(rows(40)), doctest::Contains("axis 0 is 40"), ms::ShapeError);
    CHECK_THROWS_WITH_AS((void)f(rows(40)), doctest::Contains("(max = 32)"), ms::ShapeError);
    CHECK_THROWS_WITH_AS((void)f(rows(12)), doctest::Contains("(divisor = 8)"), ms::ShapeError);
    // The rejected calls compiled nothing; a valid one still runs.
    CHECK(f.compile_count() == 1);
    CHECK(ms::allclose(f(rows(24)), rows(24) * 2.f, 0, 0));
    CHECK(f.compile_count() == 1);
  }

  TEST_CASE("enable_dynamic and set_inputs: ranged dims, the argument index and axis named") {
    auto fn = [](const ms::Tensor& a, const ms::Tensor& b) { return a * 2.f + ms::sum(b); };
    auto f = ms::jit(ms::enable_dynamic(fn, ms::TensorSpec({2, ms::Dim(1, 6)}, ms::float32),
                                        ms::TensorSpec({2, ms::Dim(2, 8, 2)}, ms::float32)));
    (void)f(ms::ones({2, 3}), ms::ones({2, 4}));
    (void)f(ms::ones({2, 6}), ms::ones({2, 8}));
    CHECK(f.compile_count() == 1);
    CHECK_THROWS_WITH_AS((void)f(ms::ones({2, 3}), ms::ones({2, 5})),
                         doctest::Contains("ms::jit enable_dynamic: argument 1 axis 1 is 5 but its "
                                           "spec Float32[2,-1{min=2, max=8, divisor=2}]"),
                         ms::ShapeError);
    CHECK_THROWS_WITH_AS((void)f(ms::ones({2, 7}), ms::ones({2, 4})),
                         doctest::Contains("argument 0 axis 1 is 7"), ms::ShapeError);

    struct Scale : ms::Cell<Scale> {
      ms::Tensor construct(const ms::Tensor& x) { return x * 3.f; }
    } net;
    net.set_inputs({ms::TensorSpec({ms::Dim("batch", 2, 10, 2), 4}, ms::float32)});
    auto g = ms::jit(net);
    CHECK(ms::allclose(g(rows(2)), rows(2) * 3.f, 0, 0));
    CHECK(ms::allclose(g(rows(10)), rows(10) * 3.f, 0, 0));
    CHECK(g.compile_count() == 1);
    CHECK_THROWS_WITH_AS((void)g(rows(3)),
                         doctest::Contains("ms::jit set_inputs: argument 0 axis 0 is 3"),
                         ms::ShapeError);
    CHECK_THROWS_WITH_AS((void)g(rows(12)), doctest::Contains("(max = 10)"), ms::ShapeError);
  }
}
