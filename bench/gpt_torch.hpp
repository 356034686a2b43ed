// bench/gpt_torch.hpp — the LibTorch twin of ms::nn::Gpt (ms/nn/transformer.hpp)
// for bench/char_lm_torch.cpp and bench/bm_train.cpp: the same model, written
// with plain LibTorch tensor ops, its parameters loaded by name from a
// safetensors file of ms's (char_lm --save-init, or char_lm's checkpoint) or
// from an ms model's state_dict(); with the loss and clipping rule of
// char_lm's step (gpt_loss, clip_grad_norm).
//
// The model, as ms's: token and learned position embeddings (wte, wpe);
// n_layer pre-norm blocks x += attn(norm1(x)); x += ff(norm2(x)), the
// attention causal self-attention over n_head heads from the packed
// projection in_proj_weight [3E, E] / in_proj_bias [3E] (query, key, value
// rows in that order) and out_proj, written as the naive composition
// softmax(q k^T / sqrt(head_dim) + causal -inf) v; the feed-forward
// linear2(gelu(linear1(x))) with exact (erf) gelu and 4 E hidden units; the
// LayerNorms with eps 1e-5; a final LayerNorm ln_f and logits tied to the
// token table (ln_f(x) wte^T). No dropout (char_lm's default is 0).
//
// Names are ms's: wte.embedding_table, wpe.embedding_table,
// h.<i>.self_attn.in_proj_weight, h.<i>.self_attn.in_proj_bias,
// h.<i>.self_attn.out_proj.weight/bias, h.<i>.linear1.weight/bias,
// h.<i>.linear2.weight/bias, h.<i>.norm1.gamma/beta, h.<i>.norm2.gamma/beta,
// ln_f.gamma/beta. Loading checks that every one is present with its shape
// and float32, and that the file holds no other model entry (char_lm's
// checkpoint entries `optimizer.*` and `rng.*` are skipped).
//
//   auto f = ms::io::load_safetensors("init.safetensors");
//   bench::GptTorch gpt(bench::gpt_config(f.metadata, "init.safetensors"));
//   gpt.load(f, "init.safetensors");
//   torch::Tensor logits = gpt.forward(ids);          // ids int64 [B, T]
//   std::vector<std::int64_t> next = gpt.generate_greedy(prompt, 256);
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "ms/core/error.hpp"
#include "ms/io/safetensors.hpp"
#include "torch_convert.hpp"

namespace bench {

/// The sizes of a GptTorch (ms::nn::GptConfig's, without dropout).
struct GptTorchConfig {
  /// The number of token ids.
  std::int64_t vocab_size = 0;
  /// The longest sequence (the rows of the position table, the cache slots).
  std::int64_t block_size = 0;
  /// The number of blocks.
  std::int64_t n_layer = 0;
  /// The number of attention heads.
  std::int64_t n_head = 0;
  /// The embedding size.
  std::int64_t n_embd = 0;
};

/// `text` as a number of type T (all of it); ms::ValueError naming `what` otherwise.
template <class T>
T parse_number(const std::string& text, const std::string& what) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [p, ec] = std::from_chars(text.data(), end, v);
  MS_CHECK(ec == std::errc() && p == end && !text.empty(), ms::ValueError, what, ": '", text,
           "' is not a number");
  return v;
}

/// The sizes from a safetensors file's metadata as char_lm writes them
/// (vocab_size, block_size, n_layer, n_head, n_embd); ms::ValueError naming
/// `path` and the missing entry otherwise.
inline GptTorchConfig gpt_config(const std::map<std::string, std::string>& meta,
                                 const std::string& path) {
  auto get = [&](const char* key) {
    auto it = meta.find(key);
    MS_CHECK(it != meta.end(), ms::ValueError, "GptTorch: ", path, " has no metadata entry '", key,
             "' (expected a file written by char_lm)");
    return parse_number<std::int64_t>(it->second, "GptTorch: " + path + " metadata '" + key + "'");
  };
  GptTorchConfig c{get("vocab_size"), get("block_size"), get("n_layer"), get("n_head"),
                   get("n_embd")};
  MS_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0 &&
               c.n_embd % c.n_head == 0,
           ms::ValueError, "GptTorch: ", path, ": sizes must be > 0 with n_head dividing n_embd, ",
           "got vocab_size ", c.vocab_size, ", block_size ", c.block_size, ", n_layer ", c.n_layer,
           ", n_head ", c.n_head, ", n_embd ", c.n_embd);
  return c;
}

