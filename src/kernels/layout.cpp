// Copy kernels of the shape and indexing ops (see ms/kernels/layout.hpp).
//
// Every kernel here moves elements as raw bytes of the element size, so one
// instantiation per size (1, 2, 4, 8, 16 bytes) serves every dtype. Work is
// split into fixed blocks whose scratch space (coordinates) is allocated
// before the parallel region: nothing inside a region allocates or throws.
#include "ms/kernels/layout.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "bf16_convert.hpp"
#include "ms/kernels/parallel.hpp"

namespace ms::kernels {
namespace {

// Bytes copied by one thread before another is worth waking (an OpenMP
// region costs a few microseconds; a memcpy of 128 KiB about as much).
constexpr std::int64_t kCopyGrainBytes = std::int64_t{1} << 17;
// Elements per block for element-wise gathers (one index read each).
constexpr std::int64_t kGatherBlock = std::int64_t{1} << 15;

template <std::size_t N>
using SizeTag = std::integral_constant<std::size_t, N>;

// Calls f(SizeTag<itemsize>{}) for the element sizes of ms dtypes.
template <class F>
void with_elem(std::int64_t itemsize, F&& f) {
  switch (itemsize) {
    case 1: f(SizeTag<1>{}); break;
    case 2: f(SizeTag<2>{}); break;
    case 4: f(SizeTag<4>{}); break;
    case 8: f(SizeTag<8>{}); break;
    case 16: f(SizeTag<16>{}); break;
    default: MS_ASSERT(false && "layout kernels: unexpected element size");
  }
}

// Calls f(TypeTag<I>{}) with the C++ type of an Int32/Int64 index tensor.
template <class F>
void with_index(DType t, F&& f) {
  MS_ASSERT(t == DType::Int32 || t == DType::Int64);
  if (t == DType::Int32)
    f(TypeTag<std::int32_t>{});
  else
    f(TypeTag<std::int64_t>{});
}

// Splits [0, n) into blocks of `block` items and calls fn(begin, end, scratch)
// for each on the pool. Each block owns `scratch_per_block` int64s, allocated
// here so that the parallel region allocates nothing. Blocks are fixed by n
// and `block`, so the work done does not depend on the thread count.
template <class F>
void for_blocks(std::int64_t n, std::int64_t block, std::size_t scratch_per_block, F&& fn) {
  if (n <= 0) return;
  block = std::max<std::int64_t>(block, 1);
  const std::int64_t nb = n / block + (n % block != 0 ? 1 : 0);
  const std::size_t per = std::max<std::size_t>(scratch_per_block, 1);
  std::vector<std::int64_t> scratch(static_cast<std::size_t>(nb) * per);
  parallel_for(nb, 1, [&](std::int64_t cb, std::int64_t ce) {
    for (std::int64_t k = cb; k < ce; ++k)
      fn(k * block, std::min(n, (k + 1) * block),
         scratch.data() + static_cast<std::size_t>(k) * per);
  });
}

// Row-major coordinates `c` over `shape` (rank r) advanced one item at a
// time, with the linear offset off = sum(c[d] * strides[d]).
struct Odometer {
  const std::int64_t* shape;
  const std::int64_t* strides;
  std::int64_t* c;
  std::size_t r;
  std::int64_t off = 0;

