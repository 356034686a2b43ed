// ms/io/npy.hpp: .npy writer and strict reader; .npz (zip) writer and validating reader.
#include "ms/io/npy.hpp"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>

#include "ms/core/storage.hpp"
#include "ms/io/file.hpp"

namespace ms::io {
namespace {

static_assert(std::endian::native == std::endian::little,
              "ms::io writes tensor bytes as they are in memory: a little-endian host is assumed");

constexpr std::uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
constexpr std::uint64_t kMaxI64 =
    static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());

using detail::squote;

// ------------------------------------------------------------------ descr

struct Descr {
  DType dtype;
  bool big_endian;
};

std::optional<DType> descr_type(char kind, std::string_view size) {
  struct Row {
    char kind;
    std::string_view size;
    DType dtype;
  };
  static constexpr Row rows[] = {
      {'b', "1", DType::Bool},      {'i', "1", DType::Int8},        {'i', "2", DType::Int16},
      {'i', "4", DType::Int32},     {'i', "8", DType::Int64},       {'u', "1", DType::UInt8},
      {'u', "2", DType::UInt16},    {'u', "4", DType::UInt32},      {'u', "8", DType::UInt64},
      {'f', "2", DType::Float16},   {'f', "4", DType::Float32},     {'f', "8", DType::Float64},
      {'c', "8", DType::Complex64}, {'c', "16", DType::Complex128},
  };
  for (const auto& r : rows)
    if (r.kind == kind && r.size == size) return r.dtype;
  return std::nullopt;
}

Descr parse_descr(std::string_view d, const std::string& what) {
  const std::string shown = squote(d.substr(0, 32));
  std::optional<DType> t;
  if (d.size() >= 3) t = descr_type(d[1], d.substr(2));
  MS_CHECK(t.has_value() && std::string_view("<>|=").find(d[0]) != std::string_view::npos,
           TypeError, what, ": npy dtype ", shown,
           " is not supported (ms reads b1 i1 i2 i4 i8 u1 u2 u4 u8 f2 f4 f8 c8 c16 with byte "
           "order < > = or |)");
  const bool one_byte = dtype_itemsize(*t) == 1;
  MS_CHECK(d[0] != '|' || one_byte, ValueError, what, ": npy dtype ", shown,
           ": byte order '|' is only for 1-byte types");
  return {*t, d[0] == '>' && !one_byte};
}

// ------------------------------------------------------------------ header dict

struct NpyHeader {
  Descr descr{DType::Float32, false};
  bool fortran = false;
  std::vector<std::int64_t> shape;
};

/// A strict reader of the Python dict literal NumPy writes.
class DictParser {
 public:
  DictParser(std::string_view s, const std::string& what) : s_(s), what_(what) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    ws();
    expect('{');
    for (;;) {
      ws();
      if (peek() == '}') break;
      const std::string key = string();
      ws();
      expect(':');
      ws();
      if (key == "descr") {
        MS_CHECK(!seen_descr, ValueError, what_, ": npy header has the key 'descr' twice");
        seen_descr = true;
        MS_CHECK(peek() == '\'' || peek() == '"', TypeError, what_,
                 ": npy descr must be a string; structured dtypes are not supported");
        h.descr = parse_descr(string(), what_);
      } else if (key == "fortran_order") {
        MS_CHECK(!seen_fortran, ValueError, what_,
                 ": npy header has the key 'fortran_order' twice");
        seen_fortran = true;
        h.fortran = boolean();
      } else if (key == "shape") {
        MS_CHECK(!seen_shape, ValueError, what_, ": npy header has the key 'shape' twice");
        seen_shape = true;
        h.shape = tuple();
      } else {
        fail(detail::str_cat("unknown key ", squote(key.substr(0, 32)),
                             " (expected 'descr', 'fortran_order', 'shape')"));
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      MS_CHECK(peek() == '}', ValueError, what_, ": npy header: expected ',' or '}' at byte ", i_);
    }
    ++i_;  // '}'
    ws();
    MS_CHECK(i_ == s_.size(), ValueError, what_, ": npy header: unexpected text after the dict at ",
             "byte ", i_);
    MS_CHECK(seen_descr && seen_fortran && seen_shape, ValueError, what_, ": npy header lacks ",
             !seen_descr     ? "'descr'"
             : !seen_fortran ? "'fortran_order'"
                             : "'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const {
    detail::raise<ValueError>(what_, ": npy header: ", msg);
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  void expect(char c) {
    if (peek() != c) fail(detail::str_cat("expected '", c, "' at byte ", i_));
    ++i_;
  }
  std::string string() {
    const char q = peek();
    if (q != '\'' && q != '"') fail(detail::str_cat("expected a quoted string at byte ", i_));
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      const auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '\\') fail("escapes in strings are not supported");
      if (c < 0x20 || c >= 0x7f) fail(detail::str_cat("unexpected byte ", int(c), " in a string"));
      ++i_;
    }
    if (i_ >= s_.size()) fail("unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    fail(detail::str_cat("fortran_order must be True or False (at byte ", i_, ")"));
  }
  std::int64_t integer() {
    const std::size_t start = i_;
    std::uint64_t v = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
      const auto digit = static_cast<std::uint64_t>(s_[i_] - '0');
      if (v > (kMaxI64 - digit) / 10) fail("a shape dim overflows int64");
      v = v * 10 + digit;
      ++i_;
    }
    if (i_ == start) fail(detail::str_cat("expected a non-negative integer at byte ", i_));
    if (i_ - start > 1 && s_[start] == '0') fail("a shape dim has a leading zero");
    return static_cast<std::int64_t>(v);
  }
  std::vector<std::int64_t> tuple() {
    if (peek() != '(') fail("shape must be a tuple");
    ++i_;
    std::vector<std::int64_t> dims;
    bool comma_after_last = false;
    for (;;) {
      ws();
      if (peek() == ')') break;
      if (dims.size() >= 64) fail("shape has more than 64 dims");
      dims.push_back(integer());
      ws();
      comma_after_last = peek() == ',';
      if (comma_after_last) {
        ++i_;
        continue;
      }
      if (peek() != ')') fail(detail::str_cat("expected ',' or ')' in the shape at byte ", i_));
    }
    ++i_;
    // (3) is the number 3 in Python, not a tuple.
    if (dims.size() == 1 && !comma_after_last) fail("shape (n) is not a tuple; write (n,)");
    return dims;
  }

