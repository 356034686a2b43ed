// TensorDataset and FashionMNIST: the real Debian files when installed (skipped
// with a message otherwise), and small synthetic files in a temp dir for the
// checks on counts, shapes and labels.
#include <doctest/doctest.h>
#include <algorithm>

#include <array>
#include <cstdint>
#include <filesystem>
#include <ms/data/fashion_mnist.hpp>
#include <ms/data/idx.hpp>
#include <string>
#include <vector>

#include <unistd.h>

#include "data/contains.hpp"
#include "io/io_test_util.hpp"  // check_fifo_refused
#include "temp_dir.hpp"

using namespace ms;

namespace {

using ms_test::has;

using ms::test::TempDir;

bool have_debian_files() {
  const std::string dir(data::FashionMNIST::kDefaultDir);
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!std::filesystem::exists(dir + "/" + f)) return false;
  return true;
}

/// Writes a synthetic Fashion-MNIST split: n images whose pixels are (i + j) % 256, labels i % 10.
void write_split(const TempDir& dir, const std::string& prefix, std::int64_t n, bool gz) {
  Tensor images = empty({n, 28, 28}, uint8);
  std::uint8_t* p = images.data<std::uint8_t>();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < 784; ++j)
      p[i * 784 + j] = static_cast<std::uint8_t>((i + j) % 256);
  Tensor labels = empty({n}, uint8);
  for (std::int64_t i = 0; i < n; ++i)
    labels.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i % 10);
  const std::string ext = gz ? ".gz" : "";
  data::write_idx(dir.file(prefix + "-images-idx3-ubyte" + ext), images);
  data::write_idx(dir.file(prefix + "-labels-idx1-ubyte" + ext), labels);
}

}  // namespace

