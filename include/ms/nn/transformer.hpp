// ms/nn/transformer.hpp — attention and transformer cells (MindSpore's
// nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer,
// nn.TransformerEncoder, nn.TransformerDecoder) and a small GPT.
//
// Stage: nn. Parameter and child names are MindSpore's (which follow
// PyTorch's), so a state dict maps by name: `in_proj_weight` [3E, E],
// `in_proj_bias` [3E], `out_proj.weight`, `self_attn.*`, `linear1.*`,
// `norm1.gamma` (MindSpore's LayerNorm names; PyTorch's are `weight`/`bias`).
// Every cell computes attention through one function, detail::attend, which
// runs the fused op ms::scaled_dot_product_attention (ms/ops/attention.hpp).
//
// Masks and flags are keyword arguments of the call (`ms::Kwargs`), named as
// in MindSpore's `construct`:
//
//   ms::nn::MultiheadAttention mha(64, 4, {.batch_first = true});
//   ms::Tensor y = mha(x, x, x, ms::Kwargs{{"key_padding_mask", pad}, {"is_causal", true}});
//
//   ms::nn::Gpt gpt({.vocab_size = 65, .block_size = 64});
//   ms::Tensor logits = gpt(ids);   // ids [B, T] int -> logits [B, T, 65]
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ms/core/std_parts.hpp"
#include "ms/nn/cell.hpp"
#include "ms/nn/layers.hpp"

namespace ms::nn {

namespace detail {

/// Scaled dot-product attention, the one place the cells of this header
/// compute it: ms::scaled_dot_product_attention(q, k, v, {mask, causal,
/// dropout}) with dropout only when `training`. Its rules: q [..., Tq, E],
/// k [..., Tk, E], v [..., Tk, Ev]; `mask` broadcasts to [..., Tq, Tk], Bool
/// (true = keep) or floating (added to the scores); `causal` keeps key j for
/// query i when j <= i + Tk - Tq (queries aligned to the end of the keys); a
/// query row that keeps no key gives 0 (PyTorch gives NaN). Errors are the
/// op's, naming `scaled_dot_product_attention` and the argument.
Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
              bool causal, double dropout, bool training);

}  // namespace detail

// ------------------------------------------------------------------ MultiheadAttention

/// The keys and values one self-attention layer keeps for incremental
/// decoding, per head: key and value [B, num_heads, S, head_dim] for S cache
/// slots (ms/nn/generation.hpp explains how GptGenerator fills them).
struct KvCache {
  /// The projected keys, [B, num_heads, S, head_dim].
  Tensor key;
  /// The projected values, [B, num_heads, S, head_dim].
  Tensor value;
};

/// MultiheadAttention's options, MindSpore's argument names:
/// `ms::nn::MultiheadAttention mha(64, 4, {.dropout = 0.1, .batch_first = true});`
struct MultiheadAttentionOptions {
  /// Dropout probability on the attention weights (training mode only), in [0, 1).
  double dropout = 0.0;
  /// Whether the input and output projections add a bias.
  bool has_bias = true;
  /// Not supported in ms (a ValueError when true).
  bool add_bias_kv = false;
  /// Not supported in ms (a ValueError when true).
  bool add_zero_attn = false;
  /// The key's feature size (default: embed_dim).
  std::optional<std::int64_t> kdim = {};
  /// The value's feature size (default: embed_dim).
  std::optional<std::int64_t> vdim = {};
  /// Inputs and output are [B, L, E] when true, [L, B, E] when false.
  bool batch_first = false;
  /// The parameters' dtype.
  DType dtype = float32;
};

/// The masks and flags of a MultiheadAttention call, as its keyword arguments
/// (MultiheadAttention::attention takes them typed).
struct AttentionMasks {
  /// [B, S] (or [S] unbatched): Bool, true = the key is ignored; or floating, added.
  std::optional<Tensor> key_padding_mask = {};
  /// [L, S] or [B * num_heads, L, S]: Bool, true = not attended; or floating, added.
  std::optional<Tensor> attn_mask = {};
  /// Query i attends to keys 0 .. i + S - L only (together with attn_mask when both are given).
  bool is_causal = false;
};

