// Shape and indexing ops (ms/ops/layout.hpp) against naive loops written
// here: random shapes and values from a fixed seed, several dtypes,
// non-contiguous inputs, empty and rank-0 tensors, 1 vs 2 threads, and every
// declared error.
#include <doctest/doctest.h>
#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <ms/core/tensor.hpp>
#include <ms/kernels/parallel.hpp>
#include <ms/ops/layout.hpp>
#include <ms/ops/op.hpp>
#include <random>
#include <vector>

#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;
using ms::test::check_thread_invariant;

namespace {

using Dims = std::vector<std::int64_t>;
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

template <DType D>
struct Dt {
  static constexpr DType value = D;
};

#define LAYOUT_DTYPES                                                                             \
  Dt<float32>, Dt<float64>, Dt<int32>, Dt<int64>, Dt<bool_>, Dt<float16>, Dt<bfloat16>, Dt<int8>, \
      Dt<uint8>

std::mt19937& rng() {
  static std::mt19937 g(20240611);
  return g;
}

std::int64_t rand_int(std::int64_t lo, std::int64_t hi) {  // inclusive
  return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng());
}

Shape rand_shape(std::int64_t rank, std::int64_t lo = 1, std::int64_t hi = 5) {
  Dims d(static_cast<std::size_t>(rank));
  for (auto& v : d) v = rand_int(lo, hi);
  return Shape(d);
}

// Values that every dtype holds exactly (small integers for integer types,
// 0/1 for bool, halves for floats), each tensor from the next seed of rng().
Tensor rand_tensor(const Shape& s, DType d) {
  return test::random_tensor(
      d, s, {.lo = -100, .hi = 100, .int_lo = -100, .int_hi = 100, .halves = true}, rng()());
}

// A tensor of shape s: 0 dense, 1 a step-2 slice of a wider tensor, 2 a permuted view.
Tensor make_input(const Shape& s, DType d, int layout) {
  if (s.rank() == 0 || layout == 0) return rand_tensor(s, d);
  if (layout == 1) {
    Shape wide = s;
    wide[s.size() - 1] = 2 * s[s.size() - 1] + 1;
    return rand_tensor(wide, d).slice(-1, 1, 2 * s[s.size() - 1] + 1, 2);
  }
  Dims rev(s.dims().rbegin(), s.dims().rend()), axes;
  for (std::int64_t i = s.rank() - 1; i >= 0; --i) axes.push_back(i);
  return rand_tensor(Shape(rev), d).permute(axes);
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

Dims unravel(std::int64_t flat, const Shape& s) {
  Dims c(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    c[d] = flat % s[d];
    flat /= s[d];
  }
  return c;
}

std::int64_t ravel(const Dims& c, const Shape& s) {
  std::int64_t f = 0;
  for (std::size_t d = 0; d < s.size(); ++d) f = f * s[d] + c[d];
  return f;
}

// Brings a value through dtype d the way a cast does (for the cast reference).
double through(double v, DType d) {
  return dtype_dispatch(d, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return scalar_cast<double>(scalar_cast<T>(v));
  });
}

// pad's reference: per axis, the source coordinate of output coordinate j.
std::vector<double> pad_ref(const Tensor& x, const Dims& pads, const std::string& mode,
                            double value, Shape& out_shape) {
  const Shape& s = x.shape();
  Dims before(s.size(), 0);
  out_shape = s;
  for (std::size_t k = 0; k < pads.size() / 2; ++k) {
    const std::size_t d = s.size() - 1 - k;
    before[d] = pads[2 * k];
    out_shape[d] = s[d] + pads[2 * k] + pads[2 * k + 1];
  }
  const auto xv = vals(x);
  std::vector<double> out(static_cast<std::size_t>(shape_numel(out_shape)));
  for (std::int64_t f = 0; f < static_cast<std::int64_t>(out.size()); ++f) {
    Dims c = unravel(f, out_shape);
    bool fill = false;
    for (std::size_t d = 0; d < s.size(); ++d) {
      std::int64_t src = c[d] - before[d];
      const std::int64_t n = s[d];
      if (src < 0 || src >= n) {
        if (mode == "constant") fill = true;
        if (mode == "replicate") src = src < 0 ? 0 : n - 1;
        if (mode == "reflect") src = src < 0 ? -src : 2 * (n - 1) - src;
      }
      c[d] = src;
    }
    out[static_cast<std::size_t>(f)] = fill ? value : xv[static_cast<std::size_t>(ravel(c, s))];
  }
  return out;
}

}  // namespace