TEST_SUITE("data") {
  TEST_CASE("TensorDataset: get, size, and its argument checks") {
    const Tensor x = arange(0, 12, 1, float32).reshape({4, 3});
    const Tensor y = tensor({3, 1, 4, 1}, int64);
    data::TensorDataset ds(x, y);
    CHECK(ds.size() == 4);
    const data::Sample s = ds.get(2);
    CHECK(s.y == 4);
    CHECK(s.x.to_vector<float>() == std::vector<float>{6, 7, 8});
    CHECK(data::TensorDataset().size() == 0);
    CHECK_THROWS_WITH_AS(ds.get(4), has("index 4 is out of range for a dataset of 4"), IndexError);
    CHECK_THROWS_AS(ds.get(-1), IndexError);
    CHECK_THROWS_WITH_AS(data::TensorDataset(x.to(int32), y),
                         has("x must be uint8 or floating, got dtype Int32"), TypeError);
    CHECK_THROWS_WITH_AS(data::TensorDataset(x, y.to(float32)),
                         has("y must hold integer labels, got dtype Float32"), TypeError);
    CHECK_THROWS_WITH_AS(data::TensorDataset(x, y.reshape({2, 2})),
                         has("y must have rank 1 ([N]), got shape [2, 2]"), ShapeError);
    CHECK_THROWS_WITH_AS(data::TensorDataset(tensor(1.0f), y), has("x must have rank >= 1"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(data::TensorDataset(x, tensor({1, 2, 3}, int32)),
                         has("different sample counts 4 and 3"), ShapeError);
    CHECK_THROWS_AS(data::TensorDataset(Tensor(), y), ValueError);
  }

  TEST_CASE("FashionMNIST: the Debian files (dataset-fashion-mnist)") {
    if (!have_debian_files()) {
      MESSAGE("skipped: " << data::FashionMNIST::kDefaultDir
                          << " not found (apt-get install dataset-fashion-mnist)");
      return;
    }
    const struct {
      data::Split split;
      std::int64_t n;
    } cases[] = {{data::Split::Train, 60000}, {data::Split::Test, 10000}};
    for (const auto& c : cases) {
      CAPTURE(c.n);
      const data::FashionMNIST ds(std::string(data::FashionMNIST::kDefaultDir), c.split);
      CHECK(ds.size() == c.n);
      CHECK(ds.split() == c.split);
      CHECK(ds.images().dtype() == uint8);
      CHECK(ds.images().shape() == Shape{c.n, 28, 28});
      CHECK(ds.labels().dtype() == int32);
      CHECK(ds.labels().shape() == Shape{c.n});
      std::array<std::int64_t, 10> histogram{};
      for (std::int32_t label : ds.labels().to_vector<std::int32_t>()) {
        REQUIRE(label >= 0);
        REQUIRE(label < 10);
        ++histogram[static_cast<std::size_t>(label)];
      }
      for (std::int64_t count : histogram) CHECK(count == c.n / 10);
      // Both splits start with an ankle boot (label 9).
      const data::Sample first = ds.get(0);
      CHECK(first.y == 9);
      CHECK(data::FashionMNIST::class_names()[static_cast<std::size_t>(first.y)] == "Ankle boot");
      CHECK(first.x.shape() == Shape{28, 28});
      // Pixels span the full range and the images are not all alike.
      const std::vector<std::uint8_t> px = ds.images().slice(0, 0, 100).to_vector<std::uint8_t>();
      CHECK(*std::max_element(px.begin(), px.end()) == 255);
      CHECK(*std::min_element(px.begin(), px.end()) == 0);
      CHECK(ds.get(0).x.to_vector<std::uint8_t>() != ds.get(1).x.to_vector<std::uint8_t>());
    }
    // The default constructor is the training split in Debian's directory.
    CHECK(data::FashionMNIST().size() == 60000);
  }

  TEST_CASE("FashionMNIST: synthetic files, gzip'd or not") {
    for (bool gz : {true, false}) {
      CAPTURE(gz);
      TempDir dir;
      write_split(dir, "train", 30, gz);
      write_split(dir, "t10k", 20, gz);
      const data::FashionMNIST train(dir.path.string());
      const data::FashionMNIST test(dir.path.string(), data::Split::Test);
      CHECK(train.size() == 30);
      CHECK(test.size() == 20);
      CHECK(train.dir() == dir.path.string());
      const data::Sample s = train.get(13);
      CHECK(s.y == 3);
      CHECK(s.x.to_vector<std::uint8_t>()[5] == 18);
      CHECK(test.labels().to_vector<std::int32_t>()[19] == 9);
    }
  }

  TEST_CASE("FashionMNIST: an empty data set is an error naming the directory and the file") {
    TempDir dir;
    write_split(dir, "t10k", 0, true);
    const std::string images = dir.file("t10k-images-idx3-ubyte.gz");
    CHECK_THROWS_WITH_AS(
        data::FashionMNIST(dir.path.string(), data::Split::Test),
        has("FashionMNIST: '" + images + "' holds no images (an empty data set) in directory '" +
            dir.path.string() + "'"),
        ValueError);
    write_split(dir, "train", 0, false);
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         has("train-images-idx3-ubyte' holds no images"), ValueError);
  }

  TEST_CASE("FashionMNIST: a FIFO in place of a file is an error naming it, not a hang") {
    TempDir dir;
    write_split(dir, "train", 3, false);
    std::filesystem::remove(dir.file("train-images-idx3-ubyte"));
    io_test::check_fifo_refused(dir.file("train-images-idx3-ubyte"),
                                [&] { data::FashionMNIST ds(dir.path.string()); });
  }

  TEST_CASE("FashionMNIST: missing files, mismatched counts, bad labels and shapes") {
    TempDir dir;
    CHECK_THROWS_WITH_AS(
        data::FashionMNIST(dir.path.string()),
        has("FashionMNIST: cannot find '" + dir.file("train-images-idx3-ubyte.gz") + "' (nor '" +
            dir.file("train-images-idx3-ubyte") +
            "'); on Debian, `apt-get install dataset-fashion-mnist`"),
        ValueError);
    write_split(dir, "train", 30, true);
    data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), zeros({29}, uint8));
    CHECK_THROWS_WITH_AS(
        data::FashionMNIST(dir.path.string()),
        has("holds 30 images but " + dir.file("train-labels-idx1-ubyte.gz") + " holds 29 labels"),
        ValueError);
    Tensor labels = zeros({30}, uint8);
    labels.data<std::uint8_t>()[7] = 10;
    data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), labels);
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         has("label 10 at index 7 is not a class in 0..9"), ValueError);
    data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), zeros({30}, int32));
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         has("expected uint8 labels [N], got Int32 [30]"), ValueError);
    data::write_idx(dir.file("train-labels-idx1-ubyte.gz"), zeros({30}, uint8));
    data::write_idx(dir.file("train-images-idx3-ubyte.gz"), zeros({30, 28, 27}, uint8));
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         has("expected uint8 images [N, 28, 28], got UInt8 [30, 28, 27]"),
                         ValueError);
    // A truncated gzip'd image file: the error names it.
    write_split(dir, "train", 30, true);
    const std::string images = dir.file("train-images-idx3-ubyte.gz");
    std::filesystem::resize_file(images, std::filesystem::file_size(images) - 10);
    CHECK_THROWS_WITH_AS(data::FashionMNIST(dir.path.string()),
                         has(images + ": truncated gzip data"), ValueError);
  }
}
