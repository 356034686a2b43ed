// The attention and transformer cells of ms/nn/transformer.hpp.
#include "ms/nn/transformer.hpp"

#include <cmath>
#include <limits>
#include <string_view>

#include "ms/ops/attention.hpp"
#include "ms/ops/layout.hpp"
#include "ms/ops/random.hpp"
#include "ms/ops/reduce.hpp"

namespace ms::nn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---------------------------------------------------------------- keyword arguments

// Reads a call's keyword arguments by name, checking their types; every key
// must be one of `accepted` (ValueError naming the cell otherwise).
class KwReader {
 public:
  KwReader(const Kwargs& kw, std::string_view api, std::vector<std::string_view> accepted)
      : kw_(kw), api_(api) {
    for (const auto& [key, value] : kw) {
      bool known = false;
      for (auto a : accepted) known |= key == a;
      if (!known) {
        std::string list;
        for (auto a : accepted) list += (list.empty() ? "" : ", ") + std::string(a);
        ::ms::detail::raise<ValueError>(api_, ": unknown keyword argument '", key,
                                        "'; accepted: ", list);
      }
    }
  }
  std::optional<Tensor> tensor(std::string_view name) const {
    auto it = kw_.find(name);
    if (it == kw_.end()) return std::nullopt;
    const Tensor* t = std::get_if<Tensor>(&it->second);
    MS_CHECK(t != nullptr, TypeError, api_, ": keyword argument '", name,
             "' must be a Tensor, got another type");
    if (!t->defined()) return std::nullopt;
    return *t;
  }
  bool flag(std::string_view name, bool fallback = false) const {
    auto it = kw_.find(name);
    if (it == kw_.end()) return fallback;
    const bool* b = std::get_if<bool>(&it->second);
    MS_CHECK(b != nullptr, TypeError, api_, ": keyword argument '", name,
             "' must be a bool, got another type");
    return *b;
  }

 private:
  const Kwargs& kw_;
  std::string_view api_;
};

// The keyword arguments of a MultiheadAttention call made by a layer.
Kwargs mha_kwargs(const std::optional<Tensor>& attn_mask,
                  const std::optional<Tensor>& key_padding_mask, bool is_causal) {
  Kwargs kw;
  if (attn_mask) kw.emplace("attn_mask", *attn_mask);
  if (key_padding_mask) kw.emplace("key_padding_mask", *key_padding_mask);
  if (is_causal) kw.emplace("is_causal", true);
  return kw;
}

// ---------------------------------------------------------------- masks

// A mask of ms's "true = ignore" convention (or floating, added) as an
// additive floating mask of dtype `dt`.
Tensor additive(const Tensor& m, DType dt) {
  if (m.dtype() == bool_) return masked_fill(zeros(m.shape(), dt), m, -kInf);
  return m.dtype() == dt ? m : m.to(dt);
}

// key_padding_mask [B, S] and attn_mask [L, S] or [B, H, L, S] (already
// reshaped) as one mask for attend: Bool (true = keep) when both are Bool,
// else floating (added).
std::optional<Tensor> combine_masks(const std::optional<Tensor>& kpm,
                                    const std::optional<Tensor>& am, DType dt) {
  if (!kpm && !am) return std::nullopt;
  std::optional<Tensor> pad;
  if (kpm) pad = kpm->unsqueeze(1).unsqueeze(1);
  const bool all_bool = (!pad || pad->dtype() == bool_) && (!am || am->dtype() == bool_);
  if (all_bool) {
    if (pad && am) return Tensor(logical_not(logical_or(*pad, *am)));
    return Tensor(logical_not(pad ? *pad : *am));
  }
  if (pad && am) return Tensor(additive(*pad, dt) + additive(*am, dt));
  return additive(pad ? *pad : *am, dt);
}

void check_mask_dtype(const Tensor& m, std::string_view what) {
  MS_CHECK(m.dtype() == bool_ || dtype_is_float(m.dtype()), TypeError, "MultiheadAttention: ", what,
           " must be Bool or floating, got ", m.dtype());
}