  std::string_view s_;
  const std::string& what_;
  std::size_t i_ = 0;
};

/// The magic, version, header length and parsed header; `data_offset` receives
/// where the data begins.
NpyHeader read_npy_header(const ByteSource& src, std::uint64_t& data_offset,
                          const std::string& what) {
  const std::uint64_t size = src.size();
  MS_CHECK(size >= 10, ValueError, what, ": npy file has ", size,
           " bytes, less than its 10-byte preamble");
  std::uint8_t pre[12];
  src.read(0, pre, 10);
  MS_CHECK(std::memcmp(pre, kMagic, 6) == 0, ValueError, what,
           ": not an npy file (the magic \\x93NUMPY is missing)");
  const int major = pre[6], minor = pre[7];
  MS_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, ValueError, what,
           ": npy version ", major, ".", minor, " is not supported (1.0, 2.0, 3.0)");
  std::uint64_t hlen = 0, hstart = 10;
  if (major == 1) {
    hlen = pre[8] | (std::uint32_t{pre[9]} << 8);
  } else {
    MS_CHECK(size >= 12, ValueError, what, ": npy file has ", size,
             " bytes, less than its 12-byte preamble");
    src.read(10, pre + 10, 2);
    hlen = pre[8] | (std::uint32_t{pre[9]} << 8) | (std::uint32_t{pre[10]} << 16) |
           (std::uint32_t{pre[11]} << 24);
    hstart = 12;
  }
  MS_CHECK(hlen <= kNpyMaxHeaderBytes, ValueError, what, ": npy header length ", hlen,
           " is over the limit of ", kNpyMaxHeaderBytes);
  MS_CHECK(hlen <= size - hstart, ValueError, what, ": npy header length ", hlen,
           " is past the end of the file (", size, " bytes)");
  std::string header(static_cast<std::size_t>(hlen), '\0');
  src.read(hstart, header.data(), header.size());
  if (major == 3) {
    const auto bad = utf8_invalid_at(
        std::span(reinterpret_cast<const std::uint8_t*>(header.data()), header.size()));
    MS_CHECK(!bad, ValueError, what, ": npy 3.0 header is not valid UTF-8");
  }
  data_offset = hstart + hlen;
  return DictParser(header, what).parse();
}

void byteswap_in_place(std::byte* p, std::int64_t count, std::int64_t unit) {
  for (std::int64_t i = 0; i < count; ++i, p += unit) std::reverse(p, p + unit);
}

Tensor load_npy_from(const ByteSource& src, const std::string& what) {
  std::uint64_t data_offset = 0;
  const NpyHeader h = read_npy_header(src, data_offset, what);
  const DType dt = h.descr.dtype;
  const auto item = static_cast<std::uint64_t>(dtype_itemsize(dt));
  std::uint64_t numel = 1;
  bool zero = false;
  for (const auto d : h.shape) {
    const auto dd = static_cast<std::uint64_t>(std::max<std::int64_t>(d, 1));
    MS_CHECK(numel <= kMaxI64 / dd, ValueError, what, ": npy shape ", Shape(h.shape),
             " overflows (more than 2^63 - 1 elements)");
    numel *= dd;
    zero = zero || d == 0;
  }
  // Bytes too (ignoring zero dims: strides in bytes must not overflow either).
  MS_CHECK(numel <= kMaxI64 / item, ValueError, what, ": npy shape ", Shape(h.shape), " of ", dt,
           " overflows (more than 2^63 - 1 bytes)");
  if (zero) numel = 0;
  const std::uint64_t nbytes = numel * item;
  const std::uint64_t avail = src.size() - data_offset;
  MS_CHECK(avail >= nbytes, ValueError, what, ": npy data is truncated: shape ", Shape(h.shape),
           " of ", dt, " needs ", nbytes, " bytes, the file has ", avail);
  MS_CHECK(avail == nbytes, ValueError, what, ": ", avail - nbytes,
           " trailing bytes after the npy data (shape ", Shape(h.shape), " of ", dt, " needs ",
           nbytes, ")");

  // Fortran order: the bytes are the C-order layout of the reversed shape.
  std::vector<std::int64_t> dims = h.shape;
  if (h.fortran) std::reverse(dims.begin(), dims.end());
  Tensor t = empty(Shape(dims), dt);
  if (nbytes > 0) src.read(data_offset, t.raw_data(), static_cast<std::size_t>(nbytes));
  src.finish();
  if (h.descr.big_endian) {
    const std::int64_t unit = dtype_is_complex(dt) ? t.itemsize() / 2 : t.itemsize();
    byteswap_in_place(t.raw_data(), t.numel() * (t.itemsize() / unit), unit);
  }
  if (dt == DType::Bool) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(t.raw_data());
    for (std::int64_t i = 0; i < t.numel(); ++i)
      MS_CHECK(p[i] <= 1, ValueError, what, ": npy bool array holds byte ", int(p[i]),
               " at element ", i, " (must be 0 or 1)");
  }
  if (h.fortran && dims.size() > 1) {
    std::vector<std::int64_t> axes(dims.size());
    std::iota(axes.rbegin(), axes.rend(), 0);
    const detail::TracingSuspend eager;
    const Tensor view = detail::permute_view(t, axes);
    t = detail::to_dense(view, view.dtype());
  }
  return t;
}

