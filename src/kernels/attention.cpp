// Fused scaled dot-product attention kernels. See ms/kernels/attention.hpp.
//
// Blocks: kRows query rows by kKeys keys. A chunk of parallel_for owns whole output blocks
// (forward: a block of out rows and their lse; backward: a block of dk/dv rows, or of dq rows, or a
// whole problem's) and walks the other axis in order, so the thread count never changes a sum.
// Products of blocks run on libxsmm's JIT kernels for float when ms's GEMM runs on libxsmm
// (Products), else on Eigen's (EIGEN_DONT_PARALLELIZE: on the calling thread). Their operands are
// copies in the chunk's scratch (q scaled, k and v also transposed where a product reads them so),
// whose rows start on 64-byte lines, except float values and a single query row's keys on libxsmm,
// which are read in place. Eigen's vectorized loops peel scalar heads by address, so on the
// callers' memory the same call could round differently from one allocation to the next (eager
// against a compiled graph); on the scratch, and on libxsmm anywhere, the rounding depends on the
// block sizes only.
#include "ms/kernels/attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <vector>
#include "ms/core/detail/eigen.hpp"

#include "float_dispatch.hpp"
#include "gemm_libxsmm.hpp"
#include "ms/kernels/ew_instructions.hpp"
#include "ms/kernels/gemm.hpp"
#include "ms/kernels/parallel.hpp"
#include "predux.hpp"
#include "prefetch.hpp"
#include "transpose.hpp"

namespace ms::kernels {
namespace {

constexpr std::int64_t kRows = 32;  // query rows per block
constexpr std::int64_t kKeys = kAttentionKeyBlock;
// The forward reads the keys a Bool mask leaves to a block in whole groups of
// this many (Ctx::kept_keys): at most kKeys / kKeyGroup sizes of products.
constexpr std::int64_t kKeyGroup = 16;
static_assert(kKeys >= kRows, "Work::acc holds kKeys rows of dk and kRows rows of out or dq");
constexpr std::int64_t kGrainFlops = 1 << 18;  // work below which a chunk is not split
constexpr std::int64_t kAlign = 64;            // bytes: every scratch row starts on this

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
// Blocks in scratch: rows `ld` elements apart.
template <class T>
using Blk = Eigen::Map<RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
// A block only read: in scratch, or where a caller's tensor holds it.
template <class T>
using CBlk = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class T>
CBlk<T> cview(const Blk<T>& b) {
  return CBlk<T>(b.data(), b.rows(), b.cols(), Eigen::OuterStride<>(b.outerStride()));
}

std::int64_t blocks(std::int64_t n, std::int64_t b) { return (n + b - 1) / b; }

// A row length padded to whole kAlign-byte lines.
template <class T>
std::int64_t padded(std::int64_t n) {
  constexpr std::int64_t per = kAlign / static_cast<std::int64_t>(sizeof(T));
  return std::max<std::int64_t>(per, blocks(n, per) * per);
}

// Element offset of every batch entry of a view of rank >= 2 (the odometer
// over its leading dims, whose strides may be 0); all 0 for an undefined one.
std::vector<std::int64_t> batch_offsets(const Tensor& t, std::int64_t batch) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch), 0);
  if (!t.defined()) return out;
  const Shape& s = t.shape();
  const auto& st = t.strides();
  const std::size_t lead = s.size() - 2;
  std::vector<std::int64_t> idx(lead, 0);
  std::int64_t off = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    out[static_cast<std::size_t>(b)] = off;
    for (std::size_t d = lead; d-- > 0;) {
      off += st[d];
      if (++idx[d] < s[d]) break;
      off -= st[d] * s[d];
      idx[d] = 0;
    }
  }
  return out;
}

// The matrices of one operand [batch dims..., rows, cols] whose rows are
// dense (stride 1 along cols): where each batch entry starts and the stride
// between rows, so that strided views (heads split out of [B, T, H, D]) are
// read and written where they are.
template <class S>
struct Rows {
  S* p = nullptr;
  std::vector<std::int64_t> off;
  std::int64_t rs = 0;
  Rows() = default;
  Rows(const Tensor& t, std::int64_t batch)
      : p(t.data<std::remove_const_t<S>>()),
        off(batch_offsets(t, batch)),
        rs(t.strides()[t.strides().size() - 2]) {}
  // Row i of batch entry b.
  S* at(std::int64_t b, std::int64_t i) const {
    return p + off[static_cast<std::size_t>(b)] + i * rs;
  }
};

// Asks for rows [0, rows) of problem b of `r` (`cols` elements each) a problem
// ahead of their use: the heads split out of a packed projection are rows of
// two cache lines, 2304 bytes apart in char_lm, which the hardware prefetcher
// does not follow. char_lm's attention (forward and backward of one layer
// under jit, an ad-hoc program alternating with and without, Zen 4 VM, medians
// of 100 pairs): 1.06x on 1 thread, 1.07x on 2.
template <class S>
void prefetch_rows(const Rows<const S>& r, std::int64_t b, std::int64_t rows, std::int64_t cols) {
  const auto bytes = static_cast<std::size_t>(cols) * sizeof(S);
  for (std::int64_t i = 0; i < rows; ++i) detail::prefetch_bytes<false, 2>(r.at(b, i), bytes);
}

