// Text data: fortune files split into fortunes (the "%" rule), the fixed
// every-20th validation split, byte streams with separators, next-byte windows,
// shuffled batches that depend only on (seed, epoch) and visit every window
// once per epoch, the errors; and the real Debian corpus when installed.
#include <doctest/doctest.h>

#include "temp_dir.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ms/cell.hpp>
#include <ms/data/text.hpp>
#include <set>
#include <string>
#include <vector>

using namespace ms;

namespace {

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string fortune_text(int k) { return "fortune " + std::to_string(k) + "\n  -- line two\n"; }

/// A corpus of 45 fortunes: "a_file" holds fortunes 0..29, "b_file" 30..44,
/// plus what FortunesCorpus must skip: an index file, a .u8 link, another
/// symlink and a subdirectory.
struct TinyCorpus {
  test::TempDir dir{"ms_text"};
  TinyCorpus() {
    std::string a = "%\n", b;  // a leading "%" makes no empty fortune
    for (int k = 0; k < 30; ++k) a += fortune_text(k) + "%\n";
    for (int k = 30; k < 45; ++k) b += fortune_text(k) + (k < 44 ? "%\n" : "");
    write(dir.file("b_file"), b);  // written first: the order is by name, not by creation
    write(dir.file("a_file"), a);
    write(dir.file("a_file.dat"), std::string(24, '\x01'));
    std::filesystem::create_symlink("a_file", dir.file("a_file.u8"));
    std::filesystem::create_symlink("b_file", dir.file("link_to_b"));
    std::filesystem::create_directory(dir.file("off"));
    write(dir.file("off/c_file"), "hidden\n%\n");
  }
};

std::string as_string(const std::vector<std::uint8_t>& v) { return {v.begin(), v.end()}; }

std::string as_string(const Tensor& t) {
  std::string s;
  for (std::int64_t v : t.to_vector<std::int64_t>()) s.push_back(static_cast<char>(v));
  return s;
}

std::vector<std::uint8_t> bytes_of(const std::string& s) { return {s.begin(), s.end()}; }

bool fortunes_absent() {
  const bool absent = !std::filesystem::is_directory(std::string(data::kFortunesDir));
  if (absent)
    std::fprintf(stderr,
                 "test_text: skipping \"FortunesCorpus: Debian's fortunes\": %s is absent "
                 "(apt-get install fortunes)\n",
                 std::string(data::kFortunesDir).c_str());
  return absent;
}

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("split_fortunes: lines that are exactly % end a fortune; empty fortunes dropped") {
    using V = std::vector<std::string>;
    CHECK(data::split_fortunes("a\n%\nb\nc\n%\n") == V{"a\n", "b\nc\n"});
    CHECK(data::split_fortunes("%\n%\nx") == V{"x"});  // no final newline: kept as is
    CHECK(data::split_fortunes("x\n%") == V{"x\n"});   // a final "%" without '\n'
    CHECK(data::split_fortunes(" %\n%%\n%\r\n") == V{" %\n%%\n%\r\n"});  // none is exactly "%"
    CHECK(data::split_fortunes("50% off\n%\n") == V{"50% off\n"});
    CHECK(data::split_fortunes("").empty());
    CHECK(data::split_fortunes("%\n%\n").empty());
  }

