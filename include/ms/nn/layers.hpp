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

/// Dense's initializers, bias and dtype: `ms::nn::Dense fc(4, 8, {.has_bias = false})`.
struct DenseOptions {
  /// The weight's initializer: HeUniform(sqrt(5)), as MindSpore.
  InitSpec weight_init = init::HeUniform(2.23606797749979);  // sqrt(5), as MindSpore
  /// Default: Uniform(1 / sqrt(in_channels)), as MindSpore.
  std::optional<InitSpec> bias_init = {};
  /// Whether the layer adds a bias.
  bool has_bias = true;
  /// The parameters' dtype.
  DType dtype = float32;
};

/// y = x @ weight^T + bias, over the last axis of x [..., in] -> [..., out].
class Dense : public Cell<Dense> {
 public:
  /// A layer from `in_channels` to `out_channels` features.
  Dense(std::int64_t in_channels, std::int64_t out_channels, DenseOptions opts = {});
  /// x @ weight^T + bias.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  /// @{
  /// The weight [out, in] and the bias [out] (undefined without has_bias).
  Parameter weight, bias;  // bias undefined when !has_bias
  /// @}
  /// @{
  /// The sizes given to the constructor.
  std::int64_t in_channels, out_channels;
  /// @}
};

// ------------------------------------------------------------------ Conv2d

/// What nn::Conv2d adds to the op's options (ms::Conv2dOptions: stride,
/// padding, dilation, groups): padding mode, bias, initializers and dtype.
struct Conv2dCellOptions {
  /// "same" (output H = ceil(H / stride), padding split top/bottom as
  /// MindSpore), "valid" (no padding) or "pad" (Conv2dOptions::padding on each side).
  std::string pad_mode = "same";
  /// Whether the layer adds a bias (MindSpore's default: no).
  bool has_bias = false;  // MindSpore's default
  /// The weight's initializer: HeUniform(sqrt(5)), as MindSpore.
  InitSpec weight_init = init::HeUniform(2.23606797749979);
  /// The bias's initializer (default: Uniform(1 / sqrt(fan_in)), as MindSpore).
  std::optional<InitSpec> bias_init = {};
  /// The parameters' dtype.
  DType dtype = float32;
};

/// 2-D convolution of x [N, C, H, W] with weight [out, in / groups, kh, kw]:
/// ms::conv2d with the op's options, after the padding of `pad_mode`.
/// Example: `ms::nn::Conv2d conv(1, 32, 3, {.stride = {2}}, {.has_bias = true});`
class Conv2d : public Cell<Conv2d> {
 public:
  /// A convolution from `in_channels` to `out_channels` channels with a kernel of
  /// `kernel_size` (1 or 2 values); `conv` the op's options, `cell` the layer's.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::vector<std::int64_t> kernel_size,
         Conv2dOptions conv = {}, Conv2dCellOptions cell = {});
  /// As above with a square kernel.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_size,
         Conv2dOptions conv = {}, Conv2dCellOptions cell = {})
      : Conv2d(in_channels, out_channels, std::vector<std::int64_t>{kernel_size, kernel_size},
               std::move(conv), std::move(cell)) {}
  /// The convolution of x [N, C, H, W] (after the padding of `pad_mode`) plus the bias.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  /// @{
  /// The weight [out, in / groups, kh, kw] and the bias [out] (undefined without has_bias).
  Parameter weight, bias;
  /// @}
  /// @{
  /// The channel counts given to the constructor.
  std::int64_t in_channels, out_channels;
  /// @}
  /// The kernel's height and width.
  std::vector<std::int64_t> kernel_size;
  Conv2dOptions conv;  ///< stride, dilation and padding as 2 values each
  /// The layer's options.
  Conv2dCellOptions cell;
};

// ------------------------------------------------------------------ pooling