/// The GPT twin (see the header comment).
class GptTorch {
 public:
  /// One block's key/value cache: key and value [1, n_head, block_size, head_dim].
  struct KvCache {
    /// The keys of the slots written so far (and zeros after).
    torch::Tensor key;
    /// The values of the slots written so far (and zeros after).
    torch::Tensor value;
  };

  /// A model of the sizes in `c`, its parameters zeros until load().
  explicit GptTorch(GptTorchConfig c) : config(c), head_dim_(c.n_embd / c.n_head) {
    const std::int64_t e = c.n_embd;
    add("wte.embedding_table", {c.vocab_size, e});
    add("wpe.embedding_table", {c.block_size, e});
    for (std::int64_t i = 0; i < c.n_layer; ++i) {
      const std::string h = "h." + std::to_string(i) + ".";
      add(h + "self_attn.in_proj_weight", {3 * e, e});
      add(h + "self_attn.in_proj_bias", {3 * e});
      add(h + "self_attn.out_proj.weight", {e, e});
      add(h + "self_attn.out_proj.bias", {e});
      add(h + "linear1.weight", {4 * e, e});
      add(h + "linear1.bias", {4 * e});
      add(h + "linear2.weight", {e, 4 * e});
      add(h + "linear2.bias", {e});
      for (const char* n : {"norm1.", "norm2."}) {
        add(h + n + "gamma", {e});
        add(h + n + "beta", {e});
      }
    }
    add("ln_f.gamma", {e});
    add("ln_f.beta", {e});
  }

  /// Copies every parameter from `file` (read from `path`, named in
  /// messages); ms::ValueError naming the parameter when one is missing or
  /// the file holds a model entry this model lacks, ms::ShapeError or
  /// ms::TypeError naming it when its shape or dtype differs.
  void load(const ms::io::SafetensorsFile& file, const std::string& path) {
    std::set<std::string> seen;
    for (const auto& [name, t] : file.tensors) {
      if (name.rfind("optimizer.", 0) == 0 || name.rfind("rng.", 0) == 0) continue;
      auto it = index_.find(name);
      MS_CHECK(it != index_.end(), ms::ValueError, "GptTorch::load: ", path, " holds '", name,
               "', which is not a parameter of the model");
      torch::Tensor& p = params_[it->second].second;
      const std::vector<std::int64_t> shape(t.shape().begin(), t.shape().end());
      MS_CHECK(shape == p.sizes().vec(), ms::ShapeError, "GptTorch::load: ", path, ": '", name,
               "' has shape ", t.shape(), ", expected ", ms::Shape(p.sizes().vec()));
      MS_CHECK(t.dtype() == ms::float32, ms::TypeError, "GptTorch::load: ", path, ": '", name,
               "' has dtype ", t.dtype(), ", expected Float32");
      torch::NoGradGuard g;
      p.copy_(to_torch(t));
      seen.insert(name);
    }
    for (const auto& [name, p] : params_)
      MS_CHECK(seen.count(name) == 1, ms::ValueError, "GptTorch::load: ", path, " has no entry '",
               name, "' (a parameter of the model)");
  }