  TEST_CASE("FortunesCorpus: files by name, fortunes in corpus order, every 20th to validation") {
    TinyCorpus t;
    data::FortunesCorpus c(t.dir.path.string());
    CHECK(c.files() == std::vector<std::string>{"a_file", "b_file"});
    REQUIRE(c.size() == 45);
    for (int k = 0; k < 45; ++k) CHECK(c.fortune(k) == fortune_text(k));
    std::int64_t bytes = 0;
    for (int k = 0; k < 45; ++k) bytes += static_cast<std::int64_t>(fortune_text(k).size());
    CHECK(c.num_bytes() == bytes);
    CHECK(c.split_size(data::TextSplit::kValidation) == 2);  // fortunes 19 and 39
    CHECK(c.split_size(data::TextSplit::kTrain) == 43);
    for (int k = 0; k < 45; ++k)
      CHECK(data::FortunesCorpus::is_validation(k) == (k == 19 || k == 39));

    const std::string sep(1, '\0');
    CHECK(as_string(c.stream(data::TextSplit::kValidation)) ==
          fortune_text(19) + sep + fortune_text(39) + sep);
    std::string train;
    for (int k = 0; k < 45; ++k)
      if (k != 19 && k != 39) train += fortune_text(k) + sep;
    CHECK(as_string(c.stream(data::TextSplit::kTrain)) == train);
    CHECK_THROWS_WITH_AS(c.fortune(45), doctest::Contains("index 45 is out of range"), IndexError);
  }

  TEST_CASE("FortunesCorpus: errors name the API, the argument and the directory") {
    test::TempDir empty_dir("ms_text_empty");
    const std::string missing = empty_dir.file("nowhere");
    const std::string want = "FortunesCorpus: dir '" + missing + "' does not exist";
    CHECK_THROWS_WITH_AS(data::FortunesCorpus{missing}, doctest::Contains(want.c_str()),
                         ValueError);
    CHECK_THROWS_WITH_AS(data::FortunesCorpus(empty_dir.path.string()),
                         doctest::Contains("holds no fortune files"), ValueError);
    write(empty_dir.file("only.dat"), "x");
    CHECK_THROWS_WITH_AS(data::FortunesCorpus(empty_dir.path.string()),
                         doctest::Contains("holds no fortune files"), ValueError);
    write(empty_dir.file("blank"), "%\n%\n");
    CHECK_THROWS_WITH_AS(
        data::FortunesCorpus(empty_dir.path.string()),
        doctest::Contains("holds 1 fortune files but no fortunes (an empty corpus)"), ValueError);
  }

  TEST_CASE("ByteTextDataset: byte tokens, targets shifted by one, strides") {
    data::ByteTextDataset ds(bytes_of("abcdefgh"), 3);
    REQUIRE(ds.size() == 5);  // starts 0..4: start + 4 <= 8
    data::TextSample s = ds.get(2);
    CHECK(s.x.dtype() == int64);
    CHECK(s.y.dtype() == int64);
    CHECK(s.x.shape() == Shape({3}));
    CHECK(as_string(s.x) == "cde");
    CHECK(as_string(s.y) == "def");
    CHECK(as_string(ds.get(4).y) == "fgh");

    data::ByteTextDataset strided(bytes_of("abcdefghi"), 3, 2);
    REQUIRE(strided.size() == 3);  // starts 0, 2, 4 (6 + 4 > 9)
    CHECK(strided.window_start(2) == 4);
    CHECK(as_string(strided.get(1).x) == "cde");
    CHECK(as_string(strided.get(2).y) == "fgh");

    // Bytes above 127 are tokens 128..255, not negative chars.
    data::ByteTextDataset high(std::vector<std::uint8_t>{0, 200, 255}, 2);
    CHECK(high.get(0).x.to_vector<std::int64_t>() == std::vector<std::int64_t>{0, 200});
    CHECK(high.get(0).y.to_vector<std::int64_t>() == std::vector<std::int64_t>{200, 255});

    const std::int64_t idx[] = {4, 0};
    data::TextBatch b = ds.collate(idx);
    CHECK(b.x.shape() == Shape({2, 3}));
    CHECK(as_string(b.x) == "efgabc");
    CHECK(as_string(b.y) == "fghbcd");
  }