// ---------------------------------------------------------------- layers

Tensor activate(const Tensor& x, const std::string& activation) {
  if (activation == "gelu") return gelu(x);
  return relu(x);
}

void check_layer_options(const TransformerLayerOptions& o, std::string_view api) {
  MS_CHECK(o.activation == "relu" || o.activation == "gelu", ValueError, api,
           ": activation must be \"relu\" or \"gelu\", got \"", o.activation, "\"");
  MS_CHECK(o.dim_feedforward > 0, ValueError, api, ": dim_feedforward must be > 0, got ",
           o.dim_feedforward);
  MS_CHECK(o.dropout >= 0 && o.dropout < 1, ValueError, api, ": dropout must lie in [0, 1), got ",
           o.dropout);
}

// The options of a layer's attention cells, after checking the layer's options.
MultiheadAttentionOptions attn_options(const TransformerLayerOptions& o, std::string_view api) {
  check_layer_options(o, api);
  return {.dropout = o.dropout, .batch_first = o.batch_first};
}

}  // namespace

// ---------------------------------------------------------------- attend

namespace detail {

Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
              bool causal, double dropout, bool training) {
  return scaled_dot_product_attention(
      q, k, v, {.mask = mask, .causal = causal, .dropout = training ? dropout : 0.0});
}

}  // namespace detail

// ---------------------------------------------------------------- MultiheadAttention

MultiheadAttention::MultiheadAttention(std::int64_t e, std::int64_t h, MultiheadAttentionOptions o)
    : out_proj(std::max<std::int64_t>(e, 1), std::max<std::int64_t>(e, 1),
               {.has_bias = o.has_bias, .dtype = o.dtype}),
      embed_dim(e),
      num_heads(h),
      head_dim(h > 0 ? e / h : 0),
      kdim(o.kdim.value_or(e)),
      vdim(o.vdim.value_or(e)),
      opts(o) {
  MS_CHECK(e > 0 && h > 0, ValueError,
           "MultiheadAttention: embed_dim and num_heads must be > 0, got ", e, " and ", h);
  MS_CHECK(e % h == 0, ValueError, "MultiheadAttention: embed_dim (", e,
           ") must be divisible by num_heads (", h, ")");
  MS_CHECK(kdim > 0 && vdim > 0, ValueError, "MultiheadAttention: kdim and vdim must be > 0, got ",
           kdim, " and ", vdim);
  MS_CHECK(!o.add_bias_kv && !o.add_zero_attn, ValueError,
           "MultiheadAttention: add_bias_kv and add_zero_attn are not supported (expected false, "
           "got ",
           o.add_bias_kv, " and ", o.add_zero_attn, ")");
  MS_CHECK(o.dropout >= 0 && o.dropout < 1, ValueError,
           "MultiheadAttention: dropout must lie in [0, 1), got ", o.dropout);
  auto make = [&](const char* name, Shape shape) {
    Parameter p(initializer(init::XavierUniform(), shape, o.dtype), name);
    register_parameter(name, p);
    return p;
  };
  if (kdim == e && vdim == e) {
    in_proj_weight = make("in_proj_weight", Shape({3 * e, e}));
  } else {
    q_proj_weight = make("q_proj_weight", Shape({e, e}));
    k_proj_weight = make("k_proj_weight", Shape({e, kdim}));
    v_proj_weight = make("v_proj_weight", Shape({e, vdim}));
  }
  if (o.has_bias) {
    in_proj_bias = Parameter(zeros(Shape({3 * e}), o.dtype), "in_proj_bias");
    register_parameter("in_proj_bias", in_proj_bias);
    out_proj.bias.set_data(zeros(Shape({e}), o.dtype));  // as MindSpore's _reset_parameters
  }
  insert_child_to_cell("out_proj", out_proj);
}

Tensor MultiheadAttention::construct(const Tensor& query, const Tensor& key, const Tensor& value) {
  return attention(query, key, value, {});
}