TEST_SUITE("ops") {
  // ------------------------------------------------------------ op table
  TEST_CASE("layout ops are in the op table with their kind") {
    for (const char* n : {"reshape", "transpose", "permute", "squeeze", "unsqueeze", "flatten",
                          "broadcast_to", "concat", "stack", "split", "pad", "cast"})
      CHECK(ops::op(n).kind == ops::OpKind::Layout);
    for (const char* n : {"gather", "index_select", "one_hot", "triu", "tril", "masked_fill"})
      CHECK(ops::op(n).kind == ops::OpKind::Indexing);
    CHECK(ops::op("concat").max_inputs == -1);
    CHECK(ops::op("gather").min_inputs == 2);
    // infer through the table agrees with eval
    const ops::TensorType x{float16, Shape{5, 3}};
    const auto t = ops::op("split").infer(
        std::span(&x, 1), ops::Attrs{{"split_size", std::int64_t{2}}, {"axis", std::int64_t{0}}});
    REQUIRE(t.size() == 3);
    CHECK(t[2].shape == Shape{1, 3});
    CHECK(t[2].dtype == float16);
    // Absent attributes take the entry's defaults (axis 0); neither size given is an error.
    CHECK_THROWS_WITH_AS(ops::call(ops::op("split"), std::vector<Tensor>{zeros({2})}, {}),
                         doctest::Contains("split: give exactly one of the attributes 'sizes' and "
                                           "'split_size'"),
                         ValueError);
  }

  // ------------------------------------------------------------ view ops
  TEST_CASE_TEMPLATE("view ops return views with the right values", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    const Tensor x = rand_tensor({2, 3, 4}, dt);
    const auto xv = vals(x);
    const auto allocs = memory_stats().alloc_count;

    const Tensor r = reshape(x, {4, -1});
    CHECK(r.shape() == Shape{4, 6});
    CHECK(r.storage() == x.storage());

    const Tensor t = transpose(x, 0, -1);
    CHECK(t.shape() == Shape{4, 3, 2});
    CHECK(t.storage() == x.storage());
    const Tensor p = permute(x, {1, 2, 0});
    CHECK(p.shape() == Shape{3, 4, 2});
    const Tensor u = unsqueeze(x, -1);
    CHECK(u.shape() == Shape{2, 3, 4, 1});
    CHECK(squeeze(u).shape() == Shape{2, 3, 4});
    CHECK(squeeze(u, 3).shape() == Shape{2, 3, 4});
    CHECK(squeeze(unsqueeze(x, 0), -4).shape() == Shape{2, 3, 4});
    CHECK(flatten(x).shape() == Shape{24});
    CHECK(flatten(x, 1).shape() == Shape{2, 12});
    CHECK(flatten(x, 0, 1).shape() == Shape{6, 4});
    CHECK(flatten(x, -2, -2).shape() == Shape{2, 3, 4});
    const Tensor b = broadcast_to(x.slice(0, 0, 1), {5, 2, 3, 4});
    CHECK(b.shape() == Shape{5, 2, 3, 4});
    CHECK(b.strides()[0] == 0);
    CHECK(memory_stats().alloc_count == allocs);  // no copies so far
    CHECK(vals(r) == xv);

    const auto tv = vals(t), pv = vals(p), bv = vals(b);
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 3; ++j)
        for (std::int64_t k = 0; k < 4; ++k) {
          const double v = xv[static_cast<std::size_t>((i * 3 + j) * 4 + k)];
          CHECK(tv[static_cast<std::size_t>((k * 3 + j) * 2 + i)] == v);
          CHECK(pv[static_cast<std::size_t>((j * 4 + k) * 2 + i)] == v);
          if (i == 0)
            for (std::int64_t m = 0; m < 5; ++m)
              CHECK(bv[static_cast<std::size_t>(((m * 2 + 1) * 3 + j) * 4 + k)] == v);
        }

    // reshape of a non-contiguous tensor copies, with values in row-major order
    const Tensor rt = reshape(t, {24});
    CHECK(vals(rt) == tv);
  }

  TEST_CASE("view ops: rank 0 and empty tensors") {
    const Tensor s = tensor(2.5);
    CHECK(reshape(s, {1, 1}).shape() == Shape{1, 1});
    CHECK(reshape(s, {}).shape() == Shape{});
    CHECK(transpose(s, 0, -1).shape() == Shape{});
    CHECK(permute(s, {}).shape() == Shape{});
    CHECK(squeeze(s).shape() == Shape{});
    CHECK(squeeze(s, 0).shape() == Shape{});
    CHECK(unsqueeze(s, 0).shape() == Shape{1});
    CHECK(flatten(s).shape() == Shape{1});
    CHECK(flatten(s).item<double>() == 2.5);
    CHECK(broadcast_to(s, {2, 3}).to_vector<double>() == std::vector<double>(6, 2.5));
    const Tensor e = zeros({2, 0, 3});
    CHECK_THROWS_WITH_AS(reshape(e, {0, -1}), doctest::Contains("(0 elements) into [0, -1]"),
                         ShapeError);  // -1 is ambiguous with 0 elements, as in PyTorch
    CHECK(reshape(e, {3, 0}).shape() == Shape{3, 0});
    CHECK(transpose(e, 0, 2).shape() == Shape{3, 0, 2});
    CHECK(flatten(e, 1).shape() == Shape{2, 0});
    CHECK(broadcast_to(zeros({0, 1}), {4, 0, 5}).shape() == Shape{4, 0, 5});
  }

  TEST_CASE("view ops: errors") {
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(reshape(x, {4, 2}), doctest::Contains("cannot reshape [2, 3]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {-1, -1}), doctest::Contains("only one dim may be -1"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {-3, -2}), doctest::Contains("negative size -3"), ValueError);
    CHECK_THROWS_WITH_AS(reshape(zeros({0}), {0, -1}), doctest::Contains("cannot reshape [0]"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(reshape(x, {kMax, 2, 0}), doctest::Contains("more than 2^63-1"),
                         ValueError);
    for (std::int64_t bad : Dims{2, -3, kMin, kMax}) {
      CHECK_THROWS_WITH_AS(transpose(x, 0, bad), doctest::Contains("transpose: axis"), IndexError);
      CHECK_THROWS_WITH_AS(squeeze(x, bad), doctest::Contains("squeeze: axis"), IndexError);
      CHECK_THROWS_WITH_AS(flatten(x, bad), doctest::Contains("flatten: axis"), IndexError);
      CHECK_THROWS_WITH_AS(permute(x, {0, bad}), doctest::Contains("permute: axis"), IndexError);
    }
    CHECK_THROWS_WITH_AS(unsqueeze(x, 3), doctest::Contains("unsqueeze: axis 3 is out of range"),
                         IndexError);
    CHECK_THROWS_WITH_AS(unsqueeze(x, -4), doctest::Contains("unsqueeze: axis -4"), IndexError);
    CHECK_THROWS_AS(unsqueeze(x, kMin), IndexError);
    CHECK_THROWS_WITH_AS(transpose(tensor(1.0), 0, 1), doctest::Contains("rank 0"), IndexError);
    CHECK_THROWS_WITH_AS(permute(x, {0}), doctest::Contains("1 axes [0] given for x of shape"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(permute(x, {1, -1}), doctest::Contains("more than once"), ValueError);
    CHECK_THROWS_WITH_AS(squeeze(x, 1), doctest::Contains("axis 1 of shape [2, 3] has size 3"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(flatten(zeros({2, 3, 4}), 2, 1),
                         doctest::Contains("start axis 2 is after end axis 1"), ValueError);
    CHECK_THROWS_WITH_AS(flatten(tensor(1.0), 1), doctest::Contains("flatten: axis 1"), IndexError);
    CHECK_THROWS_WITH_AS(broadcast_to(x, {2, 4}), doctest::Contains("only size-1 axes expand"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(broadcast_to(x, {3}), doctest::Contains("lower rank"), ShapeError);
    CHECK_THROWS_WITH_AS(broadcast_to(x, {-1, 2, 3}), doctest::Contains("negative size -1"),
                         ValueError);
    CHECK_THROWS_WITH_AS(broadcast_to(zeros({1}), {-5}), doctest::Contains("negative size -5"),
                         ValueError);
    CHECK_THROWS_WITH_AS(broadcast_to(zeros({1, 1}), {kMax, 2}),
                         doctest::Contains("more than 2^63-1"), ValueError);
    const Tensor i4 = zeros({2, 2}, int4);
    CHECK_THROWS_WITH_AS(transpose(i4, 0, 1), doctest::Contains("Int4"), TypeError);
    CHECK_THROWS_WITH_AS(permute(i4, {1, 0}), doctest::Contains("Int4"), TypeError);
    CHECK_THROWS_WITH_AS(broadcast_to(i4, {3, 2, 2}), doctest::Contains("Int4"), TypeError);
    CHECK(reshape(i4, {4}).shape() == Shape{4});  // dense int4 reshapes
    CHECK_THROWS_WITH_AS(reshape(Tensor(), {1}), doctest::Contains("undefined"), ValueError);
  }

  // ------------------------------------------------------------ concat
  TEST_CASE_TEMPLATE("concat matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 30; ++trial) {
      const std::int64_t rank = rand_int(1, 4);
      const Shape base = rand_shape(rank, 1, 4);
      const std::int64_t ax = rand_int(0, rank - 1);
      const int n = static_cast<int>(rand_int(1, 4));
      std::vector<Tensor> xs;
      for (int i = 0; i < n; ++i) {
        Shape s = base;
        s[static_cast<std::size_t>(ax)] = rand_int(0, 4);
        xs.push_back(make_input(s, dt, static_cast<int>(rand_int(0, 2))));
      }
      const std::int64_t axis_arg = rand_int(0, 1) ? ax : ax - rank;
      const Tensor out = concat(xs, axis_arg);
      CHECK(out.dtype() == dt);
      if (out.numel() > 0) CHECK(out.is_contiguous());
      Shape os = base;
      os[static_cast<std::size_t>(ax)] = 0;
      for (const Tensor& x : xs)
        os[static_cast<std::size_t>(ax)] += x.shape()[static_cast<std::size_t>(ax)];
      REQUIRE(out.shape() == os);
      std::vector<double> ref(static_cast<std::size_t>(shape_numel(os)));
      std::int64_t off = 0;
      for (const Tensor& x : xs) {
        const auto xv = vals(x);
        for (std::int64_t f = 0; f < x.numel(); ++f) {
          Dims c = unravel(f, x.shape());
          c[static_cast<std::size_t>(ax)] += off;
          ref[static_cast<std::size_t>(ravel(c, os))] = xv[static_cast<std::size_t>(f)];
        }
        off += x.shape()[static_cast<std::size_t>(ax)];
      }
      CHECK(vals(out) == ref);
    }
  }

  TEST_CASE("concat: dtype promotion, legacy empty rule, NaN, threads") {
    const Tensor a = tensor({{1, 2}}, int32), b = tensor({{1.5f, 2.5f}});
    CHECK(concat({a, b}).dtype() == float32);
    CHECK(concat({a, b}).to_vector<double>() == std::vector<double>{1, 2, 1.5, 2.5});
    CHECK(concat({a, tensor({{3, 4}}, int64)}).dtype() == int64);
    CHECK(concat({tensor({true}), tensor({3}, int8)}).dtype() == int8);
    CHECK(concat({tensor({1.f}, float16), tensor({2.f})}).dtype() == float32);
    CHECK(concat({tensor({1.f}, float16), tensor({2.f}, bfloat16)}).dtype() == float32);
    // Shape [0] tensors are skipped whatever their rank (PyTorch's legacy
    // rule) but still take part in the dtype promotion.
    const Tensor x = rand_tensor({2, 3}, float32);
    const Tensor c = concat({zeros({0}, float64), x, zeros({0})}, 1);
    CHECK(c.shape() == Shape{2, 3});
    CHECK(c.dtype() == float64);
    CHECK(vals(c) == vals(x));
    CHECK(concat({zeros({0}), zeros({0}, int32)}).shape() == Shape{0});
    CHECK(concat({zeros({2, 0}), zeros({2, 0})}, 1).shape() == Shape{2, 0});
    CHECK(concat({zeros({0, 3}), x}).shape() == Shape{2, 3});
    const Tensor one = concat({x});
    CHECK(vals(one) == vals(x));
    CHECK(one.storage() != x.storage());  // always a new tensor
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto nv =
        concat({tensor({nan, 1.0}, float64), tensor({-INFINITY}, float64)}).to_vector<double>();
    CHECK(std::isnan(nv[0]));
    CHECK(nv[2] == -INFINITY);
    // big enough for several threads: identical results
    std::vector<Tensor> big{make_input({300, 257}, float32, 1), make_input({300, 100}, float32, 2),
                            rand_tensor({300, 333}, float32)};
    check_thread_invariant([&] { return concat(big, 1); });
    check_thread_invariant([&] { return concat({big[0], big[0]}, 0); });
  }

  TEST_CASE("concat: errors") {
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(concat({}), doctest::Contains("concat: expected a non-empty list"),
                         ValueError);
    CHECK_THROWS_WITH_AS(concat({tensor(1.0), tensor(2.0)}), doctest::Contains("rank-0"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(concat({x, zeros({2, 3, 1})}),
                         doctest::Contains("input 1 has shape [2, 3, 1] of rank 3 but input 0 has "
                                           "shape [2, 3] of rank 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(concat({x, zeros({2, 4})}, 0),
                         doctest::Contains("input 1 has shape [2, 4] but input 0 has shape [2, 3]: "
                                           "axis 1 sizes differ (4 vs 3)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(concat({zeros({0}), x, zeros({3, 3})}, 1),
                         doctest::Contains("input 2 has shape [3, 3] but input 1 has shape [2, 3]: "
                                           "axis 0 sizes differ"),
                         ShapeError);
    for (std::int64_t bad : Dims{2, -3, kMin, kMax})
      CHECK_THROWS_WITH_AS(concat({x, x}, bad), doctest::Contains("concat: axis"), IndexError);
    CHECK_THROWS_AS(concat({zeros({0}), zeros({0})}, 1), IndexError);
    CHECK_THROWS_WITH_AS(concat({x, zeros({2, 3}, int4)}),
                         doctest::Contains("input 1 has dtype Int4"), TypeError);
    // Sizes near 2^62 / 2^63 (stride-0 views, no memory): checked before allocating.
    const Tensor huge = zeros({1}).expand({std::int64_t{1} << 62});
    CHECK_THROWS_WITH_AS(concat({huge, huge}), doctest::Contains("overflow"), ValueError);
    const Tensor big = zeros({1}).expand({std::int64_t{1} << 61});
    CHECK_THROWS_WITH_AS(concat({big, big}), doctest::Contains("overflow a 64-bit byte size"),
                         ValueError);
    const auto allocs = memory_stats().alloc_count;
    const Tensor t40 = zeros({1}).expand({std::int64_t{1} << 40});
    CHECK_THROWS_WITH_AS(concat({t40, t40}), doctest::Contains("concat: allocation of"),
                         MemoryError);
    CHECK(memory_stats().alloc_count == allocs + 1);  // only zeros({1})
    CHECK_THROWS_WITH_AS(concat({x, Tensor()}), doctest::Contains("undefined"), ValueError);
  }

  // ------------------------------------------------------------ stack
  TEST_CASE_TEMPLATE("stack matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 20; ++trial) {
      const std::int64_t rank = rand_int(0, 3);
      const Shape s = rand_shape(rank, 0, 4);
      const int n = static_cast<int>(rand_int(1, 4));
      std::vector<Tensor> xs;
      for (int i = 0; i < n; ++i) xs.push_back(make_input(s, dt, static_cast<int>(rand_int(0, 2))));
      const std::int64_t ax = rand_int(0, rank);
      const Tensor out = stack(xs, rand_int(0, 1) ? ax : ax - rank - 1);
      Dims od = s.to_vector();
      od.insert(od.begin() + ax, n);
      const Shape os(od);
      REQUIRE(out.shape() == os);
      CHECK(out.dtype() == dt);
      std::vector<double> ref(static_cast<std::size_t>(shape_numel(os)));
      for (int i = 0; i < n; ++i) {
        const auto xv = vals(xs[static_cast<std::size_t>(i)]);
        for (std::int64_t f = 0; f < shape_numel(s); ++f) {
          Dims c = unravel(f, s);
          c.insert(c.begin() + ax, i);
          ref[static_cast<std::size_t>(ravel(c, os))] = xv[static_cast<std::size_t>(f)];
        }
      }
      CHECK(vals(out) == ref);
    }
  }

  TEST_CASE("stack: promotion, threads, errors") {
    CHECK(stack({tensor({1}, int32), tensor({2.0}, float64)}).dtype() == float64);
    CHECK(stack({tensor(1.0), tensor(2.0)}).to_vector<double>() == std::vector<double>{1, 2});
    const Tensor a = make_input({200, 300}, float32, 2), b = rand_tensor({200, 300}, float32);
    check_thread_invariant([&] { return stack({a, b}, 1); });
    check_thread_invariant([&] { return stack({a, b}, 2); });
    CHECK_THROWS_WITH_AS(stack({}), doctest::Contains("stack: expected a non-empty list"),
                         ValueError);
    CHECK_THROWS_WITH_AS(stack({zeros({2, 3}), zeros({2, 4})}),
                         doctest::Contains("input 1 has shape [2, 4] but input 0 has shape [2, 3]; "
                                           "stack needs equal shapes (axis 1: 4 vs 3)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(stack({zeros({2, 3}), zeros({6})}), doctest::Contains("ranks 1 and 2"),
                         ShapeError);
    for (std::int64_t bad : Dims{3, -4, kMin, kMax})
      CHECK_THROWS_WITH_AS(stack({zeros({2, 3})}, bad), doctest::Contains("stack: axis"),
                           IndexError);
    CHECK_THROWS_WITH_AS(stack({zeros({2}, int4)}), doctest::Contains("Int4"), TypeError);
    const Tensor huge = zeros({1}).expand({std::int64_t{1} << 62});
    CHECK_THROWS_WITH_AS(stack({huge, huge}), doctest::Contains("more than 2^63-1"), ValueError);
  }

  // ------------------------------------------------------------ split
  TEST_CASE_TEMPLATE("split returns views matching slices", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 20; ++trial) {
      const std::int64_t rank = rand_int(1, 3);
      const Shape s = rand_shape(rank, 0, 7);
      const Tensor x = make_input(s, dt, static_cast<int>(rand_int(0, 2)));
      const std::int64_t ax = rand_int(0, rank - 1), n = s[static_cast<std::size_t>(ax)];
      const auto xv = vals(x);
      // Random sizes summing to n, or a random split_size.
      Dims sizes;
      std::vector<Tensor> parts;
      if (trial % 2 == 0) {
        std::int64_t left = n;
        do {
          const std::int64_t k = rand_int(0, left);
          sizes.push_back(k);
          left -= k;
        } while (left > 0);
        parts = split(x, sizes, ax - (trial % 4 == 0 ? rank : 0));
      } else {
        const std::int64_t ss = n == 0 ? rand_int(0, 3) : rand_int(1, n + 1);
        parts = split(x, ss, ax);
        if (n == 0) {
          sizes = {0};
        } else {
          for (std::int64_t o = 0; o < n; o += ss) sizes.push_back(std::min(ss, n - o));
        }
      }
      REQUIRE(parts.size() == sizes.size());
      std::int64_t off = 0;
      for (std::size_t i = 0; i < parts.size(); ++i) {
        Shape ps = s;
        ps[static_cast<std::size_t>(ax)] = sizes[i];
        REQUIRE(parts[i].shape() == ps);
        CHECK(parts[i].storage() == x.storage());
        const auto pv = vals(parts[i]);
        for (std::int64_t f = 0; f < parts[i].numel(); ++f) {
          Dims c = unravel(f, ps);
          c[static_cast<std::size_t>(ax)] += off;
          CHECK(pv[static_cast<std::size_t>(f)] == xv[static_cast<std::size_t>(ravel(c, s))]);
        }
        off += sizes[i];
      }
    }
  }

  TEST_CASE("split: errors") {
    const Tensor x = zeros({5, 3});
    CHECK(split(x, 2).size() == 3);
    CHECK(split(x, 2)[2].shape() == Shape{1, 3});
    CHECK(split(x, 10).size() == 1);
    CHECK(split(zeros({0, 3}), 0).size() == 1);
    CHECK_THROWS_WITH_AS(split(tensor(1.0), 1), doctest::Contains("rank-0"), ShapeError);
    CHECK_THROWS_WITH_AS(split(x, 0), doctest::Contains("split_size 0 is only valid for an empty"),
                         ValueError);
    CHECK_THROWS_WITH_AS(split(x, -2), doctest::Contains("split_size must be >= 0, got -2"),
                         ValueError);
    CHECK_THROWS_WITH_AS(split(x, kMin), doctest::Contains("split_size must be >= 0"), ValueError);
    CHECK(split(x, kMax).size() == 1);
    CHECK_THROWS_WITH_AS(split(x, Dims{2, 2}),
                         doctest::Contains("sizes [2, 2] sum to 4 but axis 0 of x with shape "
                                           "[5, 3] has size 5"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(split(x, Dims{6, -1}), doctest::Contains("sizes[1] = -1 is negative"),
                         ValueError);
    CHECK_THROWS_WITH_AS(split(x, Dims{kMax, kMax}), doctest::Contains("overflow"), ValueError);
    CHECK_THROWS_WITH_AS(split(x, Dims{}), doctest::Contains("sizes is empty"), ValueError);
    for (std::int64_t bad : Dims{2, -3, kMin, kMax})
      CHECK_THROWS_WITH_AS(split(x, 1, bad), doctest::Contains("split: axis"), IndexError);
    CHECK_THROWS_WITH_AS(split(zeros({4}, int4), 2), doctest::Contains("Int4"), TypeError);
    const Tensor huge = zeros({1}).expand({std::int64_t{1} << 40});
    CHECK_THROWS_WITH_AS(split(huge, 1), doctest::Contains("more than the limit"), ValueError);
  }

  // ------------------------------------------------------------ gather
  TEST_CASE_TEMPLATE("gather matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 30; ++trial) {
      const std::int64_t rank = rand_int(1, 4);
      const Shape xs = rand_shape(rank, 1, 4);
      const std::int64_t ax = rand_int(0, rank - 1);
      Shape is = xs;
      for (std::size_t d = 0; d < is.size(); ++d)
        is[d] = static_cast<std::int64_t>(d) == ax ? rand_int(0, 6) : rand_int(0, xs[d]);
      const Tensor x = make_input(xs, dt, static_cast<int>(rand_int(0, 2)));
      std::vector<std::int64_t> iv(static_cast<std::size_t>(shape_numel(is)));
      for (auto& v : iv) v = rand_int(0, xs[static_cast<std::size_t>(ax)] - 1);
      Tensor index = from_vector(iv, is).to(trial % 2 ? int32 : int64);
      if (trial % 3 == 0 && rank >= 2)  // a non-contiguous index with the same values
        index = index.transpose(0, 1).contiguous().transpose(0, 1);
      const Tensor out = gather(x, rand_int(0, 1) ? ax : ax - rank, index);
      REQUIRE(out.shape() == is);
      CHECK(out.dtype() == dt);
      const auto xv = vals(x), ov = vals(out);
      for (std::int64_t f = 0; f < shape_numel(is); ++f) {
        Dims c = unravel(f, is);
        c[static_cast<std::size_t>(ax)] = iv[static_cast<std::size_t>(f)];
        CHECK(ov[static_cast<std::size_t>(f)] == xv[static_cast<std::size_t>(ravel(c, xs))]);
      }
    }
  }

  TEST_CASE("gather: rank 0, empty, threads") {
    CHECK(gather(tensor(7.0), 0, tensor(0)).item<double>() == 7.0);
    CHECK(gather(tensor(7.0), -1, tensor(0, int32)).shape() == Shape{});
    CHECK(gather(zeros({3, 0}), 0, zeros({5, 0}, int64)).shape() == Shape{5, 0});
    CHECK(gather(zeros({3, 4}), 1, zeros({0, 4}, int64)).shape() == Shape{0, 4});
    const Tensor x = make_input({400, 300}, float64, 2);
    std::vector<std::int64_t> iv(400 * 200);
    for (auto& v : iv) v = rand_int(0, 299);
    const Tensor index = from_vector(iv, {400, 200});
    check_thread_invariant([&] { return gather(x, 1, index); });
    for (auto& v : iv) v = rand_int(0, 399);
    const Tensor index0 = from_vector(iv, {400, 200}).to(int32).transpose(0, 1);  // [200, 400]
    check_thread_invariant([&] { return gather(x.transpose(0, 1), 1, index0); });
  }

  TEST_CASE("gather: errors") {
    const Tensor x = zeros({3, 4});
    const Tensor i = zeros({2, 2}, int64);
    CHECK_THROWS_WITH_AS(
        gather(x, 0, zeros({2, 2})),
        doctest::Contains("gather: index must have dtype Int32 or Int64, got Float32"), TypeError);
    CHECK_THROWS_WITH_AS(gather(x, 0, zeros({2, 2}, bool_)), doctest::Contains("got Bool"),
                         TypeError);
    CHECK_THROWS_WITH_AS(gather(x, 0, zeros({2, 2}, uint8)), doctest::Contains("got UInt8"),
                         TypeError);
    CHECK_THROWS_WITH_AS(gather(zeros({3, 4}, int4), 0, i), doctest::Contains("Int4"), TypeError);
    CHECK_THROWS_WITH_AS(
        gather(x, 0, zeros({2}, int64)),
        doctest::Contains("index of shape [2] has rank 1 but x of shape [3, 4] has "
                          "rank 2"),
        ShapeError);
    CHECK_THROWS_WITH_AS(gather(x, 0, zeros({2, 5}, int64)),
                         doctest::Contains("index of shape [2, 5] is larger than x of shape [3, 4] "
                                           "on axis 1 (5 > 4)"),
                         ShapeError);
    CHECK(gather(x, 0, zeros({7, 4}, int64)).shape() == Shape{7, 4});  // the axis may be larger
    for (std::int64_t bad : Dims{2, -3, kMin, kMax})
      CHECK_THROWS_WITH_AS(gather(x, bad, i), doctest::Contains("gather: axis"), IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 1, tensor({{0, 1}, {-1, 2}})),
                         doctest::Contains("gather: index[1, 0] = -1 is out of range for axis 1 of "
                                           "x with shape [3, 4] (expected 0 <= value < 4)"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 0, tensor({{0, 1}, {2, 3}}, int32)),
                         doctest::Contains("index[1, 1] = 3 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 0, tensor({{0, 1}, {2, kMin}})),
                         doctest::Contains("index[1, 1] = -9223372036854775808"), IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 0, tensor({{0, 1}, {2, kMax}})),
                         doctest::Contains("= 9223372036854775807 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(gather(tensor(1.0), 0, tensor(1)), doctest::Contains("index = 1"),
                         IndexError);
    CHECK_THROWS_WITH_AS(gather(zeros({0, 4}), 0, zeros({1, 4}, int64)),
                         doctest::Contains("index[0, 0] = 0 is out of range"), IndexError);
    // the first bad position is reported, whatever the thread count
    std::vector<std::int64_t> iv(300000, 1);
    iv[200001] = 9;
    iv[250000] = -4;
    const Tensor bigx = zeros({2, 300000});
    const Tensor bigi = from_vector(iv, {1, 300000});
    for (int nt : {1, 2}) {
      const int saved = get_num_threads();
      set_num_threads(nt);
      CHECK_THROWS_WITH_AS(gather(bigx, 0, bigi), doctest::Contains("index[0, 200001] = 9"),
                           IndexError);
      set_num_threads(saved);
    }
  }

  // ------------------------------------------------------------ index_select
  TEST_CASE_TEMPLATE("index_select matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 30; ++trial) {
      const std::int64_t rank = rand_int(1, 4);
      const Shape xs = rand_shape(rank, 1, 4);
      const std::int64_t ax = rand_int(0, rank - 1);
      const Tensor x = make_input(xs, dt, static_cast<int>(rand_int(0, 2)));
      std::vector<std::int64_t> iv(static_cast<std::size_t>(rand_int(0, 6)));
      for (auto& v : iv) v = rand_int(0, xs[static_cast<std::size_t>(ax)] - 1);
      Tensor index = from_vector(iv).to(trial % 2 ? int32 : int64);
      if (trial % 3 == 0) {  // a strided index with the same values
        Tensor wide = zeros({2 * index.numel()}, index.dtype());
        wide.slice(0, 0, 2 * index.numel(), 2).copy_(index);
        index = wide.slice(0, 0, 2 * index.numel(), 2);
      }
      const Tensor out = index_select(x, rand_int(0, 1) ? ax : ax - rank, index);
      Shape os = xs;
      os[static_cast<std::size_t>(ax)] = static_cast<std::int64_t>(iv.size());
      REQUIRE(out.shape() == os);
      CHECK(out.dtype() == dt);
      const auto xv = vals(x), ov = vals(out);
      for (std::int64_t f = 0; f < out.numel(); ++f) {
        Dims c = unravel(f, os);
        c[static_cast<std::size_t>(ax)] =
            iv[static_cast<std::size_t>(c[static_cast<std::size_t>(ax)])];
        CHECK(ov[static_cast<std::size_t>(f)] == xv[static_cast<std::size_t>(ravel(c, xs))]);
      }
    }
  }

  TEST_CASE("index_select: embedding rows, strided inner axes, threads") {
    const Tensor table = rand_tensor({1000, 64}, float32);
    std::vector<std::int64_t> ids(5000);
    for (auto& v : ids) v = rand_int(0, 999);
    const Tensor idx = from_vector(ids);
    const Tensor rows = index_select(table, 0, idx);
    const auto tv = vals(table), rv = vals(rows);
    bool ok = true;
    for (std::size_t k = 0; k < ids.size(); ++k)
      for (std::size_t j = 0; j < 64; ++j)
        ok = ok && rv[k * 64 + j] == tv[static_cast<std::size_t>(ids[k]) * 64 + j];
    CHECK(ok);
    check_thread_invariant([&] { return index_select(table, 0, idx); });
    check_thread_invariant([&] { return index_select(table.transpose(0, 1), 1, idx); });
    std::vector<std::int64_t> small(3000);
    for (auto& v : small) v = rand_int(0, 63);
    const Tensor sidx = from_vector(small).to(int32);
    check_thread_invariant([&] { return index_select(table.transpose(0, 1), 0, sidx); });
    CHECK(index_select(zeros({3, 0}), 0, tensor({2, 0})).shape() == Shape{2, 0});
    CHECK(index_select(zeros({3, 2}), 1, zeros({0}, int32)).shape() == Shape{3, 0});
  }

  TEST_CASE("index_select: errors") {
    const Tensor x = zeros({4, 3});
    CHECK_THROWS_WITH_AS(
        index_select(x, 0, tensor({0.f, 1.f})),
        doctest::Contains("index_select: index must have dtype Int32 or Int64, got "
                          "Float32"),
        TypeError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({true})), doctest::Contains("got Bool"),
                         TypeError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({{0, 1}})),
                         doctest::Contains("index must be 1-D, got shape [1, 2]"), ShapeError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, tensor(0)), doctest::Contains("got shape []"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(index_select(tensor(1.0), 0, tensor({0})), doctest::Contains("rank-0"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(index_select(zeros({4}, int4), 0, tensor({0})), doctest::Contains("Int4"),
                         TypeError);
    for (std::int64_t bad : Dims{2, -3, kMin, kMax})
      CHECK_THROWS_WITH_AS(index_select(x, bad, tensor({0})),
                           doctest::Contains("index_select: axis"), IndexError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({0, 3, -1})),
                         doctest::Contains("index_select: index[2] = -1 is out of range for axis 0 "
                                           "of x with shape [4, 3] (expected 0 <= value < 4)"),
                         IndexError);
    CHECK_THROWS_WITH_AS(index_select(x, 1, tensor({0, 3}, int32)),
                         doctest::Contains("index[1] = 3 is out of range for axis 1"), IndexError);
    CHECK_THROWS_WITH_AS(index_select(x, 0, tensor({kMin})),
                         doctest::Contains("index[0] = -9223372036854775808"), IndexError);
    CHECK_THROWS_WITH_AS(index_select(zeros({0, 3}), 0, tensor({0})),
                         doctest::Contains("index[0] = 0 is out of range"), IndexError);
    const Tensor wide = zeros({1, 1}).expand({std::int64_t{1} << 20, 1});
    const Tensor many = zeros({1}, int64).expand({std::int64_t{1} << 30});
    CHECK_THROWS_WITH_AS(index_select(zeros({1, 1}).expand({2, std::int64_t{1} << 40}), 0, many),
                         doctest::Contains("more than 2^63-1"), ValueError);
    const auto allocs = memory_stats().alloc_count;
    CHECK_THROWS_WITH_AS(index_select(wide, 1, many), doctest::Contains("index_select: allocation"),
                         MemoryError);
    CHECK(memory_stats().alloc_count == allocs);
  }

  // ------------------------------------------------------------ one_hot
  TEST_CASE_TEMPLATE("one_hot matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    for (int trial = 0; trial < 15; ++trial) {
      const std::int64_t rank = rand_int(0, 3);
      const Shape s = rand_shape(rank, 0, 4);
      const std::int64_t classes = rand_int(1, 6);
      std::vector<std::int64_t> iv(static_cast<std::size_t>(shape_numel(s)));
      for (auto& v : iv) v = rand_int(0, classes - 1);
      Tensor idx = from_vector(iv, s).to(trial % 2 ? int32 : int64);
      if (rank >= 2) idx = idx.transpose(0, 1).contiguous().transpose(0, 1);
      const Tensor out = one_hot(idx, classes, dt);
      Dims od = s.to_vector();
      od.push_back(classes);
      REQUIRE(out.shape() == Shape(od));
      CHECK(out.dtype() == dt);
      std::vector<double> ref(static_cast<std::size_t>(out.numel()), 0.0);
      for (std::size_t p = 0; p < iv.size(); ++p)
        ref[p * static_cast<std::size_t>(classes) + static_cast<std::size_t>(iv[p])] = 1.0;
      CHECK(vals(out) == ref);
    }
  }

  TEST_CASE("one_hot: inferred count, rank 0, empty, threads") {
    const Tensor a = one_hot(tensor({0, 2}));
    CHECK(a.shape() == Shape{2, 3});
    CHECK(a.dtype() == float32);
    CHECK(a.to_vector<double>() == std::vector<double>{1, 0, 0, 0, 0, 1});
    CHECK(one_hot(tensor(4, int32).reshape({1, 1})).shape() == Shape{1, 1, 5});
    CHECK(one_hot(tensor(1), 3).to_vector<double>() == std::vector<double>{0, 1, 0});
    CHECK(one_hot(tensor(1)).shape() == Shape{2});
    CHECK(one_hot(zeros({0, 2}, int64), 4).shape() == Shape{0, 2, 4});
    CHECK(one_hot(zeros({0}, int64), 0).shape() == Shape{0, 0});  // no index, no class: fine
    CHECK(one_hot(tensor({1}), 2, bool_).to_vector<bool>() == std::vector<bool>{false, true});
    std::vector<std::int64_t> iv(20000);
    for (auto& v : iv) v = rand_int(0, 99);
    const Tensor idx = from_vector(iv);
    check_thread_invariant([&] { return one_hot(idx, 100); });
    check_thread_invariant([&] { return one_hot(idx, -1, float16); });
  }

  TEST_CASE("one_hot: errors") {
    CHECK_THROWS_WITH_AS(one_hot(tensor({0.f}), 2),
                         doctest::Contains("one_hot: indices must have dtype Int32 or Int64, got "
                                           "Float32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({0.f})), doctest::Contains("got Float32"), TypeError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({true}), 2), doctest::Contains("got Bool"), TypeError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({0}), 2, int4), doctest::Contains("Int4"), TypeError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({0}), -5),
                         doctest::Contains("num_classes must be >= 0 (or -1 to infer it from the "
                                           "data), got -5"),
                         ValueError);
    CHECK_THROWS_AS(one_hot(tensor({0}), kMin), ValueError);
    CHECK_THROWS_WITH_AS(one_hot(zeros({0}, int64)),
                         doctest::Contains("is empty; pass num_classes"), ValueError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({{1, 2}, {5, 0}}), 5),
                         doctest::Contains("one_hot: indices[1, 0] = 5 is out of range for "
                                           "num_classes 5 (expected 0 <= value < 5)"),
                         IndexError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({1, -1}, int32), 5),
                         doctest::Contains("indices[1] = -1 is out of range"), IndexError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({1, -3})),
                         doctest::Contains("one_hot: indices[1] = -3 is negative"), IndexError);
    CHECK_THROWS_WITH_AS(one_hot(tensor({kMax})), doctest::Contains("overflows int64"), ValueError);
    CHECK_THROWS_WITH_AS(one_hot(tensor(7), 3), doctest::Contains("indices = 7 is out of range"),
                         IndexError);
    // No class at all: every index is out of range (as PyTorch), although the
    // output [2, 0] would have no element to write.
    CHECK_THROWS_WITH_AS(one_hot(zeros({2}, int64), 0),
                         doctest::Contains("one_hot: indices[0] = 0 is out of range for "
                                           "num_classes 0 (expected 0 <= value < 0)"),
                         IndexError);
    CHECK_THROWS_AS(one_hot(zeros({2, 1}, int32), 0), IndexError);
    CHECK_THROWS_WITH_AS(one_hot(Tensor()), doctest::Contains("undefined"), ValueError);
    // num_classes 2^40 with a big batch (a stride-0 view): the checked numel
    // and byte size raise before anything is allocated.
    const Tensor batch30 = zeros({1}, int64).expand({std::int64_t{1} << 30});
    const Tensor batch10 = zeros({1}, int64).expand({std::int64_t{1} << 10});
    const auto allocs = memory_stats().alloc_count;
    CHECK_THROWS_WITH_AS(one_hot(batch30, std::int64_t{1} << 40),
                         doctest::Contains("one_hot: shape [1073741824, 1099511627776] has more "
                                           "than 2^63-1 elements"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        one_hot(batch10.expand({1 << 12, 1 << 10}), std::int64_t{1} << 40, float64),
        doctest::Contains("overflow a 64-bit byte size"), ValueError);
    CHECK_THROWS_WITH_AS(one_hot(batch10, std::int64_t{1} << 40),
                         doctest::Contains("one_hot: allocation of 4503599627370496 bytes"),
                         MemoryError);
    CHECK(memory_stats().alloc_count == allocs);
  }

  // ------------------------------------------------------------ pad
  TEST_CASE("pad: values as torch.nn.functional.pad") {
    const Tensor v = tensor({1.f, 2.f, 3.f, 4.f});
    CHECK(pad(v, {2, 3}, "reflect").to_vector<float>() ==
          std::vector<float>{3, 2, 1, 2, 3, 4, 3, 2, 1});
    CHECK(pad(v, {2, 1}, "replicate").to_vector<float>() ==
          std::vector<float>{1, 1, 1, 2, 3, 4, 4});
    CHECK(pad(v, {-1, 2}, "constant", 9).to_vector<float>() == std::vector<float>{2, 3, 4, 9, 9});
    CHECK(pad(v, {1, 1}).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4, 0});
    const Tensor m = tensor({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}});
    CHECK(pad(m, {1, 1, 1, 1}, "reflect").to_vector<float>() ==
          std::vector<float>{5, 4, 5, 6, 5, 2, 1, 2, 3, 2, 5, 4, 5, 6, 5, 2, 1, 2, 3, 2});
    CHECK(pad(m, {0, 0, 1, 0}, "constant", -1).to_vector<float>() ==
          std::vector<float>{-1, -1, -1, 1, 2, 3, 4, 5, 6});
    CHECK(pad(m, {0, 0, -2, 0}).shape() == Shape{0, 3});
    CHECK(pad(tensor({1, 2}, int32), {1, 0}, "constant", 7.9).to_vector<std::int32_t>() ==
          std::vector<std::int32_t>{7, 1, 2});  // converted like a cast
    CHECK(pad(tensor(5.0), {}).item<double>() == 5.0);
    CHECK(pad(zeros({0, 2}), {1, 1}).shape() == Shape{0, 4});
    CHECK(pad(zeros({0, 2}), {0, 0, 1, 2}, "constant", 3).to_vector<float>() ==
          std::vector<float>(6, 3.f));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const auto nv = pad(tensor({nan}, float64), {1, 1}, "constant", INFINITY).to_vector<double>();
    CHECK(nv[0] == INFINITY);
    CHECK(std::isnan(nv[1]));
    CHECK(std::isnan(pad(tensor({1.f}), {1, 0}, "constant", nan).to_vector<float>()[0]));
  }

  TEST_CASE_TEMPLATE("pad matches a naive loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    const char* modes[] = {"constant", "reflect", "replicate"};
    for (int trial = 0; trial < 30; ++trial) {
      const std::string mode = modes[trial % 3];
      const std::int64_t rank = rand_int(1, 3);
      const Shape s = rand_shape(rank, mode == "constant" ? 0 : 1, 5);
      const Tensor x = make_input(s, dt, static_cast<int>(rand_int(0, 2)));
      Dims pads;
      const std::int64_t pairs = rand_int(0, rank);
      for (std::int64_t k = 0; k < pairs; ++k) {
        const std::int64_t n = s[static_cast<std::size_t>(rank - 1 - k)];
        std::int64_t l = 0, r = 0;
        do {
          const std::int64_t hi = mode == "reflect" ? n - 1 : 4;
          l = rand_int(-n, hi);
          r = rand_int(-n, hi);
        } while (n + l + r < 0);
        pads.push_back(l);
        pads.push_back(r);
      }
      const double value = dt == bool_ ? 1.0 : 3.0;
      Shape os;
      const auto ref = pad_ref(x, pads, mode, value, os);
      const Tensor out = pad(x, pads, mode, value);
      REQUIRE(out.shape() == os);
      CHECK(out.dtype() == dt);
      CHECK(vals(out) == ref);
    }
  }

  TEST_CASE("pad: threads") {
    const Tensor x = make_input({64, 60, 50}, float32, 1);
    check_thread_invariant([&] { return pad(x, {3, 4, -2, 5}, "constant", 1.5); });
    check_thread_invariant([&] { return pad(x, {3, 4, 2, 5, 1, 1}, "reflect"); });
    check_thread_invariant([&] { return pad(x, {30, 4}, "replicate"); });
  }

  TEST_CASE("pad: errors") {
    const Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(pad(x, {1, 1, 1}),
                         doctest::Contains("pairs, got an odd number of values [1, 1, 1]"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        pad(x, {1, 1, 1, 1, 1, 1}),
        doctest::Contains("has 3 (left, right) pairs but x of shape [2, 3] has only "
                          "2 axes"),
        ValueError);
    CHECK_THROWS_WITH_AS(pad(tensor(1.0), {0, 0}), doctest::Contains("has only 0 axes"),
                         ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {1, 1}, "circular"),
                         doctest::Contains("mode must be \"constant\", \"reflect\" or "
                                           "\"replicate\", got \"circular\""),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        pad(x, {-4, 2}),
        doctest::Contains("pads (-4, 2) on axis -1 of size 3 crop more than the axis "
                          "holds"),
        ValueError);
    CHECK_THROWS_WITH_AS(
        pad(x, {0, 0, -2, -1}),
        doctest::Contains("axis -2 of size 2 with pads (-2, -1) gives the negative "
                          "size -1"),
        ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {kMin, 0}), doctest::Contains("crop more"), ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {kMin, kMin}), doctest::Contains("crop more"), ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {kMax, kMax}), doctest::Contains("overflows int64"), ValueError);
    const std::int64_t p62 = std::int64_t{1} << 62;
    CHECK_THROWS_WITH_AS(pad(x, {p62, p62}),
                         doctest::Contains("axis -1 of size 3 with pads (4611686018427387904, "
                                           "4611686018427387904) overflows int64"),
                         ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {p62, 0}), doctest::Contains("more than 2^63-1"), ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2}), {p62, 0}), doctest::Contains("overflow a 64-bit byte"),
                         ValueError);
    const Tensor col = zeros({1, 1}).expand({1024, 1});  // pads near 2^31 on 1024 rows
    const auto allocs = memory_stats().alloc_count;
    CHECK_THROWS_WITH_AS(pad(x, {std::int64_t{1} << 40, 0}),
                         doctest::Contains("pad: allocation of"), MemoryError);
    CHECK_THROWS_WITH_AS(pad(col, {(std::int64_t{1} << 31) - 1, 1}),
                         doctest::Contains("pad: allocation of 8796093026304 bytes"), MemoryError);
    CHECK(memory_stats().alloc_count == allocs);
    CHECK_THROWS_WITH_AS(
        pad(x, {3, 0}, "reflect"),
        doctest::Contains("reflect pads (3, 0) on axis -1 must be smaller than its "
                          "size 3"),
        ValueError);
    CHECK_THROWS_WITH_AS(pad(x, {0, 0, 0, 2}, "reflect"), doctest::Contains("axis -2"), ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2, 0}), {1, 0}, "replicate"),
                         doctest::Contains("no edge to repeat"), ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2, 0}), {1, 0}, "reflect"), doctest::Contains("smaller than"),
                         ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2}, int8), {1, 1}, "constant", 300),
                         doctest::Contains("value 300 does not fit dtype Int8"), ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2}, uint8), {1, 1}, "constant", -1),
                         doctest::Contains("does not fit dtype UInt8"), ValueError);
    CHECK_THROWS_WITH_AS(pad(zeros({2}, int64), {1, 1}, "constant", 1e19),
                         doctest::Contains("does not fit dtype Int64"), ValueError);
    CHECK_THROWS_WITH_AS(
        pad(zeros({2}, int32), {1, 1}, "constant", std::numeric_limits<double>::quiet_NaN()),
        doctest::Contains("does not fit dtype Int32"), ValueError);
    CHECK(pad(zeros({2}, uint8), {1, 0}, "constant", 255).to_vector<double>()[0] == 255);
    CHECK(pad(zeros({2}, int8), {1, 0}, "constant", -128.5).to_vector<double>()[0] == -128);
    CHECK_THROWS_WITH_AS(pad(zeros({2}, int4), {1, 1}), doctest::Contains("Int4"), TypeError);
  }

  // ------------------------------------------------------------ cast
  TEST_CASE_TEMPLATE("cast matches element conversion", D, LAYOUT_DTYPES) {
    const DType src = D::value;
    const DType targets[] = {bool_,   int8,     int32,   int64,   uint8,
                             float16, bfloat16, float32, float64, complex64};
    for (int layout = 0; layout < 3; ++layout) {
      const Shape s = rand_shape(rand_int(0, 3), 0, 5);
      Tensor x = make_input(s, src, layout);
      if (dtype_is_signed_int(src) || dtype_is_float(src)) {
        // non-negative halves so that unsigned targets are defined; fractions for floats
        std::vector<double> v(static_cast<std::size_t>(x.numel()));
        for (auto& e : v)
          e = static_cast<double>(rand_int(0, 1600)) / (dtype_is_float(src) ? 16 : 64);
        x = from_vector(v, s).to(src);
      }
      const auto xv = vals(x);
      for (DType to : targets) {
        const Tensor out = cast(x, to);
        REQUIRE(out.shape() == s);
        CHECK(out.dtype() == to);
        std::vector<double> ref;
        for (double e : xv) ref.push_back(through(e, to));
        CHECK(vals(out) == ref);
      }
    }
  }

  TEST_CASE("cast: conversions, aliasing, int4, threads, errors") {
    CHECK(cast(tensor({-2.7f, 2.7f, -0.2f}), int32).to_vector<std::int32_t>() ==
          std::vector<std::int32_t>{-2, 2, 0});
    CHECK(cast(tensor({0.0, -0.5, 2.0}), bool_).to_vector<bool>() ==
          std::vector<bool>{false, true, true});
    CHECK(cast(tensor({true, false}), float32).to_vector<float>() == std::vector<float>{1, 0});
    CHECK(cast(tensor({-3}, int64), uint8).to_vector<std::uint8_t>()[0] == 253);  // wraps like C
    const Tensor z = tensor({Scalar(std::complex<double>(1.5, -2.0))});
    CHECK(cast(z, float64).item<double>() == 1.5);
    CHECK(cast(tensor({65504.f * 2}), float16).to_vector<float>()[0] == INFINITY);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    CHECK(std::isnan(cast(tensor({nan}, float64), float16).to_vector<float>()[0]));
    const Tensor x = rand_tensor({3, 4}, float32);
    CHECK(cast(x, float32).is_same(x));  // already that dtype and dense: x itself
    const Tensor xt = x.transpose(0, 1);
    const Tensor ct = cast(xt, float32);
    CHECK(ct.is_contiguous());
    CHECK(vals(ct) == vals(xt));
    const Tensor i4 = cast(tensor({-8, 7, 3, 0, -1}), int4);
    CHECK(i4.dtype() == int4);
    CHECK(cast(i4, int32).to_vector<std::int32_t>() == std::vector<std::int32_t>{-8, 7, 3, 0, -1});
    CHECK(cast(tensor(2.5), int64).item<std::int64_t>() == 2);
    CHECK(cast(zeros({0, 3}), float16).shape() == Shape{0, 3});
    const Tensor big = make_input({500, 400}, float64, 2);
    check_thread_invariant([&] { return cast(big, float16); });
    check_thread_invariant([&] { return cast(big.contiguous(), int32); });
    check_thread_invariant([&] { return cast(big, bool_); });
    CHECK_THROWS_WITH_AS(cast(Tensor(), float32), doctest::Contains("undefined"), ValueError);
    CHECK_THROWS_WITH_AS(
        cast(zeros({1}, int8).expand({std::int64_t{1} << 61}), float64),
        doctest::Contains("cast: 2305843009213693952 elements of 8 bytes overflow"), ValueError);
    const auto allocs = memory_stats().alloc_count;
    CHECK_THROWS_WITH_AS(cast(zeros({1}, int8).expand({std::int64_t{1} << 40}), float32),
                         doctest::Contains("cast: allocation of"), MemoryError);
    CHECK(memory_stats().alloc_count == allocs + 1);  // zeros({1}) only
  }

  // ------------------------------------------------------------ triu, tril
  TEST_CASE_TEMPLATE("triu and tril match a naive double loop", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    const Shape s{2, 3, 5, 4};
    for (int layout = 0; layout < 3; ++layout) {  // dense, sliced, permuted
      CAPTURE(layout);
      const Tensor x = make_input(s, dt, layout);
      const auto xv = vals(x);
      for (std::int64_t k = -2; k <= 2; ++k) {
        CAPTURE(k);
        const Tensor up = triu(x, {.diagonal = k}), low = tril(x, {.diagonal = k});
        REQUIRE(up.shape() == s);
        REQUIRE(low.shape() == s);
        CHECK(up.dtype() == dt);
        CHECK(low.dtype() == dt);
        std::vector<double> want_up(xv.size(), 0.0), want_low(xv.size(), 0.0);
        for (std::int64_t b = 0; b < 2 * 3; ++b)
          for (std::int64_t i = 0; i < 5; ++i)
            for (std::int64_t j = 0; j < 4; ++j) {
              const auto f = static_cast<std::size_t>((b * 5 + i) * 4 + j);
              if (j - i >= k) want_up[f] = xv[f];
              if (j - i <= k) want_low[f] = xv[f];
            }
        CHECK(vals(up) == want_up);
        CHECK(vals(low) == want_low);
      }
    }
  }

  TEST_CASE("triu, tril: beyond the matrix, a causal mask, empty, threads, errors") {
    const Tensor x = rand_tensor({3, 2, 4}, float32);
    CHECK(vals(triu(x, {.diagonal = -3})) == vals(x));
    CHECK(vals(tril(x, {.diagonal = 4})) == vals(x));
    CHECK(vals(triu(x, {.diagonal = kMax})) == vals(zeros({3, 2, 4})));
    CHECK(vals(tril(x, {.diagonal = kMin})) == vals(zeros({3, 2, 4})));
    CHECK(vals(triu(x, {.diagonal = kMin})) == vals(x));
    CHECK(tril(ones({3, 3}, bool_)).to_vector<bool>() ==
          std::vector<bool>{true, false, false, true, true, false, true, true, true});
    CHECK(triu(zeros({0, 3})).shape() == Shape{0, 3});
    CHECK(tril(zeros({2, 3, 0}, int8)).shape() == Shape{2, 3, 0});
    const Tensor big = make_input({8, 300, 200}, float64, 2);
    check_thread_invariant([&] { return triu(big, {.diagonal = 7}); });
    check_thread_invariant([&] { return tril(big.contiguous(), {.diagonal = -30}); });
    CHECK_THROWS_WITH_AS(triu(zeros({4})),
                         doctest::Contains("triu: x must have rank >= 2 (matrices in its last two "
                                           "axes), got shape [4] of rank 1"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(tril(tensor(1.0)), doctest::Contains("tril: x must have rank >= 2"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(tril(zeros({2, 2}, int4)), doctest::Contains("tril: x has dtype Int4"),
                         TypeError);
  }

  // ------------------------------------------------------------ masked_fill
  TEST_CASE_TEMPLATE("masked_fill matches a naive loop with a broadcast mask", D, LAYOUT_DTYPES) {
    const DType dt = D::value;
    const Shape s{2, 3, 5, 4};
    const double value = dt == bool_ ? 1 : dtype_is_unsigned_int(dt) ? 7 : -2.5;
    const Shape masks[] = {{2, 3, 5, 4}, {5, 1}, {3, 1, 4}, {4}, {2, 1, 1, 1}, {}};
    for (int layout = 0; layout < 3; ++layout) {
      CAPTURE(layout);
      const Tensor x = make_input(s, dt, layout);
      const auto xv = vals(x);
      for (const Shape& msh : masks) {
        CAPTURE(msh);
        const Tensor mask = make_input(msh, bool_, 2 - layout);
        const auto mv = vals(mask);
        const Tensor out = masked_fill(x, mask, value);
        REQUIRE(out.shape() == s);
        CHECK(out.dtype() == dt);
        const std::size_t lead = s.size() - msh.size();
        std::vector<double> want(xv.size());
        for (std::int64_t f = 0; f < shape_numel(s); ++f) {
          const Dims c = unravel(f, s);
          Dims mc(c.begin() + static_cast<std::ptrdiff_t>(lead), c.end());
          for (std::size_t d = 0; d < mc.size(); ++d)
            if (msh[d] == 1) mc[d] = 0;
          const bool hit = mv[static_cast<std::size_t>(ravel(mc, msh))] != 0;
          want[static_cast<std::size_t>(f)] =
              hit ? through(value, dt) : xv[static_cast<std::size_t>(f)];
        }
        CHECK(vals(out) == want);
      }
    }
  }

  TEST_CASE("masked_fill: values, rank 0, empty, threads, errors") {
    const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}});
    const double inf = std::numeric_limits<double>::infinity();
    CHECK(vals(masked_fill(x, tensor({true, false}), -inf)) ==
          std::vector<double>{-inf, 2.0, -inf, 4.0});
    CHECK(
        masked_fill(tensor({5, 6}, int8), tensor({false, true}), -128.9).to_vector<std::int8_t>() ==
        std::vector<std::int8_t>{5, -128});
    CHECK(masked_fill(tensor(2.0), tensor(true), 9).item<double>() == 9);
    CHECK(masked_fill(zeros({0, 3}), zeros({3}, bool_), 1).shape() == Shape{0, 3});
    const Tensor big = make_input({600, 300}, float32, 1);
    const Tensor mask = make_input({300}, bool_, 0);
    check_thread_invariant([&] { return masked_fill(big, mask, 3); });
    check_thread_invariant([&] { return masked_fill(big.contiguous(), mask, 3); });
    CHECK_THROWS_WITH_AS(masked_fill(x, zeros({2}, int32), 0),
                         doctest::Contains("masked_fill: mask must have dtype Bool, got Int32"),
                         TypeError);
    CHECK_THROWS_WITH_AS(masked_fill(x, zeros({3}, bool_), 0),
                         doctest::Contains("masked_fill: mask of shape [3] does not broadcast to "
                                           "x's shape [2, 2]: axis -1 has size 3 in mask and 2 "
                                           "in x (expected 2 or 1)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(masked_fill(zeros({1, 2}), zeros({3, 2}, bool_), 0),
                         doctest::Contains("x is not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(masked_fill(zeros({2}), zeros({1, 2}, bool_), 0),
                         doctest::Contains("mask of shape [1, 2] has rank 2, more than x"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(masked_fill(zeros({2}, uint8), zeros({2}, bool_), -1),
                         doctest::Contains("masked_fill: value -1 does not fit dtype UInt8"),
                         ValueError);
    CHECK_THROWS_WITH_AS(masked_fill(zeros({2}, int4), zeros({2}, bool_), 0),
                         doctest::Contains("masked_fill: x has dtype Int4"), TypeError);
  }
}