  /// The parameters in ms's order (trainable_params()), with their names.
  const std::vector<std::pair<std::string, torch::Tensor>>& named_parameters() const {
    return params_;
  }
  /// The parameters in ms's order.
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> out;
    for (const auto& np : params_) out.push_back(np.second);
    return out;
  }

  /// Logits [B, T, vocab_size] for token ids [B, T] (int64, T <= block_size).
  torch::Tensor forward(const torch::Tensor& ids) const {
    const std::int64_t t = ids.size(1);
    torch::Tensor x =
        torch::embedding(p("wte.embedding_table"), ids) + p("wpe.embedding_table").narrow(0, 0, t);
    const torch::Tensor causal =
        torch::ones({t, t}, torch::TensorOptions().dtype(torch::kBool)).triu(1);
    for (std::int64_t i = 0; i < config.n_layer; ++i) {
      x = block(i, x, [&](const std::string& h, const torch::Tensor& y) {
        auto [q, k, v] = qkv(h, y);
        return attend(h, q, k, v, causal);
      });
    }
    return logits(x);
  }

  /// Eager incremental forward: logits [1, T, vocab_size] of ids [1, T] at
  /// positions start .. start + T - 1, whose keys and values are written
  /// into slots start .. start + T - 1 of `caches` (allocated, one per block,
  /// when start is 0); each position attends to the slots up to its own.
  /// No gradients are recorded.
  torch::Tensor forward_cached(const torch::Tensor& ids, std::int64_t start,
                               std::vector<KvCache>& caches) const {
    torch::NoGradGuard g;
    const std::int64_t t = ids.size(1), n = start + t;
    if (start == 0) {
      caches.assign(static_cast<std::size_t>(config.n_layer), {});
      for (KvCache& c : caches) {
        c.key = torch::zeros({1, config.n_head, config.block_size, head_dim_});
        c.value = torch::zeros_like(c.key);
      }
    }
    torch::Tensor x = torch::embedding(p("wte.embedding_table"), ids) +
                      p("wpe.embedding_table").narrow(0, start, t);
    // Query i (position start + i) keeps slots j <= start + i.
    const torch::Tensor mask =
        t == 1 ? torch::Tensor()
               : torch::ones({t, n}, torch::TensorOptions().dtype(torch::kBool)).triu(start + 1);
    for (std::int64_t i = 0; i < config.n_layer; ++i) {
      KvCache& c = caches[static_cast<std::size_t>(i)];
      x = block(i, x, [&](const std::string& h, const torch::Tensor& y) {
        auto [q, k, v] = qkv(h, y);
        c.key.narrow(2, start, t).copy_(k);
        c.value.narrow(2, start, t).copy_(v);
        return attend(h, q, c.key.narrow(2, 0, n), c.value.narrow(2, 0, n), mask);
      });
    }
    return logits(x);
  }

  /// `tokens` greedy tokens after `prompt` (1 to block_size ids) through
  /// forward_cached, with GptGenerator's rule when the block_size cache
  /// slots are full: restart from the last block_size / 2 tokens (at least
  /// 1), prefilled again. The most likely token is the first maximum, as
  /// GptGenerator's.
  std::vector<std::int64_t> generate_greedy(std::vector<std::int64_t> prompt,
                                            std::int64_t tokens) const {
    const std::int64_t s = config.block_size, keep = std::max<std::int64_t>(s / 2, 1);
    MS_CHECK(!prompt.empty() && static_cast<std::int64_t>(prompt.size()) <= s, ms::ValueError,
             "GptTorch::generate_greedy: prompt must hold 1 to block_size = ", s, " tokens, got ",
             prompt.size());
    std::vector<KvCache> caches;
    std::vector<std::int64_t> ctx = std::move(prompt), out;
    auto prefill = [&] {
      const torch::Tensor ids = torch::tensor(ctx, torch::kInt64).unsqueeze(0);
      return forward_cached(ids, 0, caches).select(1, -1);
    };
    torch::Tensor last = prefill();
    for (std::int64_t i = 0; i < tokens; ++i) {
      const torch::Tensor row = last.reshape({-1}).contiguous();
      const float* l = row.data_ptr<float>();
      const std::int64_t next = std::max_element(l, l + row.numel()) - l;
      out.push_back(next);
      ctx.push_back(next);
      if (i + 1 == tokens) break;
      const auto used = static_cast<std::int64_t>(ctx.size()) - 1;
      if (used == s) {
        ctx.erase(ctx.begin(), ctx.end() - keep);
        last = prefill();
        continue;
      }
      last = forward_cached(torch::tensor({next}, torch::kInt64).unsqueeze(0), used, caches)
                 .select(1, -1);
    }
    return out;
  }

  /// The sizes given to the constructor.
  GptTorchConfig config;

 private:
  void add(const std::string& name, std::vector<std::int64_t> shape) {
    index_[name] = params_.size();
    params_.emplace_back(name, torch::zeros(shape).requires_grad_(true));
  }
  const torch::Tensor& p(const std::string& name) const { return params_[index_.at(name)].second; }

  // Block i: x + attn(norm1(x)), then + ff(norm2(x)); `attn(prefix, y)` is
  // the self-attention of the normalized y (plain or through a cache).
  template <class Attn>
  torch::Tensor block(std::int64_t i, const torch::Tensor& x0, Attn attn) const {
    const std::string h = "h." + std::to_string(i) + ".";
    torch::Tensor x = x0 + attn(h, norm(h + "norm1.", x0));
    const torch::Tensor hidden = torch::gelu(
        torch::linear(norm(h + "norm2.", x), p(h + "linear1.weight"), p(h + "linear1.bias")));
    return x + torch::linear(hidden, p(h + "linear2.weight"), p(h + "linear2.bias"));
  }
  torch::Tensor norm(const std::string& prefix, const torch::Tensor& x) const {
    return torch::layer_norm(x, {config.n_embd}, p(prefix + "gamma"), p(prefix + "beta"), 1e-5);
  }
  // The query, key and value of y [B, T, E], each [B, H, T, head_dim].
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> qkv(const std::string& h,
                                                              const torch::Tensor& y) const {
    const torch::Tensor all =
        torch::linear(y, p(h + "self_attn.in_proj_weight"), p(h + "self_attn.in_proj_bias"));
    auto heads = [&](const torch::Tensor& z) {
      return z.reshape({y.size(0), y.size(1), config.n_head, head_dim_}).transpose(1, 2);
    };
    auto parts = all.chunk(3, -1);
    return {heads(parts[0]), heads(parts[1]), heads(parts[2])};
  }
  // softmax(q k^T / sqrt(head_dim), hidden where `mask` is true) v, joined and projected.
  torch::Tensor attend(const std::string& h, const torch::Tensor& q, const torch::Tensor& k,
                       const torch::Tensor& v, const torch::Tensor& mask) const {
    torch::Tensor scores =
        torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
    if (mask.defined()) scores = scores.masked_fill(mask, -INFINITY);
    const torch::Tensor o = torch::matmul(torch::softmax(scores, -1), v);
    return torch::linear(o.transpose(1, 2).reshape({q.size(0), q.size(2), config.n_embd}),
                         p(h + "self_attn.out_proj.weight"), p(h + "self_attn.out_proj.bias"));
  }
  torch::Tensor logits(const torch::Tensor& x) const {
    return torch::matmul(norm("ln_f.", x), p("wte.embedding_table").transpose(0, 1));
  }

  std::int64_t head_dim_;
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::map<std::string, std::size_t> index_;
};

