// The fused tile loop: dtype rules, the per-op SIMD kernels (Eigen array
// expressions over one tile), gathers for broadcast / strided / converted
// inputs, and the interpreter that runs an EwProgram tile by tile (a straight
// program, dense inputs only, as a flat list of kernel calls; runs that
// stream from memory in short tiles, large outputs with non-temporal stores).
#include "ms/kernels/elementwise.hpp"

#include <algorithm>
#include "ms/core/detail/eigen.hpp"
#include "ms/core/detail/strides.hpp"
#if defined(__SSE2__)
#include <immintrin.h>
#endif
#include <array>
#include <cstring>
#include <unsupported/Eigen/SpecialFunctions>  // erf for gelu

#include "bf16_convert.hpp"
#include "ew_codegen.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms {
namespace kernels {

namespace {
template <class... Ops>
constexpr std::array<EwOpInfo, sizeof...(Ops)> make_infos(OpList<Ops...>) {
  return {EwOpInfo{Ops::name, Ops::arity, Ops::rule}...};
}
constexpr auto kInfos = make_infos(EwInstructions{});
}  // namespace

const EwOpInfo& ew_op_info(int id) {
  MS_CHECK(id >= 0 && id < static_cast<int>(kInfos.size()), IndexError,
           "ew_op_info: no elementwise op with id ", id);
  return kInfos[static_cast<std::size_t>(id)];
}

int ew_op_find(std::string_view name) {
  for (std::size_t i = 0; i < kInfos.size(); ++i)
    if (kInfos[i].name == name) return static_cast<int>(i);
  return -1;
}

namespace {

// Register types, in table order: Bool, Int32, Int64, Float32, Float64 (see reg_index).
constexpr int kNumRegTypes = 5;

int reg_index(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::Int32: return 1;
    case DType::Int64: return 2;
    case DType::Float32: return 3;
    case DType::Float64: return 4;
    default: return -1;
  }
}

template <class T>
using Arr = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using CMap = Eigen::Map<const Arr<T>>;
template <class T>
using MMap = Eigen::Map<Arr<T>>;

// ---------------------------------------------------------------- op kernels

using ApplyFn = void (*)(const void* const* in, void* out, std::int64_t n);

template <class Op, class T>
constexpr bool kernel_valid() {
  constexpr bool num = std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t> ||
                       std::is_same_v<T, float> || std::is_same_v<T, double>;
  constexpr bool flt = std::is_same_v<T, float> || std::is_same_v<T, double>;
  switch (Op::rule) {
    case EwRule::Float: return flt;
    case EwRule::Logical: return std::is_same_v<T, bool>;
    default: return num;
  }
}

template <class Op, class T>
void apply_kernel(const void* const* in, void* out, std::int64_t n) {
  auto store = [&](const auto& e) {
    using R = typename std::decay_t<decltype(e)>::Scalar;
    MMap<R>(static_cast<R*>(out), n) = e;
  };
  if constexpr (Op::arity == 1) {
    store(Op::eval(CMap<T>(static_cast<const T*>(in[0]), n)));
  } else if constexpr (Op::arity == 2) {
    store(Op::eval(CMap<T>(static_cast<const T*>(in[0]), n),
                   CMap<T>(static_cast<const T*>(in[1]), n)));
  } else if constexpr (Op::rule == EwRule::Select) {
    // Op::eval's meaning (c ? x : y) as a plain loop: Eigen evaluates a select
    // on a bool array one coefficient at a time with a branch, which random
    // masks (relu's gradient) mispredict half the time. With both values read
    // and the condition read as bytes (g++ 12 does not vectorize a loop that
    // loads `bool`), this loop compiles to vector blends.
    const auto* c = static_cast<const unsigned char*>(in[0]);
    const T* x = static_cast<const T*>(in[1]);
    const T* y = static_cast<const T*>(in[2]);
    T* q = static_cast<T*>(out);
    for (std::int64_t i = 0; i < n; ++i) {
      const T a = x[i], b = y[i];
      q[i] = c[i] != 0 ? a : b;
    }
  } else {
    store(Op::eval(CMap<T>(static_cast<const T*>(in[0]), n),
                   CMap<T>(static_cast<const T*>(in[1]), n),
                   CMap<T>(static_cast<const T*>(in[2]), n)));
  }
}

template <class Op, class T>
constexpr ApplyFn apply_entry() {
  if constexpr (kernel_valid<Op, T>())
    return &apply_kernel<Op, T>;
  else
    return nullptr;
}

template <class Op>
constexpr std::array<ApplyFn, kNumRegTypes> apply_row() {
  return {apply_entry<Op, bool>(), apply_entry<Op, std::int32_t>(), apply_entry<Op, std::int64_t>(),
          apply_entry<Op, float>(), apply_entry<Op, double>()};
}

template <class... Ops>
constexpr auto apply_table(OpList<Ops...>) {
  return std::array<std::array<ApplyFn, kNumRegTypes>, sizeof...(Ops)>{apply_row<Ops>()...};
}

constexpr auto kApply = apply_table(EwInstructions{});

// ---------------------------------------------------------------- conversions

using ConvertFn = void (*)(const void* in, void* out, std::int64_t n);

template <class From, class To>
void convert_kernel(const void* in, void* out, std::int64_t n) {
  const From* p = static_cast<const From*>(in);
  To* q = static_cast<To*>(out);
  if constexpr (std::is_same_v<To, bool>) {
    for (std::int64_t i = 0; i < n; ++i) q[i] = p[i] != From(0);
  } else if constexpr (std::is_same_v<From, float> && std::is_same_v<To, bfloat16_t>) {
    detail::float_to_bfloat16_n(p, q, n);
  } else if constexpr (std::is_arithmetic_v<From> && std::is_arithmetic_v<To>) {
    MMap<To>(q, n) = CMap<From>(p, n).template cast<To>();
  } else {
    for (std::int64_t i = 0; i < n; ++i) q[i] = scalar_cast<To>(p[i]);
  }
}

// From register type (5) to any stored dtype (15): used for the final store.
template <class From>
ConvertFn store_entry(DType to) {
  return dtype_dispatch(to, [](auto tag) -> ConvertFn {
    using To = typename decltype(tag)::type;
    if constexpr (std::is_same_v<To, std::complex<float>> ||
                  std::is_same_v<To, std::complex<double>>)
      return nullptr;
    else
      return &convert_kernel<From, To>;
  });
}

// ---------------------------------------------------------------- gathers

// Copies elements [begin, begin + n) (row-major over the output shape) of a
// broadcast/strided input into `out`, converting to the register type.
struct GatherPlan {
  int rank = 0;  // the output's, less size-1 dims, nested dims merged (plan_load)
  std::int64_t dims[kMaxEwRank];
  std::int64_t strides[kMaxEwRank];  // 0 along broadcast axes
  const std::byte* base = nullptr;   // element 0 of the storage
  std::int64_t offset = 0;
  DType src = DType::Float32;
  DType dst = DType::Float32;
  bool direct = false;  // contiguous, unbroadcast, same type: use the memory as is
};

// q[i] = p[i * st], i < n: a function of its own, so that its loop keeps the
// stride and both pointers in registers (inlined into gather_kernel's carry
// loop, GCC spilled the stride and read it back for every pair of elements).
template <class S, class D>
[[gnu::noinline]] void copy_strided(const S* p, std::int64_t st, D* q, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i, p += st) q[i] = scalar_cast<D>(*p);
}

