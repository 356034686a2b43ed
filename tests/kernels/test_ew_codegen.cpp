// kernels/elementwise.hpp's generated code (ew_codegen_available): a straight
// float32 program of exact instructions runs as machine code and gives the
// bits the tile interpreter gives (set_ew_codegen(false); NaN for NaN) for every exact
// instruction, on values that include NaN, infinities, signed zeros and
// subnormals, at lengths that end in a partial vector, on 1 and 2 threads;
// constants are arguments (one kernel for a program whatever their values);
// programs it cannot generate (another op or dtype, more streams or live
// values than registers) run on the interpreter with the same results.
#include <doctest/doctest.h>

#include "codegen_guard.hpp"
#include "random.hpp"
#include "thread_guard.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include <ms/kernels/elementwise.hpp>
#include <ms/kernels/ew_instructions.hpp>
#include <ms/kernels/parallel.hpp>

namespace {

using namespace ms;
using kernels::EwBuilder;
using kernels::EwProgram;
using test::CodegenGuard;
using test::ThreadGuard;

// Programs run on generated code, and compiled, by this process so far.
std::int64_t runs() { return kernels::ew_codegen_stats().runs; }
std::int64_t compiled() { return kernels::ew_codegen_stats().compiled; }
// Runs on generated code of a program it can generate: 1 where it is available.
std::int64_t one_if_generated() { return kernels::ew_codegen_available() ? 1 : 0; }

// Random floats in [-3, 3), every third element one of the special values:
// at the m-th of them input 0 holds special m, input 1 special m / K, input 2
// special m / K^2 (mod K, K specials), so that every pair of specials meets
// in inputs 0 and 1 (and a third of the triples in all three).
Tensor input(std::int64_t n, int which) {
  Tensor t =
      test::random_tensor(float32, {n}, {.lo = -3, .hi = 3}, 11 + static_cast<unsigned>(which));
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            0.0f,
                            -0.0f,
                            kInf,
                            -kInf,
                            1e-40f,
                            -1e-40f,
                            std::numeric_limits<float>::max(),
                            -3.0f,
                            6.0f,
                            1.0f};
  constexpr std::int64_t kCount = sizeof(specials) / sizeof(float);
  std::int64_t div = 1;
  for (int j = 0; j < which % 3; ++j) div *= kCount;
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < n; i += 3) p[i] = specials[(i / 3 / div) % kCount];
  return t;
}

// The program `prog` over `in` with code generation on and off: the same
// bits (signs of zero included), or NaN in both (when two NaN meet, IEEE 754
// leaves open whose payload and sign the result keeps: x86 keeps the first
// operand's, and the compiler may order the interpreter's operands of a
// commutative op either way); `generated`: whether the
// run with it on should take generated code (where available).
void check_both_paths(const EwProgram& prog, std::span<const Tensor* const> in, bool generated) {
  CodegenGuard guard;
  const std::int64_t before = runs();
  const Tensor on = kernels::ew_eval(prog, in);
  CHECK(runs() - before == (generated ? one_if_generated() : 0));
  kernels::set_ew_codegen(false);
  const Tensor off = kernels::ew_eval(prog, in);
  CHECK(runs() - before == (generated ? one_if_generated() : 0));
  const float* a = on.data<float>();
  const float* b = off.data<float>();
  std::int64_t first = -1;
  for (std::int64_t i = 0; i < on.numel() && first < 0; ++i)
    if (std::memcmp(a + i, b + i, sizeof(float)) != 0 && !(std::isnan(a[i]) && std::isnan(b[i])))
      first = i;
  CAPTURE(first);
  if (first >= 0) {
    CAPTURE(a[first]);
    CAPTURE(b[first]);
    CHECK(first == -1);
  }
}

// `op`(x0, x1, ...) of `arity` float32 inputs.
EwProgram one_op(int op, int arity, std::int64_t n) {
  EwBuilder b;
  int regs[3] = {-1, -1, -1};
  for (int j = 0; j < arity; ++j) regs[j] = b.load(j, float32);
  return b.finish(b.apply(op, float32, regs[0], regs[1], regs[2]), Shape{n}, float32);
}