std::string py_tuple(const Shape& s) {
  std::ostringstream os;
  os << "(";
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ",";
  os << ")";
  return os.str();
}

void check_saveable(const Tensor& t, std::string_view what) {
  MS_CHECK(t.defined(), ValueError, what, ": tensor is undefined");
  MS_CHECK(!t.is_symbolic(), ValueError, what,
           ": tensor is symbolic (traced by ms::jit); save concrete tensors");
  (void)npy_descr(t.dtype());
  MS_CHECK(t.rank() <= 64, ValueError, what, ": rank ", t.rank(),
           " is over 64 (the most the reader, and NumPy 2, accept)");
}

/// The npy preamble and header (NumPy's layout: padded so the data starts at a multiple of 64).
std::string npy_header(const Tensor& t) {
  std::string dict = "{'descr': '" + npy_descr(t.dtype()) +
                     "', 'fortran_order': False, 'shape': " + py_tuple(t.shape()) + ", }";
  // NumPy leaves room to grow the first dim in place (GROWTH_AXIS_MAX_DIGITS = 21).
  if (t.rank() > 0) dict.append(21 - std::to_string(t.shape()[0]).size(), ' ');
  std::string out;
  for (const int version : {1, 2}) {
    const std::size_t prefix = version == 1 ? 10 : 12;
    const std::size_t hlen0 = dict.size() + 1;  // + '\n'
    const std::size_t pad = 64 - (prefix + hlen0) % 64;
    const std::size_t hlen = hlen0 + pad;
    if (version == 1 && hlen > 0xFFFF) continue;
    out.assign(reinterpret_cast<const char*>(kMagic), 6);
    out.push_back(static_cast<char>(version));
    out.push_back(0);
    for (std::size_t b = 0; b < prefix - 8; ++b) out.push_back(static_cast<char>(hlen >> (8 * b)));
    out += dict;
    out.append(pad, ' ');
    out.push_back('\n');
    break;
  }
  return out;
}

void write_npy(ByteSink& out, const Tensor& t) {
  const std::string h = npy_header(t);
  out.write(h.data(), h.size());
  const detail::TracingSuspend eager;
  const Tensor c = detail::to_dense(t, t.dtype());
  if (c.numel() > 0) out.write(c.raw_data(), static_cast<std::size_t>(c.nbytes()));
}

// ------------------------------------------------------------------ zip

constexpr std::uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint32_t kU32Max = 0xFFFFFFFFu;

std::uint16_t rd16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
std::uint32_t rd32(const std::uint8_t* p) {
  return std::uint32_t{p[0]} | (std::uint32_t{p[1]} << 8) | (std::uint32_t{p[2]} << 16) |
         (std::uint32_t{p[3]} << 24);
}
std::uint64_t rd64(const std::uint8_t* p) {
  return std::uint64_t{rd32(p)} | (std::uint64_t{rd32(p + 4)} << 32);
}

void put16(std::string& s, std::uint32_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>((v >> 8) & 0xFF));
}
void put32(std::string& s, std::uint32_t v) {
  put16(s, v & 0xFFFF);
  put16(s, v >> 16);
}

std::uint32_t crc32_of(const std::uint8_t* p, std::uint64_t n) {
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const auto chunk = static_cast<uInt>(std::min<std::uint64_t>(n, 1u << 30));
    crc = ::crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(crc);
}

/// Bounds-checked reads of the archive: every access goes through here.
struct Zip {
  const ByteSource& src;
  const std::string& what;
  /// The bytes [off, off + n), or an error naming `part` when they are not all there.
  std::vector<std::uint8_t> read(std::uint64_t off, std::uint64_t n, std::string_view part) const {
    MS_CHECK(off <= src.size() && n <= src.size() - off, ValueError, what, ": zip ", part,
             " (bytes ", off, " to ", off + n, ") lies past the end of the archive (", src.size(),
             " bytes)");
    std::vector<std::uint8_t> out(static_cast<std::size_t>(n));
    if (n > 0) src.read(off, out.data(), out.size());
    return out;
  }
};

/// The bytes [begin, begin + size) of another source, read front to back exactly
/// once (as load_npy_from does), their CRC-32 checked against `crc` at the end.
class CrcSource final : public ByteSource {
 public:
  CrcSource(const ByteSource& src, std::uint64_t begin, std::uint64_t size, std::uint32_t crc,
            const std::string& who)
      : src_(src), begin_(begin), size_(size), crc_(crc), who_(who) {}
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, void* dst, std::size_t n) const override {
    MS_CHECK(offset == next_ && n <= size_ - offset, ValueError, who_, ": reading ", n,
             " bytes at offset ", offset, " of a member of ", size_, " bytes out of order");
    src_.read(begin_ + offset, dst, n);
    const auto* p = static_cast<const Bytef*>(dst);
    for (std::size_t left = n; left > 0;) {
      const auto chunk = static_cast<uInt>(std::min<std::size_t>(left, 1u << 30));
      running_ = ::crc32(running_, p, chunk);
      p += chunk;
      left -= chunk;
    }
    next_ += n;
  }
  void finish() const override {
    MS_CHECK(next_ == size_, ValueError, who_, ": ", size_ - next_,
             " bytes of the member were not read");
    MS_CHECK(static_cast<std::uint32_t>(running_) == crc_, ValueError, who_,
             ": CRC-32 mismatch (data ", running_, ", header ", crc_, ")");
    src_.finish();
  }

 private:
  const ByteSource& src_;
  std::uint64_t begin_, size_;
  std::uint32_t crc_;
  const std::string& who_;
  mutable std::uint64_t next_ = 0;
  mutable uLong running_ = ::crc32(0L, Z_NULL, 0);
};

