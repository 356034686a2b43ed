#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <ms/core/storage.hpp>
#include <ms/core/tensor.hpp>
#include <vector>

TEST_SUITE("core") {
  using namespace ms;

  TEST_CASE("creation") {
    const Tensor z = zeros({2, 3});
    CHECK(z.dtype() == float32);
    CHECK(z.shape() == Shape{2, 3});
    CHECK(z.numel() == 6);
    CHECK(z.is_contiguous());
    CHECK(z.to_vector<float>() == std::vector<float>(6, 0.f));
    CHECK(ones({2}, int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, 1});
    CHECK(full({2}, 2.5).dtype() == float32);
    CHECK(full({2}, 7).dtype() == int64);
    CHECK(full({2}, true).dtype() == bool_);
    CHECK(arange(0, 5).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
    CHECK(arange(0, 1, 0.25, float64).numel() == 4);
    CHECK(eye(2, 3).to_vector<float>() == std::vector<float>{1, 0, 0, 0, 1, 0});
    CHECK(tensor({1.f, 2.f}).dtype() == float32);
    CHECK(tensor({1, 2}).dtype() == int64);
    CHECK(tensor({{1, 2}, {3, 4}}, float64).shape() == Shape{2, 2});
    CHECK(tensor(3.5).rank() == 0);
    CHECK(tensor(3.5).item<double>() == 3.5);
    CHECK(from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).dtype() == float64);
  }

  TEST_CASE("arange builds its own dtype: NumPy's length, values against a reference") {
    // Length: ceil((stop - start) / step) in double, as NumPy computes it.
    CHECK(arange(1, 1.3, 0.1, float64).numel() == 4);  // 0.3000000000000000444 / 0.1 > 3
    CHECK(arange(0, 1, 0.1, float32).numel() == 10);
    CHECK(arange(0, 1e-300, 1e300, float64).numel() == 1);   // the quotient underflows to 0
    CHECK(arange(0, -1e-300, 1e300, float64).numel() == 0);  // ... with the signs apart
    CHECK(arange(5, 5, 1, int64).numel() == 0);
    CHECK(arange(3, 0, 1, float32).numel() == 0);
    // float32: element i is start + i * step in double, rounded once to float32.
    for (const std::array<double, 3>& r : std::vector<std::array<double, 3>>{
             {0, 1, 0.1}, {-3.7, 11.2, 0.37}, {1e7, 1e7 + 40, 0.3}, {2.0, -5.0, -0.7}}) {
      const double start = r[0], stop = r[1], step = r[2];
      CAPTURE(start);
      const Tensor t = arange(start, stop, step, float32);
      CHECK(t.dtype() == float32);
      const auto n = static_cast<std::int64_t>(std::ceil((stop - start) / step));
      REQUIRE(t.numel() == n);
      std::vector<float> want;
      for (std::int64_t i = 0; i < n; ++i)
        want.push_back(static_cast<float>(start + static_cast<double>(i) * step));
      CHECK(t.to_vector<float>() == want);
    }
    // int64: exact integers, also where doubles are not (2^53 + 3 is not a double).
    constexpr std::int64_t p53 = std::int64_t{1} << 53;
    const Tensor big = arange(static_cast<double>(p53), static_cast<double>(p53) + 10, 3, int64);
    CHECK(big.to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{p53, p53 + 3, p53 + 6, p53 + 9});
    CHECK(arange(-5, 10, 3, int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{-5, -2, 1, 4, 7});
    CHECK(arange(10, -5, -4, int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{10, 6, 2, -2});
    CHECK(arange(0, 5, 1.5, int64).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{0, 1, 3, 4});  // a fractional step: truncated values
    CHECK(arange(125, 130, 1, int8).to_vector<std::int8_t>() ==
          std::vector<std::int8_t>{125, 126, 127, -128, -127});  // wraps as NumPy's int8
    CHECK(arange(0, 3, 1, bool_).to_vector<bool>() == std::vector<bool>{false, true, true});
    // A float32 range takes its own bytes only: no float64 buffer of twice the size.
    memory_stats_reset_peak();
    const auto before = memory_stats();
    const Tensor r = arange(0, 1 << 20, 1, float32);
    const auto after = memory_stats();
    CHECK(after.alloc_count - before.alloc_count == 1);
    CHECK(after.peak_bytes - before.live_bytes <= (4 << 20));  // float64 first: 12 MiB
    CHECK(r.to_vector<float>()[(1 << 20) - 1] == static_cast<float>((1 << 20) - 1));
  }

  TEST_CASE("creation errors") {
    CHECK_THROWS_AS(zeros({-1}), ValueError);
    CHECK_THROWS_AS(arange(0, 1, 0), ValueError);
    CHECK_THROWS_WITH_AS(from_vector(std::vector<float>{1, 2, 3}, {2, 2}),
                         doctest::Contains("shape [2, 2] holds 4 elements but 3 values"),
                         ShapeError);
    CHECK_THROWS_AS(tensor({{1, 2}, {3}}), ShapeError);
    CHECK_THROWS_AS(zeros({2}).item<float>(), ValueError);
    CHECK_THROWS_AS(zeros({2}).data<double>(), TypeError);
    CHECK_THROWS_AS(Tensor().reshape({1}), ValueError);
  }

  TEST_CASE("views share memory") {
    Tensor x = arange(0, 6).reshape({2, 3});
    Tensor t = x.transpose(0, 1);
    CHECK(t.shape() == Shape{3, 2});
    CHECK_FALSE(t.is_contiguous());
    CHECK(t.storage() == x.storage());
    CHECK(t.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK(x.permute({1, 0}).is_same(t));
    Tensor s = x.slice(1, 0, 3, 2);
    CHECK(s.to_vector<float>() == std::vector<float>{0, 2, 3, 5});
    CHECK(x.slice(1, -2, 100).to_vector<float>() == std::vector<float>{1, 2, 4, 5});
    CHECK(x.slice(0, 5, 9).numel() == 0);
    CHECK(x.select(0, -1).to_vector<float>() == std::vector<float>{3, 4, 5});
    CHECK(x.unsqueeze(0).shape() == Shape{1, 2, 3});
    CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 1});
    CHECK(x.unsqueeze(0).squeeze().shape() == Shape{2, 3});
    CHECK(x.reshape({3, -1}).shape() == Shape{3, 2});
    CHECK(x.flatten().shape() == Shape{6});
    Tensor e = tensor({1.f, 2.f}).reshape({2, 1}).expand({2, 3});
    CHECK(e.strides()[1] == 0);
    CHECK(e.to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
    // writing through a view writes the base
    x.select(0, 0).fill_(9.0);
    CHECK(x.to_vector<float>() == std::vector<float>{9, 9, 9, 3, 4, 5});
  }

  TEST_CASE("reshape of a non-contiguous tensor copies; view refuses") {
    Tensor x = arange(0, 6).reshape({2, 3}).transpose(0, 1);
    Tensor r = x.reshape({6});
    CHECK(r.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
    CHECK(r.storage() != x.storage());
    CHECK_THROWS_WITH_AS(x.view({6}), doctest::Contains("use reshape()"), ShapeError);
    // a transposed view can still be viewed when axes stay in order
    const Tensor b = arange(0, 24).reshape({2, 3, 4}).transpose(0, 1);
    CHECK(b.view({3, 2, 2, 2}).storage() == b.storage());
    CHECK(b.view({3, 2, 2, 2}).to_vector<float>() == b.contiguous().to_vector<float>());
  }

  TEST_CASE("view errors") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_AS(x.reshape({4, 2}), ShapeError);
    CHECK_THROWS_AS(x.reshape({-1, -1}), ShapeError);
    CHECK_THROWS_AS(x.reshape({-3, 2}), ValueError);
    CHECK_THROWS_AS(x.transpose(0, 2), IndexError);
    CHECK_THROWS_AS(x.permute({0, 0}), ValueError);
    CHECK_THROWS_AS(x.permute({0}), ShapeError);
    CHECK_THROWS_AS(x.slice(0, 0, 1, 0), ValueError);
    CHECK_THROWS_AS(x.slice(0, 0, 1, -1), ValueError);
    CHECK_THROWS_AS(x.select(1, 3), IndexError);
    CHECK_THROWS_AS(x.squeeze(0), ShapeError);
    CHECK_THROWS_WITH_AS(x.expand({2, 4}), doctest::Contains("only size-1 axes expand"),
                         ShapeError);
    CHECK_THROWS_AS(x.expand({3}), ShapeError);
    CHECK_THROWS_AS(x.select(0, std::numeric_limits<std::int64_t>::min()), IndexError);
  }

  TEST_CASE("views reaching outside storage are refused") {
    auto st = Storage::allocate(16);
    CHECK_NOTHROW(Tensor(st, float32, Shape{4}, {1}, 0));
    CHECK_THROWS_AS(Tensor(st, float32, Shape{5}, {1}, 0), IndexError);
    CHECK_THROWS_AS(Tensor(st, float32, Shape{2}, {-1}, 0), IndexError);
  }

  TEST_CASE("clone, contiguous, copy_") {
    Tensor x = arange(0, 4).reshape({2, 2});
    Tensor c = x.clone();
    c.fill_(1.0);
    CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 2, 3});
    CHECK(x.contiguous().is_same(x));
    Tensor y = zeros({2, 2}, float64);
    y.copy_(tensor({5, 6}));  // broadcast and convert
    CHECK(y.to_vector<double>() == std::vector<double>{5, 6, 5, 6});
    Tensor yt = y.transpose(0, 1);
    yt.copy_(x);
    CHECK(y.to_vector<double>() == std::vector<double>{0, 2, 1, 3});
  }

  TEST_CASE("allclose") {
    CHECK(allclose(tensor({1.f, 2.f}), tensor({1.f, 2.000001f})));
    CHECK_FALSE(allclose(tensor({1.f, 2.f}), tensor({1.f, 2.1f})));
    const double nan = std::nan("");
    CHECK_FALSE(allclose(tensor({nan}), tensor({nan})));
    CHECK(allclose(tensor({nan}), tensor({nan}), 1e-5, 1e-8, true));
    CHECK(allclose(tensor({INFINITY}), tensor({INFINITY})));
    CHECK(allclose(zeros({2, 3}), zeros({3})));
  }

  TEST_CASE("printing like MindSpore") {
    CHECK(tensor({{1, 2}, {3, 4}}).to_string() ==
          "Tensor(shape=[2, 2], dtype=Int64, value=\n[[1, 2],\n [3, 4]])");
    CHECK(tensor(true).to_string() == "Tensor(shape=[], dtype=Bool, value=True)");
    CHECK(tensor({0.5f, 1.f}).to_string() ==
          "Tensor(shape=[2], dtype=Float32, value=\n[0.5000, 1.0000])");
    const std::string big = arange(0, 5000).to_string();
    CHECK(big.find("...") != std::string::npos);
    CHECK(big.size() < 200);
    CHECK(Tensor().to_string() == "Tensor(undefined)");
  }
}