// A block of `rows` rows of a chunk's scratch, kAlign-aligned rows `ld`
// apart, so that Eigen's vectorized loops (whose scalar head and tail depend
// on a row's address) round alike on every call and thread.
template <class T>
struct BlockScratch {
  std::int64_t ld = 0;
  std::vector<T> mem;
  T* base = nullptr;
  BlockScratch(std::int64_t rows, std::int64_t cols) : ld(padded<T>(cols)) {
    mem.resize(static_cast<std::size_t>(rows * ld + kAlign / static_cast<std::int64_t>(sizeof(T))));
    const auto addr = reinterpret_cast<std::uintptr_t>(mem.data());
    base = mem.data() + (kAlign - addr % kAlign) % kAlign / sizeof(T);
  }
  Blk<T> blk(std::int64_t rows, std::int64_t cols) {
    return Blk<T>(base, rows, cols, Eigen::OuterStride<>(ld));
  }
  // Copies `rows` rows of `cols` elements, `lds` apart from src, into the
  // block, converted to T and multiplied by `factor`.
  template <class S>
  Blk<T> load(const S* src, std::int64_t lds, std::int64_t rows, std::int64_t cols,
              T factor = T(1)) {
    for (std::int64_t r = 0; r < rows; ++r)
      std::transform(src + r * lds, src + r * lds + cols, base + r * ld,
                     [factor](S x) { return static_cast<T>(x) * factor; });
    return blk(rows, cols);
  }
  // Columns [c0, c0 + cols) of the first `rows` rows.
  Blk<T> cols_at(std::int64_t c0, std::int64_t rows, std::int64_t cols) {
    return Blk<T>(base + c0, rows, cols, Eigen::OuterStride<>(ld));
  }
  // Copies the block's `rows` x `cols` to rows `ldd` apart at dst, rounded to D.
  template <class D>
  void store(D* dst, std::int64_t ldd, std::int64_t rows, std::int64_t cols) const {
    for (std::int64_t r = 0; r < rows; ++r)
      std::transform(base + r * ld, base + r * ld + cols, dst + r * ldd,
                     [](T x) { return static_cast<D>(x); });
  }
};

// What every block of one call reads: the inputs (stored as S, computed in
// T), the mask and the band.
template <class T, class S>
struct Ctx {
  Rows<const S> q, k, v;
  std::int64_t batch = 0, tq = 0, tk = 0, e = 0, ev = 0;
  T scale = 1;
  bool causal = false;
  std::int64_t shift = 0;  // tk - tq: row i sees keys j <= i + shift
  const std::byte* mask = nullptr;
  bool mask_bool = false;
  std::vector<std::int64_t> mask_off;
  std::int64_t mask_rs = 0, mask_cs = 0;

  Ctx(const AttentionProblem& p, const Tensor& q_, const Tensor& k_, const Tensor& v_)
      : q(q_, p.batch),
        k(k_, p.batch),
        v(v_, p.batch),
        batch(p.batch),
        tq(p.tq),
        tk(p.tk),
        e(p.e),
        ev(p.ev),
        scale(static_cast<T>(p.scale)),
        causal(p.causal),
        shift(p.tk - p.tq),
        mask_off(batch_offsets(p.mask, p.batch)) {
    if (!p.mask.defined()) return;
    mask = p.mask.raw_data();
    mask_bool = p.mask.dtype() == bool_;
    const auto& st = p.mask.strides();
    mask_rs = st[st.size() - 2];
    mask_cs = st[st.size() - 1];
  }

  // Prefetches q, k and v of problem b (prefetch_rows) when it exists and
  // has several query rows (a decoding step's single row reads its cache's
  // contiguous rows, which the hardware prefetcher follows); true if it did.
  bool prefetch(std::int64_t b) const {
    if (tq < 2 || b >= batch) return false;
    prefetch_rows(q, b, tq, e);
    prefetch_rows(k, b, tk, e);
    prefetch_rows(v, b, tk, ev);
    return true;
  }

  // One past the last key that query row i may see.
  std::int64_t key_end(std::int64_t i) const {
    return causal ? std::clamp<std::int64_t>(i + shift + 1, 0, tk) : tk;
  }

  // How many of keys j0 .. j0 + n - 1 rows i0 .. i0 + m - 1 of problem b
  // need: n less the tail that a Bool mask hides from all of them, rounded up
  // to whole groups of kKeyGroup keys; 0 when it hides the whole block.
  std::int64_t kept_keys(std::int64_t b, std::int64_t i0, std::int64_t m, std::int64_t j0,
                         std::int64_t n) const {
    if (mask == nullptr || !mask_bool) return n;
    std::int64_t end = 0;  // one past the last key a row keeps
    for (std::int64_t i = i0; i < i0 + m && end < n; ++i) {
      const auto* mb = reinterpret_cast<const bool*>(mask) + mask_off[static_cast<std::size_t>(b)] +
                       i * mask_rs + j0 * mask_cs;
      for (std::int64_t c = n; c > end; --c)
        if (mb[(c - 1) * mask_cs]) {
          end = c;
          break;
        }
    }
    return std::min(n, (end + kKeyGroup - 1) / kKeyGroup * kKeyGroup);
  }

