// ms/kernels/attention.hpp — the fused CPU kernels of scaled dot-product attention.
//
// Stage: kernels (called by src/ops/attention.cpp after the op's `infer` has
// validated everything; these functions do no user-facing checks and never
// throw inside a parallel region). The forward pass walks each (batch, block
// of query rows) over blocks of keys with an online softmax (running row
// maximum and sum), so the scores live in a block x block buffer of the chunk
// and never as a [batch, Tq, Tk] tensor; it also writes each row's
// logsumexp. The backward pass recomputes the probabilities block by block
// from that logsumexp (the flash-attention backward): one pass over (batch,
// key block) accumulates dK and dV, another over (batch, query block)
// accumulates dQ, so every output block is owned by one chunk and summed in a
// fixed order: results are bitwise the same for any thread count. When one
// problem's dS fits in 1 MiB and there are 8 problems or more, a chunk owns
// whole problems instead: its key blocks keep dS, and dQ is summed from it
// without computing the probabilities again.
#pragma once

#include <cstdint>

#include "ms/core/tensor.hpp"

namespace ms::kernels {

/// Keys per block of the kernels below (the forward's online softmax steps
/// over blocks of this many keys; the backward owns dK and dV by such
/// blocks); a key block a Bool mask hides from every row of a query block is
/// skipped without reading its keys or values, and the forward does not read
/// the hidden tail of a block either (the unused slots of a decoding cache). bm_attention (causal,
/// forward + backward, Zen 4 VM, 1 thread), 64 / 128 / 256 keys: T = 128
/// 1.58 / 1.52 / 1.52 ms, T = 512 20.4 / 19.5 / 18.9 ms, T = 1024 95.7 ms at
/// 128, 89.8 at 256; 128 keeps the skipping of masked keys finer.
inline constexpr std::int64_t kAttentionKeyBlock = 128;

/// What the attention kernels compute: `batch` independent problems (the
/// flattened leading dims) of q [Tq, E], k [Tk, E], v [Tk, Ev].
struct AttentionProblem {
  /// The number of (batch, head) problems.
  std::int64_t batch = 0;
  /// @{
  /// The sizes: query rows, key rows, the q/k feature size, the v feature size.
  std::int64_t tq = 0, tk = 0, e = 0, ev = 0;
  /// @}
  /// The factor applied to q k^T.
  double scale = 1;
  /// Query row i sees keys 0 .. i + (tk - tq) only.
  bool causal = false;
  /// Undefined, or the mask as a (strided, possibly stride-0) view of shape
  /// [batch dims..., Tq, Tk]: Bool (true keeps) or the inputs' dtype (added
  /// to the scaled scores).
  Tensor mask = {};
};

/// out [batch, Tq, Ev] = softmax(scale * q k^T + mask) v and lse [batch, Tq]
/// = the rows' logsumexp, for float64, float32, bfloat16 or float16 q, k, v
/// and out of that dtype; lse is float64 for float64, else float32. q, k, v
/// and out are views of shape [batch dims..., rows, cols] with any strides on
/// the other dims but dense rows (stride 1 along cols: the heads of a [B, T,
/// H, D] tensor seen as [B, H, T, D]); lse is dense.
/// bfloat16 and float16 blocks are converted to float32 as they are loaded,
/// everything is computed in float32 and out is rounded as it is stored. A
/// row that keeps no key gets out 0 and lse -inf.
void attention_forward(const AttentionProblem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& out, const Tensor& lse);

/// The gradients dq, dk, dv (the shapes of q, k, v) given dout [batch,
/// Tq, Ev], the forward's lse, and delta [batch, Tq] = rowsum(dout * out)
/// minus the gradient of lse: dS = P * (dout v^T - delta), dq = scale dS k,
/// dk = scale dS^T q, dv = P^T dout. q, k, v, dout, dq, dk and dv may be
/// strided as in attention_forward, lse and delta are dense; dq, dk, dv and
/// dout of q's dtype, lse and delta of the forward's lse dtype (computed as
/// the forward).
void attention_backward(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& dout, const Tensor& lse, const Tensor& delta,
                        const Tensor& dq, const Tensor& dk, const Tensor& dv);

/// The gradient of a floating mask: dS = P * (dout v^T - delta) summed over
/// the axes the mask broadcasts along. `dmask` is a view of shape [batch
/// dims..., Tq, Tk] of a dense tensor of q's dtype with stride 0 on the
/// broadcast axes; each of its elements is written once, the sum taken over
/// batch entries, rows and key blocks in a fixed order (bitwise the same for
/// any thread count). The scores are recomputed block by block, as in
/// attention_backward; nothing of size [batch, Tq, Tk] is allocated.
void attention_mask_backward(const AttentionProblem& p, const Tensor& q, const Tensor& k,
                             const Tensor& v, const Tensor& dout, const Tensor& lse,
                             const Tensor& delta, const Tensor& dmask);

}  // namespace ms::kernels
