// Atomic writes keep the previous file when a save fails part-way (an exception
// in the producer, a tensor that cannot be copied, a real write error from the
// kernel), bounded reads, UTF-8 validation.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <ms/core/storage.hpp>
#include <ms/io/file.hpp>
#include <ms/io/npy.hpp>
#include <ms/io/safetensors.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "io_test_util.hpp"

using namespace ms;
using namespace io_test;

namespace {

struct AllocCapGuard {
  std::int64_t saved = max_alloc_bytes();
  ~AllocCapGuard() { set_max_alloc_bytes(saved); }
};

/// Lowers RLIMIT_FSIZE (a write past it fails with EFBIG; SIGXFSZ is ignored)
/// for its scope.
struct FileSizeLimit {
  rlimit saved{};
  void (*saved_handler)(int) = nullptr;
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    saved_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit lower = saved;
    lower.rlim_cur = bytes;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lower) == 0);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, saved_handler);
  }
};

}  // namespace

TEST_SUITE("io") {
  TEST_CASE("write_file_atomic writes and replaces") {
    TempDir dir;
    const std::string path = dir.file("a.bin");
    io::write_file_atomic(path, bytes_of("first"));
    CHECK(read_all(path) == bytes_of("first"));
    io::write_file_atomic(path, bytes_of("second, longer"));
    CHECK(read_all(path) == bytes_of("second, longer"));
    io::write_file_atomic(path, std::vector<std::uint8_t>{});
    CHECK(read_all(path).empty());
    CHECK(dir.entries() == 1);
  }

  TEST_CASE("write_file_atomic: an exception part-way keeps the old file") {
    TempDir dir;
    const std::string path = dir.file("ckpt.bin");
    io::write_file_atomic(path, bytes_of("old contents"));
    std::uint64_t written_before_failure = 0;
    CHECK_THROWS_WITH_AS(io::write_file_atomic(path,
                                               [&](io::ByteSink& s) {
                                                 const std::vector<std::uint8_t> big(1 << 16, 7);
                                                 s.write(big.data(), big.size());
                                                 written_before_failure = s.written();
                                                 throw std::runtime_error("producer failed");
                                               }),
                         "producer failed", std::runtime_error);
    CHECK(written_before_failure == 1 << 16);
    CHECK(read_all(path) == bytes_of("old contents"));
    CHECK(dir.entries() == 1);  // the temporary file is gone
  }

  TEST_CASE("save_safetensors: a tensor that fails mid-way keeps the previous checkpoint") {
    TempDir dir;
    const std::string path = dir.file("model.safetensors");
    const io::NamedTensors v1 = {{"a", pattern({4}, float32)}};
    io::save_safetensors(path, v1);
    const auto before = read_all(path);

    // "a" (contiguous) is written first; "b" is a transposed view whose contiguous
    // copy is refused by the allocation cap, after the header and "a" were written.
    const Tensor b = pattern({64, 64}, float32).transpose(0, 1);
    const io::NamedTensors v2 = {{"a", pattern({1024}, float32)}, {"b", b}};
    {
      AllocCapGuard guard;
      set_max_alloc_bytes(8 * 1024);
      CHECK_THROWS_AS(io::save_safetensors(path, v2), MemoryError);
    }
    CHECK(read_all(path) == before);
    CHECK(dir.entries() == 1);
    CHECK(same_tensor(io::load_safetensors(path).at("a"), v1[0].second));
    io::save_safetensors(path, v2);  // without the cap it works
    CHECK(same_tensor(io::load_safetensors(path).at("b"), b.contiguous()));
  }

  TEST_CASE("save: a write error from the kernel mid-way keeps the previous file") {
    TempDir dir;
    const std::string st = dir.file("m.safetensors"), npy = dir.file("m.npy"),
                      npz = dir.file("m.npz");
    const Tensor small = pattern({8}, float32);
    io::save_safetensors(st, {{"w", small}});
    io::save_npy(npy, small);
    io::save_npz(npz, {{"w", small}});
    const auto st0 = read_all(st), npy0 = read_all(npy), npz0 = read_all(npz);
    const Tensor big = pattern({64 * 1024}, float32);  // 256 KiB
    {
      FileSizeLimit limit(64 * 1024);  // writes past 64 KiB fail with EFBIG
      CHECK_THROWS_WITH_AS(io::save_safetensors(st, {{"w", big}}),
                           doctest::Contains("m.safetensors': write failed: File too large"),
                           ValueError);
      CHECK_THROWS_WITH_AS(io::save_npy(npy, big), doctest::Contains("write failed"), ValueError);
      CHECK_THROWS_WITH_AS(io::save_npz(npz, {{"w", big}}), doctest::Contains("write failed"),
                           ValueError);
    }
    CHECK(read_all(st) == st0);
    CHECK(read_all(npy) == npy0);
    CHECK(read_all(npz) == npz0);
    CHECK(dir.entries() == 3);
  }

  TEST_CASE("write_file_atomic: OS failures name the path and leave nothing behind") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(io::write_file_atomic(dir.file("no/such/dir/x.bin"), bytes_of("x")),
                         doctest::Contains("no/such/dir/x.bin': creating temporary file"),
                         ValueError);
    // The target is a directory: the rename fails, the directory stays.
    std::filesystem::create_directory(dir.path / "sub");
    std::filesystem::create_directory(dir.path / "sub" / "inner");
    CHECK_THROWS_WITH_AS(io::write_file_atomic(dir.file("sub/inner"), bytes_of("x")),
                         doctest::Contains("rename failed"), ValueError);
    CHECK(std::filesystem::is_directory(dir.path / "sub" / "inner"));
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path / "sub"),
                        std::filesystem::directory_iterator()) == 1);
    CHECK_THROWS_WITH_AS(io::write_file_atomic("", bytes_of("x")), doctest::Contains("empty path"),
                         ValueError);
    CHECK_THROWS_WITH_AS(io::write_file_atomic(dir.file("sub/"), bytes_of("x")),
                         doctest::Contains("does not name a file"), ValueError);
    if (::geteuid() != 0) {  // root may write anywhere
      std::filesystem::permissions(dir.path / "sub", std::filesystem::perms::owner_read |
                                                         std::filesystem::perms::owner_exec);
      CHECK_THROWS_AS(io::write_file_atomic(dir.file("sub/x.bin"), bytes_of("x")), ValueError);
      std::filesystem::permissions(dir.path / "sub", std::filesystem::perms::owner_all);
    }
  }

  TEST_CASE("read_file: bounded, regular files only") {
    TempDir dir;
    const std::string path = dir.file("r.bin");
    write_all(path, std::vector<std::uint8_t>(100, 3));
    CHECK(io::read_file(path) == std::vector<std::uint8_t>(100, 3));
    CHECK(io::read_file(path, 100).size() == 100);
    CHECK_THROWS_WITH_AS(io::read_file(path, 99),
                         doctest::Contains("has 100 bytes, more than the limit of 99"), ValueError);
    CHECK_THROWS_WITH_AS(io::read_file(dir.file("missing")),
                         doctest::Contains("missing': open failed"), ValueError);
    CHECK_THROWS_WITH_AS(io::read_file(dir.path.string()),
                         doctest::Contains("is not a regular file"), ValueError);
    const io::InputFile f(path);
    std::uint8_t buf[8];
    CHECK_THROWS_WITH_AS(f.read_at(96, buf, 8), doctest::Contains("the file ended at byte 100"),
                         ValueError);
    write_all(path, std::vector<std::uint8_t>(50, 3));  // shrinks under the open file
    CHECK_THROWS_WITH_AS(f.check_unchanged(), doctest::Contains("changed size"), ValueError);
  }

  TEST_CASE("loaders refuse a FIFO at once, naming it, instead of waiting for a writer") {
    TempDir dir;
    check_fifo_refused(dir.file("a.safetensors"),
                       [&] { io::load_safetensors(dir.file("a.safetensors")); });
    check_fifo_refused(dir.file("a.npy"), [&] { io::load_npy(dir.file("a.npy")); });
    check_fifo_refused(dir.file("a.npz"), [&] { io::load_npz(dir.file("a.npz")); });
    check_fifo_refused(dir.file("a.bin"), [&] { io::read_file(dir.file("a.bin")); });
    // (load_checkpoint opens its file through load_safetensors.)
    CHECK_THROWS_WITH_AS(io::load_npy(dir.path.string()), doctest::Contains("it is a directory"),
                         ValueError);
  }

  TEST_CASE("write_file_atomic removes temporary files of dead processes, never of live ones") {
    TempDir dir;
    // A pid that no longer exists: a child that has exited and been reaped.
    const pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) ::_exit(0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    const pid_t live = ::getppid();  // the test's parent runs as long as the test does
    const std::string d = std::to_string(dead), l = std::to_string(live);
    const std::vector<std::string> stale = {".model.safetensors.tmp." + d + ".0",
                                            ".other.npz.tmp." + d + ".17"};
    const std::vector<std::string> kept = {
        ".model.safetensors.tmp." + l + ".3",                             // a live process's save
        ".model.safetensors.tmp." + std::to_string(::getpid()) + ".999",  // this process's
        "model.safetensors.tmp." + d + ".0",                              // not hidden: not ours
        ".model.safetensors.tmp." + d,                                    // no counter
        ".model.safetensors.tmp.x" + d + ".0",                            // not a pid
        ".tmp." + d + ".0",                                               // no name
        "keep.bin"};
    for (const auto& n : stale) write_all(dir.file(n), bytes_of("half a save"));
    for (const auto& n : kept) write_all(dir.file(n), bytes_of("x"));
    std::filesystem::create_directory(dir.file(".dir.tmp." + d + ".1"));  // not a regular file

    io::save_safetensors(dir.file("model.safetensors"), {{"w", ms::ones({2})}});
    for (const auto& n : stale) CHECK_MESSAGE(!std::filesystem::exists(dir.file(n)), n);
    for (const auto& n : kept) CHECK_MESSAGE(std::filesystem::exists(dir.file(n)), n);
    CHECK(std::filesystem::exists(dir.file(".dir.tmp." + d + ".1")));
    CHECK(io::load_safetensors(dir.file("model.safetensors")).at("w").numel() == 2);
    CHECK(dir.entries() == kept.size() + 2);
  }

  TEST_CASE("memory_error_as: a refused allocation is an ms::MemoryError naming the API") {
    CHECK(io::memory_error_as("x", [] { return 3; }) == 3);
    CHECK_THROWS_WITH_AS(
        io::memory_error_as("load_npz: 'a.npz'", []() -> int { throw std::bad_alloc(); }),
        doctest::Contains("load_npz: 'a.npz': out of memory"), MemoryError);
  }

  TEST_CASE("SpanSource reads within bounds only") {
    const std::vector<std::uint8_t> b = {1, 2, 3};
    const io::SpanSource s(b, "test");
    std::uint8_t out[3] = {};
    s.read(1, out, 2);
    CHECK(out[1] == 3);
    CHECK_THROWS_WITH_AS(s.read(2, out, 2), doctest::Contains("test: reading 2 bytes at offset 2"),
                         ValueError);
    CHECK_THROWS_AS(s.read(~std::uint64_t{0}, out, 2), ValueError);
  }

  TEST_CASE("utf8_invalid_at") {
    const auto at = [](const std::string& s) {
      return io::utf8_invalid_at(
          std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
    };
    CHECK_FALSE(at("plain ascii").has_value());
    CHECK_FALSE(at("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80").has_value());
    CHECK(at("ab\x80") == 2u);            // stray continuation byte
    CHECK(at("a\xC3") == 1u);             // truncated sequence
    CHECK(at("\xC1\xBF") == 0u);          // overlong 2-byte
    CHECK(at("\xE0\x80\xAF") == 0u);      // overlong 3-byte
    CHECK(at("x\xED\xB0\x80") == 1u);     // surrogate
    CHECK(at("\xF4\x90\x80\x80") == 0u);  // over U+10FFFF
    CHECK(at("\xFF") == 0u);
    CHECK(at("\xE2\x28\xA1") == 0u);  // bad continuation
  }
}