  TEST_CASE("ByteTextDataset and ByteTextLoader: argument errors") {
    CHECK_THROWS_WITH_AS(data::ByteTextDataset(bytes_of("abc"), 0),
                         doctest::Contains("ByteTextDataset: context must be >= 1, got 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(data::ByteTextDataset(bytes_of("abc"), 1, 0),
                         doctest::Contains("ByteTextDataset: stride must be >= 1, got 0"),
                         ValueError);
    CHECK_THROWS_WITH_AS(
        data::ByteTextDataset(bytes_of("abcde"), 5, 1, "validation stream"),
        doctest::Contains("context must be at most 4 for the validation stream of 5 bytes (a "
                          "window is context + 1 bytes), got 5"),
        ValueError);
    TinyCorpus t;
    data::FortunesCorpus c(t.dir.path.string());
    const auto val = c.stream(data::TextSplit::kValidation);
    CHECK_THROWS_WITH_AS(data::ByteTextDataset(val, 1000, 1, "validation stream"),
                         doctest::Contains("for the validation stream of"), ValueError);
    data::ByteTextDataset ds(bytes_of("abcdefgh"), 3);
    CHECK_THROWS_WITH_AS(ds.get(5), doctest::Contains("window 5 is out of range for 5 windows"),
                         IndexError);
    CHECK_THROWS_WITH_AS(data::ByteTextLoader(ds, {.batch_size = 0}),
                         doctest::Contains("ByteTextLoader: batch_size must be >= 1, got 0"),
                         ValueError);
    data::ByteTextLoader loader(ds);
    CHECK_THROWS_AS(loader.set_epoch(-1), ValueError);
  }

  TEST_CASE("ByteTextLoader: batch shapes, every window once per epoch, drop_last") {
    std::string text;
    for (int i = 0; i < 300; ++i) text.push_back(static_cast<char>('a' + i % 26));
    data::ByteTextDataset ds(bytes_of(text), 8);  // 292 windows
    REQUIRE(ds.size() == 292);
    data::ByteTextLoader loader(ds, {.batch_size = 32, .seed = 5});
    CHECK(loader.size() == 10);  // 9 full batches and one of 4
    for (int epoch = 0; epoch < 2; ++epoch) {
      const auto batches = loader.batch_indices(loader.epoch());
      std::multiset<std::int64_t> seen;
      std::size_t k = 0;
      for (auto& [x, y] : loader) {
        const std::int64_t rows = k + 1 < batches.size() ? 32 : 4;
        CHECK(x.shape() == Shape({rows, 8}));
        CHECK(y.shape() == Shape({rows, 8}));
        CHECK(x.dtype() == int64);
        CHECK(y.dtype() == int64);
        const data::TextBatch want = ds.collate(batches[k]);
        CHECK(x.to_vector<std::int64_t>() == want.x.to_vector<std::int64_t>());
        CHECK(y.to_vector<std::int64_t>() == want.y.to_vector<std::int64_t>());
        // the target is the input shifted by one byte
        const auto xs = x.to_vector<std::int64_t>(), ys = y.to_vector<std::int64_t>();
        for (std::size_t i = 0; i + 1 < xs.size(); ++i)
          if ((i + 1) % 8 != 0) CHECK(ys[i] == xs[i + 1]);
        seen.insert(batches[k].begin(), batches[k].end());
        ++k;
      }
      CHECK(k == 10);
      CHECK(seen.size() == 292);
      CHECK(std::set<std::int64_t>(seen.begin(), seen.end()).size() == 292);  // once each
      CHECK(*seen.begin() == 0);
      CHECK(*seen.rbegin() == 291);
    }
    CHECK(loader.epoch() == 2);

    data::ByteTextLoader dropping(ds, {.batch_size = 32, .drop_last = true});
    CHECK(dropping.size() == 9);
    std::int64_t n = 0;
    for (auto& batch : dropping) {
      CHECK(batch.x.dim(0) == 32);
      ++n;
    }
    CHECK(n == 9);
  }

  TEST_CASE("ByteTextLoader: orders depend only on (seed, epoch)") {
    data::ByteTextDataset ds(bytes_of(std::string(200, 'x')), 4);
    data::ByteTextLoader a(ds, {.batch_size = 16, .seed = 11});
    data::ByteTextLoader b(ds, {.batch_size = 16, .seed = 11});
    data::ByteTextLoader c(ds, {.batch_size = 16, .seed = 12});
    CHECK(a.order(0) == b.order(0));
    CHECK(a.order(3) == b.order(3));
    CHECK(a.order(0) != c.order(0));
    CHECK(a.order(0) != a.order(1));
    // Epoch e is the (e+1)-th randperm of Generator(seed), as DataLoader's orders.
    Generator g(11);
    for (int e = 0; e < 3; ++e) {
      const Tensor perm = randperm(ds.size(), g);
      CHECK(a.order(e) == perm.to_vector<std::int64_t>());
    }
    // set_epoch replays an epoch: the same batches as the first pass.
    std::vector<std::vector<std::int64_t>> first, again;
    for (auto& batch : a) first.push_back(batch.x.to_vector<std::int64_t>());
    a.set_epoch(0);
    for (auto& batch : a) again.push_back(batch.x.to_vector<std::int64_t>());
    CHECK(first == again);

    data::ByteTextLoader plain(ds, {.batch_size = 16, .shuffle = false});
    std::vector<std::int64_t> iota(static_cast<std::size_t>(ds.size()));
    for (std::size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<std::int64_t>(i);
    CHECK(plain.order(0) == iota);
    CHECK(plain.order(4) == iota);
    const auto chunks = plain.batch_indices(0);
    REQUIRE(chunks.size() == 13);  // 196 windows: 12 of 16 and one of 4
    CHECK(chunks[1].front() == 16);
    CHECK(chunks.back().size() == 4);
  }

  TEST_CASE("ByteTextLoader: batches feed nn::Embedding and nn::cross_entropy") {
    data::ByteTextDataset ds(bytes_of("the quick brown fox jumps over the lazy dog"), 6);
    data::ByteTextLoader loader(ds, {.batch_size = 4, .seed = 1});
    nn::Embedding emb(256, 256);
    auto it = loader.begin();
    const Tensor logits = emb(it->x);  // [4, 6, 256]
    CHECK(logits.shape() == Shape({4, 6, 256}));
    const Tensor loss = nn::cross_entropy(logits, it->y);
    CHECK(std::isfinite(loss.item<double>()));
  }

  TEST_CASE("FortunesCorpus: Debian's fortunes" * doctest::skip(fortunes_absent())) {
    data::FortunesCorpus c;
    CHECK(c.num_bytes() > 1'000'000);
    CHECK(c.size() > 1000);
    for (const std::string& f : c.files()) {
      CHECK_FALSE(f.ends_with(".dat"));
      CHECK_FALSE(f.ends_with(".u8"));
    }
    const std::int64_t val = c.split_size(data::TextSplit::kValidation);
    const double frac = static_cast<double>(val) / static_cast<double>(c.size());
    CHECK(frac > 0.049);
    CHECK(frac <= 0.05);
    // The separator byte 0 occurs in no fortune, so it marks fortune ends only.
    std::int64_t zeros = 0;
    for (std::int64_t i = 0; i < c.size(); ++i)
      for (char ch : c.fortune(i)) zeros += ch == '\0';
    CHECK(zeros == 0);
    const auto vstream = c.stream(data::TextSplit::kValidation);
    const auto tstream = c.stream(data::TextSplit::kTrain);
    CHECK(static_cast<std::int64_t>(vstream.size() + tstream.size()) == c.num_bytes() + c.size());
    const double vbytes =
        static_cast<double>(vstream.size()) / static_cast<double>(vstream.size() + tstream.size());
    CHECK(vbytes > 0.03);
    CHECK(vbytes < 0.07);
    data::ByteTextDataset vds(vstream, 256, 1, "validation stream");
    CHECK(vds.size() == static_cast<std::int64_t>(vstream.size()) - 256);
  }
}
