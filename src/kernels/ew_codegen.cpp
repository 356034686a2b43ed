// Straight float32 elementwise programs as generated AVX-512 code (xbyak).
//
// The tile loop (elementwise.cpp) runs each instruction over a tile held in
// L1 before the next; on data streaming from memory that costs about a fifth
// of the bandwidth a loop keeping every value in registers reaches
// (bench/chain_vs_triad.sh). Here a program whose instructions are all EwExact
// becomes such a loop: per vector of 16 elements, each Load of a stream is one
// load, each op its `eval` (from ew_instructions.hpp) instantiated on V, a
// vector type whose arithmetic emits instructions instead of computing, and
// the result one store. The ops' arithmetic stays in one place, their `eval`;
// an exact op computes the same bits as Eigen's packets and scalar remainder
// (every lane rounds alone), so a program gives the same results on either
// path (but for which NaN's payload and sign a commutative op keeps when two
// NaN meet: x86 keeps the first operand's, here in the `eval`'s order, in the
// tile loop in the order the compiler chose). A last partial vector runs the
// same code under a lane mask.
#include "ew_codegen.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ms/core/detail/env_switch.hpp"
#include "ms_xbyak_config.h"

#if MS_HAVE_XBYAK && defined(__AVX512F__) && defined(__x86_64__)
#define MS_EW_CODEGEN 1
#include <xbyak/xbyak.h>
#else
#define MS_EW_CODEGEN 0
#endif

namespace ms::kernels {

namespace {

constinit ms::detail::EnvSwitch g_codegen{"MS_EW_CODEGEN"};
std::atomic<std::int64_t> g_compiled{0}, g_runs{0};

}  // namespace

#if MS_EW_CODEGEN

namespace {

using detail::EwJitCall;
using detail::EwJitFn;
using detail::EwJitLoad;
using detail::kMaxJitStreams;

// A kernel being generated: the assembler, its free vector and mask
// registers, and its pool of float constants (placed after the code).
class Gen;

// Thrown when a program's values do not fit the registers: no kernel.
struct OutOfRegisters {};

// A vector or mask register of a generator, marked free in its set (`used`)
// again when the last V or M holding it goes.
struct Reg {
  Reg(std::uint32_t* in_set, int i) : used(in_set), idx(i) {}
  Reg(const Reg&) = delete;
  Reg& operator=(const Reg&) = delete;
  ~Reg() { *used &= ~(1u << idx); }
  std::uint32_t* used;
  int idx;
};

// 16 float lanes, as an op's `eval` sees an Eigen array: arithmetic with
// other vectors and with float numbers, comparisons giving a mask M, abs,
// square, inverse. Each operation emits its instruction into a new register.
class V {
 public:
  using Scalar = float;
  V(Gen* g, std::shared_ptr<Reg> r) : g_(g), r_(std::move(r)) {}
  Gen& gen() const { return *g_; }
  Xbyak::Zmm z() const { return Xbyak::Zmm(r_->idx); }
  V abs() const;
  V square() const;
  V inverse() const;

 private:
  Gen* g_;
  std::shared_ptr<Reg> r_;
};

// A lane mask (a k register), as the Eigen comparison arrays an op selects with.
class M {
 public:
  M(Gen* g, std::shared_ptr<Reg> k) : g_(g), k_(std::move(k)) {}
  Gen& gen() const { return *g_; }
  Xbyak::Opmask k() const { return Xbyak::Opmask(k_->idx); }
  V select(const V& then, const V& otherwise) const;
  V select(float then, const V& otherwise) const;
  V select(const V& then, float otherwise) const;

 private:
  Gen* g_;
  std::shared_ptr<Reg> k_;
};

class Gen : public Xbyak::CodeGenerator {
 public:
  // Written while not executable; setProtectModeRE() then makes it
  // executable and no longer writable.
  Gen() : Xbyak::CodeGenerator(16384, Xbyak::DontSetProtectRWE) {}

  V fresh() { return V(this, take(used_zmm_, 0, 32)); }
  // k0 masks nothing; kTailMask is the tail's.
  M fresh_mask() { return M(this, take(used_k_, 1, kTailMask)); }