template <class S, class D>
void gather_kernel(const GatherPlan& g, std::int64_t begin, std::int64_t n, void* out_v) {
  const S* src = reinterpret_cast<const S*>(g.base);
  D* out = static_cast<D*>(out_v);
  if (g.rank == 0) {
    const D v = scalar_cast<D>(src[g.offset]);
    std::fill_n(out, n, v);
    return;
  }
  std::int64_t idx[kMaxEwRank];
  std::int64_t off = g.offset, rem = begin;
  for (int d = g.rank - 1; d >= 0; --d) {
    idx[d] = rem % g.dims[d];
    rem /= g.dims[d];
    off += idx[d] * g.strides[d];
  }
  const int last = g.rank - 1;
  const std::int64_t inner = g.dims[last], st = g.strides[last];
  std::int64_t done = 0;
  while (done < n) {
    const std::int64_t run = std::min(inner - idx[last], n - done);
    const S* p = src + off;
    D* q = out + done;
    if (st == 0) {
      std::fill_n(q, run, scalar_cast<D>(*p));
    } else if (st == 1) {
      if constexpr (std::is_same_v<S, D>)
        std::memcpy(q, p, static_cast<std::size_t>(run) * sizeof(D));
      else
        for (std::int64_t i = 0; i < run; ++i) q[i] = scalar_cast<D>(p[i]);
    } else {
      copy_strided(p, st, q, run);
    }
    done += run;
    off += run * st;
    idx[last] += run;
    // carry into outer dims
    for (int d = last; d > 0 && idx[d] == g.dims[d]; --d) {
      off -= idx[d] * g.strides[d];
      idx[d] = 0;
      ++idx[d - 1];
      off += g.strides[d - 1];
    }
  }
}

using GatherFn = void (*)(const GatherPlan&, std::int64_t, std::int64_t, void*);

GatherFn gather_fn(DType src, DType dst) {
  return dtype_dispatch(src, [&](auto stag) -> GatherFn {
    using S = typename decltype(stag)::type;
    switch (dst) {
      case DType::Bool: return &gather_kernel<S, bool>;
      case DType::Int32: return &gather_kernel<S, std::int32_t>;
      case DType::Int64: return &gather_kernel<S, std::int64_t>;
      case DType::Float32: return &gather_kernel<S, float>;
      default: return &gather_kernel<S, double>;
    }
  });
}

ConvertFn convert_fn(DType from, DType to) {
  switch (from) {
    case DType::Bool: return store_entry<bool>(to);
    case DType::Int32: return store_entry<std::int32_t>(to);
    case DType::Int64: return store_entry<std::int64_t>(to);
    case DType::Float32: return store_entry<float>(to);
    default: return store_entry<double>(to);
  }
}

void fill_const(void* out, DType t, const Scalar& v, std::int64_t n) {
  dtype_dispatch(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(static_cast<T*>(out), n, v.to<T>());
  });
}

// Per-thread scratch for the registers of one tile.
std::byte* scratch(std::size_t bytes) {
  thread_local std::vector<std::byte> buf;
  if (buf.size() < bytes + 64) buf.resize(bytes + 64);
  auto p = reinterpret_cast<std::uintptr_t>(buf.data());
  return buf.data() + ((64 - p % 64) % 64);
}

// One register slot: kTile elements of the widest register type (8 bytes).
constexpr std::size_t kSlotBytes = static_cast<std::size_t>(kTile) * 8;

// This thread's `count` register slots, the program's constants filled in
// (once per chunk: nothing writes a constant's slot).
std::byte* thread_slots(const EwProgram& prog, std::size_t count) {
  std::byte* regs = scratch(count * kSlotBytes);
  for (const EwInstr& i : prog.instrs)
    if (i.kind == EwInstr::Kind::Const)
      fill_const(regs + static_cast<std::size_t>(i.dst) * kSlotBytes, i.type, i.value, kTile);
  return regs;
}

// Everything one instruction needs at run time, resolved before any thread starts.
struct Step {
  GatherPlan plan;
  GatherFn gather = nullptr;
  ApplyFn apply = nullptr;
  ConvertFn convert = nullptr;
};

