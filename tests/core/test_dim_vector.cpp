// core/dim_vector.hpp: the vector behind Shape's dims and Tensor's strides,
// across its inline / heap boundary (six elements): construction, copies and
// moves in every direction, growth by push_back, equality; and tensors of a
// rank above six (dims on the heap) through a view and a copy.
#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include <ms/core/dim_vector.hpp>
#include <ms/core/tensor.hpp>

namespace {

using ms::DimVector;

std::vector<std::int64_t> iota(std::size_t n) {
  std::vector<std::int64_t> v(n);
  std::iota(v.begin(), v.end(), 1);
  return v;
}

std::vector<std::int64_t> as_vector(const DimVector& d) { return d.to_vector(); }

}  // namespace

TEST_SUITE("core") {
  TEST_CASE("DimVector: copies and moves across the inline / heap boundary") {
    for (const std::size_t a : {0u, 3u, 6u, 7u, 13u})
      for (const std::size_t b : {0u, 2u, 6u, 7u, 20u}) {
        CAPTURE(a);
        CAPTURE(b);
        const DimVector src(iota(a));
        DimVector copy(src);
        CHECK(as_vector(copy) == iota(a));
        DimVector dst(iota(b));
        dst = src;  // copy-assign over either kind
        CHECK(as_vector(dst) == iota(a));
        CHECK(dst == src);
        DimVector moved(std::move(copy));
        CHECK(as_vector(moved) == iota(a));
        CHECK(copy.empty());  // NOLINT: a moved-from DimVector is empty, as documented
        DimVector target(iota(b));
        target = std::move(moved);
        CHECK(as_vector(target) == iota(a));
        copy = target;  // a moved-from vector takes new elements
        CHECK(as_vector(copy) == iota(a));
      }
  }

  TEST_CASE("DimVector: push_back past the inline room keeps every element") {
    DimVector d;
    std::vector<std::int64_t> want;
    for (std::int64_t i = 0; i < 40; ++i) {
      d.push_back(i * 3);
      want.push_back(i * 3);
      REQUIRE(as_vector(d) == want);
    }
    CHECK(d.back() == 39 * 3);
    d[10] = -1;
    CHECK(d[10] == -1);
    CHECK(DimVector(4, 7) == DimVector{7, 7, 7, 7});
    CHECK_FALSE(DimVector{1, 2} == DimVector{1, 2, 3});
  }

  TEST_CASE("a tensor of rank 8: dims and strides on the heap, through a view and a copy") {
    const ms::Shape s{2, 1, 3, 1, 2, 1, 2, 3};
    const ms::Tensor t = ms::arange(0, 72, 1, ms::float32).reshape(s);
    CHECK(t.shape() == s);
    CHECK(t.strides().size() == 8);
    const ms::Tensor v = t.transpose(0, 7);  // a strided view
    CHECK(v.shape() == ms::Shape{3, 1, 3, 1, 2, 1, 2, 2});
    const ms::Tensor c = v.contiguous();
    const ms::Tensor back = c.transpose(0, 7).contiguous();
    CHECK(back.to_vector<float>() == t.to_vector<float>());
  }
}