/// Multi-head attention (MindSpore's nn.MultiheadAttention): the query, key
/// and value are projected (in_proj_weight [3E, E] and in_proj_bias [3E] when
/// kdim == vdim == E, else q_proj_weight [E, E], k_proj_weight [E, kdim],
/// v_proj_weight [E, vdim]), split into num_heads heads of E / num_heads,
/// attended (detail::attend), joined and projected by out_proj (a Dense).
///
/// Call: `mha(query, key, value)` or `mha(query, key, value, kwargs)` with the
/// keyword arguments `key_padding_mask`, `attn_mask` (Tensors), `is_causal`
/// (bool), `need_weights` (only false is accepted: the attention weights
/// are not returned, the call returns the attention output alone) and
/// `average_attn_weights` (bool, no effect without weights). Shapes:
/// query [L, B, E] (batch_first: [B, L, E]; unbatched: [L, E]), key [S, B,
/// kdim], value [S, B, vdim]; output as the query.
class MultiheadAttention : public Cell<MultiheadAttention> {
 public:
  /// `num_heads` heads over `embed_dim` features (divisible by num_heads, ValueError otherwise).
  MultiheadAttention(std::int64_t embed_dim, std::int64_t num_heads,
                     MultiheadAttentionOptions opts = {});
  /// Attention without masks.
  Tensor construct(const Tensor& query, const Tensor& key, const Tensor& value);
  /// Attention with the masks and flags of `kwargs` (see the class).
  Tensor construct(const Tensor& query, const Tensor& key, const Tensor& value,
                   const Kwargs& kwargs);
  /// The attention with typed masks (what construct computes; no hooks run).
  Tensor attention(const Tensor& query, const Tensor& key, const Tensor& value,
                   const AttentionMasks& masks);
  /// Self-attention (query = key = value = `x`, batch_first [B, T, E], kdim
  /// = vdim = E) through a key/value cache. Without `write_at` (a prefill)
  /// `cache` becomes this call's keys and values ([B, H, T, head_dim]) and
  /// the call attends as attention(x, x, x, masks). With `write_at` (a 0-d
  /// integer tensor, usually an ms::mutable_ graph input) `x` is one position
  /// ([B, 1, E]): its key and value are written into cache slot `write_at`
  /// (ms::index_copy along the slots, write_at in [0, S): the cache keeps its shape, so a compiled
  /// graph serves every slot) and the query attends over all S slots;
  /// `masks.key_padding_mask` ([B, S]) must hide the slots not yet written.
  /// ValueError/ShapeError naming MultiheadAttention::attention_cached otherwise.
  Tensor attention_cached(const Tensor& x, KvCache& cache, const std::optional<Tensor>& write_at,
                          const AttentionMasks& masks);
  std::string extra_repr() const override;
  /// @{
  /// The packed projection [3E, E] and its bias [3E] (the bias undefined without has_bias).
  Parameter in_proj_weight, in_proj_bias;
  /// @}
  /// @{
  /// The separate projections when kdim or vdim differ from embed_dim (else undefined).
  Parameter q_proj_weight, k_proj_weight, v_proj_weight;
  /// @}
  /// The output projection [E] -> [E].
  Dense out_proj;
  /// @{
  /// The sizes given to the constructor; head_dim = embed_dim / num_heads.
  std::int64_t embed_dim, num_heads, head_dim, kdim, vdim;
  /// @}
  /// The options given to the constructor.
  MultiheadAttentionOptions opts;

 private:
  Tensor project(const Tensor& x, int which) const;  // 0: query, 1: key, 2: value
  // Self-attention's q, k and v from one product with the packed in_proj_weight
  // (PyTorch's packed in-projection), split into views of its [..., 3E] result:
  // one GEMM forward and one per gradient instead of three.
  std::array<Tensor, 3> project_packed(const Tensor& x) const;
};

// ------------------------------------------------------------------ transformer layers

/// The options of TransformerEncoderLayer and TransformerDecoderLayer
/// (MindSpore's argument names and defaults).
struct TransformerLayerOptions {
  /// The hidden size of the feed-forward block.
  std::int64_t dim_feedforward = 2048;
  /// Dropout probability (attention weights, and after each block; training mode only).
  double dropout = 0.1;
  /// "relu" or "gelu" (the exact, erf form).
  std::string activation = "relu";
  /// LayerNorm's epsilon.
  double layer_norm_eps = 1e-5;
  /// Inputs and output are [B, L, E] when true, [L, B, E] when false.
  bool batch_first = false;
  /// Pre-norm (LayerNorm before each block) when true, post-norm when false.
  bool norm_first = false;
};