Tensor MultiheadAttention::construct(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const Kwargs& kwargs) {
  KwReader kw(
      kwargs, "MultiheadAttention",
      {"key_padding_mask", "attn_mask", "is_causal", "need_weights", "average_attn_weights"});
  kw.flag("average_attn_weights");  // type-checked only: no weights are returned
  MS_CHECK(!kw.flag("need_weights"), ValueError,
           "MultiheadAttention: need_weights=true is not supported (the attention weights are not "
           "returned); pass need_weights=false or leave it out");
  return attention(query, key, value,
                   {.key_padding_mask = kw.tensor("key_padding_mask"),
                    .attn_mask = kw.tensor("attn_mask"),
                    .is_causal = kw.flag("is_causal")});
}

Tensor MultiheadAttention::project(const Tensor& x, int which) const {
  const std::int64_t e = embed_dim;
  const Parameter* sep[] = {&q_proj_weight, &k_proj_weight, &v_proj_weight};
  const Tensor w = in_proj_weight.defined() ? in_proj_weight.slice(0, which * e, (which + 1) * e)
                                            : Tensor(*sep[which]);
  Tensor y = matmul(x, w.transpose(0, 1));
  if (in_proj_bias.defined()) y = y + in_proj_bias.slice(0, which * e, (which + 1) * e);
  return y;
}

std::array<Tensor, 3> MultiheadAttention::project_packed(const Tensor& x) const {
  Tensor y = matmul(x, in_proj_weight.transpose(0, 1));
  if (in_proj_bias.defined()) y = y + in_proj_bias;
  std::vector<Tensor> qkv = split(y, embed_dim, -1);
  return {qkv[0], qkv[1], qkv[2]};
}

Tensor MultiheadAttention::attention(const Tensor& query, const Tensor& key, const Tensor& value,
                                     const AttentionMasks& m) {
  const std::int64_t r = query.rank();
  MS_CHECK(r == 2 || r == 3, ShapeError, "MultiheadAttention: query must have rank 3 ([L, B, E] ",
           "or [B, L, E] with batch_first) or 2 (unbatched [L, E]), got ", query.shape());
  MS_CHECK(key.rank() == r && value.rank() == r, ShapeError,
           "MultiheadAttention: key and value must have the query's rank ", r, ", got key ",
           key.shape(), " and value ", value.shape());
  // Everything below is batch first: [B, T, features].
  const bool bf = opts.batch_first || r == 2;
  auto batch_first = [&](const Tensor& t) {
    if (r == 2) return t.unsqueeze(0);
    return bf ? t : t.transpose(0, 1);
  };
  const Tensor q = batch_first(query), k = batch_first(key), v = batch_first(value);
  MS_CHECK(q.dim(-1) == embed_dim, ShapeError, "MultiheadAttention: query ", query.shape(),
           " must end in embed_dim = ", embed_dim);
  MS_CHECK(k.dim(-1) == kdim && v.dim(-1) == vdim, ShapeError, "MultiheadAttention: key ",
           key.shape(), " and value ", value.shape(), " must end in kdim = ", kdim,
           " and vdim = ", vdim);
  MS_CHECK(k.dim(0) == q.dim(0) && v.dim(0) == q.dim(0), ShapeError, "MultiheadAttention: query ",
           query.shape(), ", key ", key.shape(), " and value ", value.shape(),
           " must have the same batch size");
  MS_CHECK(k.dim(1) == v.dim(1), ShapeError, "MultiheadAttention: key ", key.shape(), " and value ",
           value.shape(), " must have the same sequence length");
  const std::int64_t b = q.dim(0), l = q.dim(1), s = k.dim(1);
  // The batch dim as -1 in reshapes, so that a graph generalized over it fits any batch size.
  auto heads = [&](const Tensor& t) {
    return t.reshape(Shape({-1, t.dim(1), num_heads, head_dim})).transpose(1, 2);
  };
  std::optional<Tensor> kpm, am;
  if (m.key_padding_mask) {
    kpm = *m.key_padding_mask;
    check_mask_dtype(*kpm, "key_padding_mask");
    if (r == 2 && kpm->rank() == 1) kpm = kpm->unsqueeze(0);
    MS_CHECK(kpm->shape() == Shape({b, s}), ShapeError,
             "MultiheadAttention: key_padding_mask must have shape [B, S] = ", Shape({b, s}),
             ", got ", m.key_padding_mask->shape());
  }
  if (m.attn_mask) {
    am = *m.attn_mask;
    check_mask_dtype(*am, "attn_mask");
    const bool ok2 = am->shape() == Shape({l, s}),
               ok3 = am->shape() == Shape({b * num_heads, l, s});
    MS_CHECK(ok2 || ok3, ShapeError,
             "MultiheadAttention: attn_mask must have shape [L, S] = ", Shape({l, s}),
             " or [B * num_heads, L, S] = ", Shape({b * num_heads, l, s}), ", got ", am->shape());
    if (ok3) am = am->reshape(Shape({-1, num_heads, l, s}));
  }
  // Self-attention with the packed weight: one product for q, k and v.
  const std::array<Tensor, 3> qkv =
      in_proj_weight.defined() && query.is_same(key) && key.is_same(value)
          ? project_packed(q)
          : std::array{project(q, 0), project(k, 1), project(v, 2)};
  const Tensor o =
      detail::attend(heads(qkv[0]), heads(qkv[1]), heads(qkv[2]), combine_masks(kpm, am, q.dtype()),
                     m.is_causal, opts.dropout, training());
  Tensor y = out_proj(o.transpose(1, 2).reshape(Shape({-1, l, embed_dim})));
  if (r == 2) return y.squeeze(0);
  return bf ? y : y.transpose(0, 1);
}

