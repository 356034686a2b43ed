// Table-driven tests of every elementwise op of the op table: values against
// the op's double-precision reference, dtypes, broadcasting, non-contiguous
// inputs, empty and rank-0 tensors, NaN propagation, thread-count
// independence, and bad inputs. A new elementwise op needs no new test: its
// struct's domain (ops::Domain) says where its operands are drawn.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <ms/ms.hpp>
#include <random>

#include "random.hpp"
#include "thread_guard.hpp"

using namespace ms;

namespace {

template <class Op>
double ref_apply(const std::vector<double>& a, std::size_t i, const std::vector<double>* b,
                 const std::vector<double>* c) {
  if constexpr (Op::arity == 1)
    return Op::ref(a[i]);
  else if constexpr (Op::arity == 2)
    return Op::ref(a[i], (*b)[i]);
  else
    return Op::ref(a[i], (*b)[i], (*c)[i]);
}

// Checks `out` against Op::ref over the (broadcast) inputs: every element is
// compared; one assertion per tensor reports how many differ and the first.
template <class Op>
void check_against_ref(const std::vector<Tensor>& in, const Tensor& out, double rtol, double atol) {
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : in) vals.push_back(t.expand(out.shape()).to_vector<double>());
  const auto got = out.to_vector<double>();
  std::size_t wrong = 0, first = 0;
  double first_want = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    double want = ref_apply<Op>(vals[0], i, vals.size() > 1 ? &vals[1] : nullptr,
                                vals.size() > 2 ? &vals[2] : nullptr);
    if (dtype_is_int(out.dtype())) want = std::trunc(want);
    if (out.dtype() == bool_) want = want != 0;
    const bool ok = std::isnan(want)   ? std::isnan(got[i])
                    : std::isinf(want) ? got[i] == want
                                       : std::fabs(got[i] - want) <= atol + rtol * std::fabs(want);
    if (!ok && wrong++ == 0) {
      first = i;
      first_want = want;
    }
  }
  INFO(Op::name, " of ", out.shape(), " dtype ", out.dtype(), ": ", wrong, " elements differ; the ",
       "first, element ", first, ", is ", wrong > 0 ? got[first] : 0.0, " where the reference ",
       "gives ", first_want);
  CHECK(wrong == 0);
}

std::vector<DType> dtypes_for(ops::EwRule rule) {
  switch (rule) {
    case ops::EwRule::Float: return {float32, float64, float16, bfloat16, int32};
    case ops::EwRule::Logical: return {bool_, float32, int64};
    default: return {float32, float64, int32, int64, float16};
  }
}

// PyTorch's assert_close defaults per dtype.
double rtol_for(DType t) {
  return t == float16 ? 1e-3 : t == bfloat16 ? 1.6e-2 : t == float64 ? 1e-7 : 1.3e-6;
}
double atol_for(DType t) { return t == float64 ? 1e-7 : 1e-5; }

template <class Op>
void check_op() {
  const ops::OpDef& def = ops::op(Op::name);
  CHECK(def.kind == ops::OpKind::Elementwise);
  CHECK(def.min_inputs == Op::arity);
  std::mt19937 rng(1234);
  const std::vector<Shape> shapes[] = {
      {Shape{4, 5}, Shape{4, 5}, Shape{4, 5}},     // same shape
      {Shape{3, 1, 5}, Shape{4, 1}, Shape{5}},     // broadcasting
      {Shape{}, Shape{}, Shape{}},                 // rank 0
      {Shape{0, 3}, Shape{3}, Shape{1}},           // empty
      {Shape{70000}, Shape{70000}, Shape{70000}},  // several chunks and tiles
  };
  for (DType dt : dtypes_for(Op::rule)) {
    for (const auto& sh : shapes) {
      std::vector<Tensor> in;
      for (int k = 0; k < Op::arity; ++k) {
        const DType t = (Op::rule == ops::EwRule::Select && k == 0) ? bool_ : dt;
        in.push_back(test::random_tensor(t, sh[static_cast<std::size_t>(k)],
                                         test::range_of(ops::ew_domain<Op>(k)), rng()));
      }
      const Tensor out = ops::call1(def, in);
      const auto types = def.infer(ops::types_of(in), {});
      CHECK(out.dtype() == types[0].dtype);
      CHECK(out.shape() == types[0].shape);
      const DType cmp = out.dtype() == bool_ ? dt : out.dtype();
      check_against_ref<Op>(in, out, rtol_for(cmp), atol_for(cmp));
    }
  }
}

template <class... Ops>
void check_all(ops::OpList<Ops...>) {
  (check_op<Ops>(), ...);
}

template <class Op>
void check_noncontiguous() {
  std::mt19937 rng(99);
  std::vector<Tensor> in, dense;
  for (int k = 0; k < Op::arity; ++k) {
    const DType t = (Op::rule == ops::EwRule::Select && k == 0) ? bool_ : float32;
    // a transposed slice: non-contiguous with a negative-free odd stride
    Tensor base =
        test::random_tensor(t, Shape{9, 12}, test::range_of(ops::ew_domain<Op>(k)), rng());
    in.push_back(base.slice(0, 1, 9, 2).transpose(0, 1));
    dense.push_back(in.back().contiguous());
  }
  const ops::OpDef& def = ops::op(Op::name);
  CHECK(allclose(ops::call1(def, in), ops::call1(def, dense), 0, 0, true));
}

