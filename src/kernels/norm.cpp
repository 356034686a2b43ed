// Layer normalization kernels. See ms/kernels/norm.hpp.
#include "ms/kernels/norm.hpp"

#include "float_dispatch.hpp"
#include "predux.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ms/core/detail/eigen.hpp"
#include "ms/core/half.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels {
namespace {

// Elements below which a chunk of rows is not split further.
constexpr std::int64_t kGrainElements = 1 << 14;
// The backward's parameter gradients: at most this many blocks of rows, each
// of at least kMinBlockRows rows, sum their rows; the blocks are then added.
constexpr std::int64_t kMaxBlocks = 256;
constexpr std::int64_t kMinBlockRows = 32;

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
using Packet = typename Eigen::internal::packet_traits<T>::type;
template <class T>
constexpr std::int64_t kPacket = Eigen::internal::unpacket_traits<Packet<T>>::size;

// Rows the forward normalizes together: their sums are independent chains of
// additions the core overlaps, where one row's chains leave it waiting on the
// adder's latency. layer_norm on [256, 192] (in cache), 1 thread, the old and
// new libms in alternating processes on the Intel Xeon VM (a noisy host):
// 14.5 -> 11.0 us in one round, medians 20.5 -> 16.2 us of six in another;
// [4096, 192] (char_lm's shape, from memory): unchanged. The backward stays
// one row at a time: grouped (4 rows, or 2), it was up to 1.5x faster on
// [256, 192] but 8-16 % slower on [4096, 192] (medians of 6-8 alternating
// runs).
constexpr int kRowGroup = 4;

// Each of R rows' mean and 1 / sqrt(biased variance + eps), two passes. A
// row's sums take the packets in order, then across the packet, then the
// elements past the last whole packet: the order depends on d only
// (unaligned loads: no peeling by address), not on the rows beside it. The
// squares are added with explicit multiply-adds (pmadd, madd): with `acc +
// c * c` GCC 12 (-march=native, AMD Zen 3: AVX2 and FMA) fused the float64
// products of a row alone but not those of a group of four (test_norm
// "layer_norm: a row's output and input gradient do not depend on the rows
// beside it").
template <int R, class T>
void row_stats(const T* const* x, std::int64_t d, T eps, T* mean, T* rstd) {
  using Eigen::internal::padd;
  using Eigen::internal::ploadu;
  using Eigen::internal::pset1;
  using P = Packet<T>;
  constexpr std::int64_t PS = kPacket<T>;
  const std::int64_t whole = d / PS * PS;
  P acc[R];
  for (int r = 0; r < R; ++r) acc[r] = pset1<P>(T(0));
  for (std::int64_t j = 0; j < whole; j += PS)
    for (int r = 0; r < R; ++r) acc[r] = padd(acc[r], ploadu<P>(x[r] + j));
  P m[R];
  for (int r = 0; r < R; ++r) {
    T s = Eigen::internal::predux(acc[r]);
    for (std::int64_t j = whole; j < d; ++j) s += x[r][j];
    mean[r] = s / static_cast<T>(d);
    m[r] = pset1<P>(mean[r]);
    acc[r] = pset1<P>(T(0));
  }
  for (std::int64_t j = 0; j < whole; j += PS)
    for (int r = 0; r < R; ++r) {
      const P c = Eigen::internal::psub(ploadu<P>(x[r] + j), m[r]);
      acc[r] = Eigen::internal::pmadd(c, c, acc[r]);
    }
  for (int r = 0; r < R; ++r) {
    T ss = Eigen::internal::predux(acc[r]);
    for (std::int64_t j = whole; j < d; ++j)
      ss = detail::madd(x[r][j] - mean[r], x[r][j] - mean[r], ss);
    rstd[r] = T(1) / std::sqrt(ss / static_cast<T>(d) + eps);
  }
}

// One row of the backward in T: xhat and gy = dy * gamma of the row, its
// terms added to the block's parameter sums sg and sb, and the row's sums of
// gy and gy * xhat (in row_stats' order) into s_gy and s_gyx.
template <class T>
void row_terms(const T* __restrict xr, const T* __restrict dyr, const T* __restrict g,
               std::int64_t d, T mean, T rstd, T* __restrict xhat, T* __restrict gy,
               T* __restrict sg, T* __restrict sb, T& s_gy, T& s_gyx) {
  using Eigen::internal::padd;
  using Eigen::internal::ploadu;
  using Eigen::internal::pmadd;
  using Eigen::internal::pmul;
  using Eigen::internal::pset1;
  using Eigen::internal::pstoreu;
  using P = Packet<T>;
  constexpr std::int64_t PS = kPacket<T>;
  const P m = pset1<P>(mean), rs = pset1<P>(rstd);
  P agy = pset1<P>(T(0)), agyx = agy;
  std::int64_t j = 0;
  for (; j + PS <= d; j += PS) {
    const P dy = ploadu<P>(dyr + j);
    const P xh = pmul(Eigen::internal::psub(ploadu<P>(xr + j), m), rs);
    const P gyj = pmul(dy, ploadu<P>(g + j));
    pstoreu(xhat + j, xh);
    pstoreu(gy + j, gyj);
    pstoreu(sg + j, pmadd(dy, xh, ploadu<P>(sg + j)));
    pstoreu(sb + j, padd(ploadu<P>(sb + j), dy));
    agy = padd(agy, gyj);
    agyx = padd(agyx, pmul(gyj, xh));
  }
  s_gy = Eigen::internal::predux(agy);
  s_gyx = Eigen::internal::predux(agyx);
  for (; j < d; ++j) {
    xhat[j] = (xr[j] - mean) * rstd;
    gy[j] = dyr[j] * g[j];
    sg[j] += dyr[j] * xhat[j];
    sb[j] += dyr[j];
    s_gy += gy[j];
    s_gyx += gy[j] * xhat[j];
  }
}

// Calls fn.template operator()<R>(r) for the rows [r0, r1): groups of
// kRowGroup rows from r0, then the rest one by one.
template <class F>
void for_row_groups(std::int64_t r0, std::int64_t r1, F&& fn) {
  std::int64_t r = r0;
  for (; r + kRowGroup <= r1; r += kRowGroup) fn.template operator()<kRowGroup>(r);
  for (; r < r1; ++r) fn.template operator()<1>(r);
}

#pragma GCC diagnostic pop

// A row of storage type S as T: the row itself when S is T, else converted
// into `buf`.
template <class T, class S>
const T* as_compute(const S* row, std::int64_t d, std::vector<T>& buf) {
  if constexpr (std::is_same_v<S, T>) {
    (void)d;
    (void)buf;
    return row;
  } else {
    buf.resize(static_cast<std::size_t>(d));
    for (std::int64_t j = 0; j < d; ++j) buf[static_cast<std::size_t>(j)] = static_cast<T>(row[j]);
    return buf.data();
  }
}

template <class T, class S>
std::vector<T> to_compute(const Tensor& t) {
  const S* p = t.data<S>();
  return std::vector<T>(p, p + t.numel());
}

template <class T, class S>
void forward_t(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps_,
               const Tensor& y) {
  const std::int64_t d = gamma.numel();
  const std::int64_t rows = d > 0 ? x.numel() / d : 0;
  const std::vector<T> g = to_compute<T, S>(gamma), b = to_compute<T, S>(beta);
  const S* xs = x.data<S>();
  S* ys = y.data<S>();
  const T eps = static_cast<T>(eps_);
  parallel_for(rows, std::max<std::int64_t>(1, kGrainElements / std::max<std::int64_t>(d, 1)),
               [&](std::int64_t r0, std::int64_t r1) {
                 std::vector<T> buf[kRowGroup];
                 for_row_groups(r0, r1, [&]<int R>(std::int64_t first) {
                   const T* xr[R];
                   for (int r = 0; r < R; ++r)
                     xr[r] = as_compute<T>(xs + (first + r) * d, d, buf[r]);
                   T mean[R], rstd[R];
                   row_stats<R>(xr, d, eps, mean, rstd);
                   for (int r = 0; r < R; ++r) {
                     S* yr = ys + (first + r) * d;
                     for (std::int64_t j = 0; j < d; ++j) {
                       const auto k = static_cast<std::size_t>(j);
                       yr[j] = static_cast<S>((xr[r][j] - mean[r]) * rstd[r] * g[k] + b[k]);
                     }
                   }
                 });
               });
}

// dx of one row from its terms: rstd * (gy - mean(gy) - xhat * mean(gy * xhat)).
template <class T, class S>
void row_dx(const T* __restrict xhat, const T* __restrict gy, std::int64_t d, T rstd, T mg, T mgx,
            S* __restrict dxr) {
  for (std::int64_t j = 0; j < d; ++j) dxr[j] = static_cast<S>(rstd * (gy[j] - mg - xhat[j] * mgx));
}

template <class T, class S>
void backward_t(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps_,
                const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  const std::int64_t d = gamma.numel();
  const std::int64_t rows = d > 0 ? x.numel() / d : 0;
  const std::vector<T> g = to_compute<T, S>(gamma);
  const S* xs = x.data<S>();
  const S* dys = dy.data<S>();
  S* dxs = dx.data<S>();
  const T eps = static_cast<T>(eps_);
  const std::int64_t nb = std::clamp<std::int64_t>(rows / kMinBlockRows, 1, kMaxBlocks);
  const std::int64_t per = (rows + nb - 1) / nb;
  // Block i's sums of dy * xhat and of dy over its rows, then the blocks in order.
  std::vector<T> pg(static_cast<std::size_t>(nb * d), T(0)), pb(pg.size(), T(0));
  parallel_for(nb, 1, [&](std::int64_t b0, std::int64_t b1) {
    std::vector<T> xbuf, dybuf, xhat(static_cast<std::size_t>(d)), gy(xhat.size());
    for (std::int64_t blk = b0; blk < b1; ++blk) {
      T* sg = pg.data() + blk * d;
      T* sb = pb.data() + blk * d;
      for (std::int64_t r = blk * per; r < std::min(rows, (blk + 1) * per); ++r) {
        const T* xr = as_compute<T>(xs + r * d, d, xbuf);
        const T* dyr = as_compute<T>(dys + r * d, d, dybuf);
        T mean, rstd;
        row_stats<1>(&xr, d, eps, &mean, &rstd);
        T s_gy, s_gyx;
        row_terms(xr, dyr, g.data(), d, mean, rstd, xhat.data(), gy.data(), sg, sb, s_gy, s_gyx);
        row_dx(xhat.data(), gy.data(), d, rstd, s_gy / static_cast<T>(d), s_gyx / static_cast<T>(d),
               dxs + r * d);
      }
    }
  });
  S* dg = dgamma.data<S>();
  S* db = dbeta.data<S>();
  for (std::int64_t j = 0; j < d; ++j) {
    T sg = T(0), sb = T(0);
    for (std::int64_t blk = 0; blk < nb; ++blk) {
      sg += pg[static_cast<std::size_t>(blk * d + j)];
      sb += pb[static_cast<std::size_t>(blk * d + j)];
    }
    dg[j] = static_cast<S>(sg);
    db[j] = static_cast<S>(sb);
  }
}

}  // namespace

void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps,
                        const Tensor& y) {
  detail::dispatch_float(
      x.dtype(), [&]<class T, class S>(T*, S*) { forward_t<T, S>(x, gamma, beta, eps, y); });
}

void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& dy, double eps,
                         const Tensor& dx, const Tensor& dgamma, const Tensor& dbeta) {
  detail::dispatch_float(x.dtype(), [&]<class T, class S>(T*, S*) {
    backward_t<T, S>(x, gamma, dy, eps, dx, dgamma, dbeta);
  });
}

}  // namespace ms::kernels
