#include "titan/models/common/kernels/attention.h"

#include <ATen/Parallel.h>

#include "titan/models/common/kernels/attention_tiles.h"

namespace titan::models::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// t in float32 with unit stride along its last dim (the tiles read rows).
torch::Tensor float_rows(const torch::Tensor& t) {
  auto f = t.to(torch::kFloat);
  return f.stride(-1) == 1 ? f : f.contiguous();
}

// [B, heads, S, D] float32 zeros laid out as [B, S, heads, D]: the layout the model's transpose
// back to tokens reads without a copy.
torch::Tensor token_major(const torch::Tensor& like, int64_t width, bool zero) {
  const auto shape = std::vector<int64_t>{like.size(0), like.size(2), like.size(1), width};
  const auto opts = like.options().dtype(torch::kFloat);
  return (zero ? torch::zeros(shape, opts) : torch::empty(shape, opts)).transpose(1, 2);
}

// The first float of (batch b, head h) of t [B, heads, S, D] (pointer arithmetic: indexing
// t[b][h] runs an aten::select per call, thousands a step).
float* head_rows(const torch::Tensor& t, int64_t b, int64_t h) {
  return t.data_ptr<float>() + b * t.stride(0) + h * t.stride(1);
}

// (batch b, head h)'s rows of q, and its key/value head's of k and v.
AttentionHead head_of(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                      int64_t b, int64_t h, double scale) {
  const int64_t kv = h / (q.size(1) / k.size(1));
  return {head_rows(q, b, h),  q.stride(2), head_rows(k, b, kv), k.stride(2),
          head_rows(v, b, kv), v.stride(2), q.size(3),           v.size(3),
          static_cast<float>(scale)};
}

struct CausalAttentionFn : public torch::autograd::Function<CausalAttentionFn> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in, double scale) {
    auto q = float_rows(q_in), k = float_rows(k_in), v = float_rows(v_in);
    const int64_t B = q.size(0), H = q.size(1), S = q.size(2);
    auto out = token_major(q, v.size(3), /*zero=*/false);  // out: [B, H, S, Dv]
    auto lse = torch::empty({B, H, S}, q.options().dtype(torch::kFloat));  // lse: [B, H, S]
    constexpr int64_t kRowsPerTask = 128;
    const int64_t tasks_per_head = (S + kRowsPerTask - 1) / kRowsPerTask;
    at::parallel_for(0, B * H * tasks_per_head, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        const int64_t bh = t / tasks_per_head, begin = t % tasks_per_head * kRowsPerTask;
        const int64_t b = bh / H, h = bh % H;
        attention_forward_rows(head_of(q, k, v, b, h, scale), begin,
                               std::min(S, begin + kRowsPerTask), head_rows(out, b, h),
                               out.stride(2), lse.data_ptr<float>() + (b * H + h) * S);
      }
    });
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["dtypes"] = std::vector<int64_t>{int64_t(q_in.scalar_type()),
                                                     int64_t(k_in.scalar_type()),
                                                     int64_t(v_in.scalar_type())};
    return out.to(q_in.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    const auto dout = float_rows(grads[0]);                           // dout: [B, H, S, Dv]
    const auto delta = (dout * out).sum(-1).contiguous();             // delta: [B, H, S]
    auto dq = token_major(q, q.size(3), true);                        // dq: [B, H, S, Dh]
    auto dk = token_major(k, k.size(3), true);                        // dk: [B, Hkv, S, Dh]
    auto dv = token_major(v, v.size(3), true);                        // dv: [B, Hkv, S, Dv]
    const int64_t B = q.size(0), H = q.size(1), Hkv = k.size(1), S = q.size(2);
    const int64_t group = H / Hkv;
    // One task per key/value head: its query heads add to its dk and dv one after another.
    at::parallel_for(0, B * Hkv, 1, [&](int64_t first, int64_t last) {
      for (int64_t t = first; t < last; ++t) {
        const int64_t b = t / Hkv, kv = t % Hkv;
        for (int64_t h = kv * group; h < (kv + 1) * group; ++h) {
          const AttentionHeadGrads g{head_rows(dout, b, h),
                                     dout.stride(2),
                                     lse.data_ptr<float>() + (b * H + h) * S,
                                     delta.data_ptr<float>() + (b * H + h) * S,
                                     head_rows(dq, b, h),
                                     dq.stride(2),
                                     head_rows(dk, b, kv),
                                     dk.stride(2),
                                     head_rows(dv, b, kv),
                                     dv.stride(2)};
          attention_backward_head(head_of(q, k, v, b, h, scale), S, g);
        }
      }
    });
    const auto dtypes = ctx->saved_data["dtypes"].toIntVector();
    return {dq.to(c10::ScalarType(dtypes[0])), dk.to(c10::ScalarType(dtypes[1])),
            dv.to(c10::ScalarType(dtypes[2])), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(-1) == k.size(-1) &&
                  v.sizes().slice(0, 3) == k.sizes().slice(0, 3) && q.size(0) == k.size(0) &&
                  q.size(2) == k.size(2) && q.size(1) % k.size(1) == 0,
              "fused causal_attention: q [B, H, S, Dh], k [B, Hkv, S, Dh], v [B, Hkv, S, Dv], H a "
              "multiple of Hkv; got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  for (const auto* t : {&q, &k, &v}) {
    TORCH_CHECK(t->device().is_cpu() &&
                    (t->scalar_type() == torch::kFloat || t->scalar_type() == torch::kBFloat16),
                "fused causal_attention: float32 or bfloat16 CPU tensors, got ", t->scalar_type(),
                " on ", t->device());
  }
  return CausalAttentionFn::apply(q, k, v, scale);
}

}  // namespace titan::models::kernels