  // -inf where a key is not kept, the float mask added, in the scores s of
  // rows i0.. and keys j0.. of problem b.
  void apply_mask(Blk<T>& s, std::int64_t b, std::int64_t i0, std::int64_t j0) const {
    constexpr T kNegInf = -std::numeric_limits<T>::infinity();
    const std::int64_t n = s.cols();
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      T* row = &s(r, 0);
      const std::int64_t i = i0 + r;
      if (mask != nullptr) {
        const std::int64_t base = mask_off[static_cast<std::size_t>(b)] + i * mask_rs;
        if (mask_bool) {
          const auto* mb = reinterpret_cast<const bool*>(mask) + base;
          for (std::int64_t c = 0; c < n; ++c)
            if (!mb[(j0 + c) * mask_cs]) row[c] = kNegInf;
        } else {
          const S* mf = reinterpret_cast<const S*>(mask) + base;
          for (std::int64_t c = 0; c < n; ++c) row[c] += static_cast<T>(mf[(j0 + c) * mask_cs]);
        }
      }
      if (causal)
        for (std::int64_t c = std::max<std::int64_t>(0, i + shift + 1 - j0); c < n; ++c)
          row[c] = kNegInf;
    }
  }

  // s (masked scores) -> P = exp(s - lse) row by row; a row whose lse is
  // -inf kept no key: its probabilities are 0.
  static void probs(Blk<T>& s, const T* lse) {
    for (std::int64_t r = 0; r < s.rows(); ++r) {
      if (std::isinf(lse[r]) && lse[r] < 0)
        s.row(r).setZero();
      else
        s.row(r).array() = exp_flushed(s.row(r).array() - lse[r]);
    }
  }
};

// True when the products of float blocks run on libxsmm's kernels: when
// ms's GEMM does (gemm_backend()), so MS_GEMM=eigen keeps Eigen's here too.
template <class T>
bool blocks_on_libxsmm() {
  if constexpr (std::is_same_v<T, float>) {
    static const bool on = std::string_view(gemm_backend().name) == "libxsmm";
    return on;
  }
  return false;
}

// The products of a chunk's blocks: c = op(a) b, or c += op(a) b with
// `accumulate`, op(a) being a or, with `trans_a`, its transpose. On libxsmm
// (blocks_on_libxsmm) each size gets a JIT kernel, kept with the Work; else,
// and for a size libxsmm declines, Eigen computes it. Either way the rounding
// depends on the block sizes only (Eigen's only on the scratch, see above).
template <class T>
class Products {
 public:
  // True when the products run on libxsmm: an operand may then be read where
  // the caller's tensor holds it.
  bool on_libxsmm() const { return xsmm_; }
  void operator()(Blk<T>& c, const Blk<T>& a, bool trans_a, const Blk<T>& b, bool accumulate) {
    (*this)(c, cview(a), trans_a, cview(b), accumulate);
  }
  void operator()(Blk<T>& c, const CBlk<T>& a, bool trans_a, const CBlk<T>& b, bool accumulate) {
    if (xsmm_) {
      const std::array<std::int64_t, 8> key{trans_a,         accumulate,     c.rows(),
                                            c.cols(),        b.rows(),       a.outerStride(),
                                            b.outerStride(), c.outerStride()};
      auto it = std::find_if(kernels_.begin(), kernels_.end(),
                             [&](const Kernel& k) { return k.key == key; });
      if (it == kernels_.end())
        it = kernels_.insert(kernels_.end(), Kernel{key, detail::libxsmm_block_kernel(
                                                             trans_a, accumulate, key[2], key[3],
                                                             key[4], key[5], key[6], key[7])});
      if (it->f) {
        if constexpr (std::is_same_v<T, float>) it->f(a.data(), b.data(), c.data());
        return;
      }
    }
    if (trans_a && accumulate)
      c.noalias() += a.transpose() * b;
    else if (trans_a)
      c.noalias() = a.transpose() * b;
    else if (accumulate)
      c.noalias() += a * b;
    else
      c.noalias() = a * b;
  }

 private:
  struct Kernel {
    std::array<std::int64_t, 8> key;
    detail::BlockKernel f;
  };
  bool xsmm_ = blocks_on_libxsmm<T>();
  std::vector<Kernel> kernels_;
};

