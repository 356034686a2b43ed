// kernels/conv.hpp: conv2d, conv2d_grad_input and conv2d_grad_weight on each
// algorithm (Direct on libxsmm's batch-reduce kernels or, for 3x3 kernels
// with padding 1 over few channels, ms's narrow kernels; Winograd, Im2col)
// against naive float64 loops over odd shapes (sizes 1, 7, 17, 33; channels
// 1 to 4, 17; strides, paddings, dilations, groups), within the error bound of a
// float32 sum of that many terms; 1 and 2 threads bitwise; the fused relu and
// 2x2 pooling of the forward; the bfloat16 algorithms' choice
// (conv2d_bf16_algorithm); and the bfloat16 forward (conv2d_bf16, on Auto,
// Direct and Im2col) against float64 sums of the bfloat16 values (within one
// bfloat16 rounding) and of the unrounded values (within what an 8-bit
// mantissa allows), the narrow kernels' bitwise against float32's rounded
// once (NaN payloads and overflow included), and the same
// for the bfloat16 gradients (conv2d_grad_input_bf16 on the Direct and Im2col
// paths, conv2d_grad_weight_bf16), 1 and 2 threads bitwise; conv1's narrow
// gradients over the allocation cap (ms::MemoryError, nothing written). Where an
// algorithm does not apply (or libxsmm is absent) the call falls back, and the
// checks hold for the fallback.
#include <doctest/doctest.h>

#include "thread_guard.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <ms/core/error.hpp>
#include <ms/core/half.hpp>
#include <ms/core/storage.hpp>
#include <ms/kernels/conv.hpp>
#include <ms/kernels/gemm.hpp>
#include <ms/kernels/parallel.hpp>

namespace {

using ms::kernels::Conv2dGeometry;
using ms::kernels::ConvAlgo;
using ms::kernels::ConvPass;
using ms::test::ThreadGuard;

struct Case {
  std::int64_t n, c, h, w, o, k, s, p, d, groups;
};

std::string describe(const Case& t) {
  return "x [" + std::to_string(t.n) + ", " + std::to_string(t.c) + ", " + std::to_string(t.h) +
         ", " + std::to_string(t.w) + "], " + std::to_string(t.o) + " outputs, kernel " +
         std::to_string(t.k) + ", stride " + std::to_string(t.s) + ", padding " +
         std::to_string(t.p) + ", dilation " + std::to_string(t.d) + ", groups " +
         std::to_string(t.groups);
}

Conv2dGeometry geometry(const Case& t) {
  Conv2dGeometry g{.n = t.n, .c = t.c, .h = t.h, .w = t.w, .o = t.o, .kh = t.k, .kw = t.k};
  g.sh = g.sw = t.s;
  g.ph = g.pw = t.p;
  g.dh = g.dw = t.d;
  g.groups = t.groups;
  g.oh = (t.h + 2 * t.p - t.d * (t.k - 1) - 1) / t.s + 1;
  g.ow = (t.w + 2 * t.p - t.d * (t.k - 1) - 1) / t.s + 1;
  return g;
}

// The geometries: the CNN's two layers (batch cut to 2), then odd sizes,
// channel counts, strides, paddings, dilations and groups; the last four are
// Direct's narrow shapes (3x3, padding 1, 1 to 4 channels): more images than
// the weight gradient's 8 chunks, one row, one column, planes of whole
// vectors, output channels not a multiple of 4.
std::vector<Case> cases() {
  return {
      {2, 1, 28, 28, 32, 3, 1, 1, 1, 1}, {2, 32, 14, 14, 64, 3, 1, 1, 1, 1},
      {1, 1, 1, 1, 1, 1, 1, 0, 1, 1},    {2, 3, 7, 7, 17, 3, 1, 1, 1, 1},
      {1, 17, 17, 17, 3, 3, 1, 0, 1, 1}, {2, 17, 33, 33, 17, 3, 1, 1, 1, 1},
      {1, 3, 33, 17, 17, 3, 2, 1, 1, 1}, {1, 17, 17, 33, 3, 5, 1, 2, 1, 1},
      {1, 3, 17, 17, 3, 3, 1, 2, 2, 1},  {2, 17, 7, 7, 17, 1, 1, 0, 1, 1},
      {1, 3, 7, 7, 1, 7, 1, 3, 1, 1},    {3, 17, 17, 17, 17, 3, 1, 1, 1, 17},
      {1, 66, 7, 7, 130, 3, 1, 1, 1, 1}, {1, 16, 17, 17, 16, 3, 1, 1, 1, 1},
      {1, 3, 17, 17, 17, 3, 1, 0, 1, 1}, {1, 1, 7, 7, 3, 3, 2, 0, 2, 1},
      {1, 3, 7, 7, 3, 1, 1, 1, 1, 1},    {9, 2, 5, 6, 5, 3, 1, 1, 1, 1},
      {2, 4, 1, 17, 3, 3, 1, 1, 1, 1},   {1, 3, 17, 1, 6, 3, 1, 1, 1, 1},
      {3, 1, 16, 16, 7, 3, 1, 1, 1, 1},
  };
}

std::vector<float> random_values(std::int64_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& e : v) e = dist(gen);
  return v;
}