/// Finds the zip64 extended-information field (id 1) in an extra block and
/// replaces each of `fields` that is 0xFFFFFFFF by the next 8-byte value.
void apply_zip64_extra(const std::uint8_t* extra, std::size_t n,
                       std::initializer_list<std::uint64_t*> fields, const std::string& who) {
  std::size_t i = 0;
  while (i + 4 <= n) {
    const std::uint16_t id = rd16(extra + i), len = rd16(extra + i + 2);
    MS_CHECK(i + 4 + len <= n, ValueError, who, ": zip extra field runs past its block");
    if (id == 1) {
      std::size_t k = 0;
      for (std::uint64_t* f : fields) {
        if (*f != kU32Max) continue;
        MS_CHECK(k + 8 <= len, ValueError, who, ": zip64 extra field is too short");
        *f = rd64(extra + i + 4 + k);
        k += 8;
      }
      return;
    }
    i += 4 + std::size_t{len};
  }
  for (std::uint64_t* f : fields)
    MS_CHECK(*f != kU32Max, ValueError, who,
             ": a zip size or offset is 0xFFFFFFFF but there is no zip64 extra field");
}

/// Inflates the `csize` bytes at `begin` of `src`, which must give exactly `usize`
/// bytes. The input is read in chunks and the output grows with what zlib
/// produces, never past `usize`.
std::vector<std::uint8_t> inflate_member(const ByteSource& src, std::uint64_t begin,
                                         std::uint64_t csize, std::uint64_t usize,
                                         const std::string& who) {
  z_stream zs{};
  MS_CHECK(inflateInit2(&zs, -MAX_WBITS) == Z_OK, ValueError, who, ": zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&zs};
  // Grows with the actual output, never to a declared size not yet reached.
  std::vector<std::uint8_t> out(
      static_cast<std::size_t>(std::min<std::uint64_t>(usize, (1u << 16) + 4 * csize)));
  std::vector<std::uint8_t> in(static_cast<std::size_t>(std::min<std::uint64_t>(csize, 1u << 20)));
  std::uint64_t produced = 0, consumed = 0, fed = 0;
  for (;;) {
    if (zs.avail_in == 0 && fed < csize) {
      const auto chunk = static_cast<uInt>(std::min<std::uint64_t>(csize - fed, in.size()));
      src.read(begin + fed, in.data(), chunk);
      fed += chunk;
      zs.next_in = in.data();
      zs.avail_in = chunk;
    }
    std::uint8_t probe = 0;
    const bool full = produced == out.size();
    if (full && out.size() < usize)
      out.resize(static_cast<std::size_t>(std::min<std::uint64_t>(usize, 2 * out.size())));
    const bool probing = produced == out.size();  // at the declared size: one more byte is an error
    const auto room =
        probing ? 1u : static_cast<uInt>(std::min<std::uint64_t>(out.size() - produced, 1u << 30));
    zs.next_out = probing ? &probe : out.data() + produced;
    zs.avail_out = room;
    const uInt avail_in_before = zs.avail_in;
    const int ret = ::inflate(&zs, Z_NO_FLUSH);
    consumed += avail_in_before - zs.avail_in;
    const std::uint64_t got = room - zs.avail_out;
    MS_CHECK(!(probing && got > 0), ValueError, who, ": deflate data inflates to more than the ",
             usize, " bytes its header declares");
    produced += got;
    if (ret == Z_STREAM_END) break;
    MS_CHECK(ret == Z_OK || ret == Z_BUF_ERROR, ValueError, who, ": corrupt deflate data (",
             zs.msg ? zs.msg : "zlib error", ")");
    // No progress: the input ran out before the stream's end (or zlib is stuck).
    MS_CHECK(got > 0 || avail_in_before != zs.avail_in, ValueError, who,
             consumed == csize ? ": deflate data is truncated (the stream does not end)"
                               : ": deflate data makes no progress");
  }
  MS_CHECK(consumed == csize && zs.avail_in == 0, ValueError, who, ": ", csize - consumed,
           " bytes follow the end of the deflate stream");
  MS_CHECK(produced == usize, ValueError, who, ": deflate data inflates to ", produced,
           " bytes but its header declares ", usize);
  return out;
}

/// The most bytes `compressed` bytes may declare under `limits`' ratio rule.
std::uint64_t ratio_bound(std::uint64_t compressed, const NpzLimits& limits) {
  const double bound = limits.max_ratio * static_cast<double>(compressed);
  const auto free = static_cast<std::uint64_t>(limits.ratio_free_bytes);
  if (bound >= 0x1p63) return std::numeric_limits<std::uint64_t>::max();
  return std::max(free, static_cast<std::uint64_t>(bound));
}

struct Member {
  std::string name;
  std::uint16_t flags = 0, method = 0;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0, local = 0;
  std::uint64_t data_begin = 0, data_end = 0;
};

void check_npz_limits(const NpzLimits& limits, const std::string& what) {
  MS_CHECK(limits.max_bytes >= 0, ValueError, what, ": NpzLimits::max_bytes must be >= 0, got ",
           limits.max_bytes);
  MS_CHECK(limits.max_ratio >= 1, ValueError, what, ": NpzLimits::max_ratio must be >= 1, got ",
           limits.max_ratio);
  MS_CHECK(limits.ratio_free_bytes >= 0, ValueError, what,
           ": NpzLimits::ratio_free_bytes must be >= 0, got ", limits.ratio_free_bytes);
}

/// Where an archive's central directory lies, from its end records.
struct CentralDir {
  std::uint64_t offset = 0, size = 0, end = 0, entries = 0;
};

/// The zip64 end record that replaces the classic one's saturated fields.
void read_zip64_end(const Zip& z, std::uint64_t eocd, std::uint64_t& disk, std::uint64_t& cd_disk,
                    std::uint64_t& n_disk, CentralDir& d) {
  const std::string& what = z.what;
  MS_CHECK(eocd >= 20, ValueError, what, ": zip64 end of central directory locator is missing");
  const std::vector<std::uint8_t> locator = z.read(eocd - 20, 20, "zip64 locator");
  const std::uint8_t* loc = locator.data();
  MS_CHECK(rd32(loc) == kZip64LocatorSig, ValueError, what,
           ": zip64 end of central directory locator is missing");
  const std::uint64_t z64 = rd64(loc + 8);
  MS_CHECK(rd32(loc + 4) == 0 && rd32(loc + 16) == 1, ValueError, what,
           ": multi-disk zip archives are not supported");
  const std::vector<std::uint8_t> record = z.read(z64, 56, "zip64 end of central directory record");
  const std::uint8_t* r = record.data();
  MS_CHECK(rd32(r) == kZip64EndSig, ValueError, what,
           ": bad zip64 end of central directory signature");
  MS_CHECK(z64 + 56 <= eocd - 20, ValueError, what,
           ": zip64 end of central directory record overlaps the locator");
  disk = rd32(r + 16);
  cd_disk = rd32(r + 20);
  n_disk = rd64(r + 24);
  d.entries = rd64(r + 32);
  d.size = rd64(r + 40);
  d.offset = rd64(r + 48);
  d.end = z64;
}

/// Finds the end record (the last signature whose comment reaches exactly to
/// the end; only the last 22 + 65535 bytes can hold it) and checks the
/// central directory it points to.
CentralDir find_central_dir(const Zip& z) {
  const std::string& what = z.what;
  const std::uint64_t size = z.src.size();
  MS_CHECK(size >= 22, ValueError, what, ": not a zip archive (", size,
           " bytes, less than an end of central directory record)");
  const std::uint64_t lowest = size > 22 + 0xFFFF ? size - 22 - 0xFFFF : 0;
  const std::vector<std::uint8_t> tail = z.read(lowest, size - lowest, "end records");
  std::optional<std::uint64_t> eocd;
  for (std::uint64_t p = size - 22 + 1; p-- > lowest;) {
    const std::uint8_t* q = tail.data() + (p - lowest);
    if (rd32(q) == kEndSig && p + 22 + rd16(q + 20) == size) {
      eocd = p;
      break;
    }
  }
  MS_CHECK(eocd.has_value(), ValueError, what,
           ": not a zip archive (no end of central directory record at its end)");
  const std::uint8_t* e = tail.data() + (*eocd - lowest);
  std::uint64_t disk = rd16(e + 4), cd_disk = rd16(e + 6), n_disk = rd16(e + 8);
  // The central directory must end where the end records begin.
  CentralDir d{.offset = rd32(e + 16), .size = rd32(e + 12), .end = *eocd, .entries = rd16(e + 10)};
  if (n_disk == 0xFFFF || d.entries == 0xFFFF || d.size == kU32Max || d.offset == kU32Max)
    read_zip64_end(z, *eocd, disk, cd_disk, n_disk, d);
  MS_CHECK(disk == 0 && cd_disk == 0 && n_disk == d.entries, ValueError, what,
           ": multi-disk zip archives are not supported");
  MS_CHECK(d.offset <= d.end && d.size == d.end - d.offset, ValueError, what,
           ": the central directory (offset ", d.offset, ", ", d.size,
           " bytes) does not end where the end record begins (byte ", d.end, ")");
  // Each central entry takes at least 46 bytes.
  MS_CHECK(d.entries <= d.size / 46, ValueError, what, ": the central directory declares ",
           d.entries, " entries, more than its ", d.size, " bytes can hold");
  // It is read whole; its size is checked first (it is held in memory).
  MS_CHECK(d.size <= kNpzMaxCentralDirBytes, ValueError, what, ": the central directory has ",
           d.size, " bytes, over the limit of ", kNpzMaxCentralDirBytes);
  return d;
}

/// Central directory entry `k` at `pos` (advanced past it).
Member read_central_entry(const std::vector<std::uint8_t>& cd, const CentralDir& d,
                          std::uint64_t& pos, std::uint64_t k, const std::string& what) {
  MS_CHECK(pos + 46 <= d.end, ValueError, what, ": central directory entry ", k,
           " runs past the central directory");
  const std::uint8_t* c = cd.data() + (pos - d.offset);
  MS_CHECK(rd32(c) == kCentralSig, ValueError, what, ": bad signature of central directory entry ",
           k);
  Member m;
  m.flags = rd16(c + 8);
  m.method = rd16(c + 10);
  m.crc = rd32(c + 16);
  m.csize = rd32(c + 20);
  m.usize = rd32(c + 24);
  const std::uint16_t nlen = rd16(c + 28), xlen = rd16(c + 30), clen = rd16(c + 32);
  m.local = rd32(c + 42);
  MS_CHECK(pos + 46 + nlen + xlen + clen <= d.end, ValueError, what, ": central directory entry ",
           k, " runs past the central directory");
  m.name.assign(reinterpret_cast<const char*>(c + 46), nlen);
  const std::string who = what + ": member " + squote(m.name.substr(0, 64));
  apply_zip64_extra(c + 46 + nlen, xlen, {&m.usize, &m.csize, &m.local}, who);
  pos += 46 + std::uint64_t{nlen} + xlen + clen;
  return m;
}

/// A member's name, encryption, method and sizes, against the limits
/// (`total_usize`: the members' declared sizes so far, this one added).
void check_member(const Member& m, std::set<std::string>& names, std::uint64_t& total_usize,
                  const NpzLimits& limits, const std::string& who) {
  const auto max_bytes = static_cast<std::uint64_t>(limits.max_bytes);
  MS_CHECK(m.name.size() >= 4 && m.name.compare(m.name.size() - 4, 4, ".npy") == 0, ValueError, who,
           ": member names must end in .npy");
  MS_CHECK(names.insert(m.name).second, ValueError, who, ": the archive holds this name twice");
  MS_CHECK((m.flags & 0x0001) == 0 && (m.flags & 0x0040) == 0, ValueError, who,
           ": encrypted members are not supported");
  MS_CHECK(m.method == 0 || m.method == 8, ValueError, who, ": compression method ", m.method,
           " is not supported (0 stored, 8 deflate)");
  MS_CHECK(m.method != 0 || m.csize == m.usize, ValueError, who, ": stored member has size ",
           m.csize, " but declares ", m.usize, " uncompressed");
  MS_CHECK(m.usize <= max_bytes && total_usize <= max_bytes - m.usize, ValueError, who,
           ": the archive's decompressed size exceeds the limit of ", max_bytes,
           " bytes (NpzLimits::max_bytes)");
  // Declared sizes are binding (inflating past them is an error), so a bomb
  // is refused here, before anything is allocated.
  MS_CHECK(m.usize <= ratio_bound(m.csize, limits), ValueError, who, ": ", m.csize,
           " compressed bytes declare ", m.usize, " decompressed, a ratio over the limit of ",
           limits.max_ratio, ":1 for members over ", limits.ratio_free_bytes,
           " bytes (a decompression bomb? NpzLimits::max_ratio raises the limit)");
  total_usize += m.usize;
}

/// The local header must agree with the central directory; sets where the
/// member's data lies (before the central directory at `cd_offset`).
void check_local_header(const Zip& z, Member& m, std::uint64_t cd_offset, const std::string& who) {
  const std::vector<std::uint8_t> local = z.read(m.local, 30, "local header of " + squote(m.name));
  const std::uint8_t* l = local.data();
  MS_CHECK(rd32(l) == kLocalSig, ValueError, who, ": bad local header signature at byte ", m.local);
  const std::uint16_t lflags = rd16(l + 6), lmethod = rd16(l + 8);
  const std::uint32_t lcrc = rd32(l + 14);
  std::uint64_t lcsize = rd32(l + 18), lusize = rd32(l + 22);
  const std::uint16_t lnlen = rd16(l + 26), lxlen = rd16(l + 28);
  const std::vector<std::uint8_t> local_rest =
      z.read(m.local + 30, std::uint64_t{lnlen} + lxlen, "local header");
  const std::uint8_t* lname = local_rest.data();
  MS_CHECK(lnlen == m.name.size() && std::memcmp(lname, m.name.data(), lnlen) == 0, ValueError, who,
           ": local header names a different file");
  MS_CHECK(lmethod == m.method && (lflags & 0x0009) == (m.flags & 0x0009), ValueError, who,
           ": local header method/flags differ from the central directory");
  if (lusize == kU32Max || lcsize == kU32Max)
    apply_zip64_extra(lname + lnlen, lxlen, {&lusize, &lcsize}, who);
  const bool descriptor = (m.flags & 0x0008) != 0;  // sizes follow the data instead
  const bool ok = descriptor
                      ? ((lcrc == 0 || lcrc == m.crc) && (lcsize == 0 || lcsize == m.csize) &&
                         (lusize == 0 || lusize == m.usize))
                      : (lcrc == m.crc && lcsize == m.csize && lusize == m.usize);
  MS_CHECK(ok, ValueError, who, ": local header (crc ", lcrc, ", sizes ", lcsize, "/", lusize,
           ") differs from the central directory (crc ", m.crc, ", sizes ", m.csize, "/", m.usize,
           ")");
  m.data_begin = m.local + 30 + lnlen + lxlen;
  MS_CHECK(m.data_begin <= cd_offset && m.csize <= cd_offset - m.data_begin, ValueError, who,
           ": data (", m.csize, " bytes at ", m.data_begin,
           ") runs past the start of the central directory (byte ", cd_offset, ")");
  m.data_end = m.data_begin + m.csize;
}

/// The archive's members, each checked (names, sizes, limits, local header),
/// and the archive as a whole against the ratio limit.
std::vector<Member> read_members(const Zip& z, const CentralDir& d, const NpzLimits& limits) {
  const std::string& what = z.what;
  const std::vector<std::uint8_t> cd = z.read(d.offset, d.size, "central directory");
  std::vector<Member> members;
  std::set<std::string> names;
  std::uint64_t pos = d.offset, total_usize = 0;
  for (std::uint64_t k = 0; k < d.entries; ++k) {
    Member m = read_central_entry(cd, d, pos, k, what);
    const std::string who = what + ": member " + squote(m.name.substr(0, 64));
    check_member(m, names, total_usize, limits, who);
    check_local_header(z, m, d.offset, who);
    members.push_back(std::move(m));
  }
  MS_CHECK(pos == d.end, ValueError, what, ": ", d.end - pos,
           " unexplained bytes at the end of the central directory");
  const std::uint64_t size = z.src.size();
  MS_CHECK(total_usize <= ratio_bound(size, limits), ValueError, what, ": ", size,
           " bytes of archive declare ", total_usize, " decompressed, a ratio over the limit of ",
           limits.max_ratio, ":1 beyond the first ", limits.ratio_free_bytes,
           " bytes (a decompression bomb? NpzLimits::max_ratio raises the limit)");
  // Members may not share bytes (the trick of zip bombs that reuse one stream).
  std::vector<const Member*> by_offset;
  for (const auto& m : members) by_offset.push_back(&m);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const Member* a, const Member* b) { return a->local < b->local; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    MS_CHECK(by_offset[i]->local >= by_offset[i - 1]->data_end, ValueError, what, ": member ",
             squote(by_offset[i]->name), " overlaps member ", squote(by_offset[i - 1]->name));
  return members;
}

NamedTensors load_npz_from(const ByteSource& src, const NpzLimits& limits,
                           const std::string& what) {
  check_npz_limits(limits, what);
  const Zip z{src, what};
  const std::vector<Member> members = read_members(z, find_central_dir(z), limits);
  NamedTensors out;
  for (const auto& m : members) {
    const std::string who = what + ": member " + squote(m.name);
    if (m.method == 0) {  // stored: the tensor's bytes are read straight into its storage
      const CrcSource member(src, m.data_begin, m.csize, m.crc, who);
      out.emplace_back(m.name.substr(0, m.name.size() - 4), load_npy_from(member, who));
      continue;
    }
    const std::vector<std::uint8_t> inflated =
        inflate_member(src, m.data_begin, m.csize, m.usize, who);
    const std::uint32_t crc = crc32_of(inflated.data(), inflated.size());
    MS_CHECK(crc == m.crc, ValueError, who, ": CRC-32 mismatch (data ", crc, ", header ", m.crc,
             ")");
    out.emplace_back(m.name.substr(0, m.name.size() - 4),
                     load_npy_from(SpanSource(inflated, who), who));
  }
  src.finish();
  return out;
}

std::vector<std::uint8_t> deflate_bytes(std::span<const std::uint8_t> in, std::string_view what) {
  z_stream zs{};
  MS_CHECK(deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8,
                        Z_DEFAULT_STRATEGY) == Z_OK,
           ValueError, what, ": zlib deflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { deflateEnd(z); }
  } end{&zs};
  std::vector<std::uint8_t> out(in.size() / 2 + 1024);
  std::uint64_t consumed = 0, produced = 0;
  for (;;) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      zs.next_in = const_cast<Bytef*>(in.data() + consumed);
      zs.avail_in = static_cast<uInt>(std::min<std::uint64_t>(in.size() - consumed, 1u << 30));
    }
    if (produced == out.size()) out.resize(out.size() * 2);
    zs.next_out = out.data() + produced;
    const auto room = static_cast<uInt>(std::min<std::uint64_t>(out.size() - produced, 1u << 30));
    zs.avail_out = room;
    const uInt before = zs.avail_in;
    const bool last = consumed + before == in.size();
    const int ret = ::deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    consumed += before - zs.avail_in;
    produced += room - zs.avail_out;
    if (ret == Z_STREAM_END) break;
    MS_CHECK(ret == Z_OK || ret == Z_BUF_ERROR, ValueError, what, ": zlib deflate failed");
  }
  out.resize(static_cast<std::size_t>(produced));
  return out;
}