// The keys (or values) of one problem transposed, [cols, tk], each block of
// kKeys keys made on first use and kept while the chunk stays on the problem.
template <class T>
struct Transposed {
  BlockScratch<T> t;
  std::int64_t tk = 0, problem = -1;
  std::vector<bool> done;
  Transposed(std::int64_t cols, std::int64_t tk_)
      : t(cols, tk_), tk(tk_), done(blocks(tk_, kKeys)) {}
  // Keys [j0, j0 + n) of problem b (rows of `src`, `cols` elements each), transposed.
  template <class S>
  Blk<T> block(const Rows<const S>& src, std::int64_t cols, std::int64_t b, std::int64_t j0,
               std::int64_t n) {
    if (b != problem) {
      std::fill(done.begin(), done.end(), false);
      problem = b;
    }
    const auto i = static_cast<std::size_t>(j0 / kKeys);
    if (!done[i]) {  // the whole block: a later call may take more of its keys
      const S* p = src.at(b, j0);
      const std::int64_t keys = std::min(kKeys, tk - j0);
      if constexpr (std::is_same_v<S, float> && std::is_same_v<T, float>)
        detail::transpose32(p, src.rs, keys, cols, t.base + j0, t.ld);
      else
        for (std::int64_t r = 0; r < keys; ++r)
          for (std::int64_t c = 0; c < cols; ++c)
            t.base[c * t.ld + j0 + r] = static_cast<T>(p[r * src.rs + c]);
      done[i] = true;
    }
    return t.cols_at(j0, cols, n);
  }
};

// A chunk's scratch: the blocks of q (scaled), k and v (also transposed,
// per problem), dout, the scores and their gradients, the accumulators of the
// outputs, and the products' kernels.
template <class T>
struct Work {
  std::int64_t e, ev, tk;
  BlockScratch<T> qb, kb, vb, gb, s, dp, acc, acc2;
  Transposed<T> kt, vt;
  std::vector<T> mx, l;
  std::vector<T> ds;  // one problem's dS (backward_t, when it keeps it)
  Products<T> mm;
  Work(std::int64_t e_, std::int64_t ev_, std::int64_t tk_)
      : e(e_),
        ev(ev_),
        tk(tk_),
        qb(kRows, e),
        kb(kKeys, e),
        vb(kKeys, ev),
        gb(kRows, ev),
        s(kRows, kKeys),
        dp(kRows, kKeys),
        acc(kKeys, std::max(e, ev)),
        acc2(kKeys, ev),
        kt(e, tk),
        vt(ev, tk),
        mx(kRows),
        l(kRows) {}
  // Elements of its scratch, roughly.
  static std::int64_t elements(std::int64_t e, std::int64_t ev, std::int64_t tk) {
    return (2 * kRows + 2 * kKeys) * std::max(e, ev) + 2 * kRows * kKeys + (e + ev) * tk;
  }
};

// Up to this many elements, a thread keeps its Work between calls of the same
// sizes: a decoding step's attention (one query row per problem) does less
// work than allocating and zeroing its scratch.
constexpr std::int64_t kKeptWorkElements = 1 << 18;

// A chunk's Work: the calling thread's kept one (its transposed keys and
// values forgotten: a new call has new inputs), or a fresh one for large sizes.
template <class T>
class ChunkWork {
 public:
  ChunkWork(std::int64_t e, std::int64_t ev, std::int64_t tk) {
    if (Work<T>::elements(e, ev, tk) > kKeptWorkElements) {
      own_ = std::make_unique<Work<T>>(e, ev, tk);
      w_ = own_.get();
      return;
    }
    thread_local std::unique_ptr<Work<T>> kept;
    if (!kept || kept->e != e || kept->ev != ev || kept->tk != tk)
      kept = std::make_unique<Work<T>>(e, ev, tk);
    kept->kt.problem = kept->vt.problem = -1;
    w_ = kept.get();
  }
  Work<T>& operator*() const { return *w_; }

 private:
  std::unique_ptr<Work<T>> own_;
  Work<T>* w_ = nullptr;
};

// The online softmax step of one block of scores s (rows of the output
// accumulator o): the running maximum mx and sum l are updated, o rescaled,
// s turned into exp(s - mx), and o += s v_block.
template <class T>
void online_step(Products<T>& mm, Blk<T>& s, Blk<T>& o, const CBlk<T>& vb, T* mx, T* l) {
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  for (std::int64_t r = 0; r < s.rows(); ++r) {
    const T newm = std::max(mx[r], s.row(r).maxCoeff());
    if (newm == kNegInf) {  // no key of this row kept yet
      s.row(r).setZero();
      continue;
    }
    const T alpha = std::exp(mx[r] - newm);  // 0 when mx is -inf
    s.row(r).array() = exp_flushed(s.row(r).array() - newm);
    l[r] = l[r] * alpha + s.row(r).sum();
    if (alpha != T(1)) o.row(r) *= alpha;
    mx[r] = newm;
  }
  mm(o, cview(s), false, vb, true);
}

// True when the products read float rows of `r` (`cols` wide) where its
// tensor holds them: on libxsmm, whose rounding does not depend on addresses.
template <class T, class S>
bool in_place(const Work<T>& w, const Rows<const S>& r, std::int64_t cols) {
  return std::is_same_v<S, T> && w.mm.on_libxsmm() && r.rs >= cols;
}

// The forward's v rows of keys j0.. of problem b: where v holds them
// (in_place), else as block_scores loaded them into w.vb.
template <class T, class S>
CBlk<T> value_rows(const Ctx<T, S>& c, Work<T>& w, std::int64_t b, std::int64_t j0,
                   std::int64_t n) {
  if constexpr (std::is_same_v<S, T>)
    if (in_place(w, c.v, c.ev))
      return CBlk<T>(c.v.at(b, j0), n, c.ev, Eigen::OuterStride<>(c.v.rs));
  return cview(w.vb.blk(n, c.ev));
}

