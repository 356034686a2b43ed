// kernels/elementwise.hpp: the interpreter's straight path (dense inputs of
// the register type, constants and ops, the last op writing the output) and
// its generated code (float32, see test_ew_codegen.cpp) at
// the sizes where it changes how it moves memory: tiles of kTile in cache,
// tiles of kStreamTile past kStreamBytes, non-temporal stores from
// kStreamOutBytes of output. Every value against a scalar loop, bit for bit,
// with 1 and 2 threads, tails that leave a tile and a vector partial, outputs
// and inputs that start off the vector alignment, in place, and a program that needs
// the general path (a broadcast input) at the same sizes.
#include <doctest/doctest.h>

#include "codegen_guard.hpp"
#include "random.hpp"
#include "thread_guard.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <ms/expr/expr.hpp>
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
EwProgram chain_program(const Shape& shape, DType dt) {
  EwBuilder b;
  const int id_mul = kernels::ew_op_find("mul"), id_add = kernels::ew_op_find("add"),
            id_relu = kernels::ew_op_find("relu");
  const int x = b.load(0, dt), y = b.load(1, dt), z = b.load(2, dt);
  const int m = b.apply(id_mul, dt, x, y);
  const int s = b.apply(id_add, dt, m, z);
  const int r = b.apply(id_relu, dt, s);
  const int h = b.constant(0.5, dt);
  return b.finish(b.apply(id_mul, dt, r, h), shape, dt);
}
EwProgram chain_program(std::int64_t n, DType dt) { return chain_program(Shape{n}, dt); }