/// What a zip's local header and central entry say of one member.
struct ZipEntry {
  std::string fname;
  std::uint32_t crc = 0;
  std::uint64_t csize = 0, usize = 0, local = 0;
  std::uint16_t flags = 0, method = 0;
};

// Fixed time: 1980-01-01 00:00 (equal inputs give equal archives).
constexpr std::uint16_t kDosTime = 0, kDosDate = (0 << 9) | (1 << 5) | 1;

std::string zip_local_header(const ZipEntry& e) {
  std::string lh;
  put32(lh, kLocalSig);
  put16(lh, 20);
  put16(lh, e.flags);
  put16(lh, e.method);
  put16(lh, kDosTime);
  put16(lh, kDosDate);
  put32(lh, e.crc);
  put32(lh, static_cast<std::uint32_t>(e.csize));
  put32(lh, static_cast<std::uint32_t>(e.usize));
  put16(lh, static_cast<std::uint32_t>(e.fname.size()));
  put16(lh, 0);
  lh += e.fname;
  return lh;
}

void append_central_entry(std::string& central, const ZipEntry& e) {
  put32(central, kCentralSig);
  put16(central, (3 << 8) | 20);  // made by: Unix, zip 2.0
  put16(central, 20);
  put16(central, e.flags);
  put16(central, e.method);
  put16(central, kDosTime);
  put16(central, kDosDate);
  put32(central, e.crc);
  put32(central, static_cast<std::uint32_t>(e.csize));
  put32(central, static_cast<std::uint32_t>(e.usize));
  put16(central, static_cast<std::uint32_t>(e.fname.size()));
  put16(central, 0);  // extra
  put16(central, 0);  // comment
  put16(central, 0);  // disk
  put16(central, 0);  // internal attributes
  put32(central, 0644u << 16);
  put32(central, static_cast<std::uint32_t>(e.local));
  central += e.fname;
}