Tensor MultiheadAttention::attention_cached(const Tensor& x, KvCache& cache,
                                            const std::optional<Tensor>& write_at,
                                            const AttentionMasks& m) {
  constexpr std::string_view api = "MultiheadAttention::attention_cached";
  MS_CHECK(opts.batch_first && kdim == embed_dim && vdim == embed_dim, ValueError, api,
           ": needs batch_first self-attention (kdim = vdim = embed_dim), got batch_first = ",
           opts.batch_first, ", kdim ", kdim, ", vdim ", vdim, ", embed_dim ", embed_dim);
  MS_CHECK(x.rank() == 3 && x.dim(2) == embed_dim, ShapeError, api,
           ": x must have shape [B, T, embed_dim = ", embed_dim, "], got ", x.shape());
  MS_CHECK(!m.attn_mask, ValueError, api,
           ": attn_mask is not supported (expected key_padding_mask and is_causal only)");
  const std::int64_t l = x.dim(1);
  auto heads = [&](const Tensor& t) {
    return t.reshape(Shape({-1, l, num_heads, head_dim})).transpose(1, 2);
  };
  const std::array<Tensor, 3> qkv = project_packed(x);
  const Tensor q = heads(qkv[0]), k = heads(qkv[1]), v = heads(qkv[2]);
  if (!write_at) {
    cache = {k, v};
  } else {
    MS_CHECK(l == 1, ShapeError, api, ": an increment (write_at given) takes one position, x ",
             "must be [B, 1, embed_dim], got ", x.shape());
    MS_CHECK(cache.key.defined() && cache.key.rank() == 4 && cache.key.dim(0) == x.dim(0) &&
                 cache.value.defined() && cache.value.shape() == cache.key.shape(),
             ShapeError, api,
             ": cache must hold key and value [B, H, S, head_dim] with B = ", x.dim(0),
             ", got key ", cache.key.defined() ? cache.key.shape() : Shape{}, " and value ",
             cache.value.defined() ? cache.value.shape() : Shape{});
    MS_CHECK(write_at->rank() == 0 && dtype_is_int(write_at->dtype()), TypeError, api,
             ": write_at must be a 0-d integer tensor, got ", write_at->dtype(), " ",
             write_at->shape());
    // index_copy takes int32 or int64 indices: a narrower or unsigned slot widens to int64.
    const DType at = write_at->dtype();
    const Tensor slot = (at == DType::Int32 || at == DType::Int64 ? *write_at : write_at->to(int64))
                            .reshape(Shape({1}));
    cache = {index_copy(cache.key, 2, slot, k), index_copy(cache.value, 2, slot, v)};
  }
  const std::int64_t s = cache.key.dim(2);
  std::optional<Tensor> kpm;
  if (m.key_padding_mask) {
    kpm = *m.key_padding_mask;
    check_mask_dtype(*kpm, "key_padding_mask");
    MS_CHECK(kpm->shape() == Shape({x.dim(0), s}), ShapeError, api,
             ": key_padding_mask must have shape [B, S] = ", Shape({x.dim(0), s}), ", got ",
             kpm->shape());
  }
  const Tensor o = detail::attend(q, cache.key, cache.value, combine_masks(kpm, {}, x.dtype()),
                                  m.is_causal, opts.dropout, training());
  return out_proj(o.transpose(1, 2).reshape(Shape({-1, l, embed_dim})));
}