/// 2-D max pooling with the op's options (ms::MaxPool2dOptions); `pad_mode`
/// "valid" (no padding), "same" (MindSpore's) or "pad" (options.padding).
/// Example: `ms::nn::MaxPool2d pool({.kernel = {3}, .stride = {2}, .padding = {1}}, "pad");`
class MaxPool2d : public Cell<MaxPool2d> {
 public:
  /// Pooling with `opts` after the padding of `pad_mode`.
  explicit MaxPool2d(MaxPool2dOptions opts, std::string pad_mode = "valid");
  /// A square `kernel_size` window, the other options as ms::MaxPool2dOptions' defaults.
  explicit MaxPool2d(std::int64_t kernel_size)
      : MaxPool2d(MaxPool2dOptions{.kernel = {kernel_size, kernel_size}}) {}
  /// The pooled x.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  MaxPool2dOptions opts;  ///< kernel, stride and padding as 2 values each
  /// "valid", "same" or "pad".
  std::string pad_mode;
};

/// 2-D average pooling with the op's options (ms::AvgPool2dOptions); `pad_mode`
/// "valid" (no padding) or "pad" (options.padding).
/// Example: `ms::nn::AvgPool2d pool({.kernel = {2}, .stride = {1}});`
class AvgPool2d : public Cell<AvgPool2d> {
 public:
  /// Pooling with `opts` after the padding of `pad_mode`.
  explicit AvgPool2d(AvgPool2dOptions opts, std::string pad_mode = "valid");
  /// A square `kernel_size` window, the other options as ms::AvgPool2dOptions' defaults.
  explicit AvgPool2d(std::int64_t kernel_size)
      : AvgPool2d(AvgPool2dOptions{.kernel = {kernel_size, kernel_size}}) {}
  /// The pooled x.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  AvgPool2dOptions opts;  ///< kernel, stride and padding as 2 values each
  /// "valid" or "pad".
  std::string pad_mode;
};

// ------------------------------------------------------------------ shape and activations

/// [N, ...] -> [N, prod(...)].
class Flatten : public Cell<Flatten> {
 public:
  /// Flattens dims `start_dim` through `end_dim` (negative: from the end) into one.
  explicit Flatten(std::int64_t start_dim = 1, std::int64_t end_dim = -1)
      : start_dim(start_dim), end_dim(end_dim) {}
  /// x.flatten(start_dim, end_dim).
  Tensor construct(const Tensor& x) const { return x.flatten(start_dim, end_dim); }
  /// @{
  /// The first and last dims flattened.
  std::int64_t start_dim, end_dim;
  /// @}
};

/// ms::relu as a cell.
class ReLU : public Cell<ReLU> {
 public:
  /// relu(x).
  Tensor construct(const Tensor& x) const;
};
/// ms::sigmoid as a cell.
class Sigmoid : public Cell<Sigmoid> {
 public:
  /// sigmoid(x).
  Tensor construct(const Tensor& x) const;
};
/// ms::tanh as a cell.
class Tanh : public Cell<Tanh> {
 public:
  /// tanh(x).
  Tensor construct(const Tensor& x) const;
};
/// GELU as a cell: ms::gelu_tanh when `approximate` (MindSpore's default), else the exact ms::gelu.
class GELU : public Cell<GELU> {
 public:
  /// The tanh form when `approximate`, else the erf form.
  explicit GELU(bool approximate = true) : approximate(approximate) {}  // MindSpore: tanh form
  /// gelu_tanh(x) or gelu(x).
  Tensor construct(const Tensor& x) const;
  /// Whether the tanh approximation is used.
  bool approximate;
};
/// ms::silu as a cell.
class SiLU : public Cell<SiLU> {
 public:
  /// silu(x).
  Tensor construct(const Tensor& x) const;
};
/// x for x >= 0, alpha * x below.
class LeakyReLU : public Cell<LeakyReLU> {
 public:
  /// The slope `alpha` below zero (MindSpore's default 0.2).
  explicit LeakyReLU(double alpha = 0.2) : alpha(alpha) {}  // MindSpore's default slope
  /// where(x >= 0, x, alpha * x).
  Tensor construct(const Tensor& x) const;
  /// The slope below zero.
  double alpha;
};
/// ms::softmax over `axis` as a cell.
class Softmax : public Cell<Softmax> {
 public:
  /// Softmax over `axis` (negative: from the end).
  explicit Softmax(std::int64_t axis = -1) : axis(axis) {}
  /// softmax(x, axis).
  Tensor construct(const Tensor& x) const;
  /// The axis.
  std::int64_t axis;
};
/// ms::log_softmax over `axis` as a cell.
class LogSoftmax : public Cell<LogSoftmax> {
 public:
  /// Log-softmax over `axis` (negative: from the end).
  explicit LogSoftmax(std::int64_t axis = -1) : axis(axis) {}
  /// log_softmax(x, axis).
  Tensor construct(const Tensor& x) const;
  /// The axis.
  std::int64_t axis;
};

