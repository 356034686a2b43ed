// ms/data/fashion_mnist.hpp — the Fashion-MNIST dataset (Xiao, Rasul and Vollgraf, 2017).
//
// Stage: data. 70000 grayscale 28x28 images of clothing in 10 classes (60000 for
// training, 10000 for testing), read from the four IDX files of the original
// distribution, gzip-compressed or not. The default directory is where Debian's
// `dataset-fashion-mnist` package installs them
// (`sudo apt-get install dataset-fashion-mnist`).
//
//   ms::data::FashionMNIST train;                                     // 60000 samples
//   ms::data::FashionMNIST test("/usr/share/datasets/fashion-mnist", ms::data::Split::Test);
//   ms::data::DataLoader loader(train, {.batch_size = 64, .seed = 1});
//   std::cout << ms::data::FashionMNIST::class_names()[test.get(0).y];  // "Ankle boot"
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ms/core/tensor.hpp"
#include "ms/data/dataset.hpp"

namespace ms::data {

/// Which part of a dataset: the training or the test samples.
enum class Split { Train, Test };

/// Fashion-MNIST in memory: `images()` uint8 [N, 28, 28], `labels()` int32 [N]
/// with values 0..9 (N = 60000 for Split::Train, 10000 for Split::Test).
/// Files: `{train,t10k}-{images-idx3,labels-idx1}-ubyte` with or without `.gz`.
/// ms::ValueError naming the file when one is missing or malformed, when it holds
/// no images (an empty data set), when the image and label counts differ, or when
/// a label is not in 0..9.
/// Example: `ms::data::FashionMNIST test(dir, ms::data::Split::Test);`
class FashionMNIST : public TensorDataset {
 public:
  /// Debian's location of the files (package dataset-fashion-mnist).
  static constexpr std::string_view kDefaultDir = "/usr/share/datasets/fashion-mnist";
  /// Image side length (28) and number of classes (10).
  static constexpr std::int64_t kSide = 28;
  /// The number of classes.
  static constexpr std::int64_t kNumClasses = 10;

  /// Reads split `split` from the IDX files in `dir` (gzip-compressed or not).
  /// ms::ValueError naming the file when one is missing or malformed.
  explicit FashionMNIST(std::string dir = std::string(kDefaultDir), Split split = Split::Train);

  /// The images, uint8 [N, 28, 28] (same as `x()`).
  const Tensor& images() const { return x(); }
  /// The labels, int32 [N] (same as `y()`).
  const Tensor& labels() const { return y(); }
  /// The split it holds.
  Split split() const { return split_; }
  /// The directory it was read from.
  const std::string& dir() const { return dir_; }

  /// The class names by label: "T-shirt/top", "Trouser", "Pullover", "Dress",
  /// "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot".
  static const std::array<std::string_view, 10>& class_names();

 private:
  std::string dir_;
  Split split_;
};

}  // namespace ms::data