// Copies `bytes` from a 64-byte aligned slot to `dst` with non-temporal stores
// where `dst` is aligned to the vector width (memcpy for the rest, and on CPUs
// without SSE2). Callers fence (stream_fence) before the data is read.
void stream_store(std::byte* dst, const std::byte* src, std::int64_t bytes) {
  std::int64_t done = 0;
#if defined(__AVX512F__)
  constexpr std::int64_t kVec = 64;
  if (reinterpret_cast<std::uintptr_t>(dst) % kVec == 0)
    for (; done + kVec <= bytes; done += kVec)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + done), _mm512_load_si512(src + done));
#elif defined(__AVX__)
  constexpr std::int64_t kVec = 32;
  if (reinterpret_cast<std::uintptr_t>(dst) % kVec == 0)
    for (; done + kVec <= bytes; done += kVec)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + done),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(src + done)));
#elif defined(__SSE2__)
  constexpr std::int64_t kVec = 16;
  if (reinterpret_cast<std::uintptr_t>(dst) % kVec == 0)
    for (; done + kVec <= bytes; done += kVec)
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done),
                       _mm_load_si128(reinterpret_cast<const __m128i*>(src + done)));
#endif
  if (done < bytes) std::memcpy(dst + done, src + done, static_cast<std::size_t>(bytes - done));
}

// Orders this thread's non-temporal stores before what follows (the end of
// the parallel region, after which other threads read the output).
void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

// Elements per tile of a run that moves `bytes_per_elem` bytes per element
// of its output: kStreamTile when it streams from memory, else kTile.
std::int64_t run_tile(std::int64_t numel, std::int64_t bytes_per_elem) {
  return numel * bytes_per_elem > kStreamBytes ? kStreamTile : kTile;
}

// Threads take whole tiles, counted from element 0: every element is computed
// at the same place in its tile (the same SIMD packet or scalar remainder, the
// same alignment) whatever the thread count, so results are bitwise the same
// (transcendental functions round differently in scalar and packet code).
std::int64_t tiles_of(std::int64_t numel, std::int64_t tile) { return (numel + tile - 1) / tile; }
// Tiles per chunk: about 2^16 elements.
std::int64_t tile_grain(std::int64_t tile) { return std::max<std::int64_t>(1, (1 << 16) / tile); }

// A second output of a run (ew_run_also): each tile of the output, once
// stored, converted by `fn` into `base` (dense, `item` bytes an element).
struct AlsoOut {
  ConvertFn fn;
  std::byte* base;
  std::int64_t item;
};

// A straight program (see run_straight) as a flat list of calls. Trivial
// types, filled only as far as used (a short program's run must not pay for
// zeroing the room of a long one).
struct StraightSrc {
  const std::byte* base;  // an input's data; nullptr for a slot or no operand
  std::int64_t step;      // bytes per element for an input, 0 otherwise
  int slot;               // -1 unless a slot
};
struct StraightCall {
  ApplyFn fn;
  StraightSrc in[3];
  int dst;  // slot, or -1 for the output
};
constexpr std::size_t kMaxStraightCalls = 24, kMaxStraightSlots = 64;
// A load of a single element broadcast over the output (a 0-d learning rate,
// a bias correction): its value fills a slot of its own past the program's
// (after the staging slot) once per chunk, as a constant's does.
struct StraightSplat {
  std::size_t step;  // the load's step (its gather fills the slot)
  int slot;
};
struct StraightPlan {
  std::array<StraightCall, kMaxStraightCalls> calls;
  std::size_t ncalls = 0;
  std::array<StraightSplat, kMaxStraightCalls> splats;
  std::size_t nsplats = 0;
  std::int64_t bytes_per_elem = 0;  // bytes moved per output element
};

// True when a load reads one element for every output element.
bool splat_load(const GatherPlan& g) {
  return !g.direct &&
         std::all_of(g.strides, g.strides + g.rank, [](std::int64_t s) { return s == 0; });
}

// The calls of a straight program; false for any other program.
bool plan_straight(const EwProgram& prog, std::span<const Step> steps, const Tensor& out,
                   StraightPlan& plan) {
  if (steps.size() > kMaxStraightCalls || prog.num_regs > static_cast<int>(kMaxStraightSlots))
    return false;
  // What each slot holds at this point of the program (kept as separate
  // scalars: copying a whole StraightSrc just after writing it stalls store forwarding).
  std::array<const std::byte*, kMaxStraightSlots> held_base;
  std::array<std::int64_t, kMaxStraightSlots> held_step;
  std::array<int, kMaxStraightSlots> held_slot;
  plan.bytes_per_elem = out.itemsize();
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    const auto d = static_cast<std::size_t>(i.dst);
    if (i.kind == EwInstr::Kind::Load && steps[k].plan.direct) {
      const GatherPlan& g = steps[k].plan;
      const std::int64_t item = dtype_itemsize(g.src);
      held_base[d] = g.base + g.offset * item;
      held_step[d] = item;
      held_slot[d] = -1;
      plan.bytes_per_elem += item;
    } else if (i.kind == EwInstr::Kind::Load && splat_load(steps[k].plan)) {
      const int own = std::max(prog.num_regs, 1) + 1 + static_cast<int>(plan.nsplats);
      if (own >= static_cast<int>(kMaxStraightSlots)) return false;
      plan.splats[plan.nsplats++] = {k, own};
      held_base[d] = nullptr;
      held_step[d] = 0;
      held_slot[d] = own;
    } else if (i.kind == EwInstr::Kind::Const || i.kind == EwInstr::Kind::Apply) {
      if (i.kind == EwInstr::Kind::Apply) {
        StraightCall& c = plan.calls[plan.ncalls++];
        c.fn = steps[k].apply;
        const int operands[3] = {i.a, i.b, i.c};
        for (std::size_t j = 0; j < 3; ++j) {
          const auto r = static_cast<std::size_t>(operands[j]);
          c.in[j] = operands[j] >= 0 ? StraightSrc{held_base[r], held_step[r], held_slot[r]}
                                     : StraightSrc{nullptr, 0, -1};
        }
        c.dst = k + 1 == steps.size() ? -1 : i.dst;
      }
      held_base[d] = nullptr;
      held_step[d] = 0;
      held_slot[d] = i.dst;
    } else {
      return false;
    }
  }
  return true;
}

