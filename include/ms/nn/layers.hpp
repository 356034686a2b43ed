// ms/nn/layers.hpp — the layers of MindSpore's nn, as cells.
//
// Stage: nn. Parameter names, layouts and default initializations are
// MindSpore's (so checkpoints map one to one): Dense holds `weight` [out, in]
// and `bias` [out], HeUniform(sqrt(5)) and Uniform(1 / sqrt(in)); Conv2d holds
// `weight` [out, in / group, kh, kw] (no bias unless has_bias, pad_mode "same"
// by default); BatchNorm holds `gamma`, `beta` and the buffers `moving_mean`,
// `moving_variance`. Each layer's construct is compiled once into libms and
// works on concrete tensors and, under ms::jit, on symbolic ones.
//
//   ms::nn::Dense fc(784, 512);                         // fc.weight [512, 784]
//   ms::nn::Conv2d conv(1, 32, 3, {.stride = {1}}, {.pad_mode = "same", .has_bias = true});
//   ms::nn::SequentialCell seq{std::make_shared<ms::nn::Dense>(4, 8),
//   std::make_shared<ms::nn::ReLU>()};
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ms/expr/expr.hpp"
#include "ms/nn/any_cell.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/initializer.hpp"
#include "ms/ops/linalg.hpp"
#include "ms/ops/nn.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::nn {

// ------------------------------------------------------------------ Dense

struct DenseOptions {
  InitSpec weight_init = init::HeUniform(2.23606797749979);  // sqrt(5), as MindSpore
  /// Default: Uniform(1 / sqrt(in_channels)), as MindSpore.
  std::optional<InitSpec> bias_init = {};
  bool has_bias = true;
  DType dtype = float32;
};

/// y = x @ weight^T + bias, over the last axis of x [..., in] -> [..., out].
class Dense : public Cell<Dense> {
 public:
  Dense(std::int64_t in_channels, std::int64_t out_channels, DenseOptions opts = {});
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  Parameter weight, bias;  // bias undefined when !has_bias
  std::int64_t in_channels, out_channels;
};

// ------------------------------------------------------------------ Conv2d

/// What nn::Conv2d adds to the op's options (ms::Conv2dOptions: stride,
/// padding, dilation, groups): padding mode, bias, initializers and dtype.
struct Conv2dCellOptions {
  /// "same" (output H = ceil(H / stride), padding split top/bottom as
  /// MindSpore), "valid" (no padding) or "pad" (Conv2dOptions::padding on each side).
  std::string pad_mode = "same";
  bool has_bias = false;  // MindSpore's default
  InitSpec weight_init = init::HeUniform(2.23606797749979);
  std::optional<InitSpec> bias_init = {};
  DType dtype = float32;
};

/// 2-D convolution of x [N, C, H, W] with weight [out, in / groups, kh, kw]:
/// ms::conv2d with the op's options, after the padding of `pad_mode`.
/// Example: `ms::nn::Conv2d conv(1, 32, 3, {.stride = {2}}, {.has_bias = true});`
class Conv2d : public Cell<Conv2d> {
 public:
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::vector<std::int64_t> kernel_size,
         Conv2dOptions conv = {}, Conv2dCellOptions cell = {});
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         Conv2dOptions conv = {}, Conv2dCellOptions cell = {})
      : Conv2d(in_channels, out_channels, std::vector<std::int64_t>{kernel_size, kernel_size},
               std::move(conv), std::move(cell)) {}
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  Parameter weight, bias;
  std::int64_t in_channels, out_channels;
  std::vector<std::int64_t> kernel_size;
  Conv2dOptions conv;  ///< stride, dilation and padding as 2 values each
  Conv2dCellOptions cell;
};

// ------------------------------------------------------------------ pooling

/// 2-D max pooling with the op's options (ms::MaxPool2dOptions); `pad_mode`
/// "valid" (no padding), "same" (MindSpore's) or "pad" (options.padding).
/// Example: `ms::nn::MaxPool2d pool({.kernel = {3}, .stride = {2}, .padding = {1}}, "pad");`
class MaxPool2d : public Cell<MaxPool2d> {
 public:
  explicit MaxPool2d(MaxPool2dOptions opts, std::string pad_mode = "valid");
  explicit MaxPool2d(std::int64_t kernel_size)
      : MaxPool2d(MaxPool2dOptions{.kernel = {kernel_size, kernel_size}}) {}
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  MaxPool2dOptions opts;  ///< kernel, stride and padding as 2 values each
  std::string pad_mode;
};

