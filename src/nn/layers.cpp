// The layers of ms/nn/layers.hpp.
#include "ms/nn/layers.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ms/autodiff/grad.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/norm.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::nn {
namespace {

std::vector<std::int64_t> two(const std::vector<std::int64_t>& v, std::string_view api,
                              std::string_view what) {
  MS_CHECK(v.size() == 1 || v.size() == 2, ValueError, api, ": ", what,
           " must hold 1 or 2 values, got ", v.size());
  return v.size() == 1 ? std::vector<std::int64_t>{v[0], v[0]} : v;
}

std::string ints(const std::vector<std::int64_t>& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

// MindSpore's "same" padding for one spatial axis: output ceil(n / s), the
// extra row (if any) at the bottom / right.
std::pair<std::int64_t, std::int64_t> same_pad(std::int64_t n, std::int64_t k, std::int64_t s,
                                               std::int64_t d) {
  const std::int64_t out = (n + s - 1) / s;
  const std::int64_t total = std::max<std::int64_t>((out - 1) * s + (k - 1) * d + 1 - n, 0);
  return {total / 2, total - total / 2};
}

void check_mode(const std::string& mode, std::string_view api) {
  MS_CHECK(mode == "same" || mode == "valid" || mode == "pad", ValueError, api,
           ": pad_mode must be \"same\", \"valid\" or \"pad\", got \"", mode, "\"");
}

// Pads x [N, C, H, W] for "same" when the split is uneven; returns the
// symmetric padding left to the op.
Tensor pad_same(const Tensor& x, const std::vector<std::int64_t>& k,
                const std::vector<std::int64_t>& s, const std::vector<std::int64_t>& d,
                std::vector<std::int64_t>& sym, double value = 0.0) {
  auto [t, b] = same_pad(x.dim(-2), k[0], s[0], d[0]);
  auto [l, r] = same_pad(x.dim(-1), k[1], s[1], d[1]);
  if (t == b && l == r) {
    sym = {t, l};
    return x;
  }
  sym = {0, 0};
  return pad(x, {l, r, t, b}, "constant", value);
}

}  // namespace

// ------------------------------------------------------------------ Dense

Dense::Dense(std::int64_t in, std::int64_t out, DenseOptions opts)
    : in_channels(in), out_channels(out) {
  MS_CHECK(in > 0 && out > 0, ValueError, "Dense: in_channels and out_channels must be > 0, got ",
           in, " and ", out);
  weight = Parameter(initializer(opts.weight_init, {out, in}, opts.dtype), "weight");
  register_parameter("weight", weight);
  if (opts.has_bias) {
    InitSpec b = opts.bias_init ? *opts.bias_init
                                : InitSpec(init::Uniform(1.0 / std::sqrt(static_cast<double>(in))));
    bias = Parameter(initializer(b, {out}, opts.dtype), "bias");
    register_parameter("bias", bias);
  }
}

Tensor Dense::construct(const Tensor& x) const {
  MS_CHECK(x.rank() >= 1 && x.dim(-1) == in_channels, ShapeError, "Dense: input of shape ",
           x.shape(), " must end in in_channels = ", in_channels);
  Tensor y = matmul(x, weight.transpose(0, 1));
  if (bias.defined()) return y + bias;
  return y;
}

std::string Dense::extra_repr() const {
  return detail::str_cat("input_channels=", in_channels, ", output_channels=", out_channels,
                         ", has_bias=", bias.defined() ? "True" : "False");
}

// ------------------------------------------------------------------ Conv2d

Conv2d::Conv2d(std::int64_t in, std::int64_t out, std::vector<std::int64_t> k, Conv2dOptions c,
               Conv2dCellOptions o)
    : in_channels(in),
      out_channels(out),
      kernel_size(two(k, "Conv2d", "kernel_size")),
      conv(std::move(c)),
      cell(std::move(o)) {
  check_mode(cell.pad_mode, "Conv2d");
  conv.stride = two(conv.stride, "Conv2d", "stride");
  conv.dilation = two(conv.dilation, "Conv2d", "dilation");
  conv.padding = two(conv.padding, "Conv2d", "padding");
  MS_CHECK(in > 0 && out > 0, ValueError, "Conv2d: in_channels and out_channels must be > 0, got ",
           in, " and ", out);
  MS_CHECK(conv.groups > 0 && in % conv.groups == 0 && out % conv.groups == 0, ValueError,
           "Conv2d: groups ", conv.groups, " must be > 0 and divide in_channels ", in,
           " and out_channels ", out);
  MS_CHECK(kernel_size[0] > 0 && kernel_size[1] > 0, ValueError, "Conv2d: kernel_size ",
           ints(kernel_size), " must be > 0");
  MS_CHECK(cell.pad_mode == "pad" || (conv.padding[0] == 0 && conv.padding[1] == 0), ValueError,
           "Conv2d: padding ", ints(conv.padding), " needs pad_mode \"pad\", got \"", cell.pad_mode,
           "\"");
  weight =
      Parameter(initializer(cell.weight_init,
                            {out, in / conv.groups, kernel_size[0], kernel_size[1]}, cell.dtype),
                "weight");
  register_parameter("weight", weight);
  if (cell.has_bias) {
    const double fan_in = static_cast<double>(in / conv.groups * kernel_size[0] * kernel_size[1]);
    InitSpec b =
        cell.bias_init ? *cell.bias_init : InitSpec(init::Uniform(1.0 / std::sqrt(fan_in)));
    bias = Parameter(initializer(b, {out}, cell.dtype), "bias");
    register_parameter("bias", bias);
  }
}

Tensor Conv2d::construct(const Tensor& x) const {
  MS_CHECK(x.rank() == 4 && x.dim(1) == in_channels, ShapeError, "Conv2d: input of shape ",
           x.shape(), " must be [N, ", in_channels, ", H, W]");
  Conv2dOptions o = conv;
  Tensor in = x;
  if (cell.pad_mode == "same")
    in = pad_same(x, kernel_size, conv.stride, conv.dilation, o.padding);
  else if (cell.pad_mode == "valid")
    o.padding = {0, 0};
  std::optional<Tensor> b;
  if (bias.defined()) b = bias;
  return conv2d(in, weight, b, o);
}

std::string Conv2d::extra_repr() const {
  return detail::str_cat("input_channels=", in_channels, ", output_channels=", out_channels,
                         ", kernel_size=", ints(kernel_size), ", stride=", ints(conv.stride),
                         ", pad_mode=", cell.pad_mode, ", padding=", ints(conv.padding),
                         ", dilation=", ints(conv.dilation), ", group=", conv.groups,
                         ", has_bias=", bias.defined() ? "True" : "False");
}

// ------------------------------------------------------------------ pooling

namespace {

// The pooling cells' options with 2 values per list and the pad mode checked.
template <class O>
O pool_options(O o, const std::string& pad_mode, std::string_view api) {
  check_mode(pad_mode, api);
  o.kernel = two(o.kernel, api, "kernel");
  o.stride = two(o.stride.empty() ? o.kernel : o.stride, api, "stride");
  o.padding = two(o.padding, api, "padding");
  MS_CHECK(pad_mode == "pad" || (o.padding[0] == 0 && o.padding[1] == 0), ValueError, api,
           ": padding ", ints(o.padding), " needs pad_mode \"pad\", got \"", pad_mode, "\"");
  return o;
}

}  // namespace

MaxPool2d::MaxPool2d(MaxPool2dOptions o, std::string mode)
    : opts(pool_options(std::move(o), mode, "MaxPool2d")), pad_mode(std::move(mode)) {
  opts.dilation = two(opts.dilation, "MaxPool2d", "dilation");
}

Tensor MaxPool2d::construct(const Tensor& x) const {
  if (pad_mode != "same") return max_pool2d(x, opts);
  MS_CHECK(x.rank() >= 3, ShapeError, "MaxPool2d: input of shape ", x.shape(),
           " must be [N, C, H, W] or [C, H, W]");
  MaxPool2dOptions o = opts;
  const Tensor in = pad_same(x, opts.kernel, opts.stride, opts.dilation, o.padding,
                             -std::numeric_limits<double>::infinity());
  return max_pool2d(in, o);
}

std::string MaxPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", ints(opts.kernel), ", stride=", ints(opts.stride),
                         ", pad_mode=", pad_mode);
}