  // A vector of 16 copies of the float whose bits are `bits` (from the pool).
  V splat_bits(std::uint32_t bits) {
    V d = fresh();
    vbroadcastss(d.z(), ptr[rip + pool_[bits]]);
    return d;
  }
  V splat(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return splat_bits(bits);
  }
  void emit_pool() {
    align(4);
    for (auto& [bits, label] : pool_) {
      L(label);
      dd(bits);
    }
  }

  static constexpr int kTailMask = 7;

 private:
  // The first free register of `set` in [first, end), marked used.
  std::shared_ptr<Reg> take(std::uint32_t& set, int first, int end) {
    for (int i = first; i < end; ++i)
      if ((set >> i & 1u) == 0) {
        set |= 1u << i;
        return std::make_shared<Reg>(&set, i);
      }
    throw OutOfRegisters{};
  }

  std::uint32_t used_zmm_ = 0, used_k_ = 0;
  std::map<std::uint32_t, Xbyak::Label> pool_;
};

// d = op(a, b) for a vector instruction `op` of Gen (a member function
// called through the lambda, as xbyak overloads each mnemonic).
template <class F>
V binary(const V& a, const V& b, F op) {
  V d = a.gen().fresh();
  op(a.gen(), d.z(), a.z(), b.z());
  return d;
}

#define MS_EW_BINARY(OPERATOR, MNEMONIC)                                              \
  V operator OPERATOR(const V& a, const V& b) {                                       \
    return binary(a, b, [](Gen& g, auto d, auto x, auto y) { g.MNEMONIC(d, x, y); }); \
  }                                                                                   \
  [[maybe_unused]] V operator OPERATOR(const V& a, float b) {                         \
    return a OPERATOR a.gen().splat(b);                                               \
  }                                                                                   \
  [[maybe_unused]] V operator OPERATOR(float a, const V& b) { return b.gen().splat(a) OPERATOR b; }
MS_EW_BINARY(+, vaddps)
MS_EW_BINARY(-, vsubps)
MS_EW_BINARY(*, vmulps)
MS_EW_BINARY(/, vdivps)
#undef MS_EW_BINARY

// The comparison predicates of Eigen's (and C++'s) operators: ordered and
// false on NaN, except != (unordered: true on NaN).
M compare(const V& a, const V& b, int predicate) {
  M k = a.gen().fresh_mask();
  a.gen().vcmpps(k.k(), a.z(), b.z(), static_cast<std::uint8_t>(predicate));
  return k;
}
#define MS_EW_COMPARE(OPERATOR, PREDICATE)                       \
  [[maybe_unused]] M operator OPERATOR(const V& a, const V& b) { \
    return compare(a, b, PREDICATE);                             \
  }                                                              \
  [[maybe_unused]] M operator OPERATOR(const V& a, float b) {    \
    return compare(a, a.gen().splat(b), PREDICATE);              \
  }
MS_EW_COMPARE(<, 0x11)   // LT_OQ
MS_EW_COMPARE(<=, 0x12)  // LE_OQ
MS_EW_COMPARE(>, 0x1e)   // GT_OQ
MS_EW_COMPARE(>=, 0x1d)  // GE_OQ
MS_EW_COMPARE(==, 0x00)  // EQ_OQ
MS_EW_COMPARE(!=, 0x04)  // NEQ_UQ
#undef MS_EW_COMPARE

[[maybe_unused]] M operator||(const M& a, const M& b) {
  M k = a.gen().fresh_mask();
  a.gen().korw(k.k(), a.k(), b.k());
  return k;
}
[[maybe_unused]] M operator&&(const M& a, const M& b) {
  M k = a.gen().fresh_mask();
  a.gen().kandw(k.k(), a.k(), b.k());
  return k;
}

V M::select(const V& then, const V& otherwise) const {
  V d = gen().fresh();
  gen().vblendmps(d.z() | k(), otherwise.z(), then.z());
  return d;
}
V M::select(float then, const V& otherwise) const { return select(gen().splat(then), otherwise); }
V M::select(const V& then, float otherwise) const { return select(then, gen().splat(otherwise)); }

V V::abs() const {  // Eigen's pabs: the sign bit cleared
  const V m = gen().splat_bits(0x7fffffffu);
  return binary(*this, m, [](Gen& g, auto d, auto x, auto y) { g.vandps(d, x, y); });
}
V V::square() const { return *this * *this; }
V V::inverse() const { return gen().splat(1.0f) / *this; }

// ---------------------------------------------------------------- op table

using OpEmit = V (*)(const V* operands);

template <class Op>
constexpr OpEmit op_emit() {
  if constexpr (!EwExact<Op>)
    return nullptr;
  else if constexpr (Op::arity == 1)
    return [](const V* o) -> V { return Op::eval(o[0]); };
  else if constexpr (Op::arity == 2)
    return [](const V* o) -> V { return Op::eval(o[0], o[1]); };
  else
    return [](const V* o) -> V { return Op::eval(o[0], o[1], o[2]); };
}

template <class... Ops>
constexpr auto emit_table(OpList<Ops...>) {
  return std::array<OpEmit, sizeof...(Ops)>{op_emit<Ops>()...};
}

constexpr auto kEmit = emit_table(EwInstructions{});

// ---------------------------------------------------------------- kernels

// The stream pointers' registers, in order of the program's Stream loads.
const Xbyak::Reg64 kStreamRegs[kMaxJitStreams] = {
    Xbyak::util::r8,  Xbyak::util::r9,  Xbyak::util::r10, Xbyak::util::r11,
    Xbyak::util::rbx, Xbyak::util::r12, Xbyak::util::r13, Xbyak::util::r14};

// For each instruction, the slots whose value it reads for the last time
// (no later instruction reads them before one writes them; the result's
// slot is kept).
std::vector<std::vector<int>> last_reads(const EwProgram& prog) {
  const std::size_t n = prog.instrs.size();
  std::vector<std::vector<int>> out(n);
  for (std::size_t k = 0; k < n; ++k) {
    const EwInstr& i = prog.instrs[k];
    for (const int s : {static_cast<int>(i.a), static_cast<int>(i.b), static_cast<int>(i.c)}) {
      if (s < 0 || s == i.dst) continue;
      bool last = s != prog.result;
      for (std::size_t j = k + 1; j < n && last; ++j) {
        const EwInstr& later = prog.instrs[j];
        if (later.a == s || later.b == s || later.c == s) last = false;
        if (later.dst == s) break;
      }
      if (last && std::find(out[k].begin(), out[k].end(), s) == out[k].end()) out[k].push_back(s);
    }
  }
  return out;
}

// One vector of the program at element index rax (under the tail mask when
// `masked`): loads, ops, the store.
void emit_vector(Gen& g, const EwProgram& prog, std::span<const EwJitLoad> loads,
                 const std::vector<std::optional<V>>& held,
                 const std::vector<std::vector<int>>& releases, bool masked, bool stream_out) {
  using namespace Xbyak::util;
  const Xbyak::Opmask tail(Gen::kTailMask);
  std::vector<std::optional<V>> slot(static_cast<std::size_t>(prog.num_regs));
  int stream = 0;
  for (std::size_t k = 0; k < prog.instrs.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    std::optional<V> value;
    if (i.kind == EwInstr::Kind::Load && loads[k] == EwJitLoad::Stream) {
      value = g.fresh();
      const auto src = g.ptr[kStreamRegs[stream++] + rax * 4];
      if (masked)
        g.vmovups(value->z() | tail | Xbyak::util::T_z, src);
      else
        g.vmovups(value->z(), src);
    } else if (i.kind == EwInstr::Kind::Load || i.kind == EwInstr::Kind::Const) {
      value = held[k];
    } else {
      std::vector<V> args;  // the op's operands, in order
      for (const int r : {static_cast<int>(i.a), static_cast<int>(i.b), static_cast<int>(i.c)})
        if (r >= 0) args.push_back(*slot[static_cast<std::size_t>(r)]);
      value = kEmit[static_cast<std::size_t>(i.op)](args.data());
    }
    for (const int s : releases[k]) slot[static_cast<std::size_t>(s)].reset();
    slot[static_cast<std::size_t>(i.dst)] = std::move(value);
  }
  const V& r = *slot[static_cast<std::size_t>(prog.result)];
  const auto dst = g.ptr[rsi + rax * 4];
  if (masked)
    g.vmovups(dst | tail, r.z());
  else if (stream_out)
    g.vmovntps(dst, r.z());
  else
    g.vmovups(dst, r.z());
}

// The whole kernel: void fn(const EwJitCall* call), System V calling convention.
void emit_kernel(Gen& g, const EwProgram& prog, std::span<const EwJitLoad> loads, bool stream_out) {
  using namespace Xbyak::util;
  const std::vector<std::vector<int>> releases = last_reads(prog);
  const Xbyak::Reg64 saved[] = {rbx, r12, r13, r14, r15};
  for (const auto& r : saved) g.push(r);
  g.mov(rsi, g.ptr[rdi + offsetof(EwJitCall, out)]);
  g.mov(rdx, g.ptr[rdi + offsetof(EwJitCall, n)]);
  g.mov(rcx, g.ptr[rdi + offsetof(EwJitCall, streams)]);
  int streams = 0;
  for (std::size_t k = 0; k < prog.instrs.size(); ++k)
    if (prog.instrs[k].kind == EwInstr::Kind::Load && loads[k] == EwJitLoad::Stream) {
      g.mov(kStreamRegs[streams], g.ptr[rcx + 8 * streams]);
      ++streams;
    }
  // Constants and broadcast loads: one register each for the whole kernel.
  g.mov(rcx, g.ptr[rdi + offsetof(EwJitCall, broadcasts)]);
  std::vector<std::optional<V>> held(prog.instrs.size());
  int broadcasts = 0;
  for (std::size_t k = 0; k < prog.instrs.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    if (i.kind == EwInstr::Kind::Const ||
        (i.kind == EwInstr::Kind::Load && loads[k] == EwJitLoad::Broadcast)) {
      held[k] = g.fresh();
      g.vbroadcastss(held[k]->z(), g.ptr[rcx + 4 * broadcasts++]);
    }
  }
  Xbyak::Label loop, tail, done;
  g.mov(r15, rdx);
  g.and_(r15, -16);
  g.xor_(eax, eax);
  g.cmp(rax, r15);
  g.jge(tail, Xbyak::CodeGenerator::T_NEAR);
  g.L(loop);
  emit_vector(g, prog, loads, held, releases, false, stream_out);
  g.add(rax, 16);
  g.cmp(rax, r15);
  g.jl(loop, Xbyak::CodeGenerator::T_NEAR);
  g.L(tail);
  g.cmp(rax, rdx);
  g.jge(done, Xbyak::CodeGenerator::T_NEAR);
  g.mov(ecx, edx);
  g.sub(ecx, eax);
  g.mov(edi, 1);
  g.shl(edi, cl);
  g.sub(edi, 1);
  g.kmovw(Xbyak::Opmask(Gen::kTailMask), edi);
  emit_vector(g, prog, loads, held, releases, true, stream_out);
  g.L(done);
  if (stream_out) g.sfence();
  g.vzeroupper();
  for (auto r = std::rbegin(saved); r != std::rend(saved); ++r) g.pop(*r);
  g.ret();
  held.clear();
  g.emit_pool();
}

// The program's shape as the cache's key, written into `key` (cleared first,
// so that a caller can reuse its buffer): everything the code depends on (not
// the constants' values, which are arguments).
void kernel_key(const EwProgram& prog, std::span<const EwJitLoad> loads, bool stream_out,
                std::string& key) {
  key.clear();
  const auto put = [&](int v) {
    char bytes[sizeof v];
    std::memcpy(bytes, &v, sizeof v);
    key.append(bytes, sizeof v);
  };
  put(stream_out ? 1 : 0);
  put(prog.num_regs);
  put(prog.result);
  for (std::size_t k = 0; k < prog.instrs.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    for (const int v : {static_cast<int>(i.kind), static_cast<int>(i.op), static_cast<int>(i.dst),
                        static_cast<int>(i.a), static_cast<int>(i.b), static_cast<int>(i.c),
                        i.kind == EwInstr::Kind::Load ? static_cast<int>(loads[k]) : 0})
      put(v);
  }
}

// True when every instruction is a float32 load, constant or EwExact op,
// with at most kMaxJitStreams streams.
bool generable(const EwProgram& prog, std::span<const EwJitLoad> loads) {
  if (prog.result < 0 || prog.dtype != DType::Float32 || loads.size() < prog.instrs.size())
    return false;
  int streams = 0;
  for (std::size_t k = 0; k < prog.instrs.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    if (i.type != DType::Float32) return false;
    switch (i.kind) {
      case EwInstr::Kind::Load: streams += loads[k] == EwJitLoad::Stream ? 1 : 0; break;
      case EwInstr::Kind::Const: break;
      case EwInstr::Kind::Convert: return false;
      case EwInstr::Kind::Apply:
        if (i.op < 0 || static_cast<std::size_t>(i.op) >= kEmit.size() ||
            kEmit[static_cast<std::size_t>(i.op)] == nullptr)
          return false;
        break;
    }
  }
  return streams <= kMaxJitStreams;
}

struct CachedKernel {
  std::unique_ptr<Gen> code;  // null when the program could not be generated
  EwJitFn fn = nullptr;
};

// Kernels by key. Bounded: past kMaxKernels programs, new ones run on the
// interpreter (a process generating programs without end keeps its memory).
constexpr std::size_t kMaxKernels = 4096;
std::mutex g_cache_mu;
std::unordered_map<std::string, CachedKernel>& cache() {
  static auto* c = new std::unordered_map<std::string, CachedKernel>();  // never destroyed:
  return *c;  // kernels may run while static destructors do
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") != 0;
  return has;
}

}  // namespace

namespace detail {

EwJitFn ew_jit_kernel(const EwProgram& prog, std::span<const EwJitLoad> loads, bool stream_out) {
  if (!ew_jit_enabled() || !generable(prog, loads)) return nullptr;
  // The key of every call on this thread in one buffer: no allocation per
  // call once it has grown to the programs' size.
  thread_local std::string key;
  kernel_key(prog, loads, stream_out, key);
  const std::lock_guard<std::mutex> lock(g_cache_mu);
  auto& kernels = cache();
  if (auto it = kernels.find(key); it != kernels.end()) return it->second.fn;
  if (kernels.size() >= kMaxKernels) return nullptr;
  CachedKernel entry;
  try {
    auto gen = std::make_unique<Gen>();
    emit_kernel(*gen, prog, loads, stream_out);
    gen->ready();
    gen->setProtectModeRE();
    entry.fn = gen->getCode<EwJitFn>();
    entry.code = std::move(gen);
    g_compiled.fetch_add(1, std::memory_order_relaxed);
  } catch (const OutOfRegisters&) {
  } catch (const Xbyak::Error&) {
  }
  return kernels.emplace(key, std::move(entry)).first->second.fn;
}

bool ew_jit_enabled() noexcept { return cpu_has_avx512() && g_codegen.on(); }

}  // namespace detail

bool ew_codegen_available() noexcept { return cpu_has_avx512(); }

#else  // no code generation in this build

namespace detail {
EwJitFn ew_jit_kernel(const EwProgram&, std::span<const EwJitLoad>, bool) { return nullptr; }
bool ew_jit_enabled() noexcept { return false; }
}  // namespace detail

bool ew_codegen_available() noexcept { return false; }

#endif

bool set_ew_codegen(bool on) noexcept { return g_codegen.set(on); }

EwCodegenStats ew_codegen_stats() noexcept {
  return {g_compiled.load(std::memory_order_relaxed), g_runs.load(std::memory_order_relaxed)};
}

namespace detail {
void ew_jit_count_run() noexcept { g_runs.fetch_add(1, std::memory_order_relaxed); }
}  // namespace detail

}  // namespace ms::kernels

#undef MS_EW_CODEGEN  // a unity build's next file must not see it
