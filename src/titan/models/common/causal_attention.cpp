#include "titan/models/common/causal_attention.h"

#include <algorithm>
#include <limits>

namespace titan::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Shapes inside: BK = B * Hkv batched key/value heads, G = H / Hkv query heads per key/value
// head. Work proceeds in tiles: a block of nb batched heads times a chunk [s0, s1) of c queries
// of every group, flattened to G * c rows against the s1 keys they can see.

// Scores of a tile beyond this many elements are split over several head blocks: smaller
// tiles stay in cache (measured on a 2-core AVX-512 CPU: 2-3x faster than one big tile).
constexpr int64_t kTileElements = int64_t{1} << 20;

int64_t heads_per_tile(int64_t bk, int64_t groups, int64_t chunk, int64_t seq) {
  return std::clamp<int64_t>(kTileElements / (groups * chunk * seq), 1, bk);
}

// Masked, scaled scores of a tile: [nb, G * c, s1]. Keys before s0 precede every query of the
// chunk, so only the trailing c x c block needs the causal mask.
torch::Tensor tile_scores(const torch::Tensor& qc, const torch::Tensor& kc, double scale,
                          int64_t groups, int64_t s0, int64_t c) {
  const int64_t nb = qc.size(0), s1 = kc.size(1);
  auto scores = torch::bmm(qc, kc.transpose(1, 2)).mul_(scale);  // scores: [nb, G*c, s1]
  auto future = torch::ones({c, c}, qc.options().dtype(torch::kBool)).triu_(1);  // [c, c]
  scores.view({nb, groups, c, s1})
      .narrow(3, s0, c)
      .masked_fill_(future, -std::numeric_limits<double>::infinity());
  return scores;
}

// Rows [s0, s0 + c) of x: [nb, G, S, Dh] as [nb, G * c, Dh].
torch::Tensor chunk_rows(const torch::Tensor& x, int64_t s0, int64_t c) {
  return x.narrow(2, s0, c).reshape({x.size(0), x.size(1) * c, x.size(3)});
}

