// safetensors: round trips of every dtype, the reference library's byte layout,
// and one test per class of bad file.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ms/core/tensor.hpp>
#include <ms/io/safetensors.hpp>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace ms;
using namespace io_test;

namespace {

const std::vector<DType> kSafetensorsDTypes = {bool_,   uint8,    int8,   int16,    uint16,
                                               float16, bfloat16, int32,  uint32,   float32,
                                               float64, int64,    uint64, complex64};

/// A file: 8-byte length, `header` padded with spaces to 8 bytes (unless `pad` is false), data.
std::vector<std::uint8_t> craft(std::string header, const std::vector<std::uint8_t>& data = {},
                                bool pad = true) {
  if (pad) header.append((8 - header.size() % 8) % 8, ' ');
  std::string all(8, '\0');
  for (int i = 0; i < 8; ++i) all[i] = static_cast<char>(header.size() >> (8 * i));
  all += header;
  all.append(data.begin(), data.end());
  return std::vector<std::uint8_t>(all.begin(), all.end());
}

std::vector<std::uint8_t> zeros_bytes(std::size_t n) { return std::vector<std::uint8_t>(n, 0); }

#define CHECK_BAD(bytes, text, Error) \
  CHECK_THROWS_WITH_AS(io::from_safetensors_bytes(bytes), doctest::Contains(text), Error)

}  // namespace