// The three passes as float64 loops: y (forward), dx, dw, with the sums of the
// absolute values of their terms (for the error bounds) and the term counts.
struct Reference {
  std::vector<double> y, y_abs, dx, dx_abs, dw, dw_abs;
  std::int64_t y_terms = 0, dx_terms = 0, dw_terms = 0;
};

template <class X>
Reference reference(const Conv2dGeometry& g, const X& x, const X& w, const X& gy) {
  Reference r;
  const std::int64_t cg = g.c / g.groups, og = g.o / g.groups;
  r.y.assign(static_cast<std::size_t>(g.n * g.o * g.oh * g.ow), 0.0);
  r.y_abs = r.y;
  r.dx.assign(static_cast<std::size_t>(g.n * g.c * g.h * g.w), 0.0);
  r.dx_abs = r.dx;
  r.dw.assign(static_cast<std::size_t>(g.o * cg * g.kh * g.kw), 0.0);
  r.dw_abs = r.dw;
  for (std::int64_t n = 0; n < g.n; ++n)
    for (std::int64_t o = 0; o < g.o; ++o)
      for (std::int64_t oh = 0; oh < g.oh; ++oh)
        for (std::int64_t ow = 0; ow < g.ow; ++ow)
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t i = 0; i < g.kh; ++i)
              for (std::int64_t j = 0; j < g.kw; ++j) {
                const std::int64_t ih = oh * g.sh - g.ph + i * g.dh,
                                   iw = ow * g.sw - g.pw + j * g.dw;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const std::int64_t c = (o / og) * cg + ci;
                const auto xi = static_cast<std::size_t>(((n * g.c + c) * g.h + ih) * g.w + iw);
                const auto wi = static_cast<std::size_t>(((o * cg + ci) * g.kh + i) * g.kw + j);
                const auto yi = static_cast<std::size_t>(((n * g.o + o) * g.oh + oh) * g.ow + ow);
                const double xv = double(x[xi]), wv = double(w[wi]), gv = double(gy[yi]);
                r.y[yi] += xv * wv, r.y_abs[yi] += std::abs(xv * wv);
                r.dx[xi] += gv * wv, r.dx_abs[xi] += std::abs(gv * wv);
                r.dw[wi] += gv * xv, r.dw_abs[wi] += std::abs(gv * xv);
              }
  r.y_terms = cg * g.kh * g.kw;
  r.dx_terms = og * g.kh * g.kw;
  r.dw_terms = g.n * g.oh * g.ow;
  return r;
}

// Counts the elements of got outside want +- (slack * terms + 4) * 2^-24 * abs
// (the bound of a float32 sum of `terms` products, as rounding analysis gives
// it; `slack` > 1 for Winograd, whose transforms add and scale terms).
std::int64_t outside_bound(const std::vector<float>& got, const std::vector<double>& want,
                           const std::vector<double>& abs, std::int64_t terms, double slack) {
  std::int64_t bad = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double tol = (slack * double(terms) + 4) * 0x1p-24 * abs[e] + 1e-30;
    bad += !(std::abs(double(got[e]) - want[e]) <= tol);
  }
  return bad;
}