  void seek(std::int64_t flat) {
    off = 0;
    for (std::size_t d = r; d-- > 0;) {
      c[d] = flat % shape[d];
      flat /= shape[d];
      off += c[d] * strides[d];
    }
  }
  void next() {
    for (std::size_t d = r; d-- > 0;) {
      if (++c[d] < shape[d]) {
        off += strides[d];
        return;
      }
      off -= strides[d] * (shape[d] - 1);
      c[d] = 0;
    }
  }
};

template <std::size_t E>
inline void copy_elem(std::byte* dst, const std::byte* src) {
  std::memcpy(dst, src, E);
}

// True when the axes after `axis` are dense row-major (size-1 axes ignored),
// so that one slice x[..., i, :, :] is a single run of bytes.
bool inner_dense(const Tensor& x, std::int64_t axis) {
  std::int64_t expected = 1;
  for (std::int64_t d = x.rank() - 1; d > axis; --d) {
    const auto u = static_cast<std::size_t>(d);
    if (x.shape()[u] == 1) continue;
    if (x.strides()[u] != expected) return false;
    expected *= x.shape()[u];
  }
  return true;
}

}  // namespace

void concat_rows(std::span<const std::byte* const> srcs, std::span<const std::int64_t> block_bytes,
                 std::byte* dst, std::int64_t rows) {
  const std::size_t n = srcs.size();
  // start[i]: byte offset of input i's block inside one output row.
  std::vector<std::int64_t> start(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) start[i + 1] = start[i] + block_bytes[i];
  const std::int64_t row = start[n];
  if (rows <= 0 || row == 0) return;
  // The op checked that the output's byte size fits in int64.
  const std::int64_t total = rows * row;
  parallel_for(total, kCopyGrainBytes, [&](std::int64_t b, std::int64_t e) {
    std::int64_t pos = b;
    while (pos < e) {
      const std::int64_t r = pos / row, in_row = pos % row;
      // The last input whose block starts at or before in_row; empty blocks
      // share their start with the next one, so this one is never empty.
      const auto i = static_cast<std::size_t>(std::upper_bound(start.begin(), start.end(), in_row) -
                                              start.begin() - 1);
      const std::int64_t within = in_row - start[i];
      const std::int64_t len = std::min(block_bytes[i] - within, e - pos);
      std::memcpy(dst + pos, srcs[i] + r * block_bytes[i] + within, static_cast<std::size_t>(len));
      pos += len;
    }
  });
}

std::int64_t index_find_out_of_range(const Tensor& index, std::int64_t limit) {
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::atomic<std::int64_t> first{kNone};
  const std::int64_t n = index.numel();
  with_index(index.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = index.data<I>();
    const auto ulimit = static_cast<std::uint64_t>(limit);  // limit >= 0
    parallel_for(n, std::int64_t{1} << 16, [&](std::int64_t b, std::int64_t e) {
      // Branch-free test per sub-block (vectorizes); locate only on a hit.
      constexpr std::int64_t kSub = 256;
      for (std::int64_t s = b; s < e; s += kSub) {
        const std::int64_t t = std::min(e, s + kSub);
        bool bad = false;
        for (std::int64_t i = s; i < t; ++i)
          bad |= static_cast<std::uint64_t>(static_cast<std::int64_t>(p[i])) >= ulimit;
        if (!bad) continue;
        for (std::int64_t i = s; i < t; ++i) {
          if (static_cast<std::uint64_t>(static_cast<std::int64_t>(p[i])) >= ulimit) {
            std::int64_t cur = first.load();
            while (i < cur && !first.compare_exchange_weak(cur, i)) {
            }
            return;
          }
        }
      }
    });
  });
  const std::int64_t f = first.load();
  return f == kNone ? -1 : f;
}

std::int64_t index_max(const Tensor& index) {
  std::int64_t m = std::numeric_limits<std::int64_t>::min();
  with_index(index.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = index.data<I>();
    for (std::int64_t i = 0; i < index.numel(); ++i) m = std::max<std::int64_t>(m, p[i]);
  });
  return m;
}

namespace {

// The coordinates of an element-wise index (gather, scatter) over a tensor
// of strides `strides`: index's shape (rank 0 as one element), the strides
// with the indexed axis zeroed (its coordinate comes from the index) and
// that axis's stride.
struct IndexWalk {
  std::vector<std::int64_t> shape, walk;
  std::int64_t axis_stride = 0;
  IndexWalk(const Tensor& index, std::span<const std::int64_t> strides, std::int64_t axis)
      : shape(index.shape().to_vector()), walk(strides.begin(), strides.end()) {
    if (shape.empty()) {  // rank 0: one element, index 0
      shape = {1};
      walk = {0};
      axis = 0;
    }
    const auto ax = static_cast<std::size_t>(axis);
    axis_stride = walk[ax];
    walk[ax] = 0;
  }
  std::size_t rank() const { return shape.size(); }
};

}  // namespace

void gather(const Tensor& x, std::int64_t axis, const Tensor& index, const Tensor& out) {
  const std::int64_t n = out.numel();
  if (n == 0) return;
  const IndexWalk w(index, x.strides(), axis);
  const std::size_t r = w.rank();
  const std::byte* xb = x.raw_data();
  std::byte* ob = out.raw_data();
  with_index(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = index.data<I>();
    with_elem(x.itemsize(), [&](auto esz) {
      constexpr std::size_t E = decltype(esz)::value;
      for_blocks(n, kGatherBlock, r, [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
        Odometer od{w.shape.data(), w.walk.data(), c, r};
        od.seek(b);
        for (std::int64_t p = b; p < e; ++p) {
          const std::int64_t src = od.off + static_cast<std::int64_t>(ip[p]) * w.axis_stride;
          copy_elem<E>(ob + p * static_cast<std::int64_t>(E),
                       xb + src * static_cast<std::int64_t>(E));
          od.next();
        }
      });
    });
  });
}