AvgPool2d::AvgPool2d(AvgPool2dOptions o, std::string mode)
    : opts(pool_options(std::move(o), mode, "AvgPool2d")), pad_mode(std::move(mode)) {
  MS_CHECK(pad_mode != "same", ValueError,
           "AvgPool2d: pad_mode \"same\" is not supported (the divisor of padded windows differs "
           "between frameworks); use \"pad\" with count_include_pad semantics or \"valid\"");
}

Tensor AvgPool2d::construct(const Tensor& x) const { return avg_pool2d(x, opts); }

std::string AvgPool2d::extra_repr() const {
  return detail::str_cat("kernel_size=", ints(opts.kernel), ", stride=", ints(opts.stride),
                         ", pad_mode=", pad_mode);
}

// ------------------------------------------------------------------ activations, dropout

Tensor ReLU::construct(const Tensor& x) const { return ms::relu(x); }
Tensor Sigmoid::construct(const Tensor& x) const { return ms::sigmoid(x); }
Tensor Tanh::construct(const Tensor& x) const { return ms::tanh(x); }
Tensor SiLU::construct(const Tensor& x) const { return ms::silu(x); }
Tensor GELU::construct(const Tensor& x) const {
  return approximate ? Tensor(ms::gelu_tanh(x)) : Tensor(ms::gelu(x));
}
Tensor Softmax::construct(const Tensor& x) const { return ms::softmax(x, axis); }
Tensor LogSoftmax::construct(const Tensor& x) const { return ms::log_softmax(x, axis); }
Tensor LeakyReLU::construct(const Tensor& x) const { return ms::where(x >= 0, x, x * alpha); }