TEST_SUITE("io") {
  TEST_CASE("safetensors: every dtype round-trips with its values") {
    for (const DType t : kSafetensorsDTypes) {
      CAPTURE(t);
      const Tensor x = pattern({3, 5}, t);
      const Tensor s = pattern({}, t);      // 0-d
      const Tensor e = pattern({0, 4}, t);  // empty
      const auto bytes = io::to_safetensors_bytes({{"x", x}, {"s", s}, {"e", e}});
      const io::SafetensorsFile f = io::from_safetensors_bytes(bytes);
      REQUIRE(f.tensors.size() == 3);
      CHECK(same_tensor(f.at("x"), x));
      CHECK(same_tensor(f.at("s"), s));
      CHECK(f.at("s").rank() == 0);
      CHECK(same_tensor(f.at("e"), e));
      CHECK(f.at("e").shape() == Shape{0, 4});
      CHECK(f.metadata.empty());
      if (!dtype_is_complex(t)) {
        const std::vector<double> v = f.at("x").to_vector<double>();
        for (std::int64_t i = 0; i < 15; ++i)
          CHECK(v[i] == (t == bool_ ? (i % 3 == 0 ? 1.0 : 0.0) : pattern_value(i, t)));
      }
    }
  }

  TEST_CASE("safetensors: extreme values survive bit-exactly") {
    const double inf = std::numeric_limits<double>::infinity();
    const Tensor f64 = from_vector(std::vector<double>{-0.0, inf, -inf, 1e-308, 1.7e308});
    const Tensor i64 = from_vector(std::vector<std::int64_t>{INT64_MIN, INT64_MAX, -1});
    const Tensor u64 = from_vector(std::vector<std::uint64_t>{UINT64_MAX, 0, 1ull << 63});
    const Tensor nan = from_vector(std::vector<float>{std::numeric_limits<float>::quiet_NaN()});
    const auto f = io::from_safetensors_bytes(
        io::to_safetensors_bytes({{"f64", f64}, {"i64", i64}, {"u64", u64}, {"nan", nan}}));
    CHECK(same_tensor(f.at("f64"), f64));
    CHECK(same_tensor(f.at("i64"), i64));
    CHECK(same_tensor(f.at("u64"), u64));
    CHECK(same_tensor(f.at("nan"), nan));
  }

  TEST_CASE("safetensors: non-contiguous tensors are saved contiguous") {
    const Tensor base = pattern({4, 6}, float32);
    const Tensor tr = base.transpose(0, 1);                             // [6, 4], strided
    const Tensor sl = base.slice(1, 1, 6, 2);                           // [4, 3], step 2
    const Tensor ex = pattern({3}, int32).unsqueeze(0).expand({4, 3});  // stride 0
    REQUIRE(!tr.is_contiguous());
    REQUIRE(!sl.is_contiguous());
    const auto f =
        io::from_safetensors_bytes(io::to_safetensors_bytes({{"tr", tr}, {"sl", sl}, {"ex", ex}}));
    CHECK(same_tensor(f.at("tr"), tr.contiguous()));
    CHECK(f.at("tr").shape() == Shape{6, 4});
    CHECK(f.at("tr").to_vector<float>()[1] == base.to_vector<float>()[6]);  // tr[0][1] = base[1][0]
    CHECK(same_tensor(f.at("sl"), sl.contiguous()));
    CHECK(same_tensor(f.at("ex"), ex.contiguous()));
    CHECK(f.at("ex").is_contiguous());
  }

  TEST_CASE("safetensors: the byte layout of the reference library") {
    // The reference implementation's own serialization test (safetensors/src/tensor.rs,
    // test_serialization): one F32 tensor "attn.0" of shape [1, 2, 3] holding 0..5.
    const Tensor x = arange(0, 6).reshape({1, 2, 3});
    const auto b = io::to_safetensors_bytes({{"attn.0", x}});
    const std::string header =
        R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
    REQUIRE(header.size() == 64);  // already a multiple of 8: no padding
    std::vector<std::uint8_t> expected = {64, 0, 0, 0, 0, 0, 0, 0};
    expected.insert(expected.end(), header.begin(), header.end());
    for (const float v : {0.f, 1.f, 2.f, 3.f, 4.f, 5.f}) {
      std::uint8_t raw[4];
      std::memcpy(raw, &v, 4);
      expected.insert(expected.end(), raw, raw + 4);
    }
    CHECK(b == expected);

    // test_empty: no tensors is "{}" padded with six spaces; metadata comes first.
    CHECK(io::to_safetensors_bytes({}) == std::vector<std::uint8_t>{8, 0, 0, 0, 0, 0, 0, 0, '{',
                                                                    '}', ' ', ' ', ' ', ' ', ' ',
                                                                    ' '});
    const auto m = io::to_safetensors_bytes({}, {{"framework", "pt"}});
    const std::string mh = R"({"__metadata__":{"framework":"pt"}})";
    CHECK(get_le(m, 0, 8) == 40);
    CHECK(std::string(m.begin() + 8, m.end()) == mh + "     ");
  }

  TEST_CASE("safetensors: data order is by dtype alignment, then by name") {
    const auto b = io::to_safetensors_bytes({{"z_u8", pattern({3}, uint8)},
                                             {"b_f32", pattern({2}, float32)},
                                             {"a_f32", pattern({1}, float32)},
                                             {"c_f64", pattern({1}, float64)},
                                             {"d_bool", pattern({2}, bool_)}},
                                            {{"k", "v"}});
    const std::uint64_t n = get_le(b, 0, 8);
    CHECK(n % 8 == 0);
    const std::string h(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n));
    const auto pos = [&](const std::string& k) { return h.find("\"" + k + "\""); };
    CHECK(pos("__metadata__") < pos("c_f64"));
    CHECK(pos("c_f64") < pos("a_f32"));
    CHECK(pos("a_f32") < pos("b_f32"));
    CHECK(pos("b_f32") < pos("z_u8"));
    CHECK(pos("z_u8") < pos("d_bool"));
    CHECK(h.find(R"("c_f64":{"dtype":"F64","shape":[1],"data_offsets":[0,8]})") !=
          std::string::npos);
    CHECK(h.find(R"("d_bool":{"dtype":"BOOL","shape":[2],"data_offsets":[23,25]})") !=
          std::string::npos);
    CHECK(h.find_last_not_of(' ') == h.find_last_of('}'));  // padded with spaces only
    const auto f = io::from_safetensors_bytes(b);
    // Loaded in data order.
    std::vector<std::string> names;
    for (const auto& [k, t] : f.tensors) names.push_back(k);
    CHECK(names == std::vector<std::string>{"c_f64", "a_f32", "b_f32", "z_u8", "d_bool"});
    CHECK(f.metadata == std::map<std::string, std::string>{{"k", "v"}});
    CHECK(f.contains("a_f32"));
    CHECK_FALSE(f.contains("nope"));
    CHECK_THROWS_WITH_AS(f.at("nope"), doctest::Contains("no tensor named 'nope'"), ValueError);
  }

  TEST_CASE("safetensors: metadata and names with unicode round-trip") {
    const std::map<std::string, std::string> meta = {{"format", "pt"},
                                                     {"note", "caf\xC3\xA9 \"q\"\n"}};
    const auto f = io::from_safetensors_bytes(
        io::to_safetensors_bytes({{"w\xC3\xA9ight", pattern({2}, float32)}}, meta));
    CHECK(f.metadata == meta);
    CHECK(f.contains("w\xC3\xA9ight"));
  }

  TEST_CASE("safetensors: save and load through a file") {
    TempDir dir;
    const std::string path = dir.file("m.safetensors");
    const Tensor w = pattern({8, 3}, float32), b = pattern({3}, bfloat16);
    io::save_safetensors(path, {{"w", w}, {"b", b}}, {{"epoch", "3"}});
    CHECK(read_all(path) == io::to_safetensors_bytes({{"w", w}, {"b", b}}, {{"epoch", "3"}}));
    const auto f = io::load_safetensors(path);
    CHECK(same_tensor(f.at("w"), w));
    CHECK(same_tensor(f.at("b"), b));
    CHECK(f.metadata.at("epoch") == "3");
    CHECK(dir.entries() == 1);  // no temporary file left

    // A file truncated on disk fails the same way as truncated bytes.
    auto bytes = read_all(path);
    bytes.resize(bytes.size() - 4);
    write_all(path, bytes);
    CHECK_THROWS_WITH_AS(io::load_safetensors(path), doctest::Contains("out of range"), ValueError);
    CHECK_THROWS_WITH_AS(io::load_safetensors(dir.file("missing.safetensors")),
                         doctest::Contains("missing.safetensors"), ValueError);
  }

  TEST_CASE("safetensors: save rejects what the format cannot hold") {
    const Tensor x = ones({2});
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"a", x}, {"a", x}}),
                         doctest::Contains("the name 'a' is given twice"), ValueError);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"__metadata__", x}}),
                         doctest::Contains("reserved"), ValueError);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"c", ones({2}, complex128)}}),
                         doctest::Contains("dtype Complex128 has no safetensors name"), TypeError);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"q", zeros({2}, int4)}}),
                         doctest::Contains("dtype Int4 has no safetensors name"), TypeError);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"u", Tensor()}}),
                         doctest::Contains("tensor 'u' is undefined"), ValueError);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"\xFF", x}}),
                         doctest::Contains("not valid UTF-8"), ValueError);
    Shape r65;
    for (int i = 0; i < 65; ++i) r65.push_back(1);
    CHECK_THROWS_WITH_AS(io::to_safetensors_bytes({{"r", zeros(r65)}}),
                         doctest::Contains("has rank 65, over the 64 dims"), ValueError);
    CHECK(io::safetensors_dtype_name(bfloat16) == "BF16");
    CHECK(io::safetensors_dtype_name(bool_) == "BOOL");
  }

  // ---------------------------------------------------------------- bad files

  TEST_CASE("safetensors bad file: shorter than the 8-byte length") {
    for (std::size_t n = 0; n < 8; ++n) {
      CAPTURE(n);
      CHECK_BAD(zeros_bytes(n), "the 8-byte header length is missing", ValueError);
    }
  }

  TEST_CASE("safetensors bad file: header length 0-1") {
    for (std::uint64_t n = 0; n < 2; ++n) {
      CAPTURE(n);
      std::vector<std::uint8_t> b(8 + 16, ' ');
      put_le(b, 0, n, 8);
      b[8] = '{';
      b[9] = '}';
      CHECK_BAD(b, "is too small (at least 2", ValueError);
    }
  }

  TEST_CASE("safetensors: the 2-byte header {} is an empty file, as for the reference reader") {
    for (const bool pad : {false, true}) {
      CAPTURE(pad);
      const auto b = craft("{}", {}, pad);
      CHECK(b.size() == (pad ? 16u : 10u));
      const auto f = io::from_safetensors_bytes(b);
      CHECK(f.tensors.empty());
      CHECK(f.metadata.empty());
    }
    // Lengths 2-7 with spaces after "{}" (an unpadded writer's trailing spaces).
    for (std::size_t spaces = 0; spaces < 6; ++spaces)
      CHECK(io::from_safetensors_bytes(craft("{}" + std::string(spaces, ' '), {}, false))
                .tensors.empty());
  }

  TEST_CASE("safetensors bad file: NUL bytes (padding is trailing spaces only)") {
    // Padded with NULs instead of spaces: the reference reader refuses it.
    std::vector<std::uint8_t> b = craft("{}");
    std::fill(b.begin() + 10, b.end(), 0);
    CHECK_BAD(b, "header holds a NUL byte at byte 2 of 8", ValueError);
    // A NUL would end the JSON text early for a parser that stops there: what
    // follows it must not be ignored.
    b = craft(std::string("{}\0{\"x\": 1}", 11));
    CHECK_BAD(b, "header holds a NUL byte at byte 2", ValueError);
    const std::string t = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    b = craft(t + std::string(1, '\0'), {7});
    CHECK_BAD(b, (std::string("NUL byte at byte ") + std::to_string(t.size())).c_str(), ValueError);
    // Spaces (and JSON's other whitespace, which the reference reader allows) are fine.
    CHECK(io::from_safetensors_bytes(craft(t + "  \n\t ", {7}, false)).at("a").numel() == 1);
  }

  TEST_CASE("safetensors: a header of 100,000 tensors loads, in order, with every check") {
    // The header parse is linear (bench/bm_io.cpp: BM_Safetensors_LoadHeader
    // measures 10k to 1M tensors); here the large header's contents are checked.
    constexpr int kTensors = 100'000;
    std::string h = "{";
    for (int i = 0; i < kTensors; ++i) {
      if (i > 0) h += ",";
      h += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
           std::to_string(i) + "," + std::to_string(i + 1) + "]}";
    }
    std::vector<std::uint8_t> data(kTensors);
    for (int i = 0; i < kTensors; ++i) data[i] = static_cast<std::uint8_t>(i % 251);
    const auto f = io::from_safetensors_bytes(craft(h + "}", data));
    REQUIRE(f.tensors.size() == kTensors);
    for (int i : {0, 1, 12'345, kTensors - 1}) {
      CHECK(f.tensors[i].first == "t" + std::to_string(i));
      CHECK(f.tensors[i].second.item<std::uint8_t>() == i % 251);
    }
    // A duplicate as the last of 100,000 keys is still found.
    const std::string dup = h + ",\"t7\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    CHECK_BAD(craft(dup, data), "header has the key 't7' twice", ValueError);
  }

  TEST_CASE("safetensors bad file: header length over 100 MB") {
    std::vector<std::uint8_t> b(16, ' ');
    put_le(b, 0, 100'000'008, 8);
    CHECK_BAD(b, "over the limit of 100000000", ValueError);
  }

  TEST_CASE("safetensors bad file: header length past the end") {
    auto b = craft("{}");
    put_le(b, 0, 16, 8);  // 8 bytes of header follow, 16 declared
    CHECK_BAD(b, "past the end of the file", ValueError);
  }

  TEST_CASE("safetensors bad file: header length that overflows") {
    for (const std::uint64_t n :
         {~std::uint64_t{0}, ~std::uint64_t{0} - 7, std::uint64_t{1} << 63}) {
      std::vector<std::uint8_t> b(16, ' ');
      put_le(b, 0, n, 8);
      CHECK_BAD(b, "over the limit", ValueError);
    }
  }

  TEST_CASE("safetensors bad file: header not UTF-8") {
    CHECK_BAD(craft("{\"a\xFF\":{}}"), "not valid UTF-8", ValueError);
    CHECK_BAD(craft("{\"\xC0\xAF\":{}}"), "not valid UTF-8", ValueError);      // overlong '/'
    CHECK_BAD(craft("{\"\xED\xA0\x80\":{}}"), "not valid UTF-8", ValueError);  // surrogate
  }

  TEST_CASE("safetensors bad file: header not a JSON object") {
    CHECK_BAD(craft("[1, 2, 3]"), "header must be a JSON object, got array", ValueError);
    CHECK_BAD(craft("\"text\""), "header must be a JSON object, got string", ValueError);
    CHECK_BAD(craft("{\"a\": "), "header is not valid JSON", ValueError);
    CHECK_BAD(craft("{} {}"), "header is not valid JSON", ValueError);
    CHECK_BAD(craft("{\"x\":{\"dtype\":\"F32\",\"shape\":[[[1]]],\"data_offsets\":[0,4]}}"),
              "nested deeper", ValueError);
  }

  TEST_CASE("safetensors bad file: duplicate keys") {
    const std::string t = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
    CHECK_BAD(craft("{\"a\":" + t + ",\"a\":" + t + "}", zeros_bytes(4)),
              "header has the key 'a' twice", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    zeros_bytes(4)),
              "the key 'dtype' twice", ValueError);
    CHECK_BAD(craft(R"({"__metadata__":{"k":"1","k":"2"}})"), "the key 'k' twice", ValueError);
  }

  TEST_CASE("safetensors bad file: unknown dtype") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F17","shape":[1],"data_offsets":[0,4]}})", zeros_bytes(4)),
              "tensor 'a': unknown dtype 'F17'", ValueError);
    CHECK_BAD(
        craft(R"({"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", zeros_bytes(1)),
        "dtype 'F8_E4M3' has no ms equivalent", TypeError);
    CHECK_BAD(craft(R"({"a":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", zeros_bytes(4)),
              "dtype must be a string", ValueError);
  }

  TEST_CASE("safetensors bad file: overflowing or malformed shape") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
                    zeros_bytes(4)),
              "overflows (more than 2^63 - 1 elements)", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})",
                    zeros_bytes(8)),
              "overflows (more than 2^63 - 1 bytes)", ValueError);
    // A zero dim does not hide an overflowing product.
    CHECK_BAD(
        craft(R"({"a":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
        "overflows", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,4]}})",
                    zeros_bytes(4)),
              "overflows", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", zeros_bytes(4)),
              "shape entries must be non-negative integers, got -1", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}})", zeros_bytes(4)),
              "non-negative integers", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":3,"data_offsets":[0,4]}})", zeros_bytes(4)),
              "shape must be an array", ValueError);
  }

  TEST_CASE("safetensors bad file: malformed tensor entries") {
    CHECK_BAD(craft(R"({"a":[1]})"), "expected an object with dtype, shape", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[1]}})"), "missing 'data_offsets'", ValueError);
    CHECK_BAD(
        craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", zeros_bytes(4)),
        "unknown key 'x'", ValueError);
  }

  TEST_CASE("safetensors bad file: data_offsets not [begin, end] integers") {
    for (const std::string o : {"[0]", "[0,4,8]", "[0,\"4\"]", "[0.0,4]", "[-4,0]", "4", "{}",
                                "[0,18446744073709551616]"}) {
      CAPTURE(o);
      CHECK_BAD(
          craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":)" + o + "}}", zeros_bytes(4)),
          "data_offsets must be [begin, end] non-negative integers", ValueError);
    }
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", zeros_bytes(4)),
              "end before they begin", ValueError);
  }

  TEST_CASE("safetensors bad file: shape times dtype size differs from the byte span") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", zeros_bytes(8)),
              "shape [3] of F32 needs 12 bytes but data_offsets [0, 8] span 8", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F64","shape":[],"data_offsets":[0,4]}})", zeros_bytes(4)),
              "needs 8 bytes", ValueError);
  }

  TEST_CASE("safetensors bad file: offsets out of range (past the data)") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zeros_bytes(4)),
              "data_offsets [0, 8] are out of range: past the end of the data (4 bytes)",
              ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[9,9]}})", zeros_bytes(4)),
              "out of range", ValueError);
  }

  TEST_CASE("safetensors bad file: overlapping offsets") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                    zeros_bytes(12)),
              "tensor 'b' data_offsets [4, 12] overlap tensor 'a' [0, 8]", ValueError);
    // Two tensors on the same bytes (an aliasing trick) overlap too.
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})",
                    zeros_bytes(8)),
              "overlap", ValueError);
  }

  TEST_CASE("safetensors bad file: gaps between tensors") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
                    zeros_bytes(20)),
              "gap of 4 bytes in the data before tensor 'b'", ValueError);
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", zeros_bytes(8)),
              "gap of 4 bytes in the data before tensor 'a'", ValueError);
  }

  TEST_CASE("safetensors bad file: trailing bytes") {
    CHECK_BAD(craft(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", zeros_bytes(9)),
              "1 trailing bytes after the last tensor", ValueError);
    CHECK_BAD(craft("{}", zeros_bytes(3)), "3 trailing bytes", ValueError);
  }

  TEST_CASE("safetensors bad file: truncated data") {
    auto b = io::to_safetensors_bytes({{"a", pattern({4}, float32)}, {"b", pattern({4}, int64)}});
    for (std::size_t cut : {1, 7, 20}) {
      CAPTURE(cut);
      auto t = b;
      t.resize(t.size() - cut);
      CHECK_BAD(t, "out of range: past the end of the data", ValueError);
    }
    b.resize(12);  // inside the header
    CHECK_BAD(b, "past the end of the file", ValueError);
  }

  TEST_CASE("safetensors bad file: __metadata__ not string to string") {
    CHECK_BAD(craft(R"({"__metadata__":{"epoch":3}})"),
              "__metadata__ 'epoch' must be a string, got number", ValueError);
    CHECK_BAD(craft(R"({"__metadata__":["a"]})"), "__metadata__ must be an object", ValueError);
    CHECK_BAD(craft(R"({"__metadata__":{"a":{"b":"c"}}})"), "must be a string, got object",
              ValueError);
  }

  TEST_CASE("safetensors bad file: BOOL bytes other than 0 and 1") {
    CHECK_BAD(craft(R"({"a":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", {1, 0, 2}),
              "BOOL tensor 'a' holds byte 2 at element 2", ValueError);
  }

  TEST_CASE("safetensors: an unpadded header (older writers) is accepted") {
    const auto f = io::from_safetensors_bytes(
        craft(R"({"a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", {1, 2, 3}, false));
    CHECK(f.at("a").to_vector<std::uint8_t>() == std::vector<std::uint8_t>{1, 2, 3});
  }
}