struct ChunkedCausalAttention : torch::autograd::Function<ChunkedCausalAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double scale, int64_t chunk_size) {
    const int64_t B = q.size(0), H = q.size(1), S = q.size(2), Dh = q.size(3);
    const int64_t Hkv = k.size(1), G = H / Hkv, BK = B * Hkv;
    const auto cd = q.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
    auto qf = q.to(cd).reshape({BK, G, S, Dh});                 // qf: [BK, G, S, Dh]
    auto kf = k.to(cd).reshape({BK, S, Dh});                    // kf: [BK, S, Dh]
    auto vf = v.to(cd).reshape({BK, S, Dh});                    // vf: [BK, S, Dh]
    auto out = torch::empty({BK, G, S, Dh}, qf.options());      // out: [BK, G, S, Dh]
    auto lse = torch::empty({BK, G, S}, qf.options());          // lse: [BK, G, S]
    const int64_t hb = heads_per_tile(BK, G, std::min(chunk_size, S), S);
    for (int64_t b0 = 0; b0 < BK; b0 += hb) {
      const int64_t nb = std::min(hb, BK - b0);
      for (int64_t s0 = 0; s0 < S; s0 += chunk_size) {
        const int64_t c = std::min(chunk_size, S - s0), s1 = s0 + c;
        auto qc = chunk_rows(qf.narrow(0, b0, nb), s0, c);                  // qc: [nb, G*c, Dh]
        auto kc = kf.narrow(0, b0, nb).narrow(1, 0, s1);                    // kc: [nb, s1, Dh]
        auto vc = vf.narrow(0, b0, nb).narrow(1, 0, s1);                    // vc: [nb, s1, Dh]
        auto scores = tile_scores(qc, kc, scale, G, s0, c);                 // [nb, G*c, s1]
        auto lse_c = torch::logsumexp(scores, -1, /*keepdim=*/true);        // lse_c: [nb, G*c, 1]
        auto probs = scores.sub_(lse_c).exp_();                             // probs: [nb, G*c, s1]
        out.narrow(0, b0, nb).narrow(2, s0, c)
            .copy_(torch::bmm(probs, vc).view({nb, G, c, Dh}));             // [nb, G, c, Dh]
        lse.narrow(0, b0, nb).narrow(2, s0, c).copy_(lse_c.view({nb, G, c}));
      }
    }
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["chunk_size"] = chunk_size;
    return out.view({B, H, S, Dh}).to(q.scalar_type());        // [B, H, S, Dh]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t chunk_size = ctx->saved_data["chunk_size"].toInt();
    const int64_t B = q.size(0), H = q.size(1), S = q.size(2), Dh = q.size(3);
    const int64_t Hkv = k.size(1), G = H / Hkv, BK = B * Hkv;
    const auto cd = out.scalar_type();
    auto qf = q.to(cd).reshape({BK, G, S, Dh});                         // qf: [BK, G, S, Dh]
    auto kf = k.to(cd).reshape({BK, S, Dh});                            // kf: [BK, S, Dh]
    auto vf = v.to(cd).reshape({BK, S, Dh});                            // vf: [BK, S, Dh]
    auto dout = grad_outputs[0].to(cd).reshape({BK, G, S, Dh});         // dout: [BK, G, S, Dh]
    auto delta = (dout * out).sum(-1);                                  // delta: [BK, G, S]
    auto dq = torch::empty({BK, G, S, Dh}, qf.options());               // dq: [BK, G, S, Dh]
    auto dk = torch::zeros({BK, S, Dh}, qf.options());                  // dk: [BK, S, Dh]
    auto dv = torch::zeros({BK, S, Dh}, qf.options());                  // dv: [BK, S, Dh]
    const int64_t hb = heads_per_tile(BK, G, std::min(chunk_size, S), S);
    for (int64_t b0 = 0; b0 < BK; b0 += hb) {
      const int64_t nb = std::min(hb, BK - b0);
      for (int64_t s0 = 0; s0 < S; s0 += chunk_size) {
        const int64_t c = std::min(chunk_size, S - s0), s1 = s0 + c;
        auto qc = chunk_rows(qf.narrow(0, b0, nb), s0, c);                    // qc: [nb, G*c, Dh]
        auto kc = kf.narrow(0, b0, nb).narrow(1, 0, s1);                      // kc: [nb, s1, Dh]
        auto vc = vf.narrow(0, b0, nb).narrow(1, 0, s1);                      // vc: [nb, s1, Dh]
        auto doc = chunk_rows(dout.narrow(0, b0, nb), s0, c);                 // doc: [nb, G*c, Dh]
        auto lse_c = lse.narrow(0, b0, nb).narrow(2, s0, c).reshape({nb, G * c, 1});    // [nb, G*c, 1]
        auto delta_c = delta.narrow(0, b0, nb).narrow(2, s0, c).reshape({nb, G * c, 1});  // [nb, G*c, 1]
        auto probs = tile_scores(qc, kc, scale, G, s0, c).sub_(lse_c).exp_();  // [nb, G*c, s1]
        dv.narrow(0, b0, nb).narrow(1, 0, s1)
            .add_(torch::bmm(probs.transpose(1, 2), doc));                    // += [nb, s1, Dh]
        auto dprobs = torch::bmm(doc, vc.transpose(1, 2));                    // dprobs: [nb, G*c, s1]
        auto dscores = probs.mul_(dprobs.sub_(delta_c)).mul_(scale);          // [nb, G*c, s1]
        dq.narrow(0, b0, nb).narrow(2, s0, c)
            .copy_(torch::bmm(dscores, kc).view({nb, G, c, Dh}));             // [nb, G, c, Dh]
        dk.narrow(0, b0, nb).narrow(1, 0, s1)
            .add_(torch::bmm(dscores.transpose(1, 2), qc));                   // += [nb, s1, Dh]
      }
    }
    return {dq.view({B, H, S, Dh}).to(q.scalar_type()),                 // [B, H, S, Dh]
            dk.view({B, Hkv, S, Dh}).to(k.scalar_type()),               // [B, Hkv, S, Dh]
            dv.view({B, Hkv, S, Dh}).to(v.scalar_type()),               // [B, Hkv, S, Dh]
            torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale, int64_t chunk_size) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "causal_attention: q, k, v must be [B, H, S, Dh], got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), "causal_attention: k ", k.sizes(), " and v ", v.sizes(),
              " differ");
  TORCH_CHECK(k.size(0) == q.size(0) && k.size(2) == q.size(2) && k.size(3) == q.size(3),
              "causal_attention: k/v ", k.sizes(), " do not match q ", q.sizes(),
              " in batch, sequence or head_dim");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "causal_attention: ", q.size(1),
              " query heads are not a multiple of ", k.size(1), " key/value heads");
  TORCH_CHECK(chunk_size > 0, "causal_attention: chunk_size must be positive, got ", chunk_size);
  return ChunkedCausalAttention::apply(q, k, v, scale, chunk_size);
}

}  // namespace titan::models