std::string zip_end_record(std::size_t entries, std::uint64_t cd_size, std::uint64_t cd_offset) {
  std::string end;
  put32(end, kEndSig);
  put16(end, 0);
  put16(end, 0);
  put16(end, static_cast<std::uint32_t>(entries));
  put16(end, static_cast<std::uint32_t>(entries));
  put32(end, static_cast<std::uint32_t>(cd_size));
  put32(end, static_cast<std::uint32_t>(cd_offset));
  put16(end, 0);
  return end;
}

void check_npz_entries(const NamedTensors& tensors, std::string_view what) {
  std::set<std::string_view> seen;
  for (const auto& [name, t] : tensors) {
    MS_CHECK(seen.insert(name).second, ValueError, what, ": the name ", squote(name),
             " is given twice");
    MS_CHECK(name.size() + 4 <= 0xFFFF, ValueError, what, ": name is too long for zip");
    check_saveable(t, detail::str_cat(what, ": tensor ", squote(name)));
  }
  MS_CHECK(tensors.size() < 0xFFFF, ValueError, what, ": more than 65534 tensors need zip64");
}

void write_npz(ByteSink& out, const NamedTensors& tensors, NpzCompression compression,
               std::string_view what) {
  check_npz_entries(tensors, what);
  const std::uint64_t start = out.written();
  std::string central;
  for (const auto& [name, t] : tensors) {
    ZipEntry e;
    e.fname = name + ".npy";
    std::vector<std::uint8_t> npy;
    VectorSink vs(npy);
    write_npy(vs, t);
    e.crc = crc32_of(npy.data(), npy.size());
    std::vector<std::uint8_t> packed;
    const bool deflate = compression == NpzCompression::Deflate;
    if (deflate) packed = deflate_bytes(npy, what);
    const std::span<const std::uint8_t> data = deflate ? std::span(packed) : std::span(npy);
    e.local = out.written() - start;
    MS_CHECK(npy.size() < kU32Max && data.size() < kU32Max && e.local < kU32Max, ValueError, what,
             ": tensor ", squote(name),
             " makes the archive larger than 4 GiB (zip64 is not written; use safetensors)");
    const bool utf8 = std::any_of(e.fname.begin(), e.fname.end(),
                                  [](char c) { return static_cast<unsigned char>(c) >= 0x80; });
    e.flags = utf8 ? 0x0800 : 0;
    e.method = deflate ? 8 : 0;
    e.csize = data.size();
    e.usize = npy.size();
    const std::string lh = zip_local_header(e);
    out.write(lh.data(), lh.size());
    out.write(data.data(), data.size());
    append_central_entry(central, e);
  }
  const std::uint64_t cd_offset = out.written() - start;
  MS_CHECK(cd_offset + central.size() < kU32Max, ValueError, what,
           ": the archive is larger than 4 GiB (zip64 is not written; use safetensors)");
  const std::string end = zip_end_record(tensors.size(), central.size(), cd_offset);
  out.write(central.data(), central.size());
  out.write(end.data(), end.size());
}

}  // namespace

