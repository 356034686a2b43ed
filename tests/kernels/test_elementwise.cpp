// kernels/elementwise.hpp: the interpreter's straight path (dense inputs of
// the register type, constants and ops, the last op writing the output) at
// the sizes where it changes how it moves memory: tiles of kTile in cache,
// tiles of kStreamTile past kStreamBytes, non-temporal stores from
// kStreamOutBytes of output. Every value against a scalar loop, bit for bit,
// with 1 and 2 threads, tails that leave a tile and a vector partial, outputs
// and inputs that start off the vector alignment, in place, and a program that needs
// the general path (a broadcast input) at the same sizes.
#include <doctest/doctest.h>

#include "random.hpp"
#include "thread_guard.hpp"

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <ms/kernels/elementwise.hpp>
#include <ms/kernels/parallel.hpp>

namespace {

using namespace ms;
using kernels::EwBuilder;
using kernels::EwProgram;

// Nonzero values in [-2, 2): the sums below are never -0, so relu has one answer.
constexpr test::Range kNonzero{.lo = -2, .hi = 2, .avoid_zero = true};

// relu(a * b + c) * 0.5 in `dt` (inputs 0, 1, 2), the chain of BM_Chain_Ms
// (bench/bm_elementwise.cpp).
EwProgram chain_program(std::int64_t n, DType dt) {
  EwBuilder b;
  const int id_mul = kernels::ew_op_find("mul"), id_add = kernels::ew_op_find("add"),
            id_relu = kernels::ew_op_find("relu");
  const int x = b.load(0, dt), y = b.load(1, dt), z = b.load(2, dt);
  const int m = b.apply(id_mul, dt, x, y);
  const int s = b.apply(id_add, dt, m, z);
  const int r = b.apply(id_relu, dt, s);
  const int h = b.constant(0.5, dt);
  return b.finish(b.apply(id_mul, dt, r, h), Shape{n}, dt);
}

// The chain one element at a time, one rounding per statement (no contraction).
template <class T>
std::vector<T> chain_reference(const Tensor& a, const Tensor& b, const Tensor& c, std::int64_t n) {
  std::vector<T> want(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const T m = a.data<T>()[i] * b.data<T>()[i % b.numel()];
    const T s = m + c.data<T>()[i];
    const T r = s > T(0) ? s : T(0);
    want[static_cast<std::size_t>(i)] = r * T(0.5);
  }
  return want;
}

template <class T>
bool same_bits(const T* got, const std::vector<T>& want) {
  return std::memcmp(got, want.data(), want.size() * sizeof(T)) == 0;
}

template <class T>
std::int64_t first_difference(const T* got, const std::vector<T>& want) {
  for (std::size_t i = 0; i < want.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) return static_cast<std::int64_t>(i);
  return -1;
}

// Sizes per element type T (3 inputs + 1 output of sizeof(T) each): in cache,
// streamed tiles, streamed tiles and non-temporal stores; each leaves a
// partial tile and a partial vector at its end.
template <class T>
std::vector<std::int64_t> sizes() {
  const std::int64_t item = sizeof(T);
  return {kernels::kTile * 3 + 5, kernels::kStreamBytes / (4 * item) + 77,
          kernels::kStreamOutBytes / item + 5};
}

using ms::test::ThreadGuard;

template <class T>
void check_chain(DType dt) {
  ThreadGuard guard;
  for (std::int64_t n : sizes<T>()) {
    const Tensor a = test::random_tensor(dt, {n}, kNonzero, 1),
                 b = test::random_tensor(dt, {n}, kNonzero, 2),
                 c = test::random_tensor(dt, {n}, kNonzero, 3);
    const std::vector<T> want = chain_reference<T>(a, b, c, n);
    const EwProgram prog = chain_program(n, dt);
    const Tensor* in[3] = {&a, &b, &c};
    for (int nt : {1, 2}) {
      CAPTURE(n);
      CAPTURE(nt);
      set_num_threads(nt);
      const Tensor out = kernels::ew_eval(prog, in);
      CHECK(first_difference(out.data<T>(), want) == -1);

      // An output one element past a vector boundary (a contiguous view at
      // offset 1): stores that cannot be aligned, and nothing written outside.
      Tensor big = full({n + 2}, 7.0, dt);
      const Tensor view = big.slice(0, 1, n + 1);
      kernels::ew_run(prog, in, view);
      CHECK(same_bits(big.data<T>() + 1, want));
      CHECK(big.data<T>()[0] == T(7));
      CHECK(big.data<T>()[n + 1] == T(7));

      // Input 1 at an offset (a contiguous view at element 1 of a copy).
      Tensor b_big = empty({n + 1}, dt);
      Tensor b_view = b_big.slice(0, 1, n + 1);
      b_view.copy_(b);
      const Tensor* in_off[3] = {&a, &b_view, &c};
      CHECK(same_bits(kernels::ew_eval(prog, in_off).data<T>(), want));

      // In place: the output is input 0 (read before written, element by element).
      Tensor a2 = a.clone();
      const Tensor* in2[3] = {&a2, &b, &c};
      kernels::ew_run(prog, in2, a2);
      CHECK(same_bits(a2.data<T>(), want));
    }
  }
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("straight programs: every value at the cache, streamed and non-temporal sizes") {
    check_chain<float>(float32);
    check_chain<double>(float64);
  }

  TEST_CASE("a program with a broadcast input takes the general path at the same sizes") {
    // b is one element broadcast over n: no straight program, the same values.
    ThreadGuard guard;
    for (std::int64_t n : sizes<float>()) {
      const Tensor a = test::random_tensor(float32, {n}, kNonzero, 4),
                   b = test::random_tensor(float32, {1}, kNonzero, 5),
                   c = test::random_tensor(float32, {n}, kNonzero, 6);
      const std::vector<float> want = chain_reference<float>(a, b, c, n);
      const Tensor* in[3] = {&a, &b, &c};
      for (int nt : {1, 2}) {
        CAPTURE(n);
        set_num_threads(nt);
        const Tensor out = kernels::ew_eval(chain_program(n, float32), in);
        CHECK(first_difference(out.data<float>(), want) == -1);
      }
    }
  }
}
