// TensorDataset and FashionMNIST (see ms/data/dataset.hpp, ms/data/fashion_mnist.hpp).
#include <filesystem>
#include <utility>

#include "ms/core/error.hpp"
#include "ms/data/fashion_mnist.hpp"
#include "ms/data/idx.hpp"

namespace ms::data {

// ------------------------------------------------------------------ TensorDataset

TensorDataset::TensorDataset(Tensor x, Tensor y) : x_(std::move(x)), y_(std::move(y)) {
  MS_CHECK(x_.defined() && !x_.is_symbolic(), ValueError,
           "TensorDataset: x must be a concrete tensor");
  MS_CHECK(y_.defined() && !y_.is_symbolic(), ValueError,
           "TensorDataset: y must be a concrete tensor");
  MS_CHECK(x_.dtype() == uint8 || dtype_is_float(x_.dtype()), TypeError,
           "TensorDataset: x must be uint8 or floating, got dtype ", x_.dtype());
  MS_CHECK(dtype_is_int(y_.dtype()) && y_.dtype() != int4, TypeError,
           "TensorDataset: y must hold integer labels, got dtype ", y_.dtype());
  MS_CHECK(x_.rank() >= 1, ShapeError,
           "TensorDataset: x must have rank >= 1 ([N, ...]), got shape ", x_.shape());
  MS_CHECK(y_.rank() == 1, ShapeError, "TensorDataset: y must have rank 1 ([N]), got shape ",
           y_.shape());
  MS_CHECK(x_.dim(0) == y_.dim(0), ShapeError, "TensorDataset: x ", x_.shape(), " and y ",
           y_.shape(), " have different sample counts ", x_.dim(0), " and ", y_.dim(0));
}

Sample TensorDataset::get(std::int64_t i) const {
  MS_CHECK(i >= 0 && i < size(), IndexError, "TensorDataset::get: index ", i,
           " is out of range for a dataset of ", size(), " samples");
  return {x_.select(0, i), y_.select(0, i).item<std::int64_t>()};
}

// ------------------------------------------------------------------ FashionMNIST

namespace {

/// `dir/base.gz` if it exists, else `dir/base` if it exists, else an error.
std::string find_file(const std::string& dir, const std::string& base) {
  const std::filesystem::path gz = std::filesystem::path(dir) / (base + ".gz");
  const std::filesystem::path raw = std::filesystem::path(dir) / base;
  std::error_code ec;
  if (std::filesystem::exists(gz, ec)) return gz.string();
  if (std::filesystem::exists(raw, ec)) return raw.string();
  detail::raise<ValueError>("FashionMNIST: cannot find '", gz.string(), "' (nor '", raw.string(),
                            "'); on Debian, `apt-get install dataset-fashion-mnist` installs the "
                            "files in ",
                            FashionMNIST::kDefaultDir);
}

TensorDataset load_fashion_mnist(const std::string& dir, Split split) {
  const std::string prefix = split == Split::Train ? "train" : "t10k";
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(images_path);
  const Tensor labels = read_idx(labels_path);
  constexpr std::int64_t kSide = FashionMNIST::kSide;
  MS_CHECK(images.dtype() == uint8 && images.rank() == 3 && images.dim(1) == kSide &&
               images.dim(2) == kSide,
           ValueError, images_path, ": expected uint8 images [N, 28, 28], got ", images.dtype(),
           " ", images.shape());
  MS_CHECK(labels.dtype() == uint8 && labels.rank() == 1, ValueError, labels_path,
           ": expected uint8 labels [N], got ", labels.dtype(), " ", labels.shape());
  MS_CHECK(images.dim(0) == labels.dim(0), ValueError, "FashionMNIST: ", images_path, " holds ",
           images.dim(0), " images but ", labels_path, " holds ", labels.dim(0), " labels");
  // Zero samples would "train" on nothing and exit successfully.
  MS_CHECK(images.dim(0) > 0, ValueError, "FashionMNIST: '", images_path,
           "' holds no images (an empty data set) in directory '", dir, "'");
  const std::int64_t n = labels.dim(0);
  Tensor y = empty({n}, int32);
  const std::uint8_t* src = labels.data<std::uint8_t>();
  std::int32_t* dst = y.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    MS_CHECK(src[i] < FashionMNIST::kNumClasses, ValueError, labels_path, ": label ",
             static_cast<int>(src[i]), " at index ", i, " is not a class in 0..9");
    dst[i] = src[i];
  }
  return TensorDataset(std::move(images), std::move(y));
}

}  // namespace

FashionMNIST::FashionMNIST(std::string dir, Split split)
    : TensorDataset(load_fashion_mnist(dir, split)), dir_(std::move(dir)), split_(split) {}

const std::array<std::string_view, 10>& FashionMNIST::class_names() {
  static const std::array<std::string_view, 10> names = {
      "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
      "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  return names;
}

}  // namespace ms::data