// The chain one element at a time, one rounding per statement (no contraction).
template <class T>
std::vector<T> chain_reference(const Tensor& a, const Tensor& b, const Tensor& c, std::int64_t n) {
  std::vector<T> want(static_cast<std::size_t>(n));
  const T *pa = a.data<T>(), *pb = b.data<T>(), *pc = c.data<T>();
  const std::int64_t nb = b.numel();
  for (std::int64_t i = 0; i < n; ++i) {
    volatile T m = pa[i] * pb[i % nb];  // rounded here: not fused with the addition
    const T s = m + pc[i];
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
  if (same_bits(got, want)) return -1;
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

// float32 programs run on generated code where it is available, and on
// the tile loop with it off: both are checked.
template <class T>
void check_chain(DType dt) {
  ThreadGuard guard;
  test::CodegenGuard codegen;
  for (std::int64_t n : sizes<T>()) {
    const Tensor a = test::random_tensor(dt, {n}, kNonzero, 1),
                 b = test::random_tensor(dt, {n}, kNonzero, 2),
                 c = test::random_tensor(dt, {n}, kNonzero, 3);
    const std::vector<T> want = chain_reference<T>(a, b, c, n);
    const EwProgram prog = chain_program(n, dt);
    const Tensor* in[3] = {&a, &b, &c};
    for (const auto& [nt, generated] : {std::pair{1, true}, {2, true}, {1, false}, {2, false}}) {
      CAPTURE(n);
      CAPTURE(nt);
      CAPTURE(generated);
      set_num_threads(nt);
      kernels::set_ew_codegen(generated);
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

// float -> bfloat16 bits, rounded to nearest even (no NaN here).
std::uint16_t bf16_bits(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_value(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f = 0;
  std::memcpy(&f, &u, 4);
  return f;
}

// relu(a * b + c) * 0.5 on bfloat16 inputs, one rounding per statement in
// float32, rounded to bfloat16 once at the end (`round_each`: after every
// statement instead, as a bfloat16 register type would).
std::vector<std::uint16_t> bf16_chain_reference(const Tensor& a, const Tensor& b, const Tensor& c,
                                                bool round_each) {
  const auto* pa = reinterpret_cast<const std::uint16_t*>(a.raw_data());
  const auto* pb = reinterpret_cast<const std::uint16_t*>(b.raw_data());
  const auto* pc = reinterpret_cast<const std::uint16_t*>(c.raw_data());
  const auto r = [&](float v) { return round_each ? bf16_value(bf16_bits(v)) : v; };
  std::vector<std::uint16_t> want(static_cast<std::size_t>(a.numel()));
  for (std::size_t i = 0; i < want.size(); ++i) {
    const float m = r(bf16_value(pa[i]) * bf16_value(pb[i]));
    const float s = r(m + bf16_value(pc[i]));
    const float z = s > 0.0f ? s : 0.0f;
    want[i] = bf16_bits(z * 0.5f);
  }
  return want;
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("bfloat16 programs compute in float32 registers and round once, on store") {
    ThreadGuard guard;
    const std::int64_t n = kernels::kTile * 5 + 3;
    const Tensor a = test::random_tensor(bfloat16, {n}, kNonzero, 7),
                 b = test::random_tensor(bfloat16, {n}, kNonzero, 8),
                 c = test::random_tensor(bfloat16, {n}, kNonzero, 9);
    CHECK(kernels::ew_register_type(bfloat16, "add") == float32);
    const std::vector<std::uint16_t> want = bf16_chain_reference(a, b, c, false);
    // Rounding after every op gives other bits for some elements: the check
    // below tells the two apart.
    CHECK(bf16_chain_reference(a, b, c, true) != want);
    // The kernel's program (bfloat16 loads into float32 registers, a bfloat16
    // output) and the eager expression, which lowers into such a program.
    kernels::EwBuilder bld;
    const int id_mul = kernels::ew_op_find("mul"), id_add = kernels::ew_op_find("add"),
              id_relu = kernels::ew_op_find("relu");
    const int x = bld.load(0, float32), y = bld.load(1, float32), z = bld.load(2, float32);
    const int s = bld.apply(id_add, float32, bld.apply(id_mul, float32, x, y), z);
    const int h = bld.constant(0.5, float32);
    const EwProgram prog = bld.finish(bld.apply(id_mul, float32, bld.apply(id_relu, float32, s), h),
                                      Shape{n}, bfloat16);
    const Tensor* in[3] = {&a, &b, &c};
    for (int nt : {1, 2}) {
      CAPTURE(nt);
      set_num_threads(nt);
      const Tensor out = kernels::ew_eval(prog, in);
      CHECK(std::memcmp(out.raw_data(), want.data(), want.size() * 2) == 0);
      const Tensor eager = relu(a * b + c) * 0.5f;
      REQUIRE(eager.dtype() == bfloat16);
      CHECK(std::memcmp(eager.raw_data(), want.data(), want.size() * 2) == 0);
    }
  }

  TEST_CASE("straight programs: every value at the cache, streamed and non-temporal sizes") {
    check_chain<float>(float32);
    check_chain<double>(float64);
  }

  TEST_CASE("one element broadcast runs straight, a strided input interpreted: the same values") {
    // b of one element (shape [1], 0-d, or [1, 1] over [n, 1]) fills a slot of its own once per
    // chunk (the program's slot for it is reused by later results, tile after
    // tile); b strided takes the general path. The same sizes as above, and 3.
    ThreadGuard guard;
    std::vector<std::int64_t> ns = sizes<float>();
    ns.push_back(3);  // less than a tile: the slot is filled as far as the output goes
    for (std::int64_t n : ns) {
      const Tensor a = test::random_tensor(float32, {n}, kNonzero, 4),
                   b1 = test::random_tensor(float32, {1}, kNonzero, 5),
                   c = test::random_tensor(float32, {n}, kNonzero, 6);
      const Tensor b0 = b1.reshape(Shape{});
      const Tensor b_strided =
          test::random_tensor(float32, {2 * n}, kNonzero, 7).slice(0, 0, 2 * n, 2);
      const Tensor b_dense = b_strided.contiguous();
      const std::vector<float> want1 = chain_reference<float>(a, b1, c, n);
      const std::vector<float> want_strided = chain_reference<float>(a, b_dense, c, n);
      // One element of shape [1, 1] with strides of its own, over [n, 1]: a splat too.
      const Tensor b11 =
          test::random_tensor(float32, {3, 3}, kNonzero, 8).slice(0, 1, 2, 1).slice(1, 2, 3, 1);
      const Tensor a_col = a.reshape(Shape{n, 1}), c_col = c.reshape(Shape{n, 1});
      const std::vector<float> want11 = chain_reference<float>(a, b11.contiguous(), c, n);
      const EwProgram prog = chain_program(n, float32),
                      prog_col = chain_program(Shape{n, 1}, float32);
      for (int nt : {1, 2}) {
        CAPTURE(n);
        CAPTURE(nt);
        set_num_threads(nt);
        for (const Tensor* b : {&b1, &b0}) {
          const Tensor* in[3] = {&a, b, &c};
          CHECK(first_difference(kernels::ew_eval(prog, in).data<float>(), want1) == -1);
        }
        const Tensor* in[3] = {&a, &b_strided, &c};
        CHECK(first_difference(kernels::ew_eval(prog, in).data<float>(), want_strided) == -1);
        const Tensor* in_col[3] = {&a_col, &b11, &c_col};
        CHECK(first_difference(kernels::ew_eval(prog_col, in_col).data<float>(), want11) == -1);
      }
    }
  }
}

TEST_SUITE("kernels") {
  TEST_CASE("loads skip size-1 dims and walk nested dims as one: the values of dense copies") {
    // Over [A, 1, B, 1, C]: a step-2 slice (dims 0 and 2 nest into one of
    // stride 6), a plain slice (dims 2 and 4 nest, 0 does not), a permuted
    // view with odd strides on its size-1 dims, a broadcast along B, and one
    // element broadcast everywhere (a splat). Large enough for 2 threads.
    constexpr std::int64_t A = 64, B = 40, C = 33;
    const Shape shape{A, 1, B, 1, C};
    const Tensor stepped =
        test::random_tensor(float32, {A, 1, 2 * B, 1, C}, kNonzero, 21).slice(2, 0, 2 * B, 2);
    const Tensor cut =
        test::random_tensor(float32, {A, 1, B + 3, 1, C}, kNonzero, 22).slice(2, 1, B + 1, 1);
    const Tensor permuted = test::random_tensor(float32, {C, B, A}, kNonzero, 23)
                                .permute({2, 1, 0})
                                .unsqueeze(1)
                                .unsqueeze(3);
    const Tensor spread = test::random_tensor(float32, {A, 1, 1, 1, C}, kNonzero, 24).expand(shape);
    const Tensor one = test::random_tensor(float32, {2, 1, 3, 1, 2}, kNonzero, 25)
                           .slice(0, 1, 2, 1)
                           .slice(2, 2, 3, 1)
                           .slice(4, 1, 2, 1);
    EwBuilder b;
    int acc = b.load(0, float32);
    for (int i = 1; i < 5; ++i)
      acc = b.apply(kernels::ew_op_find("add"), float32, acc, b.load(i, float32));
    const EwProgram prog = b.finish(acc, shape, float32);
    const Tensor d0 = stepped.contiguous(), d1 = cut.contiguous(), d2 = permuted.contiguous(),
                 d3 = spread.contiguous(), d4 = one.contiguous();
    const Tensor* dense_in[5] = {&d0, &d1, &d2, &d3, &d4};
    const Tensor want = kernels::ew_eval(prog, dense_in);
    ThreadGuard guard;
    for (int nt : {1, 2}) {
      CAPTURE(nt);
      set_num_threads(nt);
      // The strided inputs in each position (the first decides the layout).
      const Tensor* in[5] = {&one, &stepped, &cut, &permuted, &spread};
      const Tensor* in_dense[5] = {&d4, &d0, &d1, &d2, &d3};
      CHECK(test::bitwise_equal(kernels::ew_eval(prog, in), kernels::ew_eval(prog, in_dense)));
      const Tensor* in2[5] = {&stepped, &cut, &permuted, &spread, &one};
      CHECK(test::bitwise_equal(kernels::ew_eval(prog, in2), want));
    }
  }
}

namespace {

// a * b + c, c of shape [last] broadcast, over `shape`.
EwProgram mul_add_program(const Shape& shape) {
  EwBuilder b;
  const int x = b.load(0, float32), y = b.load(1, float32), z = b.load(2, float32);
  const int m = b.apply(kernels::ew_op_find("mul"), float32, x, y);
  return b.finish(b.apply(kernels::ew_op_find("add"), float32, m, z), shape, float32);
}

}  // namespace

TEST_SUITE("kernels") {
  TEST_CASE("a result is laid out as the first input of its shape; a dense permuted one in place") {
    // Heads split out of [B, T, H, D]: the result is dense in the same order
    // (PyTorch's rule), so merging the heads back is a view; the values are
    // those of the dense inputs, bit for bit.
    // [4, 128, 6, 32]: more than one chunk of tiles, so 2 threads split it.
    const Tensor bthd_a = test::random_tensor(float32, {4, 128, 6, 32}, kNonzero, 11);
    const Tensor bthd_b = test::random_tensor(float32, {4, 128, 6, 32}, kNonzero, 12);
    const Tensor c = test::random_tensor(float32, {32}, kNonzero, 13);
    const Tensor a = bthd_a.permute({0, 2, 1, 3}), b = bthd_b.permute({0, 2, 1, 3});
    const Tensor ad = a.contiguous(), bd = b.contiguous();
    const EwProgram prog = mul_add_program(a.shape());
    const Tensor* dense_in[3] = {&ad, &bd, &c};
    const Tensor want = kernels::ew_eval(prog, dense_in);
    CHECK(want.is_contiguous());
    ThreadGuard guard;
    for (int nt : {1, 2}) {
      set_num_threads(nt);
      const Tensor* in[3] = {&a, &b, &c};
      const Tensor got = kernels::ew_eval(prog, in);
      CHECK(std::ranges::equal(got.strides(), a.strides()));
      CHECK(test::bitwise_equal(got, want));
      // The first input of the result's shape decides: dense first, dense result.
      const Tensor* mixed[3] = {&ad, &b, &c};
      const Tensor m = kernels::ew_eval(prog, mixed);
      CHECK(m.is_contiguous());
      CHECK(test::bitwise_equal(m, want));
      // A broadcast input has no order of its own: the next one's is taken.
      const Tensor spread = ad.select(1, 0).unsqueeze(1).expand(a.shape());
      const Tensor* bcast[3] = {&spread, &b, &c};
      const Tensor* bcast_dense[3] = {&spread, &bd, &c};
      const Tensor s = kernels::ew_eval(prog, bcast);
      CHECK(std::ranges::equal(s.strides(), b.strides()));
      CHECK(test::bitwise_equal(s, kernels::ew_eval(prog, bcast_dense)));
      // A strided slice: a dense result in its dim order.
      const Tensor sl = bthd_a.permute({2, 0, 1, 3}).slice(2, 0, 5, 2);  // [6, 4, 3, 32]
      const Tensor sld = sl.contiguous(), sb = sld * 2.f;
      const EwProgram sprog = mul_add_program(sl.shape());
      const Tensor* sin[3] = {&sl, &sb, &c};
      const Tensor* sin_dense[3] = {&sld, &sb, &c};
      const Tensor so = kernels::ew_eval(sprog, sin);
      CHECK(std::ranges::equal(so.strides(), std::vector<std::int64_t>{32, 576, 192, 1}));
      CHECK(test::bitwise_equal(so, kernels::ew_eval(sprog, sin_dense)));
      // Into a dense permuted output (a transposed view of a buffer).
      const Tensor buf = zeros({4, 128, 6, 32}, float32);
      const Tensor out = buf.permute({0, 2, 1, 3});
      kernels::ew_run(prog, dense_in, out);
      CHECK(test::bitwise_equal(out, want));
      // ... whose memory an input reads in another order (out += its own
      // transpose): through a temporary, as for any other strided output.
      const Tensor sq = test::random_tensor(float32, {96, 96}, kNonzero, 14);
      const Tensor sq_t = sq.transpose(0, 1), ones_row = ones({96}, float32);
      const EwProgram sqprog = mul_add_program(sq.shape());
      const Tensor sq_dense = sq.contiguous(), sq_t_dense = sq_t.contiguous();
      const Tensor* sq_in_dense[3] = {&sq_t_dense, &ones_row, &sq_dense};
      const Tensor sq_want = kernels::ew_eval(sqprog, sq_in_dense);  // sq^T * 1 + sq
      const Tensor* sq_in[3] = {&sq_t, &ones_row, &sq};
      kernels::ew_run(sqprog, sq_in, sq_t);  // writes sq's memory, transposed
      CHECK(test::bitwise_equal(sq_t, sq_want));
      // An input that does not broadcast: ShapeError, as with a dense first input.
      const Tensor bad = test::random_tensor(float32, {7}, kNonzero, 15);
      const Tensor* bad_in[3] = {&a, &b, &bad};
      CHECK_THROWS_AS(kernels::ew_eval(prog, bad_in), ShapeError);
    }
  }
}
