// Collectives against hand-computed values: every dtype and op, odd and empty
// sizes, eagerly and under ms::jit; mismatched calls are errors on every rank.
// Runs as 1 process and under mpirun with 2 and 3 ranks (tests/parallel/meson.build).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <ms/cell.hpp>
#include <ms/parallel/collective.hpp>
#include <vector>

namespace {

using ms::parallel::ReduceOp;

// Rank r's element i: a small integer, exact in every dtype (int8 and the half types too).
double value(int r, std::int64_t i) { return static_cast<double>((i * 7 + 3 * r) % 11 + r); }

std::vector<double> values(int r, std::int64_t n) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = value(r, i);
  return v;
}

ms::Tensor make(int r, const ms::Shape& shape, ms::DType dtype) {
  return ms::from_vector(values(r, ms::shape_numel(shape)), shape).to(dtype);
}

std::vector<double> doubles(const ms::Tensor& t) {
  if (ms::dtype_is_complex(t.dtype())) {
    std::vector<double> out;
    for (auto c : t.to_vector<std::complex<double>>()) {
      CHECK(c.imag() == 0.0);
      out.push_back(c.real());
    }
    return out;
  }
  return t.to_vector<double>();
}

// The reduction of every rank's value at i, computed without MPI.
double expected(ReduceOp op, std::int64_t i, int p) {
  double sum = 0, mx = value(0, i);
  for (int r = 0; r < p; ++r) {
    sum += value(r, i);
    mx = std::max(mx, value(r, i));
  }
  return op == ReduceOp::Max ? mx : op == ReduceOp::Sum ? sum : sum / p;
}

double tolerance(ms::DType t) {
  return t == ms::float16                         ? 2e-3
         : t == ms::bfloat16                      ? 1e-2
         : t == ms::float32 || t == ms::complex64 ? 1e-6
                                                  : 1e-12;
}

const std::vector<ms::DType> kNumeric = {
    ms::int8,   ms::int16,   ms::int32,    ms::int64,   ms::uint8,   ms::uint16,    ms::uint32,
    ms::uint64, ms::float16, ms::bfloat16, ms::float32, ms::float64, ms::complex64, ms::complex128};

bool op_applies(ReduceOp op, ms::DType t) {
  if (op == ReduceOp::Max) return !ms::dtype_is_complex(t);
  if (op == ReduceOp::Mean) return ms::dtype_is_float(t) || ms::dtype_is_complex(t);
  return true;
}

std::string name_of(ReduceOp op) {
  return op == ReduceOp::Sum ? "sum" : op == ReduceOp::Mean ? "mean" : "max";
}

}  // namespace