// s[j] = q . k_j for one query row q and n keys k_j, `rs` apart, read where
// they are: each sum over packets of channels in order, then across the
// packet, then the channels past the last whole packet (an order fixed by the
// sizes alone). The blocked product would need k transposed first, which
// costs as much as this whole row.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
void row_scores(const T* q, const T* k, std::int64_t rs, std::int64_t n, std::int64_t e, T* s) {
  using P = typename Eigen::internal::packet_traits<T>::type;
  constexpr std::int64_t PS = Eigen::internal::unpacket_traits<P>::size;
  const std::int64_t full = e / PS * PS;
  constexpr std::int64_t kAtOnce = 4;  // independent chains in flight
  std::int64_t j = 0;
  // s[jj]: the lanes' sum `sum` plus the channels past the last whole packet.
  const auto finish = [&](std::int64_t jj, T sum) {
    for (std::int64_t c = full; c < e; ++c) sum = detail::madd(q[c], k[jj * rs + c], sum);
    s[jj] = sum;
  };
  for (; j + kAtOnce <= n; j += kAtOnce) {
    P acc[kAtOnce];
    for (auto& a : acc) a = Eigen::internal::pset1<P>(T(0));
    for (std::int64_t c = 0; c < full; c += PS) {
      const P qv = Eigen::internal::ploadu<P>(q + c);
      for (std::int64_t r = 0; r < kAtOnce; ++r)
        acc[r] =
            Eigen::internal::pmadd(Eigen::internal::ploadu<P>(k + (j + r) * rs + c), qv, acc[r]);
    }
    T sums[kAtOnce];
    detail::predux_each<T, kAtOnce>(acc, sums);
    for (std::int64_t r = 0; r < kAtOnce; ++r) finish(j + r, sums[r]);
  }
  for (; j < n; ++j) {
    P acc = Eigen::internal::pset1<P>(T(0));
    for (std::int64_t c = 0; c < full; c += PS)
      acc = Eigen::internal::pmadd(Eigen::internal::ploadu<P>(k + j * rs + c),
                                   Eigen::internal::ploadu<P>(q + c), acc);
    finish(j, Eigen::internal::predux(acc));
  }
}
#pragma GCC diagnostic pop

// The masked scores of rows i0.. (q block, scaled, already in w.qb) and keys
// j0.. (transposed, w.kt; a single row reads k in place) into w.s; for the
// forward, v rows into w.vb unless value_rows reads them in place.
template <class T, class S>
Blk<T> block_scores(const Ctx<T, S>& c, Work<T>& w, std::int64_t b, std::int64_t i0, std::int64_t m,
                    std::int64_t j0, std::int64_t n, bool backward) {
  if (!backward && !in_place(w, c.v, c.ev)) w.vb.load(c.v.at(b, j0), c.v.rs, n, c.ev);
  Blk<T> s = w.s.blk(m, n);
  bool done = false;
  if constexpr (std::is_same_v<S, T>) {
    if (m == 1 && in_place(w, c.k, c.e)) {  // one query row (decoding)
      row_scores(w.qb.base, c.k.at(b, j0), c.k.rs, n, c.e, s.data());
      done = true;
    }
  }
  if (!done) w.mm(s, w.qb.blk(m, c.e), false, w.kt.block(c.k, c.e, b, j0, n), false);
  c.apply_mask(s, b, i0, j0);
  return s;
}

template <class T, class S>
void forward_block(const Ctx<T, S>& c, Work<T>& w, std::int64_t b, std::int64_t rb,
                   const Rows<S>& out, T* lse) {
  const std::int64_t i0 = rb * kRows, m = std::min(kRows, c.tq - i0);
  w.qb.load(c.q.at(b, i0), c.q.rs, m, c.e, c.scale);
  Blk<T> o = w.acc.blk(m, c.ev);
  o.setZero();
  std::fill_n(w.mx.data(), m, -std::numeric_limits<T>::infinity());
  std::fill_n(w.l.data(), m, T(0));
  const std::int64_t jend = c.key_end(i0 + m - 1);
  for (std::int64_t j0 = 0; j0 < jend; j0 += kKeys) {
    const std::int64_t n = std::min(kKeys, jend - j0);
    // Hidden keys' scores are -inf and their exps 0: with finite values they
    // would leave mx, l and o as they are (up to the sign of a zero in o), so
    // a wholly hidden block is skipped and a hidden tail cut (kept_keys)
    // without reading their keys and values (the unwritten slots of a
    // decoding cache: non-finite values there do not leak in).
    const std::int64_t kept = c.kept_keys(b, i0, m, j0, n);
    if (kept == 0) continue;
    Blk<T> s = block_scores(c, w, b, i0, m, j0, kept, false);
    online_step(w.mm, s, o, value_rows(c, w, b, j0, kept), w.mx.data(), w.l.data());
  }
  T* lrow = lse + b * c.tq + i0;
  for (std::int64_t r = 0; r < m; ++r) {
    if (w.l[r] > T(0)) {
      o.row(r) /= w.l[r];
      lrow[r] = w.mx[r] + std::log(w.l[r]);
    } else {  // no key kept: out 0 (already), lse -inf
      lrow[r] = -std::numeric_limits<T>::infinity();
    }
  }
  w.acc.store(out.at(b, i0), out.rs, m, c.ev);
}