std::int64_t scatter(const Tensor& out, std::int64_t axis, const Tensor& index, const Tensor& src) {
  const std::int64_t n = index.numel();
  if (n == 0) return -1;
  const IndexWalk w(index, out.strides(), axis);
  const std::size_t r = w.rank();
  std::vector<std::int64_t> c(r);
  std::vector<bool> written(static_cast<std::size_t>(out.numel()));
  const std::byte* sb = src.raw_data();
  std::byte* ob = out.raw_data();
  std::int64_t repeated = -1;
  with_index(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = index.data<I>();
    with_elem(out.itemsize(), [&](auto esz) {
      constexpr std::size_t E = decltype(esz)::value;
      Odometer od{w.shape.data(), w.walk.data(), c.data(), r};
      od.seek(0);
      for (std::int64_t p = 0; p < n; ++p) {
        const std::int64_t dst = od.off + static_cast<std::int64_t>(ip[p]) * w.axis_stride;
        if (written[static_cast<std::size_t>(dst)]) {
          repeated = p;
          return;
        }
        written[static_cast<std::size_t>(dst)] = true;
        copy_elem<E>(ob + dst * static_cast<std::int64_t>(E),
                     sb + p * static_cast<std::int64_t>(E));
        od.next();
      }
    });
  });
  return repeated;
}

void index_select(const Tensor& x_in, std::int64_t axis, const Tensor& index, const Tensor& out) {
  if (out.numel() == 0) return;
  const Tensor x = inner_dense(x_in, axis) ? x_in : ::ms::detail::to_dense(x_in, x_in.dtype());
  const Shape& s = x.shape();
  const auto ax = static_cast<std::size_t>(axis);
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < ax; ++d) outer *= s[d];
  for (std::size_t d = ax + 1; d < s.size(); ++d) inner *= s[d];
  const std::int64_t n = index.numel(), E = x.itemsize(), inner_bytes = inner * E;
  const std::int64_t axis_stride = x.strides()[ax];
  const std::byte* xb = x.raw_data();
  std::byte* ob = out.raw_data();
  // One item = one selected slice (outer position o, index position k).
  const std::int64_t items = outer * n;
  const std::int64_t block = std::max<std::int64_t>(1, kCopyGrainBytes / inner_bytes);
  with_index(index.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = index.data<I>();
    auto run = [&](auto copy_slice) {
      for_blocks(items, block, ax, [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
        Odometer od{s.dims().data(), x.strides().data(), c, ax};
        od.seek(b / n);
        std::int64_t k = b % n;
        for (std::int64_t p = b; p < e; ++p) {
          copy_slice(ob + p * inner_bytes,
                     xb + (od.off + static_cast<std::int64_t>(ip[k]) * axis_stride) * E);
          if (++k == n) {
            k = 0;
            od.next();
          }
        }
      });
    };
    if (inner == 1) {
      with_elem(E, [&](auto esz) {
        constexpr std::size_t kE = decltype(esz)::value;
        run([](std::byte* d, const std::byte* src) { copy_elem<kE>(d, src); });
      });
    } else {
      run([inner_bytes](std::byte* d, const std::byte* src) {
        std::memcpy(d, src, static_cast<std::size_t>(inner_bytes));
      });
    }
  });
}

void one_hot(const Tensor& indices, const Tensor& out) {
  if (out.numel() == 0) return;
  const std::int64_t n = indices.numel(), C = out.shape().dims().back(), E = out.itemsize();
  const std::int64_t row_bytes = C * E;
  const Tensor one = full({}, Scalar(1), out.dtype());
  const std::byte* on = one.raw_data();
  std::byte* ob = out.raw_data();
  with_index(indices.dtype(), [&](auto itag) {
    using I = typename decltype(itag)::type;
    const I* ip = indices.data<I>();
    parallel_for(n, std::max<std::int64_t>(1, kCopyGrainBytes / row_bytes),
                 [&](std::int64_t b, std::int64_t e) {
                   // Zero is all-zero bytes in every dtype (IEEE +0, ints, bool, complex).
                   std::memset(ob + b * row_bytes, 0,
                               static_cast<std::size_t>((e - b) * row_bytes));
                   for (std::int64_t p = b; p < e; ++p)
                     std::memcpy(ob + (p * C + static_cast<std::int64_t>(ip[p])) * E, on,
                                 static_cast<std::size_t>(E));
                 });
  });
}

