#include <doctest/doctest.h>

#include <memory>
#include <ms/core/xtensor.hpp>
#include <optional>
#include <vector>
#include <xtensor/xadapt.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

namespace {

ms::Tensor iota_tensor(std::int64_t rows, std::int64_t cols) {
  std::vector<float> v(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return ms::from_vector(v, ms::Shape{rows, cols});
}

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("as_xarray views a tensor's memory with its shape, both ways") {
    ms::Tensor t = iota_tensor(2, 3);
    auto a = ms::as_xarray<float>(t);
    REQUIRE(a.dimension() == 2);
    CHECK(a.shape()[0] == 2);
    CHECK(a.shape()[1] == 3);
    CHECK(a(1, 2) == 5.0f);
    CHECK(xt::sum(a)() == doctest::Approx(15.0));
    a(0, 1) = 42.0f;  // writes t
    CHECK(t.to_vector<float>()[1] == 42.0f);
    a += 1.0f;  // an xtensor expression assigned in place
    CHECK(t.to_vector<float>()[5] == 6.0f);
  }

  TEST_CASE("as_xarray keeps a strided view's strides and outlives the tensor") {
    ms::Tensor t = iota_tensor(3, 4);
    ms::Tensor tt(t.storage(), ms::float32, ms::Shape{4, 3}, {1, 4}, 0);  // the transpose
    REQUIRE_FALSE(tt.is_contiguous());
    std::optional<ms::XArrayView<float>> a;
    {
      ms::Tensor view = tt;
      a.emplace(ms::as_xarray<float>(view));
      t = ms::Tensor();
      tt = ms::Tensor();
    }  // every tensor is gone; the adaptor holds the storage
    CHECK(a->shape()[0] == 4);
    CHECK(a->strides()[0] == 1);
    CHECK(a->strides()[1] == 4);
    CHECK((*a)(3, 2) == 11.0f);  // element [2][3] of the original
    CHECK((*a)(1, 0) == 1.0f);
    xt::xarray<float> copy = *a;  // evaluates through the strides
    CHECK(copy(2, 1) == 6.0f);
  }

  TEST_CASE("as_xarray rejects a wrong element type and tensors without values") {
    ms::Tensor t = iota_tensor(1, 2);
    CHECK_THROWS_WITH_AS(ms::as_xarray<double>(t), doctest::Contains("Float32"), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::as_xarray<float>(ms::Tensor()), doctest::Contains("undefined"),
                         ms::ValueError);
  }

  TEST_CASE("from_xtensor takes a moved container without copying it") {
    xt::xarray<double> z = {{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}};
    const double* before = z.data();
    ms::Tensor u = ms::from_xtensor(std::move(z));
    CHECK(u.dtype() == ms::float64);
    CHECK(u.shape() == ms::Shape{2, 3});
    CHECK(reinterpret_cast<const double*>(u.storage()->data()) == before);  // the same buffer
    CHECK(u.to_vector<double>() == std::vector<double>{1, 2, 3, 4, 5, 6});
    xt::xtensor<std::int32_t, 1> f = {7, 8};
    ms::Tensor v = ms::from_xtensor(std::move(f));
    CHECK(v.dtype() == ms::int32);
    CHECK(v.to_vector<std::int32_t>() == std::vector<std::int32_t>{7, 8});
  }

  TEST_CASE("from_xtensor shares a container through a shared_ptr") {
    auto z = std::make_shared<xt::xarray<float>>(xt::zeros<float>({2, 2}));
    std::weak_ptr<xt::xarray<float>> watch = z;
    ms::Tensor u = ms::from_xtensor(z);
    (*z)(1, 1) = 3.0f;  // the tensor sees writes through the container
    CHECK(u.to_vector<float>()[3] == 3.0f);
    z.reset();
    CHECK_FALSE(watch.expired());
    u = ms::Tensor();
    CHECK(watch.expired());
    CHECK_THROWS_AS(ms::from_xtensor(std::shared_ptr<xt::xarray<float>>()), ms::ValueError);
  }

  TEST_CASE("from_xtensor wraps a non-owning adaptor together with its owner") {
    auto buf = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5, 6});
    std::weak_ptr<std::vector<float>> watch = buf;
    ms::Tensor u = ms::from_xtensor(
        xt::adapt(buf->data(), 6, xt::no_ownership(), std::vector<std::size_t>{3, 2}), buf);
    buf.reset();
    CHECK_FALSE(watch.expired());
    CHECK(u.shape() == ms::Shape{3, 2});
    CHECK(u.to_vector<float>()[5] == 6.0f);
    u = ms::Tensor();
    CHECK(watch.expired());
    auto other = std::make_shared<std::vector<float>>(2);
    CHECK_THROWS_WITH_AS(
        ms::from_xtensor(
            xt::adapt(other->data(), 2, xt::no_ownership(), std::vector<std::size_t>{2}), nullptr),
        doctest::Contains("owner"), ms::ValueError);
  }

  TEST_CASE("a column-major container keeps its strides as a tensor view") {
    xt::xarray<float, xt::layout_type::column_major> c = {{1.0f, 2.0f}, {3.0f, 4.0f}};
    ms::Tensor u = ms::from_xtensor(std::move(c));
    CHECK_FALSE(u.is_contiguous());
    CHECK(u.to_vector<float>() == std::vector<float>{1, 2, 3, 4});  // logical order
  }

  TEST_CASE("from_xtensor rejects data not aligned to its element type") {
    auto buf = std::make_shared<std::vector<float>>(8);
    auto* bytes = reinterpret_cast<std::byte*>(buf->data());
    auto* shifted = reinterpret_cast<float*>(bytes + 2);
    CHECK_THROWS_WITH_AS(
        ms::from_xtensor(xt::adapt(shifted, 4, xt::no_ownership(), std::vector<std::size_t>{4}),
                         buf),
        doctest::Contains("from_xtensor: the data of a Float32 container must be aligned to 4 "
                          "bytes (given an address 2 bytes past"),
        ms::ValueError);
    // One byte elements: any address is aligned.
    auto* u8 = reinterpret_cast<std::uint8_t*>(bytes + 3);
    ms::Tensor t =
        ms::from_xtensor(xt::adapt(u8, 4, xt::no_ownership(), std::vector<std::size_t>{4}), buf);
    CHECK(t.dtype() == ms::uint8);
    CHECK(t.numel() == 4);
  }

  TEST_CASE("as_xarray rejects a view with a negative stride, and takes its contiguous copy") {
    const ms::Tensor t = iota_tensor(2, 3);
    const ms::Tensor reversed(t.storage(), ms::float32, ms::Shape{3}, {-1}, 2);  // 2, 1, 0
    CHECK_THROWS_WITH_AS(ms::as_xarray<float>(reversed),
                         doctest::Contains("as_xarray: axis 0 of the view [3] has stride -1"),
                         ms::ValueError);
    auto a = ms::as_xarray<float>(reversed.contiguous());
    CHECK(a(0) == 2.0f);
    CHECK(a(2) == 0.0f);
    // A negative stride on an axis of length 1 reaches one element: accepted.
    const ms::Tensor one(t.storage(), ms::float32, ms::Shape{1, 3}, {-3, 1}, 3);
    auto b = ms::as_xarray<float>(one);
    CHECK(b(0, 2) == 5.0f);
  }
}