template <class T, class S>
std::int64_t grain_items(const Ctx<T, S>& c) {
  const std::int64_t per = kRows * std::max<std::int64_t>(c.tk, 1) * (c.e + c.ev + 1);
  return std::max<std::int64_t>(1, kGrainFlops / std::max<std::int64_t>(per, 1));
}

template <class T, class S>
void forward_t(const AttentionProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
               const Tensor& out, const Tensor& lse) {
  const Ctx<T, S> c(p, q, k, v);
  const Rows<S> o(out, p.batch);
  T* l = lse.data<T>();
  const std::int64_t rbs = blocks(p.tq, kRows);
  parallel_for(p.batch * rbs, grain_items(c), [&](std::int64_t begin, std::int64_t end) {
    const ChunkWork<T> lease(p.e, p.ev, p.tk);
    Work<T>& w = *lease;
    for (std::int64_t it = begin; it < end; ++it) {
      const std::int64_t b = it / rbs;
      if (it % rbs == 0) c.prefetch(b + 1);
      forward_block(c, w, b, it % rbs, o, l);
    }
  });
}

// What the backward blocks read beyond the forward's inputs: dout and the
// outputs in the inputs' storage type S, lse and delta in T.
template <class T, class S>
struct Grads {
  Rows<const S> dout;
  const T *lse = nullptr, *delta = nullptr;
  Rows<S> dq, dk, dv;
};

// P (in w.s) and dS = P * (dout v^T - delta) (in w.dp) of the block of rows
// i0.. (q, scaled, and dout blocks already in w.qb, w.gb) and keys j0...
template <class T, class S>
void block_grads(const Ctx<T, S>& c, const Grads<T, S>& g, Work<T>& w, std::int64_t b,
                 std::int64_t i0, std::int64_t m, std::int64_t j0, std::int64_t n) {
  Blk<T> s = block_scores(c, w, b, i0, m, j0, n, true);
  Ctx<T, S>::probs(s, g.lse + b * c.tq + i0);
  Blk<T> dp = w.dp.blk(m, n);
  w.mm(dp, w.gb.blk(m, c.ev), false, w.vt.block(c.v, c.ev, b, j0, n), false);
  const T* delta = g.delta + b * c.tq + i0;
  for (std::int64_t r = 0; r < m; ++r)
    dp.row(r).array() = s.row(r).array() * (dp.row(r).array() - delta[r]);
}

// dk and dv of keys [j0, j0 + n) of problem b: a sum over the query blocks
// that may see them, in order. With `ds`, each block's dS is also kept there
// (rows `ldds` apart, at its rows and keys) for query_block.
template <class T, class S>
void key_block(const Ctx<T, S>& c, const Grads<T, S>& g, Work<T>& w, std::int64_t b,
               std::int64_t kb, T* ds = nullptr, std::int64_t ldds = 0) {
  const std::int64_t j0 = kb * kKeys, n = std::min(kKeys, c.tk - j0);
  Blk<T> dk = w.acc.blk(n, c.e), dv = w.acc2.blk(n, c.ev);
  dk.setZero();
  dv.setZero();
  const std::int64_t first = c.causal ? std::clamp<std::int64_t>(j0 - c.shift, 0, c.tq) : 0;
  for (std::int64_t i0 = first / kRows * kRows; i0 < c.tq; i0 += kRows) {
    const std::int64_t m = std::min(kRows, c.tq - i0);
    // The keys these rows may see (all n but where the causal band cuts the
    // block): the others' probabilities and dS are 0 and add nothing.
    const std::int64_t seen = std::min(n, c.key_end(i0 + m - 1) - j0);
    const Blk<T> q = w.qb.load(c.q.at(b, i0), c.q.rs, m, c.e, c.scale);
    const Blk<T> dout = w.gb.load(g.dout.at(b, i0), g.dout.rs, m, c.ev);
    block_grads(c, g, w, b, i0, m, j0, seen);
    if (ds != nullptr)
      Blk<T>(ds + i0 * ldds + j0, m, seen, Eigen::OuterStride<>(ldds)) = w.dp.blk(m, seen);
    Blk<T> dvs = w.acc2.blk(seen, c.ev), dks = w.acc.blk(seen, c.e);
    w.mm(dvs, w.s.blk(m, seen), true, dout, true);
    w.mm(dks, w.dp.blk(m, seen), true, q, true);  // scale dS^T q: q is scaled
  }
  w.acc.store(g.dk.at(b, j0), g.dk.rs, n, c.e);
  w.acc2.store(g.dv.at(b, j0), g.dv.rs, n, c.ev);
}