template <class... Ops>
std::vector<int> exact_ids(kernels::OpList<Ops...>) {
  std::vector<int> ids;
  ((kernels::EwExact<Ops> ? ids.push_back(kernels::ew_instr_id<Ops>) : void()), ...);
  return ids;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("generated code: every exact instruction gives the interpreter's bits") {
    ThreadGuard threads;
    const std::vector<int> ids = exact_ids(kernels::EwInstructions{});
    CHECK(ids.size() >= 14);  // add, sub, mul, div, maximum, minimum, clamp, relu, ...
    // A partial last vector on 1 thread; on 2, chunks of 2^16 and a partial one.
    for (const std::int64_t n : {std::int64_t{4096 + 37}, std::int64_t{3} * 65536 + 7}) {
      const Tensor x = input(n, 0), y = input(n, 1), z = input(n, 2);
      const Tensor* in[3] = {&x, &y, &z};
      for (const int id : ids) {
        const kernels::EwOpInfo& info = kernels::ew_op_info(id);
        CAPTURE(info.name);
        CAPTURE(n);
        set_num_threads(n > 65536 ? 2 : 1);
        check_both_paths(one_op(id, info.arity, n), {in, static_cast<std::size_t>(info.arity)},
                         true);
      }
    }
  }

  TEST_CASE("generated code: constants, broadcast inputs, values read many times") {
    ThreadGuard threads;
    const std::int64_t n = 70001;
    const Tensor x = input(n, 0), y = input(n, 1), one = test::random_tensor(float32, {1}, {}, 3);
    const Tensor scalar = one.reshape(Shape{});
    const int add = kernels::ew_op_find("add"), mul = kernels::ew_op_find("mul"),
              div = kernels::ew_op_find("div"), sub = kernels::ew_op_find("sub"),
              maximum = kernels::ew_op_find("maximum");
    // (x * c0 + y) / (x - c1), max'd with x * x * x + x: x read five times,
    // two constants, and their values changed between calls.
    const auto program = [&](double c0, double c1) {
      EwBuilder b;
      const int a = b.load(0, float32), c = b.load(1, float32);
      const int k0 = b.constant(c0, float32), k1 = b.constant(c1, float32);
      const int q = b.apply(div, float32, b.apply(add, float32, b.apply(mul, float32, a, k0), c),
                            b.apply(sub, float32, a, k1));
      const int cube =
          b.apply(add, float32, b.apply(mul, float32, b.apply(mul, float32, a, a), a), a);
      return b.finish(b.apply(maximum, float32, q, cube), Shape{n}, float32);
    };
    const Tensor* in[2] = {&x, &y};
    for (const int nt : {1, 2}) {
      set_num_threads(nt);
      CAPTURE(nt);
      check_both_paths(program(2.0, 0.25), in, true);
      // The same kernel for other constants: nothing compiled.
      const std::int64_t before = compiled();
      check_both_paths(program(-7.5, 3.0), in, true);
      CHECK(compiled() == before);
      // y of one element, [1] and 0-d, broadcast over x.
      for (const Tensor* b : {&one, &scalar}) {
        const Tensor* in_b[2] = {&x, b};
        check_both_paths(program(0.5, -1.0), in_b, true);
      }
    }
  }

  TEST_CASE("generated code: programs it cannot hold run on the interpreter, the same values") {
    ThreadGuard threads;
    set_num_threads(2);
    const std::int64_t n = 65536 * 2 + 3;
    std::vector<Tensor> xs;
    for (int j = 0; j < 9; ++j) xs.push_back(input(n, j % 5));
    std::vector<const Tensor*> in;
    for (const Tensor& t : xs) in.push_back(&t);
    const int add = kernels::ew_op_find("add"), mul = kernels::ew_op_find("mul");
    // Nine streams (one more than kernels take): summed.
    {
      EwBuilder b;
      int s = b.load(0, float32);
      for (int j = 1; j < 9; ++j) s = b.apply(add, float32, s, b.load(j, float32));
      check_both_paths(b.finish(s, Shape{n}, float32), in, false);
    }
    // Eight streams, their 28 pairwise products all live before the sum: more
    // values than vector registers.
    {
      EwBuilder b;
      int x[8];
      for (int j = 0; j < 8; ++j) x[j] = b.load(j, float32);
      std::vector<int> products;
      for (int i = 0; i < 8; ++i)
        for (int j = i + 1; j < 8; ++j) products.push_back(b.apply(mul, float32, x[i], x[j]));
      int s = products[0];
      for (std::size_t k = 1; k < products.size(); ++k) s = b.apply(add, float32, s, products[k]);
      check_both_paths(b.finish(s, Shape{n}, float32), {in.data(), 8}, false);
    }
    // An op that is not exact (exp), and float64 registers.
    {
      EwBuilder b;
      const int e = b.apply(kernels::ew_op_find("exp"), float32, b.load(0, float32));
      check_both_paths(b.finish(b.apply(add, float32, e, b.load(1, float32)), Shape{n}, float32),
                       {in.data(), 2}, false);
    }
    {
      const Tensor a = xs[0].to(float64), c = xs[1].to(float64);
      EwBuilder b;
      const EwProgram prog = b.finish(b.apply(add, float64, b.load(0, float64), b.load(1, float64)),
                                      Shape{n}, float64);
      const Tensor* in64[2] = {&a, &c};
      CodegenGuard guard;
      const std::int64_t before = runs();
      const Tensor on = kernels::ew_eval(prog, in64);
      CHECK(runs() == before);
      kernels::set_ew_codegen(false);
      CHECK(test::bitwise_equal(on, kernels::ew_eval(prog, in64)));
    }
  }
}