std::string MultiheadAttention::extra_repr() const {
  return ::ms::detail::str_cat("embed_dim=", embed_dim, ", num_heads=", num_heads, ", kdim=", kdim,
                               ", vdim=", vdim, ", dropout=", opts.dropout,
                               ", batch_first=", opts.batch_first);
}

// ---------------------------------------------------------------- encoder layer

TransformerEncoderLayer::TransformerEncoderLayer(std::int64_t d, std::int64_t nhead,
                                                 TransformerLayerOptions o)
    : self_attn(d, nhead, attn_options(o, "TransformerEncoderLayer")),
      linear1(d, std::max<std::int64_t>(o.dim_feedforward, 1)),
      dropout(o.dropout),
      linear2(std::max<std::int64_t>(o.dim_feedforward, 1), d),
      norm1({d}, o.layer_norm_eps),
      norm2({d}, o.layer_norm_eps),
      dropout1(o.dropout),
      dropout2(o.dropout),
      opts(std::move(o)) {
  register_cells("self_attn", self_attn, "linear1", linear1, "dropout", dropout, "linear2", linear2,
                 "norm1", norm1, "norm2", norm2, "dropout1", dropout1, "dropout2", dropout2);
}

namespace {

// An encoder layer's residual blocks around `attend` (its self-attention,
// plain or over a key/value cache): pre-norm when norm_first, else post-norm.
template <class Attend>
Tensor encoder_block(TransformerEncoderLayer& l, const Tensor& src, Attend attend) {
  auto sa = [&](const Tensor& x) { return l.dropout1(attend(x)); };
  auto ff = [&](const Tensor& x) {
    return l.dropout2(l.linear2(l.dropout(activate(l.linear1(x), l.opts.activation))));
  };
  Tensor x = src;
  if (l.opts.norm_first) {
    x = x + sa(l.norm1(x));
    return x + ff(l.norm2(x));
  }
  x = l.norm1(x + sa(x));
  return l.norm2(x + ff(x));
}

}  // namespace

Tensor TransformerEncoderLayer::construct(const Tensor& src) { return construct(src, Kwargs{}); }

Tensor TransformerEncoderLayer::construct(const Tensor& src, const Kwargs& kwargs) {
  KwReader kw(kwargs, "TransformerEncoderLayer", {"src_mask", "src_key_padding_mask", "is_causal"});
  const Kwargs attn_kw =
      mha_kwargs(kw.tensor("src_mask"), kw.tensor("src_key_padding_mask"), kw.flag("is_causal"));
  return encoder_block(*this, src, [&](const Tensor& x) { return self_attn(x, x, x, attn_kw); });
}

Tensor TransformerEncoderLayer::forward_cached(const Tensor& src, KvCache& cache,
                                               const std::optional<Tensor>& write_at,
                                               const AttentionMasks& masks) {
  return encoder_block(*this, src, [&](const Tensor& x) {
    return self_attn.attention_cached(x, cache, write_at, masks);
  });
}

