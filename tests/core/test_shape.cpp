#include <doctest/doctest.h>

#include <limits>
#include <ms/core/shape.hpp>

TEST_SUITE("core.shape") {
  using namespace ms;

  TEST_CASE("numel and strides") {
    CHECK(shape_numel(Shape{2, 3, 4}) == 24);
    CHECK(shape_numel(Shape{}) == 1);
    CHECK(shape_numel(Shape{3, 0, 5}) == 0);
    CHECK(shape_contiguous_strides(Shape{2, 3, 4}) == std::vector<std::int64_t>{12, 4, 1});
    CHECK(shape_contiguous_strides(Shape{2, 0, 4}) == std::vector<std::int64_t>{4, 4, 1});
  }

  TEST_CASE("negative and overflowing sizes are rejected") {
    CHECK_THROWS_WITH_AS(shape_numel(Shape{2, -3}, "zeros"),
                         doctest::Contains("zeros: shape [2, -3] has a negative size -3 at axis 1"),
                         ValueError);
    const std::int64_t big = std::int64_t{1} << 40;
    CHECK_THROWS_WITH_AS(shape_numel(Shape{big, big}), doctest::Contains("overflow"), ValueError);
    // a zero beside huge dims: the naive product is 0 and hides the overflow
    CHECK_THROWS_AS(shape_numel(Shape{0, big, big}), ValueError);
    CHECK_THROWS_AS(shape_numel(Shape{std::numeric_limits<std::int64_t>::min()}), ValueError);
    CHECK_THROWS_AS(shape_nbytes(std::int64_t{1} << 62, 8, "x"), ValueError);
    CHECK(shape_nbytes(5, 0, "int4") == 3);
  }

  TEST_CASE("broadcasting as NumPy") {
    CHECK(shape_broadcast(Shape{2, 1, 4}, Shape{3, 1}, "add") == Shape{2, 3, 4});
    CHECK(shape_broadcast(Shape{}, Shape{5}, "add") == Shape{5});
    CHECK(shape_broadcast(Shape{0}, Shape{1}, "add") == Shape{0});
    CHECK_THROWS_WITH_AS(shape_broadcast(Shape{32, 128, 64}, Shape{32, 64, 128}, "add"),
                         doctest::Contains("axis -1: 64 vs 128 (neither is 1)"), ShapeError);
  }

  TEST_CASE("axes") {
    CHECK(axis_normalize(-1, 3, "sum") == 2);
    CHECK(axis_normalize(0, 0, "sum") == 0);
    CHECK_THROWS_WITH_AS(axis_normalize(3, 3, "sum"),
                         doctest::Contains("sum: axis 3 is out of range for a tensor of rank 3"),
                         IndexError);
    CHECK_THROWS_AS(axis_normalize(std::numeric_limits<std::int64_t>::min(), 3, "sum"), IndexError);
    CHECK(axes_normalize(std::vector<std::int64_t>{-1, 0}, 3, "sum") ==
          std::vector<std::int64_t>{0, 2});
    CHECK_THROWS_AS(axes_normalize(std::vector<std::int64_t>{1, -2}, 3, "sum"), ValueError);
  }

  TEST_CASE("printing") {
    CHECK(Shape{2, 3}.to_string() == "[2, 3]");
    CHECK(Shape{kAnyRank}.is_any_rank());
    CHECK_FALSE(Shape{kAnyDim, 3}.is_static());
  }
}