struct Results {
  std::vector<float> y, dx, dw;
};

Results run_passes(const Conv2dGeometry& g, const std::vector<float>& x,
                   const std::vector<float>& w, const std::vector<float>& gy, int threads) {
  ThreadGuard guard;
  ms::set_num_threads(threads);
  Results r;
  r.y.assign(gy.size(), -7.f);
  r.dx.assign(x.size(), -7.f);
  r.dw.assign(w.size(), -7.f);
  ms::kernels::conv2d<float>(x.data(), w.data(), nullptr, r.y.data(), g);
  ms::kernels::conv2d_grad_input<float>(gy.data(), w.data(), r.dx.data(), g);
  ms::kernels::conv2d_grad_weight<float>(x.data(), gy.data(), r.dw.data(), g);
  return r;
}

const char* algo_name(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Direct: return "direct";
    case ConvAlgo::Winograd: return "winograd";
    case ConvAlgo::Im2col: return "im2col";
    case ConvAlgo::Auto: break;
  }
  return "auto";
}

// Counts the elements of got (bfloat16) outside one bfloat16 rounding of a
// float32 sum of `terms` exact products of the bfloat16 values (`rounded`,
// `rounded_abs`), and outside the same bound widened by the inputs' own
// rounding against the unrounded values (`exact`, `exact_abs`: each factor
// off by up to 2^-8 relative, so each product by 2^-7 + 2^-16).
std::int64_t outside_bf16(const std::vector<ms::bfloat16_t>& got,
                          const std::vector<double>& rounded,
                          const std::vector<double>& rounded_abs, const std::vector<double>& exact,
                          const std::vector<double>& exact_abs, std::int64_t terms) {
  std::int64_t bad = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double v = double(float(got[e]));
    const double sum_err = (double(terms) + 5) * 0x1p-24 * rounded_abs[e];
    bad += !(std::abs(v - rounded[e]) <= 0x1p-8 * (std::abs(rounded[e]) + sum_err) + sum_err);
    const double in_err = (0x1p-7 + 0x1p-16) * exact_abs[e];
    bad += !(std::abs(v - exact[e]) <=
             0x1p-8 * (std::abs(exact[e]) + in_err + sum_err) + in_err + 2 * sum_err);
  }
  return bad;
}

