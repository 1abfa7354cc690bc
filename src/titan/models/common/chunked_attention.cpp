#include "titan/models/common/chunked_attention.h"

#include <algorithm>

namespace titan::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// x: [..., d] -> [..., width], zeros appended (the fused kernel wants values as wide as keys).
torch::Tensor widen(const torch::Tensor& x, int64_t width) {
  return x.size(-1) == width ? x : torch::constant_pad_nd(x, {0, width - x.size(-1)});
}

// Chunk i of t [B, heads, n L, ...] along the sequence: [B, heads, L, ...].
torch::Tensor chunk(const torch::Tensor& t, size_t i, int64_t len) {
  return t.narrow(2, static_cast<int64_t>(i) * len, len);
}

// One pair: q [B, H, Lq, Dh], k [B, Hkv, Lk, Dh], v [B, Hkv, Lk, Dv]. `diagonal`: the pair on
// the diagonal (Lq == Lk, query i sees keys 0..i); otherwise every key is visible.
PartialAttention attend_pair(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             double scale, bool diagonal) {
  const int64_t dh = q.size(-1), dv = v.size(-1);
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(
      q, k, widen(v, dh), /*dropout_p=*/0.0, /*is_causal=*/diagonal, /*attn_mask=*/{}, scale);
  // out: [B, H, Lq, Dh]; lse: [B, H, Lq]
  const auto acc = accumulate_dtype(q);
  return {out.narrow(-1, 0, dv).to(acc), lse.to(acc)};
}

// acc becomes the attention over acc's keys and part's: lse = log(e^lse_a + e^lse_b), out =
// e^(lse_a - lse) out_a + e^(lse_b - lse) out_b. An empty acc becomes part.
void merge(PartialAttention& acc, const PartialAttention& part) {
  if (!acc.out.defined()) {
    acc = part;
    return;
  }
  auto lse = torch::logaddexp(acc.lse, part.lse);  // [B, H, Lq]
  acc.out = acc.out * (acc.lse - lse).exp().unsqueeze(-1) +
            part.out * (part.lse - lse).exp().unsqueeze(-1);  // [B, H, Lq, Dv]
  acc.lse = lse;
}

// Gradients of one pair given the query chunk's upstream gradient dout [B, H, Lq, Dv], its
// output over all keys [B, H, Lq, Dv] (q's dtype) and log-sum-exp [B, H, Lq]: the fused
// kernel's backward, exact per pair because its probabilities use the whole row's lse.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> attend_pair_backward(
    const torch::Tensor& dout, const torch::Tensor& q, const torch::Tensor& k,
    const torch::Tensor& v, const torch::Tensor& out, const torch::Tensor& lse, double scale,
    bool diagonal) {
  const int64_t dh = q.size(-1), dv = v.size(-1);
  // Zero columns added to the values, the output and its gradient change no row sum.
  auto [dq, dk, dvw] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
      widen(dout, dh).contiguous(), q, k, widen(v, dh), widen(out, dh).contiguous(),
      lse.contiguous(), /*dropout_p=*/0.0, /*is_causal=*/diagonal, /*attn_mask=*/{}, scale);
  return {dq, dk, dvw.narrow(-1, 0, dv)};  // [B, H, Lq, Dh], [B, Hkv, Lk, Dh], [B, Hkv, Lk, Dv]
}

void check_shapes(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                  const ChunkLayout& layout) {
  const auto nq = static_cast<int64_t>(layout.query_chunks.size());
  const auto nk = static_cast<int64_t>(layout.key_chunks.size());
  const int64_t len = layout.chunk_len;
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && len > 0 && q.size(2) == nq * len &&
                  k.size(2) == nk * len && v.sizes().slice(0, 3) == k.sizes().slice(0, 3) &&
                  q.size(1) % k.size(1) == 0 && q.size(-1) == k.size(-1) &&
                  v.size(-1) <= q.size(-1),
              "chunked attention: q [B, H, ", nq, " x ", len, ", Dh], k [B, Hkv, ", nk, " x ", len,
              ", Dh], v [B, Hkv, ", nk, " x ", len, ", Dv <= Dh]; got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(q.device().is_cpu(),
              "chunked attention (context parallelism) runs on the CPU's fused kernel; got ",
              q.device());
}

