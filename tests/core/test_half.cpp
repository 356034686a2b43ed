// ms::float16_t and ms::bfloat16_t (ms/core/half.hpp): the same bits and
// rounding as Eigen::half / Eigen::bfloat16, which libms computes on.
#include <doctest/doctest.h>

#include <Eigen/Core>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include <ms/core/dtype.hpp>

TEST_SUITE("core.half") {
  using namespace ms;

  TEST_CASE("float16: rounds to nearest even, overflows to inf, keeps subnormals") {
    CHECK(static_cast<float>(float16_t(1.0f / 3.0f)) == 0.333251953125f);
    CHECK(float16_t(2049.0f).x == float16_t(2048.0f).x);  // tie: to the even mantissa
    CHECK(float16_t(2051.0f).x == float16_t(2052.0f).x);  // tie: up to the even one
    CHECK(float16_t(65504.0f).x == 0x7bff);               // the largest finite value
    CHECK(float16_t(65520.0f).x == 0x7c00);               // rounds to inf
    CHECK(float16_t(-1e9).x == 0xfc00);
    CHECK(float16_t(std::ldexp(1.0f, -24)).x == 0x0001);  // the smallest subnormal
    CHECK(float16_t(std::ldexp(1.0f, -26)).x == 0x0000);  // below half of it: zero
    CHECK(std::isnan(static_cast<float>(float16_t(NAN))));
    CHECK(static_cast<double>(float16_t(-2.5)) == -2.5);
    CHECK(static_cast<int>(float16_t(7)) == 7);
  }

  TEST_CASE("bfloat16: rounds to nearest even, float's range") {
    CHECK(static_cast<float>(bfloat16_t(1.0f / 3.0f)) == 0.333984375f);
    CHECK(bfloat16_t(257.0f).x == bfloat16_t(256.0f).x);      // tie: to the even mantissa
    const float big = static_cast<float>(bfloat16_t(1e38f));  // finite: float's exponent range
    CHECK(std::isfinite(big));
    CHECK(std::fabs(big / 1e38f - 1.0f) < 1.0f / 256);  // 8 bits of precision
    CHECK(std::isnan(static_cast<float>(bfloat16_t(NAN))));
    CHECK(bfloat16_t(-NAN).x == 0xffc0);
  }

  TEST_CASE("conversions give Eigen's bits, both ways") {
    // Every 4099th float (all exponents, mantissas and signs) and every 16-bit pattern.
    int differ = 0;
    for (std::uint64_t u = 0; u < (std::uint64_t{1} << 32); u += 4099) {
      const float f = std::bit_cast<float>(static_cast<std::uint32_t>(u));
      if (std::isnan(f)) continue;
      differ += float16_t(f).x != std::bit_cast<std::uint16_t>(Eigen::half(f));
      differ += bfloat16_t(f).x != std::bit_cast<std::uint16_t>(Eigen::bfloat16(f));
    }
    for (std::uint32_t b = 0; b < 65536; ++b) {
      const auto bits = static_cast<std::uint16_t>(b);
      const float h = static_cast<float>(float16_t::from_bits(bits));
      const float eh = static_cast<float>(std::bit_cast<Eigen::half>(bits));
      const float bf = static_cast<float>(bfloat16_t::from_bits(bits));
      const float ebf = static_cast<float>(std::bit_cast<Eigen::bfloat16>(bits));
      differ += !(std::bit_cast<std::uint32_t>(h) == std::bit_cast<std::uint32_t>(eh) ||
                  (std::isnan(h) && std::isnan(eh)));
      differ += !(std::bit_cast<std::uint32_t>(bf) == std::bit_cast<std::uint32_t>(ebf) ||
                  (std::isnan(bf) && std::isnan(ebf)));
    }
    CHECK(differ == 0);
  }

  TEST_CASE("arithmetic and comparisons compute in float and round the result") {
    const float16_t a(1.5f), b(0.25f);
    CHECK(static_cast<float>(a + b) == 1.75f);
    CHECK(static_cast<float>(a * b) == 0.375f);
    CHECK(static_cast<float>(-a) == -1.5f);
    CHECK(static_cast<float>(float16_t(1.0f) / float16_t(3.0f)) == 0.333251953125f);
    CHECK(a > b);
    CHECK(a == float16_t(1.5));
    CHECK_FALSE(float16_t(NAN) == float16_t(NAN));
    std::ostringstream os;
    os << bfloat16_t(0.5f);
    CHECK(os.str() == "0.5");
  }

  TEST_CASE("numeric_limits are binary16's and bfloat16's") {
    using L = std::numeric_limits<float16_t>;
    CHECK(static_cast<float>(L::max()) == 65504.0f);
    CHECK(static_cast<float>(L::lowest()) == -65504.0f);
    CHECK(static_cast<float>(L::min()) == std::ldexp(1.0f, -14));
    CHECK(static_cast<float>(L::epsilon()) == std::ldexp(1.0f, -10));
    CHECK(std::isinf(static_cast<float>(L::infinity())));
    CHECK(std::isnan(static_cast<float>(L::quiet_NaN())));
    using B = std::numeric_limits<bfloat16_t>;
    CHECK(static_cast<float>(B::epsilon()) == std::ldexp(1.0f, -7));
    CHECK(static_cast<float>(B::min()) == std::numeric_limits<float>::min());
    CHECK(std::isinf(static_cast<float>(B::infinity())));
  }

  TEST_CASE("tensors of float16 and bfloat16 hold ms's types") {
    static_assert(dtype_of<float16_t> == float16 && dtype_of<bfloat16_t> == bfloat16);
    static_assert(Element<float16_t> && Element<bfloat16_t>);
    CHECK(scalar_cast<std::int32_t>(float16_t(NAN)) == std::numeric_limits<std::int32_t>::min());
    CHECK(static_cast<float>(scalar_cast<bfloat16_t>(3.0)) == 3.0f);
  }
}