Dropout::Dropout(double p, Generator* generator) : p(p), generator(generator) {
  MS_CHECK(p >= 0.0 && p <= 1.0, ValueError, "Dropout: p must be in [0, 1], got ", p);
}

Tensor Dropout::construct(const Tensor& x) const {
  if (!training() || p == 0.0) return x;
  return generator != nullptr ? dropout(x, p, true, *generator) : dropout(x, p, true);
}

std::string Dropout::extra_repr() const { return detail::str_cat("p=", p); }

// ------------------------------------------------------------------ normalization

BatchNorm::BatchNorm(std::int64_t n, int spatial_rank, BatchNormOptions o)
    : num_features(n), opts(o), spatial_rank_(spatial_rank) {
  MS_CHECK(n > 0, ValueError, cls_name(), ": num_features must be > 0, got ", n);
  MS_CHECK(o.momentum >= 0.0 && o.momentum <= 1.0, ValueError, cls_name(),
           ": momentum must be in [0, 1], got ", o.momentum);
  MS_CHECK(o.eps > 0.0, ValueError, cls_name(), ": eps must be > 0, got ", o.eps);
  gamma = Parameter(ones({n}), "gamma", o.affine);
  beta = Parameter(zeros({n}), "beta", o.affine);
  register_parameter("gamma", gamma);
  register_parameter("beta", beta);
  // What is registered (a buffer registration hook may replace it) is what construct uses.
  moving_mean = register_buffer("moving_mean", zeros({n}));
  moving_variance = register_buffer("moving_variance", ones({n}));
}