std::string npy_descr(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "|b1";
    case DType::Int8: return "|i1";
    case DType::UInt8: return "|u1";
    case DType::Int16: return "<i2";
    case DType::Int32: return "<i4";
    case DType::Int64: return "<i8";
    case DType::UInt16: return "<u2";
    case DType::UInt32: return "<u4";
    case DType::UInt64: return "<u8";
    case DType::Float16: return "<f2";
    case DType::Float32: return "<f4";
    case DType::Float64: return "<f8";
    case DType::Complex64: return "<c8";
    case DType::Complex128: return "<c16";
    case DType::BFloat16:
    case DType::Int4: break;
  }
  detail::raise<TypeError>("npy: dtype ", dtype,
                           " has no NumPy equivalent; cast it first (e.g. to float32)");
}

std::vector<std::uint8_t> to_npy_bytes(const Tensor& tensor) {
  check_saveable(tensor, "to_npy_bytes");
  std::vector<std::uint8_t> out;
  VectorSink sink(out);
  write_npy(sink, tensor);
  return out;
}

void save_npy(const std::string& path, const Tensor& tensor) {
  const std::string what = "save_npy: '" + path + "'";
  check_saveable(tensor, what);
  write_file_atomic(path, [&](ByteSink& sink) { write_npy(sink, tensor); });
}