// ---------------------------------------------------------------- decoder layer

TransformerDecoderLayer::TransformerDecoderLayer(std::int64_t d, std::int64_t nhead,
                                                 TransformerLayerOptions o)
    : self_attn(d, nhead, attn_options(o, "TransformerDecoderLayer")),
      multihead_attn(d, nhead, attn_options(o, "TransformerDecoderLayer")),
      linear1(d, std::max<std::int64_t>(o.dim_feedforward, 1)),
      dropout(o.dropout),
      linear2(std::max<std::int64_t>(o.dim_feedforward, 1), d),
      norm1({d}, o.layer_norm_eps),
      norm2({d}, o.layer_norm_eps),
      norm3({d}, o.layer_norm_eps),
      dropout1(o.dropout),
      dropout2(o.dropout),
      dropout3(o.dropout),
      opts(std::move(o)) {
  register_cells("self_attn", self_attn, "multihead_attn", multihead_attn, "linear1", linear1,
                 "dropout", dropout, "linear2", linear2, "norm1", norm1, "norm2", norm2, "norm3",
                 norm3, "dropout1", dropout1, "dropout2", dropout2, "dropout3", dropout3);
}

Tensor TransformerDecoderLayer::construct(const Tensor& tgt, const Tensor& memory) {
  return construct(tgt, memory, Kwargs{});
}

Tensor TransformerDecoderLayer::construct(const Tensor& tgt, const Tensor& memory,
                                          const Kwargs& kwargs) {
  KwReader kw(kwargs, "TransformerDecoderLayer",
              {"tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
               "tgt_is_causal", "memory_is_causal"});
  const Kwargs self_kw = mha_kwargs(kw.tensor("tgt_mask"), kw.tensor("tgt_key_padding_mask"),
                                    kw.flag("tgt_is_causal"));
  const Kwargs cross_kw = mha_kwargs(kw.tensor("memory_mask"), kw.tensor("memory_key_padding_mask"),
                                     kw.flag("memory_is_causal"));
  auto sa = [&](const Tensor& x) { return dropout1(self_attn(x, x, x, self_kw)); };
  auto ca = [&](const Tensor& x) { return dropout2(multihead_attn(x, memory, memory, cross_kw)); };
  auto ff = [&](const Tensor& x) {
    return dropout3(linear2(dropout(activate(linear1(x), opts.activation))));
  };
  Tensor x = tgt;
  if (opts.norm_first) {
    x = x + sa(norm1(x));
    x = x + ca(norm2(x));
    return x + ff(norm3(x));
  }
  x = norm1(x + sa(x));
  x = norm2(x + ca(x));
  return norm3(x + ff(x));
}

// ---------------------------------------------------------------- stacks