Tensor BatchNorm::construct(const Tensor& x) const {
  const std::int64_t rank = 2 + spatial_rank_;
  MS_CHECK(x.rank() == rank && x.dim(1) == num_features, ShapeError, cls_name(),
           ": input of shape ", x.shape(), " must be [N, ", num_features,
           spatial_rank_ ? ", H, W]" : "]");
  std::vector<std::int64_t> axes{0};
  Shape bshape({1, num_features});
  if (spatial_rank_ == 2) {
    axes = {0, 2, 3};
    bshape = Shape({1, num_features, 1, 1});
  }
  const Tensor g = gamma.reshape(bshape), b = beta.reshape(bshape);
  if (training() && opts.use_batch_statistics) {
    const Tensor mean = ms::mean(x, axes, true);
    const Tensor centered = x - mean;
    const Tensor var = ms::mean(ms::square(centered), axes, true);
    const std::int64_t count = x.numel() / num_features;
    // Moving statistics (unbiased variance, as MindSpore and PyTorch); no gradient flows there.
    const double unbias =
        count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
    const Tensor m1 = stop_gradient(mean.reshape(Shape({num_features})));
    const Tensor v1 = stop_gradient(var.reshape(Shape({num_features})));
    ms::assign(moving_mean, moving_mean * opts.momentum + m1 * (1.0 - opts.momentum));
    ms::assign(moving_variance,
               moving_variance * opts.momentum + v1 * ((1.0 - opts.momentum) * unbias));
    return centered * ms::rsqrt(var + opts.eps) * g + b;
  }
  const Tensor m = moving_mean.reshape(bshape), v = moving_variance.reshape(bshape);
  return (x - m) * ms::rsqrt(v + opts.eps) * g + b;
}

std::string BatchNorm::extra_repr() const {
  return detail::str_cat("num_features=", num_features, ", eps=", opts.eps,
                         ", momentum=", opts.momentum);
}

LayerNorm::LayerNorm(std::vector<std::int64_t> shape, double eps)
    : normalized_shape(std::move(shape)), eps(eps) {
  MS_CHECK(!normalized_shape.empty(), ValueError, "LayerNorm: normalized_shape is empty");
  gamma = Parameter(ones(Shape(normalized_shape)), "gamma");
  beta = Parameter(zeros(Shape(normalized_shape)), "beta");
  register_parameter("gamma", gamma);
  register_parameter("beta", beta);
}

Tensor LayerNorm::construct(const Tensor& x) const {
  const auto k = static_cast<std::int64_t>(normalized_shape.size());
  bool ok = x.rank() >= k;
  for (std::int64_t i = 0; ok && i < k; ++i)
    ok = x.dim(x.rank() - k + i) == normalized_shape[static_cast<std::size_t>(i)];
  MS_CHECK(ok, ShapeError, "LayerNorm: input of shape ", x.shape(), " must end in ",
           Shape(normalized_shape));
  return ms::layer_norm(x, gamma, beta, {.axis = -k, .eps = eps});
}

std::string LayerNorm::extra_repr() const {
  return detail::str_cat("normalized_shape=", ints(normalized_shape), ", eps=", eps);
}

Embedding::Embedding(std::int64_t vocab, std::int64_t dim, InitSpec init)
    : vocab_size(vocab), embedding_size(dim) {
  MS_CHECK(vocab > 0 && dim > 0, ValueError,
           "Embedding: vocab_size and embedding_size must be > 0, got ", vocab, " and ", dim);
  embedding_table = Parameter(initializer(init, {vocab, dim}), "embedding_table");
  register_parameter("embedding_table", embedding_table);
}

Tensor Embedding::construct(const Tensor& ids) const {
  MS_CHECK(dtype_is_int(ids.dtype()), TypeError, "Embedding: ids must be integers, got ",
           ids.dtype());
  const Tensor flat = ids.reshape(Shape({ids.numel()}));
  std::vector<std::int64_t> out = ids.shape().to_vector();
  out.push_back(embedding_size);
  return index_select(embedding_table, 0, flat).reshape(Shape(out));
}

std::string Embedding::extra_repr() const {
  return detail::str_cat("vocab_size=", vocab_size, ", embedding_size=", embedding_size);
}

// ------------------------------------------------------------------ containers