// A call with this thread's operand addresses: base + t0 * step (an absent
// operand points at the slots, unread); dst nullptr for the output.
struct BoundCall {
  ApplyFn fn;
  const std::byte* base[3];
  std::int64_t step[3];
  std::byte* dst;
};

void bind_calls(const StraightPlan& plan, std::byte* regs,
                std::array<BoundCall, kMaxStraightCalls>& bound) {
  auto slot = [&](int r) { return regs + static_cast<std::size_t>(r) * kSlotBytes; };
  for (std::size_t c = 0; c < plan.ncalls; ++c) {
    BoundCall& bc = bound[c];
    const StraightCall& call = plan.calls[c];
    bc.fn = call.fn;
    for (std::size_t j = 0; j < 3; ++j) {
      const StraightSrc& src = call.in[j];
      bc.base[j] = src.base != nullptr ? src.base : src.slot >= 0 ? slot(src.slot) : regs;
      bc.step[j] = src.step;
    }
    bc.dst = call.dst >= 0 ? slot(call.dst) : nullptr;
  }
}

// Fewest output elements for which a program runs as generated code: the
// chain relu(a * b + c) * 0.5 into an existing y on 1 thread took 1.02 us
// there against the tile loop's 1.21 (8192: 1.36 against 1.89; an ad-hoc
// loop of ms::assign calls); smaller runs were not measured and keep the
// tile loop.
constexpr std::int64_t kCodegenMinElems = 4096;

// A straight program (see run_straight) of float32 loads (dense or one
// element broadcast), constants and exact ops, on its generated kernel
// (ew_codegen.cpp), threads taking the same chunks of tiles as the tile loop.
// Returns false, having done nothing, when the program has no kernel.
bool run_generated(const EwProgram& prog, std::span<const Step> steps, const Tensor& out) {
  const std::int64_t numel = out.numel();
  if (numel < kCodegenMinElems || out.dtype() != DType::Float32 || !detail::ew_jit_enabled() ||
      steps.size() > kMaxStraightCalls)
    return false;
  std::array<detail::EwJitLoad, kMaxStraightCalls> loads{};
  std::array<const float*, detail::kMaxJitStreams> streams{};
  std::array<float, kMaxStraightCalls> broadcasts{};
  std::size_t nstreams = 0, nbroadcasts = 0;
  for (std::size_t k = 0; k < steps.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    if (i.type != DType::Float32) return false;
    if (i.kind == EwInstr::Kind::Const) {
      broadcasts[nbroadcasts++] = i.value.to<float>();
    } else if (i.kind == EwInstr::Kind::Load) {
      const GatherPlan& g = steps[k].plan;
      if (g.direct && g.src == DType::Float32 && nstreams < streams.size()) {
        loads[k] = detail::EwJitLoad::Stream;
        streams[nstreams++] = reinterpret_cast<const float*>(g.base) + g.offset;
      } else if (splat_load(g)) {
        loads[k] = detail::EwJitLoad::Broadcast;
        steps[k].gather(g, 0, 1, &broadcasts[nbroadcasts++]);
      } else {
        return false;
      }
    }
  }
  float* dst = reinterpret_cast<float*>(out.raw_data());
  const bool nt_out =
      numel * 4 >= kStreamOutBytes && reinterpret_cast<std::uintptr_t>(dst) % 64 == 0;
  const detail::EwJitFn fn = detail::ew_jit_kernel(prog, {loads.data(), steps.size()}, nt_out);
  if (fn == nullptr) return false;
  detail::ew_jit_count_run();
  const std::int64_t tile = run_tile(numel, 4 * (static_cast<std::int64_t>(nstreams) + 1));
  kernels::parallel_for(
      tiles_of(numel, tile), tile_grain(tile), [&](std::int64_t tb, std::int64_t te) {
        const std::int64_t b = tb * tile, e = std::min(te * tile, numel);
        std::array<const float*, detail::kMaxJitStreams> at{};
        for (std::size_t j = 0; j < nstreams; ++j) at[j] = streams[j] + b;
        const detail::EwJitCall call{at.data(), dst + b, e - b, broadcasts.data()};
        fn(&call);
      });
  return true;
}

// A straight program: every load a dense input of its register type, every
// other instruction a constant or an op, the last op writing the output (the
// caller checked that). It runs as a flat list of calls whose operands sit at
// base + t0 * step (step 0 for a register slot). Returns false, having done
// nothing, for any other program.
bool run_straight(const EwProgram& prog, std::span<const Step> steps, const Tensor& out,
                  const AlsoOut* also) {
  if (also == nullptr && run_generated(prog, steps, out)) return true;
  StraightPlan plan;
  if (!plan_straight(prog, steps, out, plan)) return false;
  if (also != nullptr) plan.bytes_per_elem += also->item;
  const std::int64_t numel = out.numel();
  const std::int64_t tile = run_tile(numel, plan.bytes_per_elem);
  std::byte* out_base = out.raw_data();
  const std::int64_t out_item = out.itemsize();
  const bool nt_out = numel * out_item >= kStreamOutBytes;
  const std::size_t nregs = static_cast<std::size_t>(std::max(prog.num_regs, 1));
  kernels::parallel_for(
      tiles_of(numel, tile), tile_grain(tile), [&](std::int64_t tb, std::int64_t te) {
        const std::int64_t b = tb * tile, e = std::min(te * tile, numel);
        // One slot past the program's: the last op's tile when it is streamed
        // out; then the splat loads' slots, filled here.
        std::byte* regs = thread_slots(prog, nregs + 1 + plan.nsplats);
        std::byte* staged = regs + nregs * kSlotBytes;
        for (std::size_t j = 0; j < plan.nsplats; ++j) {
          const Step& st = steps[plan.splats[j].step];
          st.gather(st.plan, 0, std::min(tile, numel),
                    regs + static_cast<std::size_t>(plan.splats[j].slot) * kSlotBytes);
        }
        std::array<BoundCall, kMaxStraightCalls> bound;
        bind_calls(plan, regs, bound);
        for (std::int64_t t0 = b; t0 < e; t0 += tile) {
          const std::int64_t n = std::min(tile, e - t0);
          for (std::size_t c = 0; c < plan.ncalls; ++c) {
            const BoundCall& bc = bound[c];
            const void* args[3] = {bc.base[0] + t0 * bc.step[0], bc.base[1] + t0 * bc.step[1],
                                   bc.base[2] + t0 * bc.step[2]};
            std::byte* to = bc.dst;
            if (to == nullptr) to = nt_out ? staged : out_base + t0 * out_item;
            bc.fn(args, to, n);
          }
          if (also != nullptr)
            also->fn(nt_out ? staged : out_base + t0 * out_item, also->base + t0 * also->item, n);
          if (nt_out) stream_store(out_base + t0 * out_item, staged, n * out_item);
        }
        if (nt_out) stream_fence();
      });
  return true;
}

}  // namespace

