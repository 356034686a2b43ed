#include <doctest/doctest.h>

#include <ms/core/dtype.hpp>
#include <ms/core/tensor.hpp>

using namespace ms;

TEST_SUITE("core") {
  TEST_CASE("dtype names and sizes follow MindSpore") {
    CHECK(dtype_name(float32) == "Float32");
    CHECK(dtype_name(bool_) == "Bool");
    CHECK(dtype_name(bfloat16) == "BFloat16");
    CHECK(dtype_itemsize(complex128) == 16);
    CHECK(dtype_itemsize(float16) == 2);
    static_assert(dtype_of<float> == float32);
    static_assert(std::is_same_v<cpp_type<DType::Int64>, std::int64_t>);
  }

  TEST_CASE("type promotion") {
    CHECK(promote_types(int32, float32) == float32);
    CHECK(promote_types(int64, float16) == float16);
    CHECK(promote_types(float16, float32) == float32);
    CHECK(promote_types(float16, bfloat16) == float32);
    CHECK(promote_types(bool_, int8) == int8);
    CHECK(promote_types(bool_, bool_) == bool_);
    CHECK(promote_types(uint8, int8) == int16);
    CHECK(promote_types(uint8, int32) == int32);
    CHECK(promote_types(uint64, int64) == int64);
    CHECK(promote_types(int32, int64) == int64);
    CHECK(promote_types(float32, complex64) == complex64);
    CHECK(promote_types(float64, complex64) == complex128);
    CHECK(promote_types(int4, int4) == int8);  // int4 computes as int8
    CHECK(promote_types(int4, int16) == int16);
    // symmetric
    for (int i = 0; i < kNumDTypes; ++i)
      for (int j = 0; j < kNumDTypes; ++j)
        CHECK(promote_types(DType(i), DType(j)) == promote_types(DType(j), DType(i)));
  }

  TEST_CASE("scalar promotion lifts the kind only") {
    CHECK(promote_with_scalar(int32, ScalarKind::Int) == int32);
    CHECK(promote_with_scalar(int32, ScalarKind::Float) == float32);
    CHECK(promote_with_scalar(float16, ScalarKind::Float) == float16);
    CHECK(promote_with_scalar(bool_, ScalarKind::Int) == int64);
    CHECK(promote_with_scalar(float64, ScalarKind::Complex) == complex128);
  }

  TEST_CASE_TEMPLATE("every dtype round-trips through a cast to float64", T, bool, std::int8_t,
                     std::int16_t, std::int32_t, std::int64_t, std::uint8_t, std::uint16_t,
                     std::uint32_t, std::uint64_t, float16_t, bfloat16_t, float, double) {
    const Tensor a = arange(0, 7).to(dtype_of<T>);
    CHECK(a.dtype() == dtype_of<T>);
    const auto v = a.to(float64).template to_vector<double>();
    for (std::size_t i = 0; i < v.size(); ++i)
      CHECK(v[i] == (std::is_same_v<T, bool> ? (i != 0 ? 1.0 : 0.0) : static_cast<double>(i)));
  }

  TEST_CASE("complex casts drop the imaginary part toward reals") {
    const Tensor c = tensor({Scalar(std::complex<double>(1.5, 2.0)), Scalar(-3.0)}, complex64);
    CHECK(c.to(float32).to_vector<float>() == std::vector<float>{1.5f, -3.f});
    CHECK(c.to(bool_).to_vector<bool>() == std::vector<bool>{true, true});
  }

  TEST_CASE("float16 and bfloat16 round on store") {
    const Tensor x = tensor({1.0f + 1.0f / 4096.0f}).to(float16);
    CHECK(x.to(float32).item<float>() == 1.0f);  // below half's precision
    const Tensor y = tensor({3.0f}).to(bfloat16);
    CHECK(y.item<float>() == 3.0f);
  }

  TEST_CASE("int4 packs two per byte and sign-extends") {
    const Tensor a = tensor({1, -2, 7, -8, 3}).to(int4);
    CHECK(a.nbytes() == 3);
    CHECK(a.to(int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{1, -2, 7, -8, 3});
    CHECK(tensor({9}).to(int4).to(int32).item<std::int32_t>() == -7);  // wraps like a 4-bit int
    CHECK_THROWS_AS(a.permute({0}), TypeError);
    CHECK(a.reshape({5, 1}).to(int64).to_vector<std::int64_t>()[2] == 7);
  }
}