namespace {

// `index` (negative counts from the end) as a position in a container of
// `size` cells: [-size, size), or [-size, size] when `end_ok` (insert).
std::size_t container_index(std::int64_t index, std::size_t size, bool end_ok,
                            std::string_view api) {
  const auto n = static_cast<std::int64_t>(size);
  const std::int64_t hi = end_ok ? n : n - 1;
  MS_CHECK(n > 0 || end_ok, IndexError, api, ": index ", index, " is out of range: the ",
           api.substr(0, api.find_first_of(".[")), " is empty");
  MS_CHECK(index >= -n && index <= hi, IndexError, api, ": index ", index,
           " is out of range for size ", n, " (expected ", -n, " <= index <= ", hi, ")");
  return static_cast<std::size_t>(index < 0 ? index + n : index);
}

// What insert_child_to_cell would refuse, checked before a container changes
// anything: an empty AnyCell, the container itself or a cell containing it.
void check_container_cell(CellBase& owner, const AnyCell& cell, std::string_view api,
                          std::string_view what) {
  MS_CHECK(cell.ptr() != nullptr, ValueError, api, ": ", what,
           " is an empty ms::AnyCell; expected a cell");
  for (const auto& [name, c] : cell.cell().cells_and_names())
    MS_CHECK(c != &owner, ValueError, api, ": ", what, " (", cell.cell().cls_name(),
             name.empty() ? std::string() : " through its child '" + name + "'", ") is this ",
             owner.cls_name(), " itself: cells must form a tree");
}

}  // namespace

template <class Derived>
CellListBase<Derived>::CellListBase(std::initializer_list<AnyCell> cells) {
  extend(cells);
}

template <class Derived>
void CellListBase<Derived>::check_cell(const AnyCell& cell, std::string_view api) {
  check_container_cell(*this, cell, api, "cell");
}

template <class Derived>
void CellListBase<Derived>::reregister(std::size_t from) {
  // Children [0, from) keep their names; the rest are registered again in
  // order, which also renames their parameters ("3.weight" -> "2.weight").
  this->children_.resize(std::min(from, this->children_.size()));
  for (std::size_t i = from; i < cells_.size(); ++i)
    this->insert_child_to_cell(std::to_string(i), cells_[i].cell());
  // The forward changed: graphs ms::jit traced before are stale.
  compiler::bump_hook_version();
}

template <class Derived>
void CellListBase<Derived>::append(AnyCell cell) {
  check_cell(cell, this->cls_name() + ".append");
  cells_.push_back(std::move(cell));
  reregister(cells_.size() - 1);
}

template <class Derived>
void CellListBase<Derived>::extend(const std::vector<AnyCell>& cells) {
  const std::string api = this->cls_name() + ".extend";
  for (const AnyCell& c : cells) check_cell(c, api);
  const std::size_t from = cells_.size();
  cells_.insert(cells_.end(), cells.begin(), cells.end());
  reregister(from);
}

template <class Derived>
void CellListBase<Derived>::insert(std::int64_t index, AnyCell cell) {
  const std::string api = this->cls_name() + ".insert";
  const std::size_t at = container_index(index, cells_.size(), true, api);
  check_cell(cell, api);
  cells_.insert(cells_.begin() + static_cast<std::ptrdiff_t>(at), std::move(cell));
  reregister(at);
}

template <class Derived>
AnyCell CellListBase<Derived>::pop(std::int64_t index) {
  const std::size_t at = container_index(index, cells_.size(), false, this->cls_name() + ".pop");
  AnyCell out = std::move(cells_[at]);
  cells_.erase(cells_.begin() + static_cast<std::ptrdiff_t>(at));
  reregister(at);
  return out;
}

template <class Derived>
void CellListBase<Derived>::set(std::int64_t index, AnyCell cell) {
  const std::string api = this->cls_name() + ".set";
  const std::size_t at = container_index(index, cells_.size(), false, api);
  check_cell(cell, api);
  cells_[at] = std::move(cell);
  reregister(at);
}

template <class Derived>
void CellListBase<Derived>::unregister_cell(const std::string& name) {
  const auto& ch = this->children_;
  auto it = std::find_if(ch.begin(), ch.end(), [&](const auto& e) { return e.first == name; });
  if (it == ch.end()) return CellBase::unregister_cell(name);  // raises the KeyError
  pop(static_cast<std::int64_t>(it - ch.begin()));
}