// dq of query rows [i0, i0 + m) of problem b: a sum over the key blocks they
// see, in order, of dS k; dS computed again (block_grads), or read from `ds`
// where key_block kept it (rows `ldds` apart). The sums run in the same order
// and dS is the same either way: both cut a key block where the causal band
// ends.
template <class T, class S>
void query_block(const Ctx<T, S>& c, const Grads<T, S>& g, Work<T>& w, std::int64_t b,
                 std::int64_t rb, const T* ds = nullptr, std::int64_t ldds = 0) {
  const std::int64_t i0 = rb * kRows, m = std::min(kRows, c.tq - i0);
  if (ds == nullptr) {
    w.qb.load(c.q.at(b, i0), c.q.rs, m, c.e, c.scale);
    w.gb.load(g.dout.at(b, i0), g.dout.rs, m, c.ev);
  }
  Blk<T> dq = w.acc.blk(m, c.e);
  dq.setZero();
  const std::int64_t jend = c.key_end(i0 + m - 1);
  for (std::int64_t j0 = 0; j0 < jend; j0 += kKeys) {
    const std::int64_t n = std::min(kKeys, jend - j0);
    const CBlk<T> kb = cview(w.kb.load(c.k.at(b, j0), c.k.rs, n, c.e));
    if (ds != nullptr) {
      w.mm(dq, CBlk<T>(ds + i0 * ldds + j0, m, n, Eigen::OuterStride<>(ldds)), false, kb, true);
      continue;
    }
    block_grads(c, g, w, b, i0, m, j0, n);
    w.mm(dq, cview(w.dp.blk(m, n)), false, kb, true);
  }
  dq *= c.scale;
  w.acc.store(g.dq.at(b, i0), g.dq.rs, m, c.e);
}

// Up to this many elements of dS per problem (1 MiB of float), and with at
// least this many problems to share among threads, the backward runs problem
// by problem: its key blocks keep dS, and dq reads it back instead of
// computing the scores, probabilities and dS a second time.
constexpr std::int64_t kKeptDsElements = 1 << 18;
constexpr std::int64_t kKeptDsMinProblems = 8;

template <class T, class S>
void backward_t(const AttentionProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                const Grads<T, S>& g) {
  const Ctx<T, S> c(p, q, k, v);
  const std::int64_t grain = grain_items(c);
  const std::int64_t kbs = blocks(p.tk, kKeys), rbs = blocks(p.tq, kRows);
  const std::int64_t ldds = padded<T>(p.tk);
  if (p.tq * ldds <= kKeptDsElements && p.batch >= kKeptDsMinProblems) {
    parallel_for(p.batch, std::max<std::int64_t>(1, grain / std::max(kbs, rbs)),
                 [&](std::int64_t begin, std::int64_t end) {
                   const ChunkWork<T> lease(p.e, p.ev, p.tk);
                   Work<T>& w = *lease;
                   w.ds.resize(static_cast<std::size_t>(p.tq * ldds));
                   for (std::int64_t b = begin; b < end; ++b) {
                     if (c.prefetch(b + 1)) prefetch_rows(g.dout, b + 1, p.tq, p.ev);
                     for (std::int64_t kb = 0; kb < kbs; ++kb)
                       key_block(c, g, w, b, kb, w.ds.data(), ldds);
                     for (std::int64_t rb = 0; rb < rbs; ++rb)
                       query_block(c, g, w, b, rb, w.ds.data(), ldds);
                   }
                 });
    return;
  }
  parallel_for(p.batch * kbs, grain, [&](std::int64_t begin, std::int64_t end) {
    const ChunkWork<T> lease(p.e, p.ev, p.tk);
    Work<T>& w = *lease;
    for (std::int64_t it = begin; it < end; ++it) key_block(c, g, w, it / kbs, it % kbs);
  });
  parallel_for(p.batch * rbs, grain, [&](std::int64_t begin, std::int64_t end) {
    const ChunkWork<T> lease(p.e, p.ev, p.tk);
    Work<T>& w = *lease;
    for (std::int64_t it = begin; it < end; ++it) query_block(c, g, w, it / rbs, it % rbs);
  });
}

// The batch entries that share one slice of the mask's gradient (equal
// offsets in its stride-0 broadcast view), in increasing order.
struct Slice {
  std::int64_t off = 0;
  std::vector<std::int64_t> batches;
};

std::vector<Slice> slices_of(const std::vector<std::int64_t>& off) {
  std::vector<Slice> out;
  for (std::size_t b = 0; b < off.size(); ++b) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Slice& s) { return s.off == off[b]; });
    if (it == out.end()) it = out.insert(out.end(), Slice{off[b], {}});
    it->batches.push_back(static_cast<std::int64_t>(b));
  }
  return out;
}

// Where the mask's gradient goes: its base, and the strides of its view over
// rows and keys (0 where the mask broadcasts).
template <class S>
struct MaskOut {
  S* base = nullptr;
  std::int64_t rs = 0, cs = 0;
};

// The part of one slice of the mask's gradient a unit of work owns: query
// rows [r0, r1) and keys [c0, c1) (c0 a multiple of kKeys).
struct Part {
  std::int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};