TEST_SUITE("parallel") {
  TEST_CASE("all_reduce: sum, mean and max of every dtype, odd and empty sizes") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    for (ms::DType t : kNumeric)
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
        if (!op_applies(op, t)) continue;
        for (std::int64_t n : {0, 1, 7, 1001}) {
          CAPTURE(t);
          CAPTURE(name_of(op));
          CAPTURE(n);
          const ms::Tensor x = make(r, {n}, t);
          const ms::Tensor y = ms::parallel::all_reduce(x, op);
          CHECK(y.dtype() == t);
          CHECK(y.shape() == x.shape());
          const std::vector<double> got = doubles(y);
          for (std::int64_t i = 0; i < n; ++i)
            CHECK(std::abs(got[static_cast<std::size_t>(i)] - expected(op, i, p)) <=
                  tolerance(t) * std::max(1.0, expected(op, i, p)));
          // The input is left as it was.
          CHECK(doubles(x) == values(r, n));
        }
      }
  }

  TEST_CASE("all_reduce: a 2-d view and a 0-d tensor") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    const ms::Tensor x = make(r, {3, 5}, ms::float32).transpose(0, 1);  // not contiguous
    const std::vector<double> got = doubles(ms::parallel::all_reduce(x));
    const std::vector<double> xs = doubles(x);
    for (std::size_t i = 0; i < got.size(); ++i) {
      // x's element (a, b) is rank r's element b * 5 + a of the [3, 5] tensor.
      const auto a = static_cast<std::int64_t>(i) / 3, b = static_cast<std::int64_t>(i) % 3;
      CHECK(got[i] == expected(ReduceOp::Sum, b * 5 + a, p));
    }
    const ms::Tensor s = ms::parallel::all_reduce(ms::full({}, r + 1, ms::int64), ReduceOp::Max);
    CHECK(s.rank() == 0);
    CHECK(s.item<std::int64_t>() == p);
  }

  TEST_CASE("broadcast: every dtype, every root") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    std::vector<ms::DType> types = kNumeric;
    types.push_back(ms::bool_);
    for (ms::DType t : types)
      for (int root = 0; root < p; ++root)
        for (std::int64_t n : {0, 1, 9}) {
          CAPTURE(t);
          CAPTURE(root);
          const ms::Tensor y = ms::parallel::broadcast(make(r, {n}, t), root);
          CHECK(y.dtype() == t);
          CHECK(doubles(y) == doubles(make(root, {n}, t)));
        }
    const std::string msg = "root " + std::to_string(p) + " is not a rank";
    CHECK_THROWS_WITH_AS(ms::parallel::broadcast(ms::ones({2}), p), doctest::Contains(msg.c_str()),
                         ms::IndexError);
  }

  TEST_CASE("all_gather: blocks in rank order; 0-d and empty tensors") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    for (ms::DType t : {ms::int8, ms::uint64, ms::float16, ms::bfloat16, ms::float32, ms::float64,
                        ms::complex128, ms::bool_})
      for (std::int64_t n : {0, 1, 5}) {
        CAPTURE(t);
        CAPTURE(n);
        const ms::Tensor y = ms::parallel::all_gather(make(r, {n, 3}, t));
        CHECK(y.shape() == ms::Shape({p * n, 3}));
        std::vector<double> want;
        for (int q = 0; q < p; ++q) {
          const std::vector<double> b = doubles(make(q, {n, 3}, t));
          want.insert(want.end(), b.begin(), b.end());
        }
        CHECK(doubles(y) == want);
      }
    const ms::Tensor s = ms::parallel::all_gather(ms::full({}, r * 10, ms::int32));
    CHECK(s.shape() == ms::Shape({p}));
    for (int q = 0; q < p; ++q) CHECK(s.to_vector<int>()[static_cast<std::size_t>(q)] == q * 10);
  }

  TEST_CASE("reduce_scatter: rank r gets block r of the reduction") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    for (ms::DType t : {ms::int16, ms::uint32, ms::float16, ms::bfloat16, ms::float32, ms::float64,
                        ms::complex64})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
        if (!op_applies(op, t)) continue;
        for (std::int64_t k : {0, 1, 3}) {
          CAPTURE(t);
          CAPTURE(name_of(op));
          CAPTURE(k);
          const ms::Tensor y = ms::parallel::reduce_scatter(make(r, {p * k, 2}, t), op);
          CHECK(y.shape() == ms::Shape({k, 2}));
          const std::vector<double> got = doubles(y);
          for (std::int64_t i = 0; i < 2 * k; ++i) {
            const double want = expected(op, r * 2 * k + i, p);
            CHECK(std::abs(got[static_cast<std::size_t>(i)] - want) <=
                  tolerance(t) * std::max(1.0, want));
          }
        }
      }
    const std::string msg = "must split into " + std::to_string(p) + " equal blocks";
    if (p > 1)
      CHECK_THROWS_WITH_AS(ms::parallel::reduce_scatter(ms::ones({p + 1})),
                           doctest::Contains(msg.c_str()), ms::ShapeError);
  }

  TEST_CASE("collectives inside a compiled graph run each time the graph runs") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    auto f = ms::jit([](const ms::Tensor& x) {
      const ms::Tensor m = ms::parallel::all_reduce(ms::Tensor(x * 2.0f), ReduceOp::Mean);
      const ms::Tensor g = ms::parallel::all_gather(m);
      const ms::Tensor s = ms::parallel::reduce_scatter(g, ReduceOp::Sum);
      return ms::Tensor(ms::parallel::broadcast(s, 0) + 1.0f);
    });
    for (int call = 0; call < 2; ++call) {
      const ms::Tensor x = ms::full({4}, static_cast<double>(r + call), ms::float32);
      // mean over ranks of 2 (q + call) = (p - 1) + 2 call; gathered p times, the block
      // summed over p ranks: p times that; plus 1.
      const double want = p * ((p - 1) + 2.0 * call) + 1.0;
      const ms::Tensor y = f(x);
      CHECK(y.shape() == ms::Shape({4}));
      for (double v : doubles(y)) CHECK(v == doctest::Approx(want));
    }
    CHECK(f.compile_count() == 1);
  }

  TEST_CASE("bad dtypes are TypeErrors on every rank count") {
    CHECK_THROWS_WITH_AS(ms::parallel::all_reduce(ms::ones({2}, ms::bool_)),
                         doctest::Contains("all_reduce: cannot reduce Bool tensors"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::all_reduce(ms::ones({2}, ms::complex64), ReduceOp::Max),
                         doctest::Contains("max of Complex64 tensors is undefined"), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::all_reduce(ms::ones({2}, ms::int32), ReduceOp::Mean),
                         doctest::Contains("mean of Int32 tensors would round"), ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::all_reduce(ms::zeros({4}, ms::int4)),
                         doctest::Contains("all_reduce: cannot reduce Int4 tensors"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::broadcast(ms::zeros({4}, ms::int4)),
                         doctest::Contains("broadcast: Int4 tensors are packed; cast first"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::all_gather(ms::zeros({4}, ms::int4)),
                         doctest::Contains("all_gather: Int4 tensors are packed; cast first"),
                         ms::TypeError);
    CHECK_THROWS_WITH_AS(ms::parallel::all_reduce(ms::Tensor()),
                         doctest::Contains("all_reduce: the tensor is undefined"), ms::ValueError);
  }

  TEST_CASE("mismatched calls across ranks are errors on every rank, not a hang") {
    const int p = ms::parallel::world_size(), r = ms::parallel::rank();
    if (p == 1) return;
    // Rank 1 passes one more element.
    CHECK_THROWS_WITH_AS(
        ms::parallel::all_reduce(ms::ones({r == 1 ? 4 : 3})),
        doctest::Contains("all_reduce: rank 1 passed Float32[4] but rank 0 "
                          "passed Float32[3]; every rank must pass the same shape"),
        ms::ShapeError);
    // Rank 1 passes another dtype.
    CHECK_THROWS_WITH_AS(
        ms::parallel::all_gather(ms::ones({2}, r == 1 ? ms::float64 : ms::float32)),
        doctest::Contains("rank 1 passed Float64[2] but rank 0 passed Float32[2]"), ms::TypeError);
    // Rank 1 names another root.
    CHECK_THROWS_WITH_AS(ms::parallel::broadcast(ms::ones({2}), r == 1 ? 1 : 0),
                         doctest::Contains("rank 1 gave root 1 but rank 0 gave root 0"),
                         ms::ValueError);
    // Rank 1 calls another collective.
    auto call = [&] {
      return r == 1 ? ms::parallel::broadcast(ms::ones({2}), 0)
                    : ms::parallel::all_reduce(ms::ones({2}));
    };
    CHECK_THROWS_WITH_AS(call(),
                         doctest::Contains("rank 1 called broadcast (op sum) while rank 0 called "
                                           "all_reduce (op sum)"),
                         ms::ValueError);
    // The communicator is still usable afterwards.
    CHECK(ms::parallel::all_reduce(ms::ones({2})).to_vector<float>() ==
          std::vector<float>{static_cast<float>(p), static_cast<float>(p)});
  }
}
