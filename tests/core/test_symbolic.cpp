// Dynamic-shape specs (Dim, TensorSpec) and symbolic expressions (SymExpr).
#include <doctest/doctest.h>

#include <ms/core/symbolic.hpp>

TEST_SUITE("core.symbolic") {
  using namespace ms;

  TEST_CASE("Dim: sizes, any, any rank, named symbols; bad sizes are ValueErrors") {
    CHECK(Dim(3).is_static());
    CHECK(Dim().is_any());
    CHECK(Dim(-1).is_any());
    CHECK(Dim(-2).is_any_rank());
    const Dim b("batch");
    CHECK(b.is_named());
    CHECK(!b.is_static());
    CHECK(b.to_string() == "batch");
    CHECK(Dim(784).to_string() == "784");
    CHECK_THROWS_WITH_AS(Dim(-3), doctest::Contains("got -3"), ValueError);
    CHECK_THROWS_AS(Dim(std::string()), ValueError);
  }

  TEST_CASE("TensorSpec: dims, -2 alone means any rank") {
    const TensorSpec s({Dim("batch"), 784}, float32);
    CHECK(!s.any_rank);
    CHECK(s.shape.size() == 2);
    CHECK(s.to_string() == "Float32[batch,784]");
    const TensorSpec r({-2}, int64);
    CHECK(r.any_rank);
    CHECK(r.shape.empty());
    CHECK(r.to_string() == "Int64[-2]");
    CHECK(TensorSpec::any_rank_of(float16) == TensorSpec({-2}, float16));
    CHECK_THROWS_WITH_AS(TensorSpec({-2, 3}, float32), doctest::Contains("only dim"), ValueError);
    CHECK_THROWS_AS(TensorSpec({4, -7}, float32), ValueError);
  }

  TEST_CASE("SymExpr: affine, product and inverse forms evaluate and print") {
    const std::vector<std::string> names{"s0", "s1"};
    const std::vector<std::int64_t> at{8, 3};
    const SymExpr a = SymExpr::affine(0, {{0, 784}});
    CHECK(a.eval(at) == 6272);
    CHECK(a.to_string(names) == "784*s0");
    const SymExpr sum = SymExpr::affine(-1, {{0, 1}, {1, 2}});
    CHECK(sum.eval(at) == 13);
    CHECK(sum.to_string(names) == "s0+2*s1-1");
    CHECK(SymExpr::affine(5, {{1, -1}}).to_string(names) == "-s1+5");
    const SymExpr p = SymExpr::product(28, {0, 1});
    CHECK(p.eval(at) == 672);
    CHECK(p.to_string(names) == "28*s0*s1");
    const SymExpr inv = SymExpr::inverse(1, {0});
    CHECK(inv.eval(at) == doctest::Approx(0.125));
    CHECK(inv.to_string(names) == "1/s0");
    CHECK(SymExpr::inverse(2, {0, 1}).to_string(names) == "2/(s0*s1)");
    CHECK(SymExpr::constant(7).is_constant());
    CHECK(SymExpr::constant(7).to_string(names) == "7");
    CHECK(SymExpr::symbol(1).to_string(names) == "s1");
    CHECK(SymExpr::product(1, {}).is_constant());
    CHECK_THROWS_AS(SymExpr::symbol(2).eval(at), IndexError);
  }
}