// ---------------------------------------------------------------- dtype rules

DType ew_register_type(DType t, std::string_view op) {
  MS_CHECK(!dtype_is_complex(t) && t != DType::Int4, TypeError, op, ": dtype ", t,
           " is not supported by elementwise ops (supported: bool, integers, float16, bfloat16, "
           "float32, float64)");
  switch (t) {
    case DType::Bool: return DType::Bool;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32: return DType::Float32;
    case DType::Float64: return DType::Float64;
    case DType::Int64:
    case DType::UInt32:
    case DType::UInt64: return DType::Int64;
    default: return DType::Int32;
  }
}

EwTypes ew_infer_types(int op_id, std::span<const EwOperand> operands) {
  const EwOpInfo& info = ew_op_info(op_id);
  MS_CHECK(static_cast<int>(operands.size()) == info.arity, ValueError, info.name, ": takes ",
           info.arity, " operands, got ", operands.size());
  // The value operands (all but the condition of `where`).
  const std::size_t first = info.rule == EwRule::Select ? 1 : 0;
  bool any_tensor = false;
  DType p = DType::Bool;
  for (std::size_t i = first; i < operands.size(); ++i)
    if (!operands[i].is_scalar) {
      p = any_tensor ? promote_types(p, operands[i].dtype) : operands[i].dtype;
      any_tensor = true;
    }
  for (std::size_t i = first; i < operands.size(); ++i)
    if (operands[i].is_scalar) {
      p = any_tensor ? promote_with_scalar(p, operands[i].kind)
                     : (any_tensor = true, operands[i].dtype);
    }
  for (const EwOperand& o : operands)
    MS_CHECK(!dtype_is_complex(o.dtype) && o.dtype != DType::Int4, TypeError, info.name, ": dtype ",
             o.dtype,
             " is not supported by elementwise ops (supported: bool, integers, float16, "
             "bfloat16, float32, float64)");
  auto arith = [&](DType t) {
    return t == DType::Bool ? DType::Int32 : ew_register_type(t, info.name);
  };
  switch (info.rule) {
    case EwRule::Same: return {p, arith(p), arith(p)};
    case EwRule::Float: {
      const DType out = dtype_is_float(p) ? p : DType::Float32;
      return {out, arith(out), arith(out)};
    }
    case EwRule::Compare: return {DType::Bool, DType::Bool, arith(p)};
    case EwRule::Logical: return {DType::Bool, DType::Bool, DType::Bool};
    case EwRule::Select: return {p, arith(p), arith(p)};
  }
  return {p, arith(p), arith(p)};
}

// ---------------------------------------------------------------- builder

int EwBuilder::new_reg() {
  if (p_.instrs.capacity() == 0) p_.instrs.reserve(8);
  return p_.num_regs++;
}

int EwBuilder::load(int leaf, DType reg_type) {
  EwInstr i;
  i.kind = EwInstr::Kind::Load;
  i.type = reg_type;
  i.leaf = leaf;
  i.dst = static_cast<std::int16_t>(new_reg());
  p_.instrs.push_back(i);
  return i.dst;
}

int EwBuilder::constant(const Scalar& v, DType reg_type) {
  EwInstr i;
  i.kind = EwInstr::Kind::Const;
  i.type = reg_type;
  i.value = v;
  i.dst = static_cast<std::int16_t>(new_reg());
  p_.instrs.push_back(i);
  return i.dst;
}

int EwBuilder::convert(int r, DType from, DType to) {
  if (from == to) return r;
  // Fold a conversion of a load or a constant into it.
  for (EwInstr& i : p_.instrs)
    if (i.dst == r && (i.kind == EwInstr::Kind::Load || i.kind == EwInstr::Kind::Const)) {
      bool used_elsewhere = false;
      for (const EwInstr& j : p_.instrs) used_elsewhere |= (j.a == r || j.b == r || j.c == r);
      if (!used_elsewhere) {
        i.type = to;
        return r;
      }
    }
  EwInstr i;
  i.kind = EwInstr::Kind::Convert;
  i.type = to;
  i.a = static_cast<std::int16_t>(r);
  i.dst = static_cast<std::int16_t>(new_reg());
  p_.instrs.push_back(i);
  return i.dst;
}

int EwBuilder::apply(int op_id, DType result_type, int a, int b, int c) {
  EwInstr i;
  i.kind = EwInstr::Kind::Apply;
  i.type = result_type;
  i.op = static_cast<std::int16_t>(op_id);
  i.a = static_cast<std::int16_t>(a);
  i.b = static_cast<std::int16_t>(b);
  i.c = static_cast<std::int16_t>(c);
  i.dst = static_cast<std::int16_t>(new_reg());
  p_.instrs.push_back(i);
  return i.dst;
}

