#include <doctest/doctest.h>

#include <ms/core/dtype.hpp>
#include <ms/core/tensor.hpp>

#include <cmath>
#include <limits>
#include <vector>

TEST_SUITE("core") {
  using namespace ms;

  TEST_CASE("dtype names and sizes follow MindSpore") {
    CHECK(dtype_name(float32) == "Float32");
    CHECK(dtype_name(bool_) == "Bool");
    CHECK(dtype_name(bfloat16) == "BFloat16");
    CHECK(dtype_itemsize(complex128) == 16);
    CHECK(dtype_itemsize(float16) == 2);
    static_assert(dtype_of<float> == float32);
    static_assert(std::is_same_v<cpp_type<DType::Int64>, std::int64_t>);
  }

  TEST_CASE("MindSpore's dtype aliases name the same dtypes") {
    static_assert(ms::byte == ms::int8 && ms::short_ == ms::int16);
    CHECK(ms::byte == DType::Int8);
    CHECK(ms::short_ == DType::Int16);
    CHECK(ms::intc == DType::Int32);
    CHECK(ms::intp == DType::Int64);
    CHECK(ms::ubyte == DType::UInt8);
    CHECK(ms::ushort == DType::UInt16);
    CHECK(ms::uintc == DType::UInt32);
    CHECK(ms::uintp == DType::UInt64);
    CHECK(ms::half == DType::Float16);
    CHECK(ms::single == DType::Float32);
    CHECK(ms::double_ == DType::Float64);
    CHECK(ms::float64 == DType::Float64);
    CHECK(ms::bfloat16 == DType::BFloat16);
    CHECK(ms::bool_ == DType::Bool);
    CHECK(ms::qint4x2 == DType::Int4);
    // The generic kinds as NumPy's 64-bit defaults.
    CHECK(ms::int_ == DType::Int64);
    CHECK(ms::uint == DType::UInt64);
    CHECK(ms::float_ == DType::Float64);
    // Usable wherever a dtype is: a tensor made with an alias has that dtype.
    CHECK(ms::zeros({2}, ms::half).dtype() == ms::float16);
    CHECK(ms::zeros({2}, ms::single).dtype() == ms::float32);
    CHECK(dtype_name(ms::double_) == "Float64");
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

  // NumPy's `np.array(values).astype(dtype)` on x86-64: the C conversion its
  // Linux builds compile for the SSE2 baseline. In C++ these conversions of
  // NaN, infinities and out-of-range values are undefined; ms gives the same
  // values by construction (the sanitizer build runs this test under UBSan).
  TEST_CASE_TEMPLATE("NaN, infinities and out-of-range floats cast to integers as NumPy's", T,
                     std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                     std::uint16_t, std::uint32_t, std::uint64_t) {
    const double inf = std::numeric_limits<double>::infinity();
    const std::vector<double> in{NAN, inf, -inf, 1e20, -1e20, -1.0, 300.0, 2.5, -2.5, 5e9, -3e9};
    constexpr std::int64_t i32min = std::numeric_limits<std::int32_t>::min();
    constexpr std::int64_t i64min = std::numeric_limits<std::int64_t>::min();
    std::vector<T> want;
    auto from = [&](std::initializer_list<std::int64_t> v) {
      for (std::int64_t e : v) want.push_back(static_cast<T>(e));  // modular: the bit pattern
    };
    constexpr std::int64_t big = 5000000000, neg = -3000000000;
    if constexpr (std::is_same_v<T, std::int8_t>) from({0, 0, 0, 0, 0, -1, 44, 2, -2, 0, 0});
    if constexpr (std::is_same_v<T, std::int16_t>) from({0, 0, 0, 0, 0, -1, 300, 2, -2, 0, 0});
    if constexpr (std::is_same_v<T, std::int32_t>)
      from({i32min, i32min, i32min, i32min, i32min, -1, 300, 2, -2, i32min, i32min});
    if constexpr (std::is_same_v<T, std::int64_t>)
      from({i64min, i64min, i64min, i64min, i64min, -1, 300, 2, -2, big, neg});
    if constexpr (std::is_same_v<T, std::uint8_t>) from({0, 0, 0, 0, 0, 255, 44, 2, 254, 0, 0});
    if constexpr (std::is_same_v<T, std::uint16_t>)
      from({0, 0, 0, 0, 0, 65535, 300, 2, 65534, 0, 0});
    if constexpr (std::is_same_v<T, std::uint32_t>)
      from({0, 0, 0, 0, 0, 4294967295, 300, 2, 4294967294, 705032704, 1294967296});
    if constexpr (std::is_same_v<T, std::uint64_t>)  // 2^63 = the bits of i64min
      from({i64min, 0, i64min, 0, i64min, -1, 300, 2, -2, big, neg});
    const Tensor x = from_vector(in);
    CHECK(x.to(dtype_of<T>).template to_vector<T>() == want);
    // The same from float32, float16 and bfloat16 for the values they hold exactly.
    for (DType src : {float32, float16, bfloat16}) {
      CAPTURE(src);
      const Tensor y = from_vector(std::vector<double>(in.begin(), in.begin() + 3)).to(src);
      CHECK(y.to(dtype_of<T>).template to_vector<T>() ==
            std::vector<T>(want.begin(), want.begin() + 3));
    }
    // A scalar fill converts the same way.
    CHECK(full({1}, NAN, dtype_of<T>).template to_vector<T>() == std::vector<T>{want[0]});
    CHECK(full({1}, -inf, dtype_of<T>).template to_vector<T>() == std::vector<T>{want[2]});
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