// The mask gradient of one part of a slice: dS summed over the slice's batch
// entries in order (and over rows where rs is 0, over keys where cs is 0),
// accumulated in T and stored once.
template <class T, class S>
void mask_unit(const Ctx<T, S>& c, const Grads<T, S>& g, Work<T>& w, const Slice& sl,
               const Part& pt, const MaskOut<S>& mo) {
  const std::int64_t mq = mo.rs != 0 ? pt.r1 - pt.r0 : 1, mk = mo.cs != 0 ? pt.c1 - pt.c0 : 1;
  std::vector<T> acc(static_cast<std::size_t>(mq * mk), T(0));
  for (const std::int64_t b : sl.batches) {
    for (std::int64_t i0 = pt.r0; i0 < pt.r1; i0 += kRows) {
      const std::int64_t m = std::min(kRows, pt.r1 - i0);
      w.qb.load(c.q.at(b, i0), c.q.rs, m, c.e, c.scale);
      w.gb.load(g.dout.at(b, i0), g.dout.rs, m, c.ev);
      const std::int64_t jend = std::min(pt.c1, c.key_end(i0 + m - 1));
      for (std::int64_t j0 = pt.c0; j0 < jend; j0 += kKeys) {
        const std::int64_t n = std::min(kKeys, jend - j0);
        block_grads(c, g, w, b, i0, m, j0, n);
        const Blk<T> ds = w.dp.blk(m, n);
        for (std::int64_t r = 0; r < m; ++r) {
          T* row = acc.data() + (mo.rs != 0 ? i0 + r - pt.r0 : 0) * mk;
          for (std::int64_t col = 0; col < n; ++col)
            row[mo.cs != 0 ? j0 - pt.c0 + col : 0] += ds(r, col);
        }
      }
    }
  }
  for (std::int64_t r = 0; r < mq; ++r)
    for (std::int64_t col = 0; col < mk; ++col)
      mo.base[sl.off + (pt.r0 + r) * mo.rs + (pt.c0 + col) * mo.cs] =
          static_cast<S>(acc[r * mk + col]);
}

// Units of work: each slice split by row blocks where the mask has rows
// (rs != 0), else by key blocks where it has keys, else whole; every element
// of the gradient is owned by one unit.
template <class T, class S>
void mask_backward_t(const AttentionProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                     const Grads<T, S>& g, const Tensor& dmask) {
  const Ctx<T, S> c(p, q, k, v);
  const std::vector<Slice> sl = slices_of(batch_offsets(dmask, p.batch));
  const auto& st = dmask.strides();
  const MaskOut<S> mo{dmask.data<S>(), p.tq > 1 ? st[st.size() - 2] : 0,
                      p.tk > 1 ? st[st.size() - 1] : 0};
  const bool by_rows = mo.rs != 0, by_keys = !by_rows && mo.cs != 0;
  const std::int64_t parts = by_rows ? blocks(p.tq, kRows) : by_keys ? blocks(p.tk, kKeys) : 1;
  const std::int64_t per = static_cast<std::int64_t>(sl.empty() ? 1 : sl[0].batches.size());
  const std::int64_t units = static_cast<std::int64_t>(sl.size()) * parts;
  parallel_for(units, std::max<std::int64_t>(1, grain_items(c) / per),
               [&](std::int64_t begin, std::int64_t end) {
                 const ChunkWork<T> lease(p.e, p.ev, p.tk);
                 Work<T>& w = *lease;
                 for (std::int64_t it = begin; it < end; ++it) {
                   const std::int64_t i = it % parts;
                   Part pt{0, p.tq, 0, p.tk};
                   if (by_rows) pt = {i * kRows, std::min(p.tq, (i + 1) * kRows), 0, p.tk};
                   if (by_keys) pt = {0, p.tq, i * kKeys, std::min(p.tk, (i + 1) * kKeys)};
                   mask_unit(c, g, w, sl[static_cast<std::size_t>(it / parts)], pt, mo);
                 }
               });
}

}  // namespace

void attention_forward(const AttentionProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, const Tensor& lse) {
  detail::dispatch_float(q.dtype(),
                         [&]<class T, class S>(T*, S*) { forward_t<T, S>(p, q, k, v, out, lse); });
}

void attention_backward(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv) {
  detail::dispatch_float(q.dtype(), [&]<class T, class S>(T*, S*) {
    const Grads<T, S> g{Rows<const S>(dout, p.batch), lse.data<T>(),        delta.data<T>(),
                        Rows<S>(dq, p.batch),         Rows<S>(dk, p.batch), Rows<S>(dv, p.batch)};
    backward_t<T, S>(p, q, k, v, g);
  });
}

void attention_mask_backward(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& dout, const Tensor& lse,
                             const Tensor& delta, const Tensor& dmask) {
  detail::dispatch_float(q.dtype(), [&]<class T, class S>(T*, S*) {
    const Grads<T, S> g{Rows<const S>(dout, p.batch), lse.data<T>(), delta.data<T>(), {}, {}, {}};
    mask_backward_t<T, S>(p, q, k, v, g, dmask);
  });
}

}  // namespace ms::kernels