namespace {

// One block of lines of a running sum: `lines` lines of `n` elements `inner`
// apart, starting at x and out; acc holds one accumulator per line.
template <class T, class Acc>
void cumsum_lines(const T* x, T* out, std::int64_t n, std::int64_t inner, std::int64_t lines,
                  bool exclusive, bool reverse, Acc* acc) {
  std::fill(acc, acc + lines, Acc{});
  for (std::int64_t step = 0; step < n; ++step) {
    const std::int64_t k = reverse ? n - 1 - step : step;
    const T* xr = x + k * inner;
    T* orow = out + k * inner;
    for (std::int64_t i = 0; i < lines; ++i) {
      const Acc before = acc[i];
      acc[i] = static_cast<Acc>(acc[i] + scalar_cast<Acc>(xr[i]));
      orow[i] = scalar_cast<T>(exclusive ? before : acc[i]);
    }
  }
}

}  // namespace

void cumsum(const Tensor& x, std::int64_t axis, bool exclusive, bool reverse, const Tensor& out) {
  if (out.numel() == 0) return;
  const Shape& s = x.shape();
  std::int64_t outer = 1, inner = 1;
  for (std::int64_t d = 0; d < axis; ++d) outer *= s[static_cast<std::size_t>(d)];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const std::int64_t n = s.rank() == 0 ? 1 : s[static_cast<std::size_t>(axis)];
  // Work items: (outer position, block of up to kBlock lines).
  constexpr std::int64_t kBlock = 256;
  const std::int64_t blocks = (inner + kBlock - 1) / kBlock;
  dtype_dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_integral_v<T>, std::uint64_t, double>;
    if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, complex64_t> ||
                  std::is_same_v<T, complex128_t>) {
      MS_ASSERT(false);
    } else {
      const T* xp = x.data<T>();
      T* op = out.data<T>();
      parallel_for(outer * blocks,
                   std::max<std::int64_t>(1, (std::int64_t{1} << 14) / (n * kBlock)),
                   [&](std::int64_t b, std::int64_t e) {
                     Acc acc[kBlock];
                     for (std::int64_t item = b; item < e; ++item) {
                       const std::int64_t o = item / blocks, i0 = (item % blocks) * kBlock;
                       const std::int64_t base = o * n * inner + i0;
                       cumsum_lines(xp + base, op + base, n, inner, std::min(kBlock, inner - i0),
                                    exclusive, reverse, acc);
                     }
                   });
    }
  });
}

void triangle(const Tensor& x, std::int64_t diagonal, bool upper, const Tensor& out) {
  const std::int64_t total = out.numel();
  if (total == 0) return;
  const Shape& s = x.shape();
  const std::size_t r = s.size();  // >= 2
  const std::int64_t M = s[r - 2], N = s[r - 1], rows = total / N;
  // Below -M (above N) every row is kept whole or zeroed whole, as at -M (N):
  // the clamp keeps i + k from overflowing.
  const std::int64_t k = std::clamp<std::int64_t>(diagonal, -M, N);
  const std::int64_t col = x.strides()[r - 1];
  const std::byte* xb = x.raw_data();
  std::byte* ob = out.raw_data();
  with_elem(out.itemsize(), [&](auto esz) {
    constexpr std::size_t kE = decltype(esz)::value;
    constexpr auto sE = static_cast<std::int64_t>(kE);
    const std::int64_t block = std::max<std::int64_t>(1, kCopyGrainBytes / (N * sE));
    // One item = one row (batch position and row i, the odometer's last axis).
    for_blocks(rows, block, r - 1, [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
      Odometer od{s.dims().data(), x.strides().data(), c, r - 1};
      od.seek(b);
      for (std::int64_t row = b; row < e; ++row, od.next()) {
        const std::int64_t i = c[r - 2];
        // Columns [lo, hi) are kept; zero is all-zero bytes in every dtype.
        const std::int64_t lo = upper ? std::clamp<std::int64_t>(i + k, 0, N) : 0;
        const std::int64_t hi = upper ? N : std::clamp<std::int64_t>(i + k + 1, 0, N);
        std::byte* o = ob + row * N * sE;
        const std::byte* src = xb + od.off * sE;
        std::memset(o, 0, static_cast<std::size_t>(lo * sE));
        if (col == 1) {
          std::memcpy(o + lo * sE, src + lo * sE, static_cast<std::size_t>((hi - lo) * sE));
        } else {
          for (std::int64_t j = lo; j < hi; ++j) copy_elem<kE>(o + j * sE, src + j * col * sE);
        }
        std::memset(o + hi * sE, 0, static_cast<std::size_t>((N - hi) * sE));
      }
    });
  });
}