// ------------------------------------------------------------------ Dropout

/// Zeroes each element with probability `p` in training mode and scales the
/// rest by 1 / (1 - p); the identity in eval mode. Draws from `generator`
/// (the default one when null).
class Dropout : public Cell<Dropout> {
 public:
  /// Drops with probability `p` (ValueError outside [0, 1]), drawing from `generator`
  /// (not owned; the default generator when null).
  explicit Dropout(double p = 0.5, Generator* generator = nullptr);
  /// ms::dropout(x, p, training()) in training mode, x in eval mode.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  /// The drop probability.
  double p;
  /// The generator drawn from (null: the default one).
  Generator* generator;
};

// ------------------------------------------------------------------ normalization

/// BatchNorm's options: `ms::nn::BatchNorm2d bn(32, {.momentum = 0.99})`.
struct BatchNormOptions {
  /// Added to the variance before the square root.
  double eps = 1e-5;
  double momentum =
      0.9;  ///< MindSpore's convention: moving = momentum * moving + (1 - momentum) * batch
  /// Whether `gamma` and `beta` are trained (false: fixed at 1 and 0).
  bool affine = true;
  bool use_batch_statistics = true;  ///< in training mode
};

/// Batch normalization over N (BatchNorm1d: [N, C]) or N, H, W (BatchNorm2d:
/// [N, C, H, W]), with MindSpore's parameter names.
class BatchNorm : public Cell<BatchNorm> {
 public:
  /// Normalization of `num_features` channels over N and `spatial_rank` trailing
  /// dims (0: [N, C]; 2: [N, C, H, W]). Use BatchNorm1d or BatchNorm2d.
  BatchNorm(std::int64_t num_features, int spatial_rank, BatchNormOptions opts = {});
  /// Normalizes x with the batch's statistics (updating the moving ones) in
  /// training mode, with the moving statistics in eval mode.
  Tensor construct(const Tensor& x) const;
  std::string cls_name() const override {
    return spatial_rank_ == 0 ? "BatchNorm1d" : "BatchNorm2d";
  }
  std::string extra_repr() const override;
  /// @{
  /// The scale and shift [C].
  Parameter gamma, beta;
  /// @}
  /// @{
  /// The moving statistics [C] (buffers, in the state dict).
  Tensor moving_mean, moving_variance;
  /// @}
  /// The number of channels C.
  std::int64_t num_features;
  /// The options given to the constructor.
  BatchNormOptions opts;

 private:
  int spatial_rank_;
};
/// Batch normalization of x [N, C].
class BatchNorm1d : public BatchNorm {
 public:
  /// Over `num_features` channels.
  explicit BatchNorm1d(std::int64_t num_features, BatchNormOptions opts = {})
      : BatchNorm(num_features, 0, opts) {}
};
/// Batch normalization of x [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  /// Over `num_features` channels.
  explicit BatchNorm2d(std::int64_t num_features, BatchNormOptions opts = {})
      : BatchNorm(num_features, 2, opts) {}
};

/// Normalizes over the trailing dims `normalized_shape`; `gamma` and `beta` of that shape.
class LayerNorm : public Cell<LayerNorm> {
 public:
  /// Normalizes over trailing dims of shape `normalized_shape`; `eps` is added to the variance.
  explicit LayerNorm(std::vector<std::int64_t> normalized_shape, double eps = 1e-7);
  /// (x - mean) / sqrt(var + eps) * gamma + beta over the trailing dims.
  Tensor construct(const Tensor& x) const;
  std::string extra_repr() const override;
  /// @{
  /// The scale (ones) and shift (zeros), of shape `normalized_shape`.
  Parameter gamma, beta;
  /// @}
  /// The trailing dims normalized over.
  std::vector<std::int64_t> normalized_shape;
  /// Added to the variance.
  double eps;
};

