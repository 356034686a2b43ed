// gzip / gunzip and the IDX reader: round trips for every type code, files built
// byte by byte in the test (big-endian by hand, gzip stored blocks with a CRC-32
// computed here, a gzip stream made by Python's gzip module), and every class of
// bad file raising an ms::Error that names the file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <ms/data/gzip.hpp>
#include <ms/data/idx.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "data/contains.hpp"
#include "io/io_test_util.hpp"  // check_fifo_refused, run_with_address_limit
#include "temp_dir.hpp"

using namespace ms;
using Bytes = std::vector<std::uint8_t>;

namespace {

using ms_test::has;

using ms::test::TempDir;

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

void push_be32(Bytes& b, std::uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

/// An IDX header: 0 0 type ndim, then the dims big-endian.
Bytes idx_header(std::uint8_t type, const std::vector<std::uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (std::uint32_t d : dims) push_be32(b, d);
  return b;
}

/// CRC-32 (IEEE, reflected, as gzip's trailer), bit by bit.
std::uint32_t crc32(const Bytes& data) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::uint8_t byte : data) {
    c ^= byte;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

void push_le32(Bytes& b, std::uint32_t v) {
  for (int s = 0; s < 32; s += 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

/// A gzip member written without zlib: deflate "stored" blocks (RFC 1951 3.2.4).
Bytes gzip_stored(const Bytes& data) {
  Bytes g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};  // deflate, no flags, mtime 0, unknown OS
  std::size_t pos = 0;
  do {
    const std::size_t len = std::min<std::size_t>(data.size() - pos, 65535);
    const bool last = pos + len == data.size();
    g.push_back(last ? 1 : 0);  // BFINAL, BTYPE = 00
    g.push_back(static_cast<std::uint8_t>(len));
    g.push_back(static_cast<std::uint8_t>(len >> 8));
    g.push_back(static_cast<std::uint8_t>(~len));
    g.push_back(static_cast<std::uint8_t>(~len >> 8));
    g.insert(g.end(), data.begin() + static_cast<std::ptrdiff_t>(pos),
             data.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < data.size());
  push_le32(g, crc32(data));
  push_le32(g, static_cast<std::uint32_t>(data.size()));
  return g;
}

Bytes str_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }

template <class T>
std::vector<T> random_values(std::size_t n, std::mt19937& rng) {
  std::vector<T> v(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::normal_distribution<double> dist(0.0, 100.0);
    for (T& x : v) x = static_cast<T>(dist(rng));
  } else {
    std::uniform_int_distribution<long long> dist(std::numeric_limits<T>::min(),
                                                  std::numeric_limits<T>::max());
    for (T& x : v) x = static_cast<T>(dist(rng));
  }
  return v;
}

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("gunzip: a stream made by Python's gzip module (known answer)") {
    // gzip.compress(b"hello, idx\n", mtime=0)
    const Bytes gz = {0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xcb,
                      0x48, 0xcd, 0xc9, 0xc9, 0xd7, 0x51, 0xc8, 0x4c, 0xa9, 0xe0, 0x02,
                      0x00, 0x31, 0xd9, 0xdf, 0x49, 0x0b, 0x00, 0x00, 0x00};
    CHECK(data::is_gzip(gz));
    CHECK(data::gunzip(gz, 100, "hello.gz") == str_bytes("hello, idx\n"));
    CHECK(data::gunzip(gz, 11, "hello.gz") == str_bytes("hello, idx\n"));  // cap == size is fine
    CHECK_THROWS_WITH_AS(data::gunzip(gz, 10, "hello.gz"),
                         has("hello.gz: gzip data decompresses to more than 10 bytes"), ValueError);
    CHECK(crc32(str_bytes("hello, idx\n")) == 0x49dfd931u);  // the trailer above, little-endian
  }

  TEST_CASE("gunzip: stored blocks written by the test, multi-member, pass-through") {
    std::mt19937 rng(1);
    Bytes data = random_values<std::uint8_t>(200000, rng);  // 4 stored blocks
    CHECK(data::gunzip(gzip_stored(data), 1 << 20, "x") == data);
    CHECK(data::gunzip(gzip_stored({}), 10, "x").empty());
    // Concatenated members decompress to the concatenation (as gzip -d does).
    Bytes two = gzip_stored(str_bytes("abc"));
    const Bytes second = data::gzip(str_bytes("defg"));
    two.insert(two.end(), second.begin(), second.end());
    CHECK(data::gunzip(two, 100, "x") == str_bytes("abcdefg"));
    // Not gzip: returned as is (uncompressed IDX files), under the same cap.
    CHECK(data::gunzip(str_bytes("plain"), 5, "x") == str_bytes("plain"));
    CHECK(data::gunzip({}, 0, "x").empty());
    CHECK_THROWS_WITH_AS(data::gunzip(str_bytes("plain"), 4, "p.idx"),
                         has("p.idx: 5 bytes is over the limit of 4 bytes"), ValueError);
  }

  TEST_CASE("gzip round trips at every level, with the output readable by the test's CRC") {
    std::mt19937 rng(2);
    Bytes data = random_values<std::uint8_t>(70000, rng);
    data.resize(140000, 7);  // half random, half a run
    for (int level = 0; level <= 9; ++level) {
      const Bytes gz = data::gzip(data, level);
      CHECK(data::is_gzip(gz));
      CHECK(gz[gz.size() - 8] == static_cast<std::uint8_t>(crc32(data)));
      CHECK(data::gunzip(gz, data.size(), "x") == data);
    }
    CHECK(data::gzip(data, 9).size() < data.size());
    CHECK(data::gunzip(data::gzip({}), 0, "x").empty());
    CHECK_THROWS_WITH_AS(data::gzip(data, 10), has("gzip: level must be in 0..9"), ValueError);
    CHECK_THROWS_AS(data::gzip(data, -1), ValueError);
  }

  TEST_CASE("gunzip: truncated, corrupt, trailing garbage, bombs") {
    std::mt19937 rng(3);
    const Bytes data = random_values<std::uint8_t>(5000, rng);
    const Bytes gz = data::gzip(data);
    for (std::size_t keep :
         {std::size_t{2}, std::size_t{10}, gz.size() / 2, gz.size() - 4, gz.size() - 1}) {
      CAPTURE(keep);
      const Bytes cut(gz.begin(), gz.begin() + static_cast<std::ptrdiff_t>(keep));
      CHECK_THROWS_WITH_AS(data::gunzip(cut, 1 << 20, "cut.gz"), has("cut.gz: truncated gzip data"),
                           ValueError);
    }
    Bytes bad_crc = gz;
    bad_crc[gz.size() - 8] ^= 0xFF;
    CHECK_THROWS_WITH_AS(data::gunzip(bad_crc, 1 << 20, "crc.gz"), has("crc.gz: corrupt gzip data"),
                         ValueError);
    CHECK_THROWS_WITH_AS(data::gunzip(bad_crc, 1 << 20, "crc.gz"), has("incorrect data check"),
                         ValueError);
    Bytes bad_size = gz;
    bad_size[gz.size() - 1] ^= 0x01;  // ISIZE
    CHECK_THROWS_WITH_AS(data::gunzip(bad_size, 1 << 20, "size.gz"),
                         has("size.gz: corrupt gzip data"), ValueError);
    Bytes bad_method = gz;
    bad_method[2] = 7;
    CHECK_THROWS_WITH_AS(data::gunzip(bad_method, 1 << 20, "m.gz"),
                         has("m.gz: corrupt gzip data at byte"), ValueError);
    Bytes bad_block = gzip_stored(str_bytes("abcdef"));
    bad_block[13] ^= 0xFF;  // LEN no longer matches NLEN
    CHECK_THROWS_WITH_AS(data::gunzip(bad_block, 100, "b.gz"), has("b.gz: corrupt gzip data"),
                         ValueError);
    Bytes trailing = gz;
    trailing.push_back(0);
    trailing.push_back(0);
    CHECK_THROWS_WITH_AS(
        data::gunzip(trailing, 1 << 20, "t.gz"),
        has("t.gz: 2 trailing bytes after the gzip stream (at offset " + std::to_string(gz.size())),
        ValueError);

    // A bomb: 64 MiB of zeros in about 64 KB; the cap stops it early.
    const Bytes zeros(std::size_t{64} << 20, 0);
    const Bytes bomb = data::gzip(zeros, 9);
    CHECK(bomb.size() < (std::size_t{1} << 17));
    CHECK_THROWS_WITH_AS(data::gunzip(bomb, 1 << 20, "bomb.gz"),
                         has("bomb.gz: gzip data decompresses to more than 1048576 "
                             "bytes (the limit"),
                         ValueError);
    // A lying ISIZE trailer (4 GiB - 1) does not make gunzip allocate it.
    Bytes liar = data::gzip(str_bytes("tiny"));
    std::fill(liar.end() - 4, liar.end(), 0xFF);
    CHECK_THROWS_WITH_AS(data::gunzip(liar, 100, "liar.gz"), has("corrupt gzip data"), ValueError);
  }

  TEST_CASE("gunzip: noise with a trailer claiming 4 GiB allocates as data arrives") {
    if (io_test::kAddressSanitizer) {
      MESSAGE("skipped under AddressSanitizer (an address-space limit cannot bound memory)");
      return;
    }
    // A gzip header, 1 MB of noise, and an ISIZE trailer of 4 GiB - 1: the
    // stream is corrupt within its first bytes.
    std::mt19937 rng(7);
    Bytes noise = random_values<std::uint8_t>(1 << 20, rng);
    const Bytes header = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
    std::copy(header.begin(), header.end(), noise.begin());
    std::fill(noise.end() - 4, noise.end(), 0xFF);
    // With 64 MiB of address space to spare, allocating what the trailer says
    // (or 1 GB by any "plausible ratio") fails with std::bad_alloc.
    const int end = io_test::run_with_address_limit(std::uint64_t{64} << 20, [&] {
      try {
        (void)data::gunzip(noise, std::size_t{8} << 30, "noise.gz");
      } catch (const Error& e) {
        if (std::string(e.what()).find("noise.gz: corrupt gzip data at byte") != std::string::npos)
          throw;
        throw std::logic_error(e.what());
      }
    });
    CHECK(end == io_test::kMsError);
  }

  TEST_CASE("read_file, read_idx: a FIFO is an error naming it, not a wait for a writer") {
    TempDir dir;
    io_test::check_fifo_refused(dir.file("fifo"), [&] { (void)data::read_file(dir.file("fifo")); });
    io_test::check_fifo_refused(dir.file("fifo.idx"),
                                [&] { (void)data::read_idx(dir.file("fifo.idx")); });
  }

  TEST_CASE("read_file: contents, cap, missing file, directory") {
    TempDir dir;
    const Bytes data = str_bytes("0123456789");
    write_bytes(dir.file("ten"), data);
    CHECK(data::read_file(dir.file("ten")) == data);
    CHECK(data::read_file(dir.file("ten"), 10) == data);
    CHECK_THROWS_WITH_AS(data::read_file(dir.file("ten"), 9),
                         has("ten' has 10 bytes, over the limit of 9 bytes"), ValueError);
    write_bytes(dir.file("empty"), {});
    CHECK(data::read_file(dir.file("empty")).empty());
    const std::string missing = dir.file("missing.idx");
    CHECK_THROWS_WITH_AS(data::read_file(missing),
                         has("cannot open '" + missing + "': No such file"), ValueError);
    CHECK_THROWS_WITH_AS(data::read_file(dir.path.string()), has("is not a regular file"),
                         ValueError);
    CHECK_THROWS_WITH_AS(data::read_idx(missing), has("cannot open '" + missing + "'"), ValueError);
  }

  TEST_CASE("IDX bytes built by hand parse to the right dtype, shape and values") {
    // int16 [2, 3] big-endian: 0x0102 = 258, 0xFFFE = -2, ...
    Bytes b = idx_header(0x0B, {2, 3});
    for (std::uint8_t v : {0x01, 0x02, 0xFF, 0xFE, 0x00, 0x00, 0x80, 0x00, 0x7F, 0xFF, 0x00, 0x07})
      b.push_back(v);
    Tensor t = data::parse_idx(b, "hand.idx");
    CHECK(t.dtype() == int16);
    CHECK(t.shape() == Shape{2, 3});
    CHECK(t.to_vector<std::int16_t>() == std::vector<std::int16_t>{258, -2, 0, -32768, 32767, 7});

    Bytes f = idx_header(0x0D, {2});
    push_be32(f, 0x3FC00000u);  // 1.5f
    push_be32(f, 0xC0200000u);  // -2.5f
    CHECK(data::parse_idx(f).to_vector<float>() == std::vector<float>{1.5f, -2.5f});

    Bytes d = idx_header(0x0E, {1});
    for (std::uint8_t v : {0x40, 0x09, 0x21, 0xFB, 0x54, 0x44, 0x2D, 0x18}) d.push_back(v);
    CHECK(data::parse_idx(d).item<double>() == 3.141592653589793);

    Bytes i8 = idx_header(0x09, {3});
    for (std::uint8_t v : {0x80, 0xFF, 0x05}) i8.push_back(v);
    CHECK(data::parse_idx(i8).to_vector<std::int8_t>() == std::vector<std::int8_t>{-128, -1, 5});

    Bytes u8 = idx_header(0x08, {1, 1, 1, 2});
    u8.push_back(200);
    u8.push_back(3);
    Tensor u = data::parse_idx(u8);
    CHECK(u.dtype() == uint8);
    CHECK(u.shape() == Shape{1, 1, 1, 2});
    CHECK(u.to_vector<std::uint8_t>() == std::vector<std::uint8_t>{200, 3});

    Bytes i32 = idx_header(0x0C, {1});
    push_be32(i32, 0x80000001u);
    CHECK(data::parse_idx(i32).item<std::int32_t>() ==
          std::numeric_limits<std::int32_t>::min() + 1);

    // Empty tensors: a zero dim, even next to huge ones, is a valid empty file.
    CHECK(data::parse_idx(idx_header(0x0C, {0})).shape() == Shape{0});
    CHECK(data::parse_idx(idx_header(0x0E, {0xFFFFFFFFu, 0x7FFFFFFFu, 0})).shape() ==
          Shape{0xFFFFFFFF, 0x7FFFFFFF, 0});
  }

  TEST_CASE_TEMPLATE("IDX round trip through files, plain and gzip'd", T, std::uint8_t, std::int8_t,
                     std::int16_t, std::int32_t, float, double) {
    TempDir dir;
    std::mt19937 rng(4);
    const std::vector<T> values = random_values<T>(3 * 5 * 7, rng);
    const Tensor t = from_vector(values, {3, 5, 7});
    const std::uint8_t code = data::idx_type_code(dtype_of<T>);
    const Bytes bytes = data::encode_idx(t);
    REQUIRE(bytes.size() == 4 + 3 * 4 + values.size() * sizeof(T));
    CHECK(Bytes(bytes.begin(), bytes.begin() + 16) == idx_header(code, {3, 5, 7}));
    // Element 0, big-endian by hand.
    std::uint64_t bits = 0;
    std::memcpy(&bits, &values[0], sizeof(T));
    for (std::size_t k = 0; k < sizeof(T); ++k)
      CHECK(bytes[16 + k] == static_cast<std::uint8_t>(bits >> (8 * (sizeof(T) - 1 - k))));

    for (const char* name : {"t.idx", "t.idx.gz"}) {
      CAPTURE(name);
      data::write_idx(dir.file(name), t);
      CHECK(data::is_gzip(data::read_file(dir.file(name))) == (name[5] == '.'));
      const Tensor r = data::read_idx(dir.file(name));
      CHECK(r.dtype() == dtype_of<T>);
      CHECK(r.shape() == Shape{3, 5, 7});
      CHECK(r.template to_vector<T>() == values);
    }
    // Non-contiguous input is written in logical order.
    const Tensor tt = t.transpose(0, 2);
    CHECK(data::read_idx_bytes(data::encode_idx(tt)).template to_vector<T>() ==
          tt.template to_vector<T>());
    // Rank 1 and a gzip'd byte stream.
    const Tensor v = from_vector(std::vector<T>(values.begin(), values.begin() + 9));
    CHECK(data::read_idx_bytes(data::gzip(data::encode_idx(v)), "v.gz").template to_vector<T>() ==
          v.template to_vector<T>());
  }

  TEST_CASE("IDX: every class of bad file is a ValueError naming the file") {
    TempDir dir;
    const auto bad = [&](const Bytes& bytes, const std::string& message) {
      CAPTURE(message);
      CHECK_THROWS_WITH_AS(data::parse_idx(bytes, "bad.idx"), has("bad.idx: " + message),
                           ValueError);
      // The same through a file, plain and gzip'd: the message names the path.
      const std::string path = dir.file("bad.idx"), gz = dir.file("bad.idx.gz");
      write_bytes(path, bytes);
      CHECK_THROWS_WITH_AS(data::read_idx(path), has(path + ": " + message), ValueError);
      write_bytes(gz, data::gzip(bytes));
      CHECK_THROWS_WITH_AS(data::read_idx(gz), has(gz + ": " + message), ValueError);
    };
    bad({}, "not an IDX file: 0 bytes is shorter than the 4-byte magic");
    bad({0, 0, 8}, "not an IDX file: 3 bytes is shorter than the 4-byte magic");
    bad({1, 0, 8, 1, 0, 0, 0, 0}, "not an IDX file: magic starts 0x01 0x00");
    bad({0, 0x42, 8, 1, 0, 0, 0, 0},
        "not an IDX file: magic starts 0x00 0x42, expected 0x00 0x00 <type> <ndim>");
    for (std::uint8_t code : {0x00, 0x07, 0x0A, 0x0F, 0xFF}) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", code);
      bad({0, 0, code, 1, 0, 0, 0, 0}, std::string("unknown IDX type code ") + hex);
    }
    bad({0, 0, 8, 0}, "IDX ndim 0 is out of range (expected 1 to 16)");
    bad({0, 0, 8, 17}, "IDX ndim 17 is out of range");
    bad({0, 0, 8, 255}, "IDX ndim 255 is out of range");
    bad({0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1},
        "truncated IDX header: 3 dims need 16 bytes, the file has 12");
    bad(idx_header(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}),
        "IDX dims [4294967295, 4294967295, 4294967295] overflow the element count");
    bad(idx_header(0x08, {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}),
        "IDX dims [4294967295, 4294967295, 4294967295, 0] overflow the element count");
    bad(idx_header(0x0E, {0x40000000u, 0x80000000u}),
        "IDX dims [1073741824, 2147483648] of Float64 overflow the byte count");
    // Huge but representable: rejected by the size check, never allocated.
    bad(idx_header(0x08, {65536, 65536}),
        "truncated IDX file: dims [65536, 65536] of UInt8 need 4294967308 bytes, the file has 12");
    bad(idx_header(0x08, {0xFFFFFFFFu, 0x7FFFFFFFu}),
        "truncated IDX file: dims [4294967295, 2147483647] of UInt8 need 9223372030412324877");
    Bytes ok = idx_header(0x0C, {3});
    for (int i = 0; i < 12; ++i) ok.push_back(static_cast<std::uint8_t>(i));
    Bytes cut(ok.begin(), ok.end() - 4);
    bad(cut, "truncated IDX file: dims [3] of Int32 need 20 bytes, the file has 16");
    Bytes longer = ok;
    longer.push_back(0);
    bad(longer, "1 trailing bytes in IDX file: dims [3] of Int32 need 20 bytes, the file has 21");
    CHECK(data::parse_idx(ok).shape() == Shape{3});

    // gzip'd data handed to the raw parser, and bad gzip around a good IDX.
    CHECK_THROWS_WITH_AS(data::parse_idx(data::gzip(ok), "z.idx"),
                         has("z.idx: gzip-compressed data given to parse_idx"), ValueError);
    Bytes gz = data::gzip(ok);
    gz.resize(gz.size() - 3);
    write_bytes(dir.file("cut.gz"), gz);
    CHECK_THROWS_WITH_AS(data::read_idx(dir.file("cut.gz")),
                         has(dir.file("cut.gz") + ": truncated gzip data"), ValueError);
    // Over the cap: the raw file, and the decompressed size of a small file.
    write_bytes(dir.file("ok.idx"), ok);
    CHECK_THROWS_WITH_AS(data::read_idx(dir.file("ok.idx"), 19),
                         has("has 20 bytes, over the limit of 19 bytes"), ValueError);
    const Tensor big = zeros({1000, 1000}, uint8);
    data::write_idx(dir.file("big.idx.gz"), big);
    CHECK(std::filesystem::file_size(dir.file("big.idx.gz")) < 10000);
    CHECK_THROWS_WITH_AS(
        data::read_idx(dir.file("big.idx.gz"), 100000),
        has(dir.file("big.idx.gz") + ": gzip data decompresses to more than 100000 bytes"),
        ValueError);
    CHECK(data::read_idx(dir.file("big.idx.gz"), 1000020).shape() == Shape{1000, 1000});
  }

