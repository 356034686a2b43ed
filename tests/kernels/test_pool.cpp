// kernels/pool.hpp: the 2x2 pooling that notes its taps (max_pool2x2_index)
// and the gradient from those taps (max_pool2x2_grad_index), bitwise against
// max_pool2d and max_pool2d_grad on planes full of ties, zeros, infinities and
// NaNs, with widths that fill, cross and leave partial the 16-lane groups of
// the AVX-512 rows.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <ms/kernels/pool.hpp>

namespace {

using ms::kernels::Pool2dGeometry;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Values drawn from a small set, so windows tie, hold zeros (relu's output),
// -0, infinities and (with `nans`) NaNs.
template <class T>
std::vector<T> plane_values(std::size_t n, std::uint32_t seed, bool nans) {
  const T inf = std::numeric_limits<T>::infinity();
  const std::vector<T> pool{T(-1), T(0), T(-0.0), T(0.5), T(1), T(2), inf, -inf, T(1.5), T(-3)};
  std::mt19937 gen(seed);
  std::vector<T> v(n);
  for (T& e : v) {
    e = pool[gen() % pool.size()];
    if (nans && gen() % 23 == 0) e = std::numeric_limits<T>::quiet_NaN();
  }
  return v;
}

template <class T>
void check_against_max_pool(std::int64_t planes, std::int64_t h, std::int64_t w, bool nans,
                            std::uint32_t seed) {
  CAPTURE(h);
  CAPTURE(w);
  CAPTURE(nans);
  const Pool2dGeometry g = ms::kernels::pool2x2_geometry(planes, h, w);
  const auto in_n = static_cast<std::size_t>(planes * h * w);
  const auto out_n = static_cast<std::size_t>(planes * g.oh * g.ow);
  const std::vector<T> x = plane_values<T>(in_n, seed, nans);
  std::vector<T> gy = plane_values<T>(out_n, seed + 1, false);
  for (std::size_t i = 0; i < gy.size(); ++i)
    if (gy[i] == T(0)) gy[i] = T(0.25) * static_cast<T>(i % 7 + 1);  // gradients mostly nonzero

  std::vector<T> y_want(out_n), y(out_n);
  std::vector<std::uint8_t> index(out_n, 0xFF);
  ms::kernels::max_pool2d(x.data(), y_want.data(), g);
  ms::kernels::max_pool2x2_index(x.data(), y.data(), index.data(), g);
  CHECK(same_bits(y, y_want));

  // Each index names a tap holding the pooled value (bitwise), and flags a
  // value that is not > 0.
  bool all_ok = true;
  for (std::int64_t p = 0; p < planes; ++p)
    for (std::int64_t oh = 0; oh < g.oh; ++oh)
      for (std::int64_t ow = 0; ow < g.ow; ++ow) {
        const auto o = static_cast<std::size_t>((p * g.oh + oh) * g.ow + ow);
        const int tap = index[o] & ms::kernels::kPoolIndexTap;
        const auto at = static_cast<std::size_t>((p * h + 2 * oh + tap / 2) * w + 2 * ow + tap % 2);
        const bool flagged = (index[o] & ms::kernels::kPoolIndexNotPositive) != 0;
        all_ok &=
            index[o] < 8 && std::memcmp(&x[at], &y[o], sizeof(T)) == 0 && flagged == !(y[o] > T(0));
      }
  CHECK(all_ok);

  for (bool positive_only : {false, true}) {
    CAPTURE(positive_only);
    std::vector<T> dx_want(in_n), dx(in_n, T(7));  // 7: every element must be written
    ms::kernels::max_pool2d_grad(x.data(), gy.data(), dx_want.data(), g, positive_only);
    ms::kernels::max_pool2x2_grad_index(index.data(), gy.data(), dx.data(), g, positive_only);
    CHECK(same_bits(dx, dx_want));
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("max_pool2x2_index and max_pool2x2_grad_index == max_pool2d and max_pool2d_grad") {
    // widths: one window, a partial 16-lane group, exactly 16 and 32 windows,
    // 16 + 1; odd heights and widths leave a row and a column in no window.
    const std::vector<std::pair<std::int64_t, std::int64_t>> sizes = {
        {2, 2}, {4, 6}, {5, 7}, {28, 28}, {14, 14}, {6, 32}, {3, 33}, {4, 64}, {2, 34}, {7, 65}};
    std::uint32_t seed = 1;
    for (const auto& [h, w] : sizes)
      for (bool nans : {false, true}) {
        check_against_max_pool<float>(3, h, w, nans, seed);
        check_against_max_pool<double>(3, h, w, nans, seed);
        seed += 2;
      }
  }

  TEST_CASE("max_pool2x2_grad_index reads only the tap and flag bits of an index byte") {
    // Hostile index bytes (from a tensor a user built) stay inside their window.
    const Pool2dGeometry g = ms::kernels::pool2x2_geometry(1, 2, 4);
    const std::vector<std::uint8_t> index{0xFF, 0xFC};  // tap 3 + flag; tap 0 + flag
    const std::vector<float> gy{2.f, 3.f};
    std::vector<float> dx(8, 7.f);
    ms::kernels::max_pool2x2_grad_index(index.data(), gy.data(), dx.data(), g, false);
    CHECK(dx == std::vector<float>{0, 0, 3, 0, 0, 2, 0, 0});
    ms::kernels::max_pool2x2_grad_index(index.data(), gy.data(), dx.data(), g, true);
    CHECK(dx == std::vector<float>(8, 0.f));
  }
}