template <class... Ops>
void check_all_noncontiguous(ops::OpList<Ops...>) {
  (check_noncontiguous<Ops>(), ...);
}

template <class Op>
void check_nan() {
  if constexpr (Op::rule == ops::EwRule::Same || Op::rule == ops::EwRule::Float) {
    std::vector<Tensor> in;
    for (int k = 0; k < Op::arity; ++k)
      in.push_back(tensor({NAN, 1.0, INFINITY, -INFINITY}, float32));
    const Tensor out = ops::call1(ops::op(Op::name), in);
    check_against_ref<Op>(in, out, rtol_for(float32), atol_for(float32));
  }
}

template <class... Ops>
void check_all_nan(ops::OpList<Ops...>) {
  (check_nan<Ops>(), ...);
}

}  // namespace

TEST_SUITE("ops") {
  TEST_CASE("exp of float64 below the normal range is 0 on the vectorized path, and of -inf") {
    const double xs[] = {-INFINITY, -1e300, -746.0, -709.8, -700.0, 0.0, 1.0, NAN};
    for (std::int64_t n : {4, 16, 1000}) {  // the scalar tail and the vector body
      CAPTURE(n);
      for (double v : xs) {
        CAPTURE(v);
        const auto y =
            ms::Tensor(ms::exp(ms::full({n}, v, ms::float64))).contiguous().to_vector<double>();
        const double want = v < -709.78 ? 0.0 : std::exp(v);
        for (double e : y) {
          if (std::isnan(v))
            CHECK(std::isnan(e));
          else if (want == 0)
            CHECK(e == 0.0);  // exactly: Approx would accept the 5.6e-309 of a clamped exp
          else
            CHECK(e == doctest::Approx(want).epsilon(1e-15));
        }
      }
    }
  }

  TEST_CASE("every elementwise op matches its reference (dtypes, broadcasting, empty, rank 0)") {
    check_all(ops::ElementwiseOps{});
  }

  TEST_CASE("every elementwise op gives the same result on non-contiguous inputs") {
    check_all_noncontiguous(ops::ElementwiseOps{});
  }

  TEST_CASE("NaN and Inf propagate as the references say") { check_all_nan(ops::ElementwiseOps{}); }

  TEST_CASE("every elementwise op of the table is registered with its arity") {
    int n = 0;
    for (const ops::OpDef* d : ops::registry())
      if (d->kind == ops::OpKind::Elementwise) {
        ++n;
        const int id = ops::ew_op_find(d->name);
        REQUIRE(id >= 0);
        CHECK(ops::ew_op_info(id).arity == d->min_inputs);
      }
    CHECK(n == ops::ElementwiseOps::size);
  }

  TEST_CASE("results are bitwise identical with 1 and 2 threads") {
    std::mt19937 rng(7);
    const Tensor a = test::random_tensor(float32, Shape{300001}, {-2, 2}, rng());
    const Tensor b = test::random_tensor(float32, Shape{300001}, {-2, 2}, rng());
    // Chunks of 2 threads start inside a tile unless cut at tile boundaries:
    // exp's scalar and SIMD code round differently (exp alone differed in
    // ~420 elements when they were not).
    const std::function<Tensor()> fns[] = {[&] { return Tensor(ms::exp(a - b)); },
                                           [&] { return Tensor(ms::sin(a)); },
                                           [&] { return Tensor(ms::gelu(a) * ms::tanh(b)); }};
    for (const auto& f : fns) test::check_thread_invariant(f);
  }

  TEST_CASE("identities on random shapes") {
    std::mt19937 rng(42);
    for (int trial = 0; trial < 20; ++trial) {
      Shape s;
      const int rank = static_cast<int>(rng() % 4);
      for (int d = 0; d < rank; ++d) s.push_back(1 + static_cast<std::int64_t>(rng() % 7));
      const Tensor a = test::random_tensor(float64, s, {-2, 2}, rng());
      const Tensor b = test::random_tensor(float64, s, {-2, 2}, rng());
      CHECK(allclose(ms::exp(a) * ms::exp(b), ms::exp(a + b), 1e-12, 1e-12));
      CHECK(allclose(ms::sigmoid(a), 1.0 / (1.0 + ms::exp(-a)), 1e-12, 1e-14));
      CHECK(allclose(ms::tanh(a), 2.0 * ms::sigmoid(2.0 * a) - 1.0, 1e-12, 1e-14));
      CHECK(allclose(ms::silu(a), a * ms::sigmoid(a), 1e-12, 1e-14));
      CHECK(allclose(ms::square(ms::sin(a)) + ms::square(ms::cos(a)), ones(s, float64), 1e-12));
      CHECK(allclose(ms::maximum(a, b) + ms::minimum(a, b), a + b, 1e-12, 1e-14));
      CHECK(allclose(ms::clamp(a, -1.0, 1.0), ms::minimum(ms::maximum(a, -1.0), 1.0), 0, 0));
      CHECK(allclose(ms::where(a > b, a, b), ms::maximum(a, b), 0, 0));
    }
  }

  // NumPy: -INT64_MIN and abs(INT64_MIN) are INT64_MIN (two's complement
  // wraps). In C++ they overflow (undefined); ms wraps by construction (the
  // sanitizer build runs this test under UBSan).
  TEST_CASE("neg and abs of the smallest integer wrap to itself, as NumPy's") {
    constexpr std::int64_t lo = std::numeric_limits<std::int64_t>::min();
    constexpr std::int64_t hi = std::numeric_limits<std::int64_t>::max();
    const Tensor x = from_vector(std::vector<std::int64_t>{lo, lo + 1, -1, 0, 1, hi});
    CHECK(Tensor(ms::neg(x)).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{lo, hi, 1, 0, -1, lo + 1});
    CHECK(Tensor(-x).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{lo, hi, 1, 0, -1, lo + 1});
    CHECK(Tensor(ms::abs(x)).to_vector<std::int64_t>() ==
          std::vector<std::int64_t>{lo, hi, 1, 0, 1, hi});
    constexpr std::int32_t lo32 = std::numeric_limits<std::int32_t>::min();
    const Tensor y = from_vector(std::vector<std::int32_t>{lo32, -7, 7});
    CHECK(Tensor(ms::neg(y)).to_vector<std::int32_t>() == std::vector<std::int32_t>{lo32, 7, -7});
    CHECK(Tensor(ms::abs(y)).to_vector<std::int32_t>() == std::vector<std::int32_t>{lo32, 7, 7});
    // Compiled: the same kernel.
    auto f = ms::jit([](const Tensor& a) { return Tensor(ms::abs(ms::neg(a))); });
    CHECK(f(x).to_vector<std::int64_t>() == std::vector<std::int64_t>{lo, hi, 1, 0, 1, hi});
  }

  TEST_CASE("bad inputs") {
    const Tensor a = zeros({32, 128, 64}), b = zeros({32, 64, 128});
    CHECK_THROWS_WITH_AS(Tensor(a + b), doctest::Contains("axis -1: 64 vs 128 (neither is 1)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(Tensor(a + b), doctest::Contains("add: shapes do not broadcast"),
                         ShapeError);
    const Tensor c = zeros({2}, complex64);
    CHECK_THROWS_WITH_AS(Tensor(ms::exp(c)), doctest::Contains("dtype Complex64 is not supported"),
                         TypeError);
    const Tensor q = zeros({4}, int4);
    CHECK_THROWS_AS(Tensor(q + 1), TypeError);
    CHECK_THROWS_WITH_AS(Tensor(Tensor() + 1.f), doctest::Contains("undefined tensor"), ValueError);
    CHECK_THROWS_WITH_AS(ops::call(ops::op("add"), std::vector<Tensor>{a}),
                         doctest::Contains("add: takes 2 inputs, got 1"), ValueError);
    CHECK_THROWS_AS(
        ops::op("where").infer(
            std::vector<ops::TensorType>{{bool_, {3}}, {float32, {4}}, {float32, {3}}}, {}),
        ShapeError);
    // relu_grad: shapes, dtype, input count
    CHECK_THROWS_WITH_AS(Tensor(ms::relu_grad(zeros({3, 4}), zeros({5}))),
                         doctest::Contains("relu_grad: shapes do not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(Tensor(ms::relu_grad(zeros({2}, complex64), zeros({2}, complex64))),
                         doctest::Contains("dtype Complex64 is not supported"), TypeError);
    CHECK_THROWS_WITH_AS(ops::call(ops::op("relu_grad"), std::vector<Tensor>{a}),
                         doctest::Contains("relu_grad: takes 2 inputs, got 1"), ValueError);
    // gelu_grad, gelu_tanh_grad: shapes, dtype, input count
    CHECK_THROWS_WITH_AS(Tensor(ms::gelu_grad(zeros({3, 4}), zeros({5}))),
                         doctest::Contains("gelu_grad: shapes do not broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(Tensor(ms::gelu_tanh_grad(zeros({2}, complex64), zeros({2}, complex64))),
                         doctest::Contains("dtype Complex64 is not supported"), TypeError);
    CHECK_THROWS_WITH_AS(ops::call(ops::op("gelu_tanh_grad"), std::vector<Tensor>{a}),
                         doctest::Contains("gelu_tanh_grad: takes 2 inputs, got 1"), ValueError);
    Tensor dst = zeros({2, 3});
    CHECK_THROWS_WITH_AS(assign(dst, zeros({4, 2, 3})),
                         doctest::Contains("cannot be written into a tensor of shape [2, 3]"),
                         ShapeError);
  }
}