  TEST_CASE("IDX: random corruptions of valid files raise ms::Error or parse, never crash") {
    std::mt19937 rng(5);
    Bytes ok = idx_header(0x0B, {4, 6});
    for (int i = 0; i < 48; ++i) ok.push_back(static_cast<std::uint8_t>(rng()));
    const Bytes gz = data::gzip(ok);
    int errors = 0, parsed = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      Bytes b = trial % 2 ? gz : ok;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const std::size_t at = rng() % b.size();
        switch (rng() % 3) {
          case 0: b[at] = static_cast<std::uint8_t>(rng()); break;
          case 1: b.resize(at); break;
          default: b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), 0); break;
        }
        if (b.empty()) break;
      }
      try {
        const Tensor t = data::read_idx_bytes(b, "fuzz", 1 << 16);
        CHECK(t.nbytes() + 4 + 4 * t.rank() <= (1 << 16));
        ++parsed;
      } catch (const Error&) {
        ++errors;
      }
    }
    CHECK(errors > 1000);
    CHECK(parsed > 0);
  }

  TEST_CASE("encode_idx / idx_type_code reject what IDX cannot hold") {
    CHECK(data::idx_type_code(uint8) == 0x08);
    CHECK(data::idx_type_code(float64) == 0x0E);
    CHECK_THROWS_WITH_AS(data::idx_type_code(int64), has("idx_type_code: IDX files hold uint8"),
                         TypeError);
    CHECK_THROWS_WITH_AS(data::encode_idx(zeros({2}, float16)), has("Float16"), TypeError);
    CHECK_THROWS_WITH_AS(data::encode_idx(tensor(1.0f)),
                         has("encode_idx: IDX holds rank 1 to 16, got shape []"), ShapeError);
    CHECK_THROWS_AS(data::encode_idx(Tensor()), ValueError);
    CHECK_THROWS_WITH_AS(data::write_idx("/nonexistent-dir/x.idx", zeros({2}, uint8)),
                         has("write_idx: cannot open '/nonexistent-dir/x.idx'"), ValueError);
  }
}