void masked_fill(const Tensor& x, const Tensor& mask, const Tensor& fill, const Tensor& out) {
  const std::int64_t total = out.numel();
  if (total == 0) return;
  const std::byte* xb = x.raw_data();
  const std::byte* mb = mask.raw_data();  // Bool: one byte per element, 0 or 1
  const std::byte* fb = fill.raw_data();
  std::byte* ob = out.raw_data();
  const std::size_t r = x.shape().size();
  if (r == 0) {
    std::memcpy(ob, mb[0] != std::byte{0} ? fb : xb, static_cast<std::size_t>(out.itemsize()));
    return;
  }
  const std::int64_t L = x.shape()[r - 1], rows = total / L;
  const std::int64_t xl = x.strides()[r - 1], ml = mask.strides()[r - 1];
  with_elem(out.itemsize(), [&](auto esz) {
    constexpr std::size_t kE = decltype(esz)::value;
    constexpr auto sE = static_cast<std::int64_t>(kE);
    const std::int64_t block = std::max<std::int64_t>(1, kCopyGrainBytes / (L * sE));
    // One item = one row of the last axis; x and mask each walk their strides.
    for_blocks(rows, block, 2 * (r - 1), [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
      Odometer xo{x.shape().dims().data(), x.strides().data(), c, r - 1};
      Odometer mo{x.shape().dims().data(), mask.strides().data(), c + (r - 1), r - 1};
      xo.seek(b);
      mo.seek(b);
      for (std::int64_t row = b; row < e; ++row, xo.next(), mo.next()) {
        std::byte* o = ob + row * L * sE;
        const std::byte* xr = xb + xo.off * sE;
        const std::byte* mr = mb + mo.off;
        if (xl == 1) {  // the row in one copy, then the filled positions
          std::memcpy(o, xr, static_cast<std::size_t>(L * sE));
          for (std::int64_t j = 0; j < L; ++j)
            if (mr[j * ml] != std::byte{0}) copy_elem<kE>(o + j * sE, fb);
        } else {
          for (std::int64_t j = 0; j < L; ++j)
            copy_elem<kE>(o + j * sE, mr[j * ml] != std::byte{0} ? fb : xr + j * xl * sE);
        }
      }
    });
  });
}