EwProgram EwBuilder::finish(int result, Shape shape, DType dtype) {
  // Linear-scan register reuse: a register's slot is free after its last
  // use. Constants are filled once per chunk and keep their slot.
  const int n = static_cast<int>(p_.instrs.size());
  std::vector<int> last_use(static_cast<std::size_t>(p_.num_regs), -1);
  for (int k = 0; k < n; ++k) {
    const EwInstr& i = p_.instrs[static_cast<std::size_t>(k)];
    for (int r : {static_cast<int>(i.a), static_cast<int>(i.b), static_cast<int>(i.c)})
      if (r >= 0) last_use[static_cast<std::size_t>(r)] = k;
  }
  // Constants are filled once per chunk, not per tile: their slots are never
  // released (after the loop above, which would set their last use).
  for (const EwInstr& i : p_.instrs)
    if (i.kind == EwInstr::Kind::Const) last_use[static_cast<std::size_t>(i.dst)] = n;
  if (result >= 0) last_use[static_cast<std::size_t>(result)] = n;
  std::vector<int> phys(static_cast<std::size_t>(p_.num_regs), -1), free_slots;
  int slots = 0;
  for (const EwInstr& i : p_.instrs)  // constants own their slot from the start
    if (i.kind == EwInstr::Kind::Const) phys[static_cast<std::size_t>(i.dst)] = slots++;
  for (int k = 0; k < n; ++k) {
    EwInstr& i = p_.instrs[static_cast<std::size_t>(k)];
    const int virt[3] = {i.a, i.b, i.c};  // before renaming to slots
    for (std::int16_t* r : {&i.a, &i.b, &i.c})
      if (*r >= 0) *r = static_cast<std::int16_t>(phys[static_cast<std::size_t>(*r)]);
    const int v = i.dst;
    if (i.kind != EwInstr::Kind::Const) {
      int s;
      if (!free_slots.empty()) {
        s = free_slots.back();
        free_slots.pop_back();
      } else {
        s = slots++;
      }
      phys[static_cast<std::size_t>(v)] = s;
    }
    i.dst = static_cast<std::int16_t>(phys[static_cast<std::size_t>(v)]);
    // Operands whose last use is this instruction release their slots after it.
    for (int r : virt)
      if (r >= 0 && r != v && last_use[static_cast<std::size_t>(r)] == k &&
          std::find(free_slots.begin(), free_slots.end(), phys[static_cast<std::size_t>(r)]) ==
              free_slots.end())
        free_slots.push_back(phys[static_cast<std::size_t>(r)]);
    if (last_use[static_cast<std::size_t>(v)] < k) free_slots.push_back(i.dst);  // dead value
  }
  p_.result = result >= 0 ? phys[static_cast<std::size_t>(result)] : -1;
  p_.num_regs = slots;
  p_.shape = std::move(shape);
  p_.dtype = dtype;
  EwProgram out = std::move(p_);
  p_ = EwProgram{};
  return out;
}

// ---------------------------------------------------------------- interpreter