/// A transformer encoder layer: self-attention then a feed-forward block,
/// each with a residual connection and a LayerNorm (after the residual, or
/// before the block with norm_first). Children as MindSpore's: self_attn,
/// linear1, dropout, linear2, norm1, norm2, dropout1, dropout2.
///
/// Call: `layer(src)` or `layer(src, kwargs)` with `src_mask` (the self
/// attention's attn_mask), `src_key_padding_mask` and `is_causal`.
class TransformerEncoderLayer : public Cell<TransformerEncoderLayer> {
 public:
  /// A layer over `d_model` features with `nhead` heads.
  TransformerEncoderLayer(std::int64_t d_model, std::int64_t nhead,
                          TransformerLayerOptions opts = {});
  /// The layer without masks.
  Tensor construct(const Tensor& src);
  /// The layer with the masks and flags of `kwargs` (see the class).
  Tensor construct(const Tensor& src, const Kwargs& kwargs);
  /// The layer with its self-attention through `cache`
  /// (MultiheadAttention::attention_cached; batch_first layers only).
  Tensor forward_cached(const Tensor& src, KvCache& cache, const std::optional<Tensor>& write_at,
                        const AttentionMasks& masks);
  /// The self-attention.
  MultiheadAttention self_attn;
  /// @{
  /// The feed-forward block: linear2(dropout(activation(linear1(x)))).
  Dense linear1;
  Dropout dropout;
  Dense linear2;
  /// @}
  /// @{
  /// The LayerNorms of the attention and feed-forward blocks.
  LayerNorm norm1, norm2;
  /// @}
  /// @{
  /// The dropouts after the attention and feed-forward blocks.
  Dropout dropout1, dropout2;
  /// @}
  /// The options given to the constructor.
  TransformerLayerOptions opts;
};

/// A transformer decoder layer: self-attention over the target, attention
/// over `memory` (the encoder's output), then a feed-forward block, each with
/// a residual connection and a LayerNorm (norm_first as the encoder layer).
/// Children as MindSpore's: self_attn, multihead_attn, linear1, dropout,
/// linear2, norm1, norm2, norm3, dropout1, dropout2, dropout3.
///
/// Call: `layer(tgt, memory)` or `layer(tgt, memory, kwargs)` with `tgt_mask`,
/// `memory_mask`, `tgt_key_padding_mask`, `memory_key_padding_mask`,
/// `tgt_is_causal` and `memory_is_causal`.
class TransformerDecoderLayer : public Cell<TransformerDecoderLayer> {
 public:
  /// A layer over `d_model` features with `nhead` heads.
  TransformerDecoderLayer(std::int64_t d_model, std::int64_t nhead,
                          TransformerLayerOptions opts = {});
  /// The layer without masks.
  Tensor construct(const Tensor& tgt, const Tensor& memory);
  /// The layer with the masks and flags of `kwargs` (see the class).
  Tensor construct(const Tensor& tgt, const Tensor& memory, const Kwargs& kwargs);
  /// @{
  /// The self-attention and the attention over memory.
  MultiheadAttention self_attn, multihead_attn;
  /// @}
  /// @{
  /// The feed-forward block: linear2(dropout(activation(linear1(x)))).
  Dense linear1;
  Dropout dropout;
  Dense linear2;
  /// @}
  /// @{
  /// The LayerNorms of the three blocks.
  LayerNorm norm1, norm2, norm3;
  /// @}
  /// @{
  /// The dropouts after the three blocks.
  Dropout dropout1, dropout2, dropout3;
  /// @}
  /// The options given to the constructor.
  TransformerLayerOptions opts;
};

// ------------------------------------------------------------------ stacked layers