Tensor from_npy_bytes(std::span<const std::uint8_t> bytes) {
  return memory_error_as("from_npy_bytes", [&] {
    return load_npy_from(SpanSource(bytes, "from_npy_bytes"), "from_npy_bytes");
  });
}

Tensor load_npy(const std::string& path) {
  const std::string what = "load_npy: '" + path + "'";
  return memory_error_as(what, [&] {
    const InputFile file(path);
    return load_npy_from(FileSource(file), what);
  });
}

std::vector<std::uint8_t> to_npz_bytes(const NamedTensors& tensors, NpzCompression compression) {
  std::vector<std::uint8_t> out;
  VectorSink sink(out);
  write_npz(sink, tensors, compression, "to_npz_bytes");
  return out;
}

void save_npz(const std::string& path, const NamedTensors& tensors, NpzCompression compression) {
  const std::string what = "save_npz: '" + path + "'";
  write_file_atomic(path, [&](ByteSink& sink) { write_npz(sink, tensors, compression, what); });
}

NamedTensors from_npz_bytes(std::span<const std::uint8_t> bytes, const NpzLimits& limits) {
  constexpr std::string_view kWhat = "from_npz_bytes";
  return memory_error_as(kWhat, [&] {
    return load_npz_from(SpanSource(bytes, std::string(kWhat)), limits, std::string(kWhat));
  });
}

NamedTensors from_npz_bytes(std::span<const std::uint8_t> bytes, std::int64_t max_bytes) {
  return from_npz_bytes(bytes, NpzLimits{.max_bytes = max_bytes});
}

NamedTensors load_npz(const std::string& path, const NpzLimits& limits) {
  const std::string what = "load_npz: '" + path + "'";
  return memory_error_as(what, [&] {
    const InputFile file(path);  // positioned reads: the archive is never held whole in memory
    return load_npz_from(FileSource(file), limits, what);
  });
}

NamedTensors load_npz(const std::string& path, std::int64_t max_bytes) {
  return load_npz(path, NpzLimits{.max_bytes = max_bytes});
}

}  // namespace ms::io