namespace {

// Resolves a Load: the input's broadcast strides (0 along expanded axes, as
// Tensor::expand computes them) and its gather function.
void plan_load(const EwInstr& i, std::span<const Tensor* const> inputs, const Shape& oshape,
               Step& st) {
  MS_CHECK(i.leaf >= 0 && static_cast<std::size_t>(i.leaf) < inputs.size(), IndexError,
           "elementwise: program reads input ", i.leaf, " of ", inputs.size());
  const Tensor& t = *inputs[static_cast<std::size_t>(i.leaf)];
  MS_CHECK(t.dtype() != DType::Int4 && !dtype_is_complex(t.dtype()), TypeError,
           "elementwise: input dtype ", t.dtype(), " is not supported");
  const std::int64_t r = t.rank(), orank = oshape.rank();
  MS_CHECK(r <= orank, ShapeError, "elementwise: input of shape ", t.shape(),
           " does not broadcast to ", oshape);
  GatherPlan& g = st.plan;
  g.rank = static_cast<int>(orank);
  const bool dense = t.shape() == oshape;
  for (std::int64_t d = 0; d < orank; ++d) {
    const std::int64_t td = d - (orank - r);
    const std::int64_t od = oshape[static_cast<std::size_t>(d)];
    g.dims[d] = od;
    if (td < 0) {
      g.strides[d] = 0;
      continue;
    }
    const std::int64_t sd = t.shape()[static_cast<std::size_t>(td)];
    MS_CHECK(sd == od || sd == 1, ShapeError, "elementwise: input of shape ", t.shape(),
             " does not broadcast to ", oshape);
    g.strides[d] = sd == od ? t.strides()[static_cast<std::size_t>(td)] : 0;
  }
  // Dims of size 1 never move, and two adjacent dims whose strides nest walk
  // as one: the gather reads longer runs (an [N, 1] output is one run of N,
  // not N runs of one), and one element broadcast over any shape is a splat.
  int kept = 0;
  for (int d = 0; d < g.rank; ++d) {
    if (g.dims[d] == 1) continue;
    if (kept > 0 && g.strides[kept - 1] == g.strides[d] * g.dims[d]) {
      g.dims[kept - 1] *= g.dims[d];
      g.strides[kept - 1] = g.strides[d];
    } else {
      g.dims[kept] = g.dims[d];
      g.strides[kept] = g.strides[d];
      ++kept;
    }
  }
  g.rank = kept;
  g.base = t.storage()->data();
  g.offset = t.offset();
  g.src = t.dtype();
  g.dst = i.type;
  g.direct = dense && t.is_contiguous() && t.dtype() == i.type;
  st.gather = gather_fn(t.dtype(), i.type);
}

// Everything each instruction needs at run time, resolved before any thread
// starts (all checks happen here). `slot_type` has room for every register.
void resolve_steps(const EwProgram& prog, const Shape& shape, std::span<const Tensor* const> inputs,
                   Step* steps, DType* slot_type) {
  for (std::size_t k = 0; k < prog.instrs.size(); ++k) {
    const EwInstr& i = prog.instrs[k];
    Step& st = steps[k];
    MS_CHECK(reg_index(i.type) >= 0, TypeError, "elementwise: register type ", i.type,
             " is not a compute type");
    if (i.kind == EwInstr::Kind::Load) {
      plan_load(i, inputs, shape, st);
    } else if (i.kind == EwInstr::Kind::Apply) {
      // Operand types follow the slots as the program runs (slots are reused).
      const auto& info = ew_op_info(i.op);
      const int operand_reg = info.rule == EwRule::Select ? i.b : i.a;
      const DType operand = slot_type[operand_reg];
      st.apply =
          kApply[static_cast<std::size_t>(i.op)][static_cast<std::size_t>(reg_index(operand))];
      MS_CHECK(st.apply != nullptr, TypeError, info.name, ": no kernel for operands of type ",
               operand);
    } else if (i.kind == EwInstr::Kind::Convert) {
      st.convert = convert_fn(slot_type[i.a], i.type);
    }
    slot_type[i.dst] = i.type;
  }
}

// The type of the program's result: that of the last writer of its slot.
DType result_type_of(const EwProgram& prog) {
  DType t = DType::Float32;
  for (const EwInstr& i : prog.instrs)
    if (i.dst == prog.result) t = i.type;
  return t;
}

// The general interpreter: tile by tile, each instruction on the tile's
// slots; the last op writes the output directly (`direct_out`), or the
// result is stored through `store`.
void run_interpreted(const EwProgram& prog, const Step* steps, const Tensor& out, bool direct_out,
                     ConvertFn store, const AlsoOut* also) {
  const std::size_t ninstr = prog.instrs.size();
  const std::int64_t numel = out.numel();
  std::byte* out_base = out.raw_data();
  const std::int64_t out_item = out.itemsize();
  const std::size_t nregs = static_cast<std::size_t>(std::max(prog.num_regs, 1));
  // Broadcast inputs counted in full: an upper bound.
  std::int64_t bytes_per_elem = out_item + (also != nullptr ? also->item : 0);
  for (std::size_t k = 0; k < ninstr; ++k)
    if (prog.instrs[k].kind == EwInstr::Kind::Load)
      bytes_per_elem += dtype_itemsize(steps[k].plan.src);
  const std::int64_t tile = run_tile(numel, bytes_per_elem);
  kernels::parallel_for(
      tiles_of(numel, tile), tile_grain(tile), [&](std::int64_t tb, std::int64_t te) {
        const std::int64_t b = tb * tile, e = std::min(te * tile, numel);
        std::byte* regs = thread_slots(prog, nregs);
        auto slot = [&](int r) { return regs + static_cast<std::size_t>(r) * kSlotBytes; };
        std::array<const void*, 64> small_ptrs{};
        std::vector<const void*> big_ptrs;
        const void** ptr = small_ptrs.data();
        if (nregs > small_ptrs.size()) {
          big_ptrs.resize(nregs);
          ptr = big_ptrs.data();
        }
        for (std::int64_t t0 = b; t0 < e; t0 += tile) {
          const std::int64_t n = std::min(tile, e - t0);
          for (std::size_t k = 0; k < ninstr; ++k) {
            const EwInstr& i = prog.instrs[k];
            void* dst = slot(i.dst);
            switch (i.kind) {
              case EwInstr::Kind::Load: {
                const GatherPlan& g = steps[k].plan;
                if (g.direct) {
                  ptr[i.dst] = g.base + (g.offset + t0) * dtype_itemsize(g.src);
                  continue;
                }
                steps[k].gather(g, t0, n, dst);
                break;
              }
              case EwInstr::Kind::Const: break;
              case EwInstr::Kind::Convert: steps[k].convert(ptr[i.a], dst, n); break;
              case EwInstr::Kind::Apply: {
                const void* args[3] = {i.a >= 0 ? ptr[i.a] : nullptr, i.b >= 0 ? ptr[i.b] : nullptr,
                                       i.c >= 0 ? ptr[i.c] : nullptr};
                if (direct_out && k + 1 == ninstr) dst = out_base + t0 * out_item;
                steps[k].apply(args, dst, n);
                break;
              }
            }
            ptr[i.dst] = dst;
          }
          if (!direct_out) store(ptr[prog.result], out_base + t0 * out_item, n);
          if (also != nullptr) also->fn(out_base + t0 * out_item, also->base + t0 * also->item, n);
        }
      });
}

}  // namespace