void pad(const Tensor& x, std::span<const std::int64_t> before, PadMode mode, const Tensor& fill,
         const Tensor& out) {
  const std::int64_t total = out.numel();
  if (total == 0) return;
  const std::int64_t E = out.itemsize();
  const std::byte* xb = x.raw_data();
  const std::byte* fb = fill.raw_data();
  std::byte* ob = out.raw_data();
  const std::size_t r = out.shape().size();
  if (r == 0) {
    std::memcpy(ob, xb, static_cast<std::size_t>(E));
    return;
  }
  const Shape& xs = x.shape();
  const std::span<const std::int64_t> st = x.strides();
  // Source coordinate of output coordinate j on axis d, or -1 for the fill value.
  auto source = [&](std::size_t d, std::int64_t j) -> std::int64_t {
    const std::int64_t n = xs[d], s = j - before[d];
    if (s >= 0 && s < n) return s;
    switch (mode) {
      case PadMode::Constant: return -1;
      case PadMode::Reflect: return s < 0 ? -s : 2 * (n - 1) - s;
      case PadMode::Replicate: return s < 0 ? 0 : n - 1;
    }
    return -1;
  };
  const std::int64_t L = out.shape()[r - 1], rows = total / L;
  const std::int64_t row_bytes = L * E;
  const std::int64_t lb = before[r - 1], ln = xs[r - 1], lst = st[r - 1];
  // Output positions [j0, j1) of the last axis read x[j - lb] directly.
  const std::int64_t j0 = std::clamp<std::int64_t>(lb, 0, L);
  const std::int64_t j1 = std::clamp<std::int64_t>(lb + ln, j0, L);
  const std::vector<std::int64_t> no_strides(r, 0);
  with_elem(E, [&](auto esz) {
    constexpr std::size_t kE = decltype(esz)::value;
    constexpr auto sE = static_cast<std::int64_t>(kE);
    const std::int64_t block = std::max<std::int64_t>(1, kCopyGrainBytes / row_bytes);
    for_blocks(rows, block, r - 1, [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
      Odometer od{out.shape().dims().data(), no_strides.data(), c, r - 1};
      od.seek(b);
      for (std::int64_t row = b; row < e; ++row, od.next()) {
        std::byte* o = ob + row * row_bytes;
        std::int64_t base = 0;
        bool inside = true;
        for (std::size_t d = 0; d + 1 < r && inside; ++d) {
          const std::int64_t s = source(d, c[d]);
          inside = s >= 0;
          base += s * st[d];
        }
        if (!inside) {
          for (std::int64_t j = 0; j < L; ++j) copy_elem<kE>(o + j * sE, fb);
          continue;
        }
        auto edge = [&](std::int64_t j) {
          const std::int64_t s = source(r - 1, j);
          copy_elem<kE>(o + j * sE, s < 0 ? fb : xb + (base + s * lst) * sE);
        };
        for (std::int64_t j = 0; j < j0; ++j) edge(j);
        if (j1 > j0) {
          const std::byte* src = xb + (base + (j0 - lb) * lst) * sE;
          if (lst == 1) {
            std::memcpy(o + j0 * sE, src, static_cast<std::size_t>((j1 - j0) * sE));
          } else {
            for (std::int64_t j = j0; j < j1; ++j)
              copy_elem<kE>(o + j * sE, src + (j - j0) * lst * sE);
          }
        }
        for (std::int64_t j = j1; j < L; ++j) edge(j);
      }
    });
  });
}

namespace {

// Copies a strided tensor's elements, in row-major order, to dense `dst`
// (same dtype), in parallel.
void strided_to_dense(const Tensor& x, std::byte* dst) {
  const std::int64_t n = x.numel();
  const std::size_t r = x.shape().size();
  const std::byte* xb = x.raw_data();
  with_elem(x.itemsize(), [&](auto esz) {
    constexpr std::size_t kE = decltype(esz)::value;
    constexpr auto sE = static_cast<std::int64_t>(kE);
    for_blocks(n, kCopyGrainBytes / sE, r, [&](std::int64_t b, std::int64_t e, std::int64_t* c) {
      Odometer od{x.shape().dims().data(), x.strides().data(), c, r};
      od.seek(b);
      for (std::int64_t i = b; i < e; ++i, od.next()) copy_elem<kE>(dst + i * sE, xb + od.off * sE);
    });
  });
}

}  // namespace

void cast(const Tensor& x, const Tensor& out) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  if (x.dtype() == DType::Int4 || out.dtype() == DType::Int4) {
    ms::detail::copy_convert(x, out);  // packed nibbles: serial
    return;
  }
  if (x.dtype() == out.dtype()) {
    strided_to_dense(x, out.raw_data());
    return;
  }
  // A strided input is first gathered densely (one instantiation per element
  // size), so that the dtype-pair conversion loops below are only the dense ones.
  Tensor dense = x;
  if (!x.is_contiguous()) {
    dense = empty(x.shape(), x.dtype());
    strided_to_dense(x, dense.raw_data());
  }
  const std::int64_t grain = kCopyGrainBytes / std::max(x.itemsize(), out.itemsize());
  dtype_dispatch(x.dtype(), [&](auto stag) {
    using S = typename decltype(stag)::type;
    dtype_dispatch(out.dtype(), [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      const S* xp = dense.data<S>();
      D* op = out.data<D>();
      parallel_for(n, grain, [&](std::int64_t b, std::int64_t e) {
        if constexpr (std::is_same_v<S, float> && std::is_same_v<D, bfloat16_t>)
          detail::float_to_bfloat16_n(xp + b, op + b, e - b);
        else
          for (std::int64_t i = b; i < e; ++i) op[i] = scalar_cast<D>(xp[i]);
      });
    });
  });
}

}  // namespace ms::kernels
