#include "titan/models/common/causal_attention.h"

namespace titan::models {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && q.size(-1) == k.size(-1) &&
                  v.sizes().slice(0, 3) == k.sizes().slice(0, 3),
              "causal_attention: q [B, H, S, Dh], k [B, Hkv, S, Dh], v [B, Hkv, S, Dv]; got ",
              q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(q.size(1) % k.size(1) == 0, "causal_attention: ", q.size(1),
              " query heads do not group over ", k.size(1), " key/value heads");
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0,
                                          /*is_causal=*/true, scale, /*enable_gqa=*/true);
}

}  // namespace titan::models