/// A LibTorch view of an int64 ms tensor (which must outlive the view).
inline torch::Tensor int64_view(const ms::Tensor& t) {
  std::vector<std::int64_t> sizes(t.shape().begin(), t.shape().end());
  return torch::from_blob(const_cast<std::byte*>(t.raw_data()), sizes, torch::kInt64);
}

/// The mean cross-entropy (nats) of gpt's logits for token ids x [B, T]
/// against the next tokens y [B, T] (ms int64 batches), as char_lm's loss.
inline torch::Tensor gpt_loss(const GptTorch& gpt, const ms::Tensor& x, const ms::Tensor& y) {
  const torch::Tensor logits = gpt.forward(int64_view(x));
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                              int64_view(y).reshape({-1}));
}

/// ms::nn::clip_grad_norm's rule, in place: the gradients times
/// max_norm / (norm + 1e-6) when their global 2-norm exceeds max_norm.
inline void clip_grad_norm(const std::vector<torch::Tensor>& params, double max_norm) {
  std::vector<torch::Tensor> norms;
  for (const auto& p : params)
    if (p.grad().defined()) norms.push_back(p.grad().norm());
  if (norms.empty()) return;
  const double total = torch::stack(norms).norm().item<double>();
  if (!(total > max_norm)) return;
  const double scale = max_norm / (total + 1e-6);
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().mul_(scale);
}

}  // namespace bench