struct ChunkedCausalAttention : public torch::autograd::Function<ChunkedCausalAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale,
                               std::vector<int64_t> query_chunks, std::vector<int64_t> key_chunks,
                               int64_t len) {
    const ChunkLayout layout{query_chunks, key_chunks, len};
    std::vector<PartialAttention> acc(query_chunks.size());
    attend_chunks(acc, q, k, v, scale, layout);
    auto done = finish_chunks(acc, q.scalar_type());
    ctx->save_for_backward({q, k, v, done.out, done.lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["query_chunks"] = query_chunks;
    ctx->saved_data["key_chunks"] = key_chunks;
    ctx->saved_data["len"] = len;
    return done.out;  // [B, H, nq L, Dv]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    const ChunkLayout layout{ctx->saved_data["query_chunks"].toIntVector(),
                             ctx->saved_data["key_chunks"].toIntVector(),
                             ctx->saved_data["len"].toInt()};
    const auto acc = q.options().dtype(accumulate_dtype(q));
    auto dq = torch::zeros(q.sizes(), acc), dk = torch::zeros(k.sizes(), acc),
         dv = torch::zeros(v.sizes(), acc);
    attend_chunks_backward(dq, dk, dv, grads[0], q, k, v, {saved[3], saved[4]},
                           ctx->saved_data["scale"].toDouble(), layout);
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), torch::Tensor(),
            torch::Tensor(),        torch::Tensor(),        torch::Tensor()};
  }
};

}  // namespace

torch::ScalarType accumulate_dtype(const torch::Tensor& t) {
  return t.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

void attend_chunks(std::vector<PartialAttention>& acc, const torch::Tensor& q,
                   const torch::Tensor& k, const torch::Tensor& v, double scale,
                   const ChunkLayout& layout) {
  check_shapes(q, k, v, layout);
  const int64_t len = layout.chunk_len;
  for (size_t i = 0; i < layout.query_chunks.size(); ++i) {
    for (size_t j = 0; j < layout.key_chunks.size(); ++j) {
      if (layout.key_chunks[j] > layout.query_chunks[i]) continue;  // future keys
      merge(acc[i], attend_pair(chunk(q, i, len), chunk(k, j, len), chunk(v, j, len), scale,
                                layout.key_chunks[j] == layout.query_chunks[i]));
    }
  }
}

PartialAttention finish_chunks(const std::vector<PartialAttention>& acc, torch::ScalarType dtype) {
  std::vector<torch::Tensor> outs, lses;
  for (const auto& a : acc) {
    TORCH_CHECK(a.out.defined(), "chunked attention: a query chunk saw none of its keys");
    outs.push_back(a.out.to(dtype));  // [B, H, L, Dv]
    lses.push_back(a.lse);            // [B, H, L]
  }
  return {torch::cat(outs, 2), torch::cat(lses, 2)};  // [B, H, nq L, Dv], [B, H, nq L]
}

void attend_chunks_backward(torch::Tensor& dq, torch::Tensor& dk, torch::Tensor& dv,
                            const torch::Tensor& dout, const torch::Tensor& q,
                            const torch::Tensor& k, const torch::Tensor& v,
                            const PartialAttention& finished, double scale,
                            const ChunkLayout& layout) {
  const int64_t len = layout.chunk_len;
  for (size_t i = 0; i < layout.query_chunks.size(); ++i) {
    const auto lse = finished.lse.narrow(2, static_cast<int64_t>(i) * len, len);  // [B, H, L]
    for (size_t j = 0; j < layout.key_chunks.size(); ++j) {
      if (layout.key_chunks[j] > layout.query_chunks[i]) continue;
      auto [dqp, dkp, dvp] = attend_pair_backward(
          chunk(dout, i, len), chunk(q, i, len), chunk(k, j, len), chunk(v, j, len),
          chunk(finished.out, i, len), lse, scale, layout.key_chunks[j] == layout.query_chunks[i]);
      chunk(dq, i, len).add_(dqp);
      chunk(dk, j, len).add_(dkp);
      chunk(dv, j, len).add_(dvp);
    }
  }
}

torch::Tensor chunked_causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& v, double scale,
                                       const ChunkLayout& layout) {
  check_shapes(q, k, v, layout);
  for (int64_t c : layout.query_chunks) {
    TORCH_CHECK(std::count(layout.key_chunks.begin(), layout.key_chunks.end(), c) == 1,
                "chunked attention: query chunk ", c, " needs its own keys exactly once");
  }
  return ChunkedCausalAttention::apply(q, k, v, scale, layout.query_chunks, layout.key_chunks,
                                       layout.chunk_len);
}

}  // namespace titan::models
