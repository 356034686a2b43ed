// The pluggable file system: checkpoints saved and loaded through a registered
// backend (in memory: nothing reaches the disk), a backend whose init fails
// (warning, POSIX instead), writes failing part-way (the previous checkpoint
// stays), a backend without rename (not atomic, best effort), POSIX restored,
// set_dump's files through the backend.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ms/core/warning.hpp>
#include <ms/io/file.hpp>
#include <ms/io/file_system.hpp>
#include <ms/io/npy.hpp>
#include <ms/io/safetensors.hpp>
#include <ms/ms.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io/memory_file_system.hpp"
#include "io_test_util.hpp"

using namespace ms;
using namespace io_test;

namespace {

/// A backend whose init fails, as MindIO's does when its device is missing.
struct FailingInitFileSystem : MemoryFileSystem {
  std::string name() const override { return "mindio"; }
  void init() override { throw std::runtime_error("ret = 7"); }
};

/// Collects ms's warnings for its scope.
struct WarningCollector {
  std::vector<std::string> seen;
  WarningHandler prev;
  WarningCollector() {
    prev = set_warning_handler([this](const std::string& w) { seen.push_back(w); });
  }
  ~WarningCollector() { set_warning_handler(prev); }
};

// A directory that does not exist on disk: saving there through POSIX fails.
const std::string kNowhere = "/nonexistent-ms-file-system-test/ckpt";

}  // namespace