/// Looks up rows of `embedding_table` [vocab, dim] by integer indices.
class Embedding : public Cell<Embedding> {
 public:
  /// A table of `vocab_size` rows of `embedding_size` values, initialized by
  /// `embedding_table_init`.
  Embedding(std::int64_t vocab_size, std::int64_t embedding_size,
            InitSpec embedding_table_init = init::Normal(1.0));
  /// The rows of the table for `ids` (integers in [0, vocab_size)): shape ids.shape +
  /// [embedding_size].
  Tensor construct(const Tensor& ids) const;
  std::string extra_repr() const override;
  /// The table [vocab_size, embedding_size].
  Parameter embedding_table;
  /// @{
  /// The sizes given to the constructor.
  std::int64_t vocab_size, embedding_size;
  /// @}
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
  /// As erase at the position of the child named `name` ("0", "1", ...);
  /// KeyError as CellBase::unregister_cell for another name.
  ///   seq.unregister_cell("1");   // as seq.erase(1)
  void unregister_cell(const std::string& name) override;
  /// Replaces the cell at `index`; the new one is registered under the same name.
  void set(std::int64_t index, AnyCell cell);
  /// The cell at `index`. Read-only: assign with set() so the cell is registered.
  const AnyCell& operator[](std::int64_t index) const;
  /// The number of cells.
  std::size_t size() const { return cells_.size(); }
  /// True when there is no cell.
  bool empty() const { return cells_.empty(); }
  /// Iterates over the cells in order.
  auto begin() const { return cells_.cbegin(); }
  /// The end of the cells.
  auto end() const { return cells_.cend(); }

 protected:
  CellListBase() = default;
  /// Holds and registers `cells` as "0", "1", ...
  explicit CellListBase(std::initializer_list<AnyCell> cells);
  /// The cells, in order.
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
  /// Runs `cells` in order.
  SequentialCell(std::initializer_list<AnyCell> cells) : CellListBase(cells) {}
  /// Feeds x through each cell in turn; returns the last one's output.
  Tensor construct(const Tensor& x);
};

/// A list of cells, registered as "0", "1", ...; not callable itself.
class CellList : public CellListBase<CellList> {
 public:
  CellList() = default;
  /// Holds and registers `cells` as "0", "1", ...
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
  /// A (key, cell) pair.
  using Item = std::pair<std::string, AnyCell>;
  CellDict() = default;
  /// Inserts `items` in order (ValueError, TypeError as insert).
  CellDict(std::initializer_list<Item> items);
  /// Adds `cell` under `key` at the end, or replaces the cell of an existing
  /// key in place (same position, same name).
  void insert(const std::string& key, AnyCell cell);
  /// insert() for each item in order; all are checked before any is added.
  /// From another CellDict: `a.update(b.items())`.
  void update(const std::vector<Item>& items);
  /// Removes `key`, unregisters its cell and returns it.
  AnyCell pop(const std::string& key);
  /// As pop(name), discarding the cell; KeyError as
  /// CellBase::unregister_cell for a missing key.
  ///   heads.unregister_cell("box");
  void unregister_cell(const std::string& name) override;
  /// Removes every cell.
  void clear();
  /// Whether a cell is held under `key`.
  bool contains(const std::string& key) const;
  /// The cell under `key` (a lookup: it never inserts, unlike std::map's).
  const AnyCell& at(const std::string& key) const;
  /// As at(key).
  const AnyCell& operator[](const std::string& key) const;
  /// The keys in insertion order.
  std::vector<std::string> keys() const;
  /// The cells in insertion order.
  std::vector<AnyCell> values() const;
  /// The (key, cell) pairs in insertion order.
  const std::vector<Item>& items() const { return items_; }
  /// The number of cells.
  std::size_t size() const { return items_.size(); }
  /// True when there is no cell.
  bool empty() const { return items_.empty(); }
  /// Iterates (key, cell) pairs in insertion order.
  auto begin() const { return items_.cbegin(); }
  /// The end of the pairs.
  auto end() const { return items_.cend(); }

 private:
  std::size_t find(const std::string& key) const;  // size() when missing
  const AnyCell& lookup(const std::string& key, std::string_view api) const;
  void check_item(const std::string& key, const AnyCell& cell, std::string_view api);
  std::vector<Item> items_;
};

}  // namespace ms::nn