namespace {

// Appends `n` layers made by `make` to `layers` (`api` names the stack in errors).
template <class Layer>
void fill_layers(CellList& layers, const std::function<std::shared_ptr<Layer>()>& make,
                 std::int64_t n, std::string_view api) {
  MS_CHECK(n >= 1, ValueError, api, ": num_layers must be >= 1, got ", n);
  MS_CHECK(static_cast<bool>(make), ValueError, api, ": the layer factory is empty");
  for (std::int64_t i = 0; i < n; ++i) {
    std::shared_ptr<Layer> l = make();
    MS_CHECK(l != nullptr, ValueError, api, ": the layer factory returned null for layer ", i);
    layers.append(std::move(l));
  }
}

// A new layer with the sizes, options, parameter values and mode of `src`
// (MindSpore's and PyTorch's deep copy of the layer given to a stack).
template <class Layer>
std::shared_ptr<Layer> copy_layer(const Layer& src) {
  auto l = std::make_shared<Layer>(src.self_attn.embed_dim, src.self_attn.num_heads, src.opts);
  const auto from = src.parameters_dict();
  const auto to = l->parameters_dict();
  MS_CHECK(from.size() == to.size(), ValueError, src.cls_name(), ": the layer to copy has ",
           from.size(), " parameters, a new layer of its sizes ", to.size());
  for (std::size_t i = 0; i < to.size(); ++i) {
    MS_CHECK(from[i].first == to[i].first, ValueError, src.cls_name(),
             ": the layer to copy has parameter '", from[i].first, "' where a new layer has '",
             to[i].first, "'");
    Parameter d = to[i].second;
    d.copy_(from[i].second);
  }
  l->set_train(src.training());
  return l;
}

// Layer `i` of `layers` as a Layer (IndexError, TypeError naming `api`).
template <class Layer>
Layer& layer_at(const CellList& layers, std::int64_t i, std::string_view api) {
  const auto n = static_cast<std::int64_t>(layers.size());
  MS_CHECK(i >= 0 && i < n, IndexError, api, "::layer: index ", i, " is out of range for ", n,
           " layers");
  auto* l = layers[i].as<Layer>();
  MS_CHECK(l != nullptr, TypeError, api, "::layer: layer ", i, " is a ",
           layers[i].cell().cls_name(), ", not a ", api, "Layer");
  return *l;
}

}  // namespace

TransformerEncoder::TransformerEncoder(const LayerFactory& make_layer, std::int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm_)
    : norm(std::move(norm_)) {
  fill_layers(layers, make_layer, num_layers, "TransformerEncoder");
  register_cells("layers", layers);
  if (norm) register_cells("norm", *norm);
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer,
                                       std::int64_t num_layers, std::shared_ptr<LayerNorm> norm_)
    : TransformerEncoder([&] { return copy_layer(layer); }, num_layers, std::move(norm_)) {}

Tensor TransformerEncoder::construct(const Tensor& src) {
  Tensor x = src;
  for (std::size_t i = 0; i < layers.size(); ++i) x = layer(static_cast<std::int64_t>(i))(x);
  return norm ? (*norm)(x) : x;
}

Tensor TransformerEncoder::construct(const Tensor& src, const Kwargs& kwargs) {
  Tensor x = src;
  for (std::size_t i = 0; i < layers.size(); ++i)
    x = layer(static_cast<std::int64_t>(i))(x, kwargs);
  return norm ? (*norm)(x) : x;
}

TransformerEncoderLayer& TransformerEncoder::layer(std::int64_t i) const {
  return layer_at<TransformerEncoderLayer>(layers, i, "TransformerEncoder");
}

TransformerDecoder::TransformerDecoder(const LayerFactory& make_layer, std::int64_t num_layers,
                                       std::shared_ptr<LayerNorm> norm_)
    : norm(std::move(norm_)) {
  fill_layers(layers, make_layer, num_layers, "TransformerDecoder");
  register_cells("layers", layers);
  if (norm) register_cells("norm", *norm);
}

TransformerDecoder::TransformerDecoder(const TransformerDecoderLayer& layer,
                                       std::int64_t num_layers, std::shared_ptr<LayerNorm> norm_)
    : TransformerDecoder([&] { return copy_layer(layer); }, num_layers, std::move(norm_)) {}

Tensor TransformerDecoder::construct(const Tensor& tgt, const Tensor& memory) {
  Tensor x = tgt;
  for (std::size_t i = 0; i < layers.size(); ++i)
    x = layer(static_cast<std::int64_t>(i))(x, memory);
  return norm ? (*norm)(x) : x;
}

Tensor TransformerDecoder::construct(const Tensor& tgt, const Tensor& memory,
                                     const Kwargs& kwargs) {
  Tensor x = tgt;
  for (std::size_t i = 0; i < layers.size(); ++i)
    x = layer(static_cast<std::int64_t>(i))(x, memory, kwargs);
  return norm ? (*norm)(x) : x;
}

TransformerDecoderLayer& TransformerDecoder::layer(std::int64_t i) const {
  return layer_at<TransformerDecoderLayer>(layers, i, "TransformerDecoder");
}