TEST_SUITE("io") {
  TEST_CASE("file_system: POSIX is the default") {
    CHECK(io::file_system() == io::posix_file_system());
    CHECK(io::file_system()->name() == "posix");
    CHECK(io::file_system()->supports_atomic_rename());
  }

  TEST_CASE("file_system: a checkpoint saved and loaded in memory never touches the disk") {
    TempDir dir;
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);
    CHECK(io::file_system() == mem);
    const io::NamedTensors v = {{"w", pattern({3, 4}, float32)}, {"b", pattern({4}, int64)}};
    const std::string on_disk = dir.file("model.safetensors");
    const std::string nowhere = kNowhere + "/model.safetensors";
    io::save_safetensors(on_disk, v, {{"epoch", "3"}});
    io::save_safetensors(nowhere, v);
    io::save_npy(kNowhere + "/w.npy", v[0].second);
    CHECK(dir.entries() == 0);
    CHECK_FALSE(std::filesystem::exists(kNowhere));
    // Only the targets: the temporary files were renamed.
    CHECK(mem->paths() ==
          std::vector<std::string>{kNowhere + "/model.safetensors", kNowhere + "/w.npy", on_disk});
    CHECK(mem->renames() == 3);

    const io::SafetensorsFile f = io::load_safetensors(on_disk);
    CHECK(same_tensor(f.at("w"), v[0].second));
    CHECK(same_tensor(f.at("b"), v[1].second));
    CHECK(f.metadata.at("epoch") == "3");
    CHECK(same_tensor(io::load_safetensors(nowhere).at("w"), v[0].second));
    CHECK(same_tensor(io::load_npy(kNowhere + "/w.npy"), v[0].second));
    CHECK(io::read_file(on_disk) == mem->contents(on_disk));
    CHECK(io::file_system()->file_size(on_disk) == mem->contents(on_disk).size());
    CHECK_THROWS_WITH_AS(io::load_safetensors(dir.file("absent.safetensors")),
                         doctest::Contains("absent.safetensors': open failed: memory: no file"),
                         ValueError);
  }

  TEST_CASE("file_system: a backend whose init fails makes ms warn and save with POSIX") {
    TempDir dir;
    WarningCollector warnings;
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);  // a backend active before: the fallback is POSIX, not it
    auto failing = std::make_shared<FailingInitFileSystem>();
    CHECK_FALSE(io::register_file_system(failing));
    REQUIRE(warnings.seen.size() == 1);
    CHECK(warnings.seen[0] ==
          "register_file_system: the file system 'mindio' failed to initialize: ret = 7; "
          "checkpoints and dumps use the POSIX file system");
    CHECK(io::file_system() == io::posix_file_system());

    const std::string path = dir.file("model.safetensors");
    io::save_safetensors(path, {{"w", pattern({5}, float32)}});
    CHECK(std::filesystem::is_regular_file(path));
    CHECK(dir.entries() == 1);
    CHECK(same_tensor(io::load_safetensors(path).at("w"), pattern({5}, float32)));
    CHECK(failing->paths().empty());
    CHECK(mem->paths().empty());
    CHECK(warnings.seen.size() == 1);  // saving does not warn again
  }

  TEST_CASE("register_file_system: a null backend is a ValueError that changes nothing") {
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);
    CHECK_THROWS_WITH_AS(io::register_file_system(nullptr),
                         doctest::Contains("register_file_system: fs is null"), ValueError);
    CHECK(io::file_system() == mem);
  }

  TEST_CASE("file_system: writes failing part-way keep the previous checkpoint") {
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);
    const std::string path = kNowhere + "/model.safetensors";
    const io::NamedTensors v1 = {{"w", pattern({16}, float32)}};
    io::save_safetensors(path, v1);
    const auto before = mem->contents(path);

    const io::NamedTensors v2 = {{"w", pattern({1024}, float32)}, {"u", pattern({64}, int32)}};
    mem->reset_written();
    mem->fail_after_bytes = 1000;  // the header and part of "w" get written
    CHECK_THROWS_WITH_AS(
        io::save_safetensors(path, v2),
        doctest::Contains("model.safetensors': write failed: injected failure after"), ValueError);
    CHECK_THROWS_AS(io::save_npy(kNowhere + "/x.npy", v2[0].second), ValueError);
    mem->fail_after_bytes = -1;
    CHECK(mem->contents(path) == before);
    CHECK(mem->paths() == std::vector<std::string>{path});  // temporaries removed
    CHECK(same_tensor(io::load_safetensors(path).at("w"), v1[0].second));

    // A producer that throws keeps it too.
    CHECK_THROWS_WITH_AS(io::write_file_atomic(path,
                                               [](io::ByteSink& s) {
                                                 s.write("partial", 7);
                                                 throw std::runtime_error("producer failed");
                                               }),
                         "producer failed", std::runtime_error);
    CHECK(mem->contents(path) == before);
    io::save_safetensors(path, v2);
    CHECK(same_tensor(io::load_safetensors(path).at("u"), v2[1].second));
  }

  TEST_CASE("file_system: temporaries of dead processes are removed through the backend") {
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);
    const pid_t dead = ::fork();
    REQUIRE(dead >= 0);
    if (dead == 0) ::_exit(0);
    REQUIRE(::waitpid(dead, nullptr, 0) == dead);
    const std::string stale = kNowhere + "/.m.safetensors.tmp." + std::to_string(dead) + ".0";
    const std::string live = kNowhere + "/.m.safetensors.tmp." + std::to_string(::getppid()) + ".0";
    mem->put(stale, bytes_of("half"));
    mem->put(live, bytes_of("half"));
    io::save_safetensors(kNowhere + "/m.safetensors", {{"w", pattern({2}, float32)}});
    CHECK_FALSE(mem->exists(stale));
    CHECK(mem->exists(live));
  }

  TEST_CASE("file_system: without atomic rename the target is overwritten from a full copy") {
    auto mem = std::make_shared<MemoryFileSystem>();
    mem->atomic = false;
    ScopedFileSystem scope(mem);
    CHECK_FALSE(io::file_system()->supports_atomic_rename());
    const std::string path = kNowhere + "/model.safetensors";
    io::save_safetensors(path, {{"w", pattern({8}, float32)}});
    const auto before = mem->contents(path);
    CHECK(mem->paths() == std::vector<std::string>{path});
    CHECK(mem->renames() == 0);

    // Failing while the temporary file is written: the target is untouched.
    mem->reset_written();
    mem->fail_after_bytes = 100;
    CHECK_THROWS_AS(io::save_safetensors(path, {{"w", pattern({256}, float32)}}), ValueError);
    mem->fail_after_bytes = -1;
    CHECK(mem->contents(path) == before);
    CHECK(mem->paths() == std::vector<std::string>{path});

    // Failing while the target is overwritten: the error says the file may be
    // damaged and where the complete copy is; that copy is kept.
    mem->fail_writes_to = path;
    const io::NamedTensors v2 = {{"w", pattern({256}, float32)}};
    std::string message;
    try {
      io::save_safetensors(path, v2);
    } catch (const ValueError& e) {
      message = e.what();
    }
    mem->fail_writes_to.clear();
    CHECK(message.find("replacing the file failed: injected failure") != std::string::npos);
    CHECK(message.find("'memory' cannot rename atomically") != std::string::npos);
    CHECK(message.find("may be damaged") != std::string::npos);
    const auto paths = mem->paths();
    REQUIRE(paths.size() == 2);
    const std::string tmp = paths[0] == path ? paths[1] : paths[0];
    CHECK(message.find("the complete new contents are in '" + tmp + "'") != std::string::npos);
    CHECK(same_tensor(io::load_safetensors(tmp).at("w"), v2[0].second));

    io::save_safetensors(path, v2);  // works again
    CHECK(same_tensor(io::load_safetensors(path).at("w"), v2[0].second));
    CHECK(mem->exists(tmp));  // this live process's copy is not cleaned up
  }

  TEST_CASE(
      "restore_default_file_system: POSIX again; a backend in use outlives its registration") {
    TempDir dir;
    auto mem = std::make_shared<MemoryFileSystem>();
    REQUIRE(io::register_file_system(mem));
    const std::shared_ptr<io::FileSystem> held = io::file_system();
    io::restore_default_file_system();
    CHECK(io::file_system() == io::posix_file_system());
    CHECK(held == mem);  // the backend outlives its registration while used
    CHECK(held->exists("x") == false);
    const std::string path = dir.file("after.npy");
    io::save_npy(path, pattern({3}, float64));
    CHECK(std::filesystem::is_regular_file(path));
    CHECK(mem->paths().empty());
  }

  TEST_CASE("InputFile keeps its file system alive after the registration ends") {
    auto mem = std::make_shared<MemoryFileSystem>();
    const std::string path = kNowhere + "/x.bin";
    mem->put(path, bytes_of("abc"));
    REQUIRE(io::register_file_system(mem));
    const io::InputFile f(path);
    io::restore_default_file_system();
    const std::weak_ptr<MemoryFileSystem> weak = mem;
    mem.reset();
    CHECK_FALSE(weak.expired());  // held by f
    char got[3] = {};
    f.read_at(0, got, 3);
    CHECK(std::string(got, 3) == "abc");
    f.check_unchanged();
  }

  TEST_CASE("file_system: registration races with saves without harm") {
    TempDir dir;
    auto mem = std::make_shared<MemoryFileSystem>();
    std::vector<std::thread> savers;
    for (int t = 0; t < 2; ++t)
      savers.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i)
          io::save_npy(dir.file(std::to_string(t * 100 + i) + ".npy"), pattern({4}, float32));
      });
    for (int i = 0; i < 20; ++i) {
      io::register_file_system(mem);
      io::restore_default_file_system();
    }
    for (auto& s : savers) s.join();
    // Each save went entirely to one backend: the disk holds no temporaries.
    const std::size_t in_memory = mem->paths().size();
    CHECK(dir.entries() + in_memory == 40);
    for (const auto& p : mem->paths())
      CHECK(same_tensor(io::from_npy_bytes(mem->contents(p)), pattern({4}, float32)));
    CHECK(io::file_system() == io::posix_file_system());
  }

  TEST_CASE("set_dump writes its files through the registered file system") {
    auto mem = std::make_shared<MemoryFileSystem>();
    ScopedFileSystem scope(mem);
    const std::filesystem::path prev = dump_dir();
    const std::string d = kNowhere + "/dump";
    set_dump_dir(d);
    const Tensor w = arange(0, 6).reshape({3, 2});
    auto f = jit([&](const auto& x) -> Tensor { return relu(matmul(x, w)); });
    set_dump("relu");
    const Tensor x = arange(-3, 3).reshape({2, 3});
    const Tensor y = f(x);
    set_dump("relu", false);
    set_dump_dir(prev);
    CHECK_FALSE(std::filesystem::exists(kNowhere));
    CHECK(mem->dirs().count(d) == 1);
    const auto paths = mem->paths();
    REQUIRE(paths.size() == 2);  // Relu's input and output
    std::string out;
    for (const auto& p : paths)
      if (p.ends_with(".output.0.npy")) out = p;
    REQUIRE(!out.empty());
    CHECK(out.starts_with(d + "/Relu."));
    CHECK(same_tensor(io::load_npy(out), y));
  }
}