/// 2-D average pooling with the op's options (ms::AvgPool2dOptions); `pad_mode`
/// "valid" (no padding) or "pad" (options.padding).
/// Example: `ms::nn::AvgPool2d pool({.kernel = {2}, .stride = {1}});`
class AvgPool2d : public Cell<AvgPool2d> {
 public:
  explicit AvgPool2d(AvgPool2dOptions opts, std::string pad_mode = "valid");
  explicit AvgPool2d(std::int64_t kernel_size)
      : AvgPool2d(AvgPool2dOptions{.kernel = {kernel_size, kernel_size}}) {}
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  AvgPool2dOptions opts;  ///< kernel, stride and padding as 2 values each
  std::string pad_mode;
};

// ------------------------------------------------------------------ shape and activations

/// [N, ...] -> [N, prod(...)].
class Flatten : public Cell<Flatten> {
 public:
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  Tensor construct(const Tensor& x) const { return x.flatten(start_dim, end_dim); }
  std::int64_t start_dim, end_dim;
};

class ReLU : public Cell<ReLU> {
 public:
  Tensor construct(const Tensor& x) const { return ms::relu(x); }
};
class Sigmoid : public Cell<Sigmoid> {
 public:
  Tensor construct(const Tensor& x) const { return ms::sigmoid(x); }
};
class Tanh : public Cell<Tanh> {
 public:
  Tensor construct(const Tensor& x) const { return ms::tanh(x); }
};
class GELU : public Cell<GELU> {
 public:
  explicit GELU(bool approximate = true) : approximate(approximate) {}  // MindSpore: tanh form
  Tensor construct(const Tensor& x) const {
    return approximate ? Tensor(ms::gelu_tanh(x)) : Tensor(ms::gelu(x));
  }
  bool approximate;
};
class SiLU : public Cell<SiLU> {
 public:
  Tensor construct(const Tensor& x) const { return ms::silu(x); }
};
class LeakyReLU : public Cell<LeakyReLU> {
 public:
  explicit LeakyReLU(double alpha = 0.2) : alpha(alpha) {}  // MindSpore's default slope
  Tensor construct(const Tensor& x) const;
  double alpha;
};
class Softmax : public Cell<Softmax> {
 public:
  explicit Softmax(std::int64_t axis = -1) : axis(axis) {}
  Tensor construct(const Tensor& x) const { return ms::softmax(x, axis); }
  std::int64_t axis;
};
class LogSoftmax : public Cell<LogSoftmax> {
 public:
  explicit LogSoftmax(std::int64_t axis = -1) : axis(axis) {}
  Tensor construct(const Tensor& x) const { return ms::log_softmax(x, axis); }
  std::int64_t axis;
};

// ------------------------------------------------------------------ Dropout

/// Zeroes each element with probability `p` in training mode and scales the
/// rest by 1 / (1 - p); the identity in eval mode. Draws from `generator`
/// (the default one when null).
class Dropout : public Cell<Dropout> {
 public:
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  double p;
  Generator* generator;
};

// ------------------------------------------------------------------ normalization

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum =
      0.9;  ///< MindSpore's convention: moving = momentum * moving + (1 - momentum) * batch
  bool affine = true;
  bool use_batch_statistics = true;  ///< in training mode
};

/// Batch normalization over N (BatchNorm1d: [N, C]) or N, H, W (BatchNorm2d:
/// [N, C, H, W]), with MindSpore's parameter names.
class BatchNorm : public Cell<BatchNorm> {
 public:
  BatchNorm(std::int64_t num_features, int spatial_rank, BatchNormOptions opts = {});
  Tensor construct(const Tensor& x) const;
  std::string cls_name() const override {
    return spatial_rank_ == 0 ? "BatchNorm1d" : "BatchNorm2d";
  }
  std::string extra_repr() const override;
  Parameter gamma, beta;
  Tensor moving_mean, moving_variance;
  std::int64_t num_features;
  BatchNormOptions opts;

 private:
  int spatial_rank_;
};
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(std::int64_t num_features, BatchNormOptions opts = {})
      : BatchNorm(num_features, 0, opts) {}
};
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(std::int64_t num_features, BatchNormOptions opts = {})
      : BatchNorm(num_features, 2, opts) {}
};

/// Normalizes over the trailing dims `normalized_shape`; `gamma` and `beta` of that shape.
class LayerNorm : public Cell<LayerNorm> {
 public:
  explicit LayerNorm(std::vector<std::int64_t> normalized_shape, double eps = 1e-7);
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  Parameter gamma, beta;
  std::vector<std::int64_t> normalized_shape;
  double eps;
};

/// Looks up rows of `embedding_table` [vocab, dim] by integer indices.
class Embedding : public Cell<Embedding> {
 public:
  Embedding(std::int64_t vocab_size, std::int64_t embedding_size,
            InitSpec embedding_table_init = init::Normal(1.0));
  Tensor construct(const Tensor& ids) const;
  std::string extra_repr() const override;
  Parameter embedding_table;
  std::int64_t vocab_size, embedding_size;
};