// bfloat16 copies of v, and their values as floats.
std::vector<ms::bfloat16_t> to_bf16(const std::vector<float>& v, std::vector<float>& as_float) {
  std::vector<ms::bfloat16_t> out(v.size());
  as_float.resize(v.size());
  for (std::size_t e = 0; e < v.size(); ++e)
    out[e] = ms::bfloat16_t(v[e]), as_float[e] = float(out[e]);
  return out;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("conv algorithms: forward and both gradients against float64 loops, 1 and 2 threads") {
    for (const Case& t : cases()) {
      Conv2dGeometry g = geometry(t);
      const auto x = random_values(g.n * g.c * g.h * g.w, 1);
      const auto w = random_values(g.o * (g.c / g.groups) * g.kh * g.kw, 2);
      const auto gy = random_values(g.n * g.o * g.oh * g.ow, 3);
      const Reference ref = reference(g, x, w, gy);
      for (ConvAlgo algo : {ConvAlgo::Direct, ConvAlgo::Winograd, ConvAlgo::Im2col}) {
        g.algo = algo;
        const ConvAlgo fwd = ms::kernels::conv2d_algorithm(g, ConvPass::Forward),
                       gin = ms::kernels::conv2d_algorithm(g, ConvPass::GradInput),
                       gw = ms::kernels::conv2d_algorithm(g, ConvPass::GradWeight);
        const std::string shape = describe(t);
        CAPTURE(shape);
        const std::string ran = std::string(algo_name(algo)) + " asked: " + algo_name(fwd) + ", " +
                                algo_name(gin) + ", " + algo_name(gw);
        CAPTURE(ran);
        const Results one = run_passes(g, x, w, gy, 1), two = run_passes(g, x, w, gy, 2);
        const auto slack = [](ConvAlgo a) { return a == ConvAlgo::Winograd ? 16.0 : 1.0; };
        CHECK(outside_bound(one.y, ref.y, ref.y_abs, ref.y_terms, slack(fwd)) == 0);
        CHECK(outside_bound(one.dx, ref.dx, ref.dx_abs, ref.dx_terms, slack(gin)) == 0);
        CHECK(outside_bound(one.dw, ref.dw, ref.dw_abs, ref.dw_terms, slack(gw)) == 0);
        CHECK(one.y == two.y);  // bitwise: float == float, no NaN here
        CHECK(one.dx == two.dx);
        CHECK(one.dw == two.dw);
      }
    }
  }

#if defined(__AVX512F__)
  TEST_CASE(
      "conv1's narrow gradients over the allocation cap: MemoryError naming the op, nothing "
      "written") {
    // Their work blocks (Scratch, kept by the calling thread) obey
    // ms::set_max_alloc_bytes on every call, a block already kept or not.
    struct CapGuard {
      ~CapGuard() { ms::set_max_alloc_bytes(0); }
    } cap_guard;
    const ms::test::ThreadGuard guard;
    Conv2dGeometry g{.n = 4,
                     .c = 1,
                     .h = 28,
                     .w = 28,
                     .o = 32,
                     .kh = 3,
                     .kw = 3,
                     .oh = 28,
                     .ow = 28,
                     .ph = 1,
                     .pw = 1};
    g.algo = ConvAlgo::Direct;
    const auto x = random_values(g.n * g.h * g.w, 1), w = random_values(g.o * 9, 2),
               gy = random_values(g.n * g.o * g.oh * g.ow, 3);
    for (const int threads : {1, 2}) {
      CAPTURE(threads);
      ms::set_num_threads(threads);
      std::vector<float> dx(x.size()), dw(w.size());
      ms::kernels::conv2d_grad_input<float>(gy.data(), w.data(), dx.data(), g);  // keeps a block
      ms::kernels::conv2d_grad_weight<float>(x.data(), gy.data(), dw.data(), g);
      ms::set_max_alloc_bytes(1024);
      std::fill(dx.begin(), dx.end(), -7.f);
      std::fill(dw.begin(), dw.end(), -7.f);
      CHECK_THROWS_WITH_AS(ms::kernels::conv2d_grad_input<float>(gy.data(), w.data(), dx.data(), g),
                           doctest::Contains("conv2d_grad_input: a scratch block of"),
                           ms::MemoryError);
      CHECK_THROWS_WITH_AS(
          ms::kernels::conv2d_grad_weight<float>(x.data(), gy.data(), dw.data(), g),
          doctest::Contains("conv2d_grad_weight: a scratch block of"), ms::MemoryError);
      CHECK(std::all_of(dx.begin(), dx.end(), [](float v) { return v == -7.f; }));
      CHECK(std::all_of(dw.begin(), dw.end(), [](float v) { return v == -7.f; }));
      ms::set_max_alloc_bytes(0);
    }
  }
#endif

  TEST_CASE("conv algorithms: Auto's choice on the CNN's shapes") {
    Conv2dGeometry g = geometry({64, 32, 14, 14, 64, 3, 1, 1, 1, 1});
    g.algo = ConvAlgo::Direct;
    const ConvAlgo fwd = ms::kernels::conv2d_algorithm(g, ConvPass::Forward);
    // Direct where libxsmm runs, else Winograd (both apply to this shape).
    CHECK((fwd == ConvAlgo::Direct || fwd == ConvAlgo::Winograd));
    g.algo = ConvAlgo::Auto;
    // Every pass takes Winograd.
    for (ConvPass pass : {ConvPass::Forward, ConvPass::GradInput, ConvPass::GradWeight})
      CHECK(ms::kernels::conv2d_algorithm(g, pass) == ConvAlgo::Winograd);
    // Padding 3: the input gradient's convolution would pad by -1, which
    // neither Winograd nor Direct runs: Im2col; the forward keeps Winograd.
    Conv2dGeometry p3 = geometry({64, 32, 14, 14, 64, 3, 1, 3, 1, 1});
    CHECK(ms::kernels::conv2d_algorithm(p3, ConvPass::Forward) == ConvAlgo::Winograd);
    CHECK(ms::kernels::conv2d_algorithm(p3, ConvPass::GradInput) == ConvAlgo::Im2col);
    // One input channel: every pass takes Direct's narrow kernels where the
    // build has AVX-512, else Im2col.
    Conv2dGeometry c1 = geometry({64, 1, 28, 28, 32, 3, 1, 1, 1, 1});
#if defined(__AVX512F__)
    const ConvAlgo narrow = ConvAlgo::Direct;
#else
    const ConvAlgo narrow = ConvAlgo::Im2col;
#endif
    for (ConvPass pass : {ConvPass::Forward, ConvPass::GradInput, ConvPass::GradWeight})
      CHECK(ms::kernels::conv2d_algorithm(c1, pass) == narrow);
    // Narrow but not 3x3 with padding 1: Im2col.
    Conv2dGeometry c1v = geometry({64, 1, 28, 28, 32, 3, 1, 0, 1, 1});
    CHECK(ms::kernels::conv2d_algorithm(c1v, ConvPass::Forward) == ConvAlgo::Im2col);
    // A stride of 2 along the width never runs Direct; Im2col is always honoured.
    Conv2dGeometry s = geometry({1, 3, 17, 17, 3, 3, 2, 1, 1, 1});
    s.algo = ConvAlgo::Direct;
    CHECK(ms::kernels::conv2d_algorithm(s, ConvPass::Forward) == ConvAlgo::Im2col);
    g.algo = ConvAlgo::Im2col;
    CHECK(ms::kernels::conv2d_algorithm(g, ConvPass::GradWeight) == ConvAlgo::Im2col);
  }

  TEST_CASE("conv2d_bf16_algorithm: the bfloat16 kernels' choice on the CNN's shapes") {
    using ms::kernels::conv2d_bf16_algorithm;
    Conv2dGeometry conv2 = geometry({64, 32, 14, 14, 64, 3, 1, 1, 1, 1});
    Conv2dGeometry direct = conv2;
    direct.algo = ConvAlgo::Direct;
    // libxsmm's bf16 kernels apply where its float32 kernels do on a CPU it
    // targets with AVX-512 (libxsmm 1.17 generates none for AVX2).
    const bool xsmm =
        ms::kernels::conv2d_algorithm(direct, ConvPass::Forward) == ConvAlgo::Direct &&
        __builtin_cpu_supports("avx512bw");
    CHECK(conv2d_bf16_algorithm(direct, ConvPass::Forward) ==
          (xsmm ? ConvAlgo::Direct : ConvAlgo::Auto));
    CHECK(conv2d_bf16_algorithm(direct, ConvPass::GradInput) ==
          (xsmm ? ConvAlgo::Direct : ConvAlgo::Im2col));
    // Im2col is always honoured; Winograd has no bfloat16 path (the forward
    // converts to float32); the weight gradient is always Im2col.
    for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Direct, ConvAlgo::Winograd, ConvAlgo::Im2col}) {
      Conv2dGeometry g = conv2;
      g.algo = algo;
      CHECK(conv2d_bf16_algorithm(g, ConvPass::GradWeight) == ConvAlgo::Im2col);
      if (algo == ConvAlgo::Im2col)
        for (ConvPass pass : {ConvPass::Forward, ConvPass::GradInput})
          CHECK(conv2d_bf16_algorithm(g, pass) == ConvAlgo::Im2col);
      if (algo == ConvAlgo::Winograd) {
        CHECK(conv2d_bf16_algorithm(g, ConvPass::Forward) == ConvAlgo::Auto);
        CHECK(conv2d_bf16_algorithm(g, ConvPass::GradInput) == ConvAlgo::Im2col);
      }
    }
    // Auto: gemm_bf16 where it runs on AMX, else libxsmm's kernels where they apply.
    const ConvAlgo auto_conv2 = ms::kernels::gemm_bf16_on_amx() ? ConvAlgo::Im2col
                                : xsmm                          ? ConvAlgo::Direct
                                                                : ConvAlgo::Auto;
    CHECK(conv2d_bf16_algorithm(conv2, ConvPass::Forward) == auto_conv2);
    CHECK(conv2d_bf16_algorithm(conv2, ConvPass::GradInput) ==
          (auto_conv2 == ConvAlgo::Auto ? ConvAlgo::Im2col : auto_conv2));