namespace {

// ew_run on a contiguous output of shape `shape` (prog.shape, or a
// permutation of it with the inputs permuted alike), with an optional second
// output.
void run_program(const EwProgram& prog, const Shape& shape, std::span<const Tensor* const> inputs,
                 const Tensor& out, const AlsoOut* also) {
  MS_CHECK(shape.rank() <= kMaxEwRank, ShapeError, "elementwise: rank ", shape.rank(),
           " is over the supported maximum of ", kMaxEwRank);
  // Small programs keep their steps and slot types on the stack.
  const std::size_t ninstr = prog.instrs.size();
  constexpr std::size_t kInlineSteps = 24;
  std::array<Step, kInlineSteps> inline_steps;
  std::vector<Step> heap_steps;
  Step* steps = inline_steps.data();
  if (ninstr > kInlineSteps) {
    heap_steps.resize(ninstr);
    steps = heap_steps.data();
  }
  std::array<DType, 64> inline_slot_types;
  std::vector<DType> heap_slot_types;
  DType* slot_type = inline_slot_types.data();
  if (prog.num_regs > 64) {
    heap_slot_types.resize(static_cast<std::size_t>(prog.num_regs));
    slot_type = heap_slot_types.data();
  }
  resolve_steps(prog, shape, inputs, steps, slot_type);
  const DType result_type = prog.result >= 0 ? result_type_of(prog) : DType::Float32;
  MS_CHECK(prog.result >= 0, ValueError, "elementwise: program has no result");
  const EwInstr& last = prog.instrs.back();
  // The last instruction writes straight into the output when the types agree.
  const bool direct_out =
      last.dst == prog.result && last.kind == EwInstr::Kind::Apply && result_type == out.dtype();
  const ConvertFn store = direct_out ? nullptr : convert_fn(result_type, out.dtype());
  MS_CHECK(direct_out || store != nullptr, TypeError, "elementwise: cannot store ", result_type,
           " as ", out.dtype());
  if (direct_out && run_straight(prog, {steps, ninstr}, out, also)) return;
  run_interpreted(prog, steps, out, direct_out, store, also);
}

// True when `t` is broadcast along some dim (stride 0, length over 1).
bool broadcast(const Tensor& t) {
  for (std::size_t d = 0; d < t.strides().size(); ++d)
    if (t.strides()[d] == 0 && t.shape()[d] > 1) return true;
  return false;
}

// True when every input broadcasts to the program's shape (else plan_load
// raises the ShapeError on the unpermuted path) and, with `out`, none shares
// out's memory other than element for element (a transposed view of the
// output would be overwritten before it is read; the unpermuted path goes
// through a temporary).
bool permutable(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor* out) {
  const Shape& o = prog.shape;
  for (const Tensor* t : inputs) {
    const Shape& s = t->shape();
    if (s.rank() > o.rank()) return false;
    for (std::int64_t d = 0; d < s.rank(); ++d) {
      const std::int64_t sd = s[static_cast<std::size_t>(d)];
      if (sd != 1 && sd != o[static_cast<std::size_t>(d + o.rank() - s.rank())]) return false;
    }
    if (out != nullptr && t->storage() == out->storage() &&
        !(s == o && t->offset() == out->offset() &&
          std::ranges::equal(t->strides(), out->strides())))
      return false;
  }
  return true;
}

// ew_run into `out`, dense in the dim order `order`: the program runs over
// the inputs and out permuted by it, out then contiguous.
void run_permuted(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor& out,
                  std::span<const std::int64_t> order) {
  std::vector<Tensor> views;
  std::vector<const Tensor*> ptrs;
  views.reserve(inputs.size());
  for (const Tensor* t : inputs)
    views.push_back(::ms::detail::permute_view(
        t->shape() == prog.shape ? *t : ::ms::detail::expand_view(*t, prog.shape), order));
  for (const Tensor& v : views) ptrs.push_back(&v);
  const Tensor dst = ::ms::detail::permute_view(out, order);
  run_program(prog, dst.shape(), ptrs, dst, nullptr);
}

}  // namespace

void ew_run(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor& out) {
  MS_CHECK(out.shape() == prog.shape && out.dtype() == prog.dtype, ShapeError,
           "elementwise: output ", out.shape(), " ", out.dtype(), " does not match the program's ",
           prog.shape, " ", prog.dtype);
  if (out.numel() == 0) return;
  if (!out.is_contiguous()) {
    const std::vector<std::int64_t> order = ::ms::detail::stride_order(out.strides());
    if (::ms::detail::dense_in(out.shape().dims(), out.strides(), order) &&
        permutable(prog, inputs, &out))
      return run_permuted(prog, inputs, out, order);
    Tensor tmp = ew_eval(prog, inputs);
    ::ms::detail::copy_convert(tmp, out);
    return;
  }
  run_program(prog, prog.shape, inputs, out, nullptr);
}

void ew_run_also(const EwProgram& prog, std::span<const Tensor* const> inputs, const Tensor& out,
                 const Tensor& also) {
  MS_CHECK(out.shape() == prog.shape && out.dtype() == prog.dtype, ShapeError,
           "elementwise: output ", out.shape(), " ", out.dtype(), " does not match the program's ",
           prog.shape, " ", prog.dtype);
  MS_CHECK(also.shape() == out.shape() && also.is_contiguous() && out.is_contiguous(), ShapeError,
           "elementwise: the second output must be dense and of the output's shape ", out.shape(),
           ", got ", also.shape());
  const ConvertFn fn = ew_register_type(out.dtype(), "elementwise") == out.dtype()
                           ? convert_fn(out.dtype(), also.dtype())
                           : nullptr;
  MS_CHECK(fn != nullptr, TypeError, "elementwise: cannot store ", out.dtype(),
           " output as a second output of dtype ", also.dtype());
  if (out.numel() == 0) return;
  const AlsoOut a{fn, also.raw_data(), also.itemsize()};
  run_program(prog, prog.shape, inputs, out, &a);
}

EwDenseFn ew_dense_kernel(int op_id, DType t) noexcept {
  const int r = reg_index(t);
  if (op_id < 0 || static_cast<std::size_t>(op_id) >= kApply.size() || r < 0) return nullptr;
  return kApply[static_cast<std::size_t>(op_id)][static_cast<std::size_t>(r)];
}

Tensor ew_eval(const EwProgram& prog, std::span<const Tensor* const> inputs) {
  // Laid out as the first input of the output's shape (PyTorch's rule): an
  // op on heads split out of [B, T, H, D] runs as one pass over dense memory
  // and its result merges back without a copy.
  for (const Tensor* t : inputs) {
    if (t->shape() != prog.shape) continue;
    if (t->is_contiguous()) break;
    if (broadcast(*t)) continue;  // no order of its own
    const std::vector<std::int64_t> order = ::ms::detail::stride_order(t->strides());
    if (std::is_sorted(order.begin(), order.end()) || !permutable(prog, inputs, nullptr)) break;
    Tensor out(empty(Shape{shape_numel(prog.shape)}, prog.dtype).storage(), prog.dtype, prog.shape,
               ::ms::detail::dense_strides(prog.shape.dims(), order), 0);
    if (out.numel() != 0) run_permuted(prog, inputs, out, order);
    return out;
  }
  Tensor out = empty(prog.shape, prog.dtype);
  ew_run(prog, inputs, out);
  return out;
}

}  // namespace kernels
}  // namespace ms