// ---------------------------------------------------------------- Gpt

namespace {

GptConfig checked(GptConfig c) {
  MS_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0,
           ValueError, "Gpt: vocab_size, block_size, n_layer, n_head and n_embd must be > 0, got ",
           c.vocab_size, ", ", c.block_size, ", ", c.n_layer, ", ", c.n_head, ", ", c.n_embd);
  MS_CHECK(c.n_embd % c.n_head == 0, ValueError, "Gpt: n_embd (", c.n_embd,
           ") must be divisible by n_head (", c.n_head, ")");
  return c;
}

}  // namespace

Gpt::Gpt(GptConfig c)
    : wte(checked(c).vocab_size, c.n_embd, init::Normal(0.02)),
      wpe(c.block_size, c.n_embd, init::Normal(0.02)),
      ln_f({c.n_embd}, 1e-5),
      config(c) {
  const TransformerLayerOptions block{.dim_feedforward = 4 * c.n_embd,
                                      .dropout = c.dropout,
                                      .activation = "gelu",
                                      .batch_first = true,
                                      .norm_first = true};
  for (std::int64_t i = 0; i < c.n_layer; ++i) {
    blocks_.push_back(std::make_shared<TransformerEncoderLayer>(c.n_embd, c.n_head, block));
    h.append(blocks_.back());
  }
  register_cells("wte", wte, "wpe", wpe, "h", h, "ln_f", ln_f);
}

Tensor Gpt::construct(const Tensor& ids) {
  MS_CHECK(ids.rank() == 2, ShapeError, "Gpt: ids must have shape [B, T], got ", ids.shape());
  MS_CHECK(dtype_is_int(ids.dtype()), TypeError, "Gpt: ids must be integers, got ", ids.dtype());
  const std::int64_t t = ids.dim(1);
  MS_CHECK(t <= config.block_size, ValueError, "Gpt: ids has ", t,
           " positions, more than block_size = ", config.block_size);
  // Positions 0..T-1 per row as a running count, not arange(0, T): arange's
  // length would be a constant of the trace and pin T under auto-dynamic
  // shapes (test_generation "Gpt under auto-dynamic shapes").
  const Tensor positions = cumsum(ids * 0 + 1, {.axis = 1}) - 1;
  Tensor x = wte(ids) + wpe(positions);
  const Kwargs causal{{"is_causal", true}};
  for (const auto& block : blocks_) x = (*block)(x, causal);
  return matmul(ln_f(x), wte.embedding_table.transpose(0, 1));
}

Tensor Gpt::forward_cached(const Tensor& ids, const Tensor& positions, std::vector<KvCache>& caches,
                           const std::optional<Tensor>& write_at, const AttentionMasks& masks) {
  constexpr std::string_view api = "Gpt::forward_cached";
  MS_CHECK(ids.rank() == 2 && positions.shape() == ids.shape(), ShapeError, api,
           ": ids and positions must both have shape [B, T], got ", ids.shape(), " and ",
           positions.shape());
  MS_CHECK(dtype_is_int(ids.dtype()) && dtype_is_int(positions.dtype()), TypeError, api,
           ": ids and positions must be integers, got ", ids.dtype(), " and ", positions.dtype());
  MS_CHECK(ids.dim(1) <= config.block_size, ValueError, api, ": ids has ", ids.dim(1),
           " positions, more than block_size = ", config.block_size);
  const auto n = static_cast<std::size_t>(config.n_layer);
  if (!write_at) caches.assign(n, KvCache{});
  MS_CHECK(caches.size() == n, ValueError, api, ": caches must hold n_layer = ", n,
           " layer caches, got ", caches.size());
  Tensor x = wte(ids) + wpe(positions);
  for (std::size_t i = 0; i < n; ++i) x = blocks_[i]->forward_cached(x, caches[i], write_at, masks);
  return matmul(ln_f(x), wte.embedding_table.transpose(0, 1));
}

}  // namespace ms::nn