// ------------------------------------------------------------------ containers
//
// A container's children are exactly its cells: SequentialCell and CellList
// register theirs as "0", "1", ... (re-registered after insert and pop, so the
// names always follow the order), CellDict under its keys. Each cell is held
// by an ms::AnyCell (a shared_ptr), so a container keeps its cells alive.

/// The list operations SequentialCell and CellList share (MindSpore's
/// _CellListBase). Indices may be negative (-1 is the last cell); an index out
/// of range is an ms::IndexError naming the container, the index and the size.
///   list.insert(0, std::make_shared<Dense>(4, 8));   // the others become "1", "2", ...
///   AnyCell last = list.pop();
template <class Derived>
class CellListBase : public Cell<Derived> {
 public:
  /// Appends `cell`, registered as "<size>".
  void append(AnyCell cell);
  /// Appends each of `cells` in order; all are checked before any is added.
  void extend(const std::vector<AnyCell>& cells);
  /// Inserts `cell` before position `index` (-size <= index <= size; size
  /// appends, as Python's list.insert); the cells after it are renamed.
  void insert(std::int64_t index, AnyCell cell);
  /// Removes the cell at `index` (the last by default), unregisters it,
  /// renames the cells after it, and returns it.
  AnyCell pop(std::int64_t index = -1);
  /// As pop, discarding the cell (Python's `del list[index]`).
  void erase(std::int64_t index) { pop(index); }
  /// Replaces the cell at `index`; the new one is registered under the same name.
  void set(std::int64_t index, AnyCell cell);
  /// The cell at `index`. Read-only: assign with set() so the cell is registered.
  const AnyCell& operator[](std::int64_t index) const;
  std::size_t size() const { return cells_.size(); }
  bool empty() const { return cells_.empty(); }
  auto begin() const { return cells_.cbegin(); }
  auto end() const { return cells_.cend(); }

 protected:
  CellListBase() = default;
  explicit CellListBase(std::initializer_list<AnyCell> cells);
  std::vector<AnyCell> cells_;

 private:
  // Registers cells_[from...] as "from", "from + 1", ... (dropping the old
  // registrations from `from` on).
  void reregister(std::size_t from);
  void check_cell(const AnyCell& cell, std::string_view api);
};

/// Runs its cells in order: `SequentialCell seq; seq.append(std::make_shared<Dense>(4, 8));`.
/// Children are named "0", "1", ... as MindSpore's.
class SequentialCell : public CellListBase<SequentialCell> {
 public:
  SequentialCell() = default;
  SequentialCell(std::initializer_list<AnyCell> cells) : CellListBase(cells) {}
  Tensor construct(const Tensor& x);
};

/// A list of cells, registered as "0", "1", ...; not callable itself.
class CellList : public CellListBase<CellList> {
 public:
  CellList() = default;
  CellList(std::initializer_list<AnyCell> cells) : CellListBase(cells) {}
};

/// Cells by name, in insertion order (MindSpore's CellDict); not callable
/// itself. Each cell is registered under its key, so its parameters are named
/// `key.weight`. A key is a non-empty string without '.' (ms::ValueError
/// otherwise); a missing key is an ms::IndexError naming it. As MindSpore's, a
/// CellDict does not hold a SequentialCell (ms::TypeError).
///   ms::nn::CellDict heads{{"cls", std::make_shared<Dense>(64, 10)},
///                          {"box", std::make_shared<Dense>(64, 4)}};
///   ms::Tensor logits = heads["cls"](features);
///   for (const auto& [key, cell] : heads) ...
class CellDict : public Cell<CellDict> {
 public:
  using Item = std::pair<std::string, AnyCell>;
  CellDict() = default;
  CellDict(std::initializer_list<Item> items);
  /// Adds `cell` under `key` at the end, or replaces the cell of an existing
  /// key in place (same position, same name).
  void insert(const std::string& key, AnyCell cell);
  /// insert() for each item in order; all are checked before any is added.
  /// From another CellDict: `a.update(b.items())`.
  void update(const std::vector<Item>& items);
  /// Removes `key`, unregisters its cell and returns it.
  AnyCell pop(const std::string& key);
  /// Removes every cell.
  void clear();
  bool contains(const std::string& key) const;
  /// The cell under `key` (a lookup: it never inserts, unlike std::map's).
  const AnyCell& at(const std::string& key) const;
  const AnyCell& operator[](const std::string& key) const;
  std::vector<std::string> keys() const;
  std::vector<AnyCell> values() const;
  const std::vector<Item>& items() const { return items_; }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  /// Iterates (key, cell) pairs in insertion order.
  auto begin() const { return items_.cbegin(); }
  auto end() const { return items_.cend(); }

 private:
  std::size_t find(const std::string& key) const;  // size() when missing
  const AnyCell& lookup(const std::string& key, std::string_view api) const;
  void check_item(const std::string& key, const AnyCell& cell, std::string_view api);
  std::vector<Item> items_;
};

}  // namespace ms::nn
