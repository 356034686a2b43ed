#include <doctest/doctest.h>

#include <ms/ops/op.hpp>

using namespace ms;

TEST_SUITE("ops") {
  TEST_CASE("op lookup and attributes") {
    CHECK_THROWS_WITH_AS(ops::op("no_such_op"), doctest::Contains("no op named 'no_such_op'"),
                         ValueError);
    ops::Attrs a{{"axes", std::vector<std::int64_t>{1, 2}}, {"keepdims", false}};
    CHECK(a.get<bool>("keepdims", "sum") == false);
    CHECK(a.get_or<std::int64_t>("ddof", 0, "var") == 0);
    CHECK_THROWS_WITH_AS(a.get<std::int64_t>("axes", "sum"),
                         doctest::Contains("attribute 'axes' has the wrong type"), ValueError);
    CHECK(a.to_string() == "axes=[1, 2], keepdims=false");
  }

  TEST_CASE("op names are unique") {
    const auto& reg = ops::registry();
    for (std::size_t i = 0; i < reg.size(); ++i)
      for (std::size_t j = i + 1; j < reg.size(); ++j) CHECK(reg[i]->name != reg[j]->name);
  }
}