#if defined(__AVX512F__)
    // One input channel: the forward on the narrow kernels (Direct), the input
    // gradient on gemm_bf16.
    const Conv2dGeometry conv1 = geometry({64, 1, 28, 28, 32, 3, 1, 1, 1, 1});
    CHECK(conv2d_bf16_algorithm(conv1, ConvPass::Forward) == ConvAlgo::Direct);
    CHECK(conv2d_bf16_algorithm(conv1, ConvPass::GradInput) == ConvAlgo::Im2col);
#endif
  }

  TEST_CASE("conv2d_bf16 on the narrow kernels: float32's output rounded once, NaN and inf too") {
#if defined(__AVX512F__)
    for (std::int64_t c : {1, 3}) {
      Conv2dGeometry g = geometry({2, c, 7, 9, 5, 3, 1, 1, 1, 1});
      REQUIRE(ms::kernels::conv2d_bf16_algorithm(g, ConvPass::Forward) == ConvAlgo::Direct);
      auto xf = random_values(g.n * g.c * g.h * g.w, 21);
      const auto wf = random_values(g.o * g.c * 9, 22), bias = random_values(g.o, 23);
      // Sums that round up and to +-inf, and NaN inputs of both signs with
      // payloads: they reach the outputs around them with the payload, which
      // the rounding must drop.
      xf[3] = 3e38f, xf[4] = 3e38f, xf[20] = -std::numeric_limits<float>::infinity();
      std::vector<float> xr, wr;
      auto x = to_bf16(xf, xr);
      const auto w = to_bf16(wf, wr);
      for (const auto& [at, bits] : {std::pair<std::size_t, std::uint16_t>{40, 0x7fd1},
                                     std::pair<std::size_t, std::uint16_t>{70, 0xffa3}}) {
        x[at] = std::bit_cast<ms::bfloat16_t>(bits);
        xr[at] = float(x[at]);
      }
      std::vector<float> want(static_cast<std::size_t>(g.n * g.o * g.oh * g.ow));
      ms::kernels::conv2d<float>(xr.data(), wr.data(), bias.data(), want.data(), g);
      std::vector<ms::bfloat16_t> got(want.size());
      REQUIRE(ms::kernels::conv2d_bf16(x.data(), w.data(), bias.data(), got.data(), g));
      std::int64_t differ = 0, nans = 0;
      for (std::size_t e = 0; e < want.size(); ++e) {
        const ms::bfloat16_t r(want[e]);
        differ += std::memcmp(&r, &got[e], sizeof(r)) != 0;
        nans += std::isnan(want[e]);
      }
      CHECK(nans > 0);
      CHECK(differ == 0);
    }
#endif
  }

  TEST_CASE("conv2d with bias, relu and 2x2 pooling: every algorithm, against its own output") {
    for (const Case& t :
         {Case{2, 32, 14, 14, 64, 3, 1, 1, 1, 1}, Case{2, 3, 17, 17, 17, 3, 1, 1, 1, 1},
          Case{2, 1, 28, 28, 32, 3, 1, 1, 1, 1}}) {
      Conv2dGeometry g = geometry(t);
      const auto x = random_values(g.n * g.c * g.h * g.w, 4);
      const auto w = random_values(g.o * g.c * g.kh * g.kw, 5);
      const auto b = random_values(g.o, 6);
      const auto gy = random_values(g.n * g.o * g.oh * g.ow, 7);
      const Reference ref = reference(g, x, w, gy);
      for (ConvAlgo algo : {ConvAlgo::Direct, ConvAlgo::Winograd, ConvAlgo::Im2col}) {
        g.algo = algo;
        CAPTURE(algo_name(ms::kernels::conv2d_algorithm(g, ConvPass::Forward)));
        const std::int64_t ph = g.oh / 2, pw = g.ow / 2, planes = g.n * g.o;
        std::vector<float> y(ref.y.size()), pooled(static_cast<std::size_t>(planes * ph * pw));
        std::vector<std::uint8_t> index(pooled.size());
        ms::kernels::conv2d<float>(x.data(), w.data(), b.data(), y.data(), g, true, pooled.data(),
                                   index.data());
        std::int64_t bad = 0, bad_pool = 0;
        for (std::size_t e = 0; e < y.size(); ++e) {
          const double want = std::max(0.0, ref.y[e] + double(b[e / (g.oh * g.ow) % g.o]));
          const double tol = (double(ref.y_terms) * 16 + 8) * 0x1p-24 * (ref.y_abs[e] + 1);
          bad += !(std::abs(double(y[e]) - want) <= tol);
        }
        for (std::int64_t pl = 0; pl < planes; ++pl)
          for (std::int64_t r = 0; r < ph; ++r)
            for (std::int64_t q = 0; q < pw; ++q) {
              const float* s = y.data() + (pl * g.oh + 2 * r) * g.ow + 2 * q;
              const float m = std::max(std::max(s[0], s[1]), std::max(s[g.ow], s[g.ow + 1]));
              bad_pool += pooled[static_cast<std::size_t>((pl * ph + r) * pw + q)] != m;
            }
        CHECK(bad == 0);
        CHECK(bad_pool == 0);
      }
    }
  }

  TEST_CASE(
      "conv2d_grad_input_bf16 and conv2d_grad_weight_bf16 against float64 sums; 1 and 2 "
      "threads") {
    for (const Case& t : cases()) {
      Conv2dGeometry g = geometry(t);
      const auto xf = random_values(g.n * g.c * g.h * g.w, 11);
      const auto wf = random_values(g.o * (g.c / g.groups) * g.kh * g.kw, 12);
      const auto gyf = random_values(g.n * g.o * g.oh * g.ow, 13);
      std::vector<float> xr, wr, gyr;
      const auto x = to_bf16(xf, xr), w = to_bf16(wf, wr), gy = to_bf16(gyf, gyr);
      const Reference rounded = reference(g, xr, wr, gyr), exact = reference(g, xf, wf, gyf);
      const std::string shape = describe(t);
      CAPTURE(shape);
      // Auto (the bf16 kernels' Direct path where it applies) and Im2col (gemm_bf16).
      for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Im2col}) {
        g.algo = algo;
        CAPTURE(algo_name(ms::kernels::conv2d_algorithm(g, ConvPass::GradInput)));
        const ms::bfloat16_t junk(-7.f);
        std::vector<ms::bfloat16_t> dx1(x.size(), junk), dx2(x.size(), junk);
        std::vector<ms::bfloat16_t> dw1(w.size(), junk), dw2(w.size(), junk);
        {
          ThreadGuard guard;
          ms::set_num_threads(1);
          ms::kernels::conv2d_grad_input_bf16(gy.data(), w.data(), dx1.data(), g);
          ms::kernels::conv2d_grad_weight_bf16(x.data(), gy.data(), dw1.data(), g);
          ms::set_num_threads(2);
          ms::kernels::conv2d_grad_input_bf16(gy.data(), w.data(), dx2.data(), g);
          ms::kernels::conv2d_grad_weight_bf16(x.data(), gy.data(), dw2.data(), g);
        }
        CHECK(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(ms::bfloat16_t)) == 0);
        CHECK(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(ms::bfloat16_t)) == 0);
        CHECK(outside_bf16(dx1, rounded.dx, rounded.dx_abs, exact.dx, exact.dx_abs,
                           rounded.dx_terms) == 0);
        CHECK(outside_bf16(dw1, rounded.dw, rounded.dw_abs, exact.dw, exact.dw_abs,
                           rounded.dw_terms) == 0);
      }
    }
  }

  TEST_CASE(
      "conv2d_bf16 against float64 sums, within one bfloat16 rounding; Auto, Direct and Im2col; 1 "
      "and 2 threads") {
    for (const Case& t : cases())
      for (ConvAlgo algo : {ConvAlgo::Auto, ConvAlgo::Direct, ConvAlgo::Im2col}) {
        Conv2dGeometry g = geometry(t);
        g.algo = algo;
        const auto xf = random_values(g.n * g.c * g.h * g.w, 8);
        const auto wf = random_values(g.o * (g.c / g.groups) * g.kh * g.kw, 9);
        const auto bias = random_values(g.o, 10);
        std::vector<ms::bfloat16_t> x(xf.size()), w(wf.size());
        std::vector<float> xr(xf.size()), wr(wf.size());  // the bfloat16 values, as floats
        for (std::size_t e = 0; e < xf.size(); ++e)
          x[e] = ms::bfloat16_t(xf[e]), xr[e] = float(x[e]);
        for (std::size_t e = 0; e < wf.size(); ++e)
          w[e] = ms::bfloat16_t(wf[e]), wr[e] = float(w[e]);
        std::vector<float> gy(static_cast<std::size_t>(g.n * g.o * g.oh * g.ow), 0.f);
        const Reference rounded = reference(g, xr, wr, gy), exact = reference(g, xf, wf, gy);
        const std::string shape = describe(t);
        const ConvAlgo chosen = ms::kernels::conv2d_bf16_algorithm(g, ConvPass::Forward);
        CAPTURE(shape);
        CAPTURE(algo_name(algo));
        CAPTURE(algo_name(chosen));
        std::vector<ms::bfloat16_t> y1(gy.size()), y2(gy.size());
        bool ran1 = false, ran2 = false;
        {
          ThreadGuard guard;
          ms::set_num_threads(1);
          ran1 = ms::kernels::conv2d_bf16(x.data(), w.data(), bias.data(), y1.data(), g);
          ms::set_num_threads(2);
          ran2 = ms::kernels::conv2d_bf16(x.data(), w.data(), bias.data(), y2.data(), g);
        }
        // It runs what conv2d_bf16_algorithm names (Auto: the op converts to
        // float32); Im2col asked for always runs.
        CHECK(ran1 == ran2);
        CHECK(ran1 == (chosen != ConvAlgo::Auto));
        if (algo == ConvAlgo::Im2col) CHECK(chosen == ConvAlgo::Im2col);
        if (!ran1) continue;
        CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(ms::bfloat16_t)) == 0);
        std::int64_t bad_rounded = 0, bad_exact = 0;
        for (std::size_t e = 0; e < y1.size(); ++e) {
          const double b =
              bias[e / static_cast<std::size_t>(g.oh * g.ow) % static_cast<std::size_t>(g.o)];
          const double got = double(float(y1[e]));
          // float32 sum of exact products, then one rounding to 8 bits (half an ulp: 2^-8
          // relative).
          const double want = rounded.y[e] + b, abs = rounded.y_abs[e] + std::abs(b);
          const double sum_err = (double(rounded.y_terms) + 5) * 0x1p-24 * abs;
          bad_rounded += !(std::abs(got - want) <= 0x1p-8 * (std::abs(want) + sum_err) + sum_err);
          // Against the unrounded inputs: each of x and w off by up to 2^-8
          // relative (8 significant bits), so each product by 2^-7 + 2^-16.
          const double want_exact = exact.y[e] + b;
          const double in_err = (0x1p-7 + 0x1p-16) * exact.y_abs[e];
          bad_exact += !(std::abs(got - want_exact) <=
                         0x1p-8 * (std::abs(want_exact) + in_err + sum_err) + in_err + 2 * sum_err);
        }
        CHECK(bad_rounded == 0);
        CHECK(bad_exact == 0);
      }
  }
}