/// A stack of `num_layers` encoder layers, then an optional LayerNorm
/// (MindSpore's and PyTorch's nn.TransformerEncoder). Children: `layers` (a
/// CellList, so the parameters are `layers.0.self_attn.in_proj_weight`, ...)
/// and `norm` when given (`norm.gamma`, `norm.beta`).
///
/// Call: `enc(src)` or `enc(src, kwargs)`: every layer gets the same keyword
/// arguments (`src_mask`, `src_key_padding_mask`, `is_causal`).
///   ms::nn::TransformerEncoder enc(ms::nn::TransformerEncoderLayer(64, 4), 6,
///                                  std::make_shared<ms::nn::LayerNorm>(std::vector<std::int64_t>{64}));
class TransformerEncoder : public Cell<TransformerEncoder> {
 public:
  /// Makes one new layer (a new cell on each call).
  using LayerFactory = std::function<std::shared_ptr<TransformerEncoderLayer>()>;
  /// `num_layers` layers made by `make_layer`, then `norm` (none when null).
  /// ValueError when num_layers < 1 or the factory returns null.
  TransformerEncoder(const LayerFactory& make_layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  /// `num_layers` copies of `layer` (its sizes, options and parameter values:
  /// as MindSpore's and PyTorch's deep copies, every layer starts from the
  /// same weights, which are not shared), then `norm`.
  TransformerEncoder(const TransformerEncoderLayer& layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  /// The layers in order, then the norm.
  Tensor construct(const Tensor& src);
  /// The layers with the keyword arguments `kwargs`, then the norm.
  Tensor construct(const Tensor& src, const Kwargs& kwargs);
  /// Layer `i` (IndexError out of range).
  TransformerEncoderLayer& layer(std::int64_t i) const;
  /// The layers, registered as "layers".
  CellList layers;
  /// The LayerNorm after the last layer (null: none), registered as "norm".
  std::shared_ptr<LayerNorm> norm;
};

/// A stack of `num_layers` decoder layers, then an optional LayerNorm
/// (MindSpore's and PyTorch's nn.TransformerDecoder); children and names as
/// TransformerEncoder's (`layers.0.multihead_attn.in_proj_weight`, `norm.gamma`).
///
/// Call: `dec(tgt, memory)` or `dec(tgt, memory, kwargs)`: every layer gets
/// the same memory and keyword arguments (`tgt_mask`, `memory_mask`,
/// `tgt_key_padding_mask`, `memory_key_padding_mask`, `tgt_is_causal`,
/// `memory_is_causal`).
class TransformerDecoder : public Cell<TransformerDecoder> {
 public:
  /// Makes one new layer (a new cell on each call).
  using LayerFactory = std::function<std::shared_ptr<TransformerDecoderLayer>()>;
  /// `num_layers` layers made by `make_layer`, then `norm` (none when null).
  /// ValueError when num_layers < 1 or the factory returns null.
  TransformerDecoder(const LayerFactory& make_layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  /// `num_layers` copies of `layer` (sizes, options, parameter values), then `norm`.
  TransformerDecoder(const TransformerDecoderLayer& layer, std::int64_t num_layers,
                     std::shared_ptr<LayerNorm> norm = nullptr);
  /// The layers in order, then the norm.
  Tensor construct(const Tensor& tgt, const Tensor& memory);
  /// The layers with the keyword arguments `kwargs`, then the norm.
  Tensor construct(const Tensor& tgt, const Tensor& memory, const Kwargs& kwargs);
  /// Layer `i` (IndexError out of range).
  TransformerDecoderLayer& layer(std::int64_t i) const;
  /// The layers, registered as "layers".
  CellList layers;
  /// The LayerNorm after the last layer (null: none), registered as "norm".
  std::shared_ptr<LayerNorm> norm;
};

// ------------------------------------------------------------------ GPT

/// The sizes of a Gpt: `ms::nn::Gpt gpt({.vocab_size = 65, .block_size = 64, .n_layer = 4});`.
struct GptConfig {
  /// The number of token ids.
  std::int64_t vocab_size = 0;
  /// The longest sequence (the number of learned positions).
  std::int64_t block_size = 0;
  /// The number of transformer blocks.
  std::int64_t n_layer = 2;
  /// The number of attention heads (divides n_embd).
  std::int64_t n_head = 2;
  /// The embedding size.
  std::int64_t n_embd = 32;
  /// Dropout probability in the blocks (training mode only).
  double dropout = 0.0;
};

/// A small decoder-only language model: token and learned position
/// embeddings (wte, wpe), n_layer pre-norm blocks of causal self-attention
/// and a GELU feed-forward of 4 * n_embd (TransformerEncoderLayer with
/// norm_first, batch_first, under CellList `h`), a final LayerNorm ln_f, and
/// logits from the token table (tied: logits = ln_f(x) @ wte^T).
class Gpt : public Cell<Gpt> {
 public:
  /// A model of the sizes in `config` (ValueError for sizes <= 0 or n_head not dividing n_embd).
  explicit Gpt(GptConfig config);
  /// Logits [B, T, vocab_size] for token ids [B, T] (integers, T <= block_size).
  Tensor construct(const Tensor& ids);
  /// Logits [B, T, vocab_size] through per-layer key/value caches (one per
  /// block, see TransformerEncoderLayer::forward_cached): token ids [B, T]
  /// at positions `positions` ([B, T] integers in [0, block_size), the rows
  /// of the position table). Prefill (no `write_at`): `caches` is resized to
  /// n_layer and filled with the keys and values of all T positions, under
  /// `masks`. Increment (`write_at` a 0-d integer tensor, T = 1): each
  /// layer's slot `write_at` gets the new key and value.
  Tensor forward_cached(const Tensor& ids, const Tensor& positions, std::vector<KvCache>& caches,
                        const std::optional<Tensor>& write_at, const AttentionMasks& masks);
  /// @{
  /// The token table [vocab_size, n_embd] and the position table [block_size, n_embd].
  Embedding wte, wpe;
  /// @}
  /// The blocks "0", "1", ...
  CellList h;
  /// The final LayerNorm.
  LayerNorm ln_f;
  /// The sizes given to the constructor.
  GptConfig config;

 private:
  std::vector<std::shared_ptr<TransformerEncoderLayer>> blocks_;
};

}  // namespace ms::nn