template <class Derived>
const AnyCell& CellListBase<Derived>::operator[](std::int64_t index) const {
  return cells_[container_index(index, cells_.size(), false, this->cls_name() + "[]")];
}

template class CellListBase<SequentialCell>;
template class CellListBase<CellList>;

Tensor SequentialCell::construct(const Tensor& x) {
  Tensor y = x;
  for (const AnyCell& c : cells_) y = c(y);
  return y;
}

CellDict::CellDict(std::initializer_list<Item> items) { update(items); }

std::size_t CellDict::find(const std::string& key) const {
  std::size_t i = 0;
  while (i < items_.size() && items_[i].first != key) ++i;
  return i;
}

void CellDict::check_item(const std::string& key, const AnyCell& cell, std::string_view api) {
  MS_CHECK(!key.empty() && key.find('.') == std::string::npos, ValueError, api, ": key '", key,
           "' is invalid: a CellDict key must be a non-empty string without '.'");
  check_container_cell(*this, cell, api, "the cell for key '" + key + "'");
  MS_CHECK(cell.as<SequentialCell>() == nullptr, TypeError, api, ": the cell for key '", key,
           "' is a SequentialCell; as MindSpore's, a CellDict holds no SequentialCell, CellList "
           "or CellDict");
}

void CellDict::insert(const std::string& key, AnyCell cell) {
  check_item(key, cell, "CellDict.insert");
  const std::size_t at = find(key);
  // Graphs ms::jit traced before see another forward: they are stale.
  compiler::bump_hook_version();
  if (at == items_.size()) {
    insert_child_to_cell(key, cell.cell());
    items_.emplace_back(key, std::move(cell));
    return;
  }
  // Replaced in place: children [at, end) are registered again in the same order.
  items_[at].second = std::move(cell);
  children_.resize(std::min(at, children_.size()));
  for (std::size_t i = at; i < items_.size(); ++i)
    insert_child_to_cell(items_[i].first, items_[i].second.cell());
}

void CellDict::update(const std::vector<Item>& items) {
  for (const auto& [key, cell] : items) check_item(key, cell, "CellDict.update");
  for (const auto& [key, cell] : items) insert(key, cell);
}

AnyCell CellDict::pop(const std::string& key) {
  lookup(key, "CellDict.pop");
  const std::size_t at = find(key);
  AnyCell out = std::move(items_[at].second);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(at));
  children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(at));
  compiler::bump_hook_version();  // as in insert
  return out;
}

void CellDict::unregister_cell(const std::string& name) {
  if (!contains(name)) return CellBase::unregister_cell(name);  // raises the KeyError
  pop(name);
}

void CellDict::clear() {
  items_.clear();
  children_.clear();
  compiler::bump_hook_version();  // as in insert
}

bool CellDict::contains(const std::string& key) const { return find(key) < items_.size(); }

const AnyCell& CellDict::lookup(const std::string& key, std::string_view api) const {
  const std::size_t at = find(key);
  if (at < items_.size()) return items_[at].second;
  std::string known;
  for (std::size_t i = 0; i < items_.size() && i < 8; ++i)
    known += (i ? ", '" : "'") + items_[i].first + "'";
  if (items_.size() > 8) known += ", ...";
  detail::raise<IndexError>(api, ": no key '", key,
                            "' in the CellDict (keys: ", items_.empty() ? "none" : known, ")");
}

const AnyCell& CellDict::at(const std::string& key) const { return lookup(key, "CellDict.at"); }

const AnyCell& CellDict::operator[](const std::string& key) const {
  return lookup(key, "CellDict[]");
}

std::vector<std::string> CellDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, c] : items_) out.push_back(k);
  return out;
}

std::vector<AnyCell> CellDict::values() const {
  std::vector<AnyCell> out;
  for (const auto& [k, c] : items_) out.push_back(c);
  return out;
}

}  // namespace ms::nn
