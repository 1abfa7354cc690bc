// Hyper-parameters of the decoder-only Transformer shared by the llama3 and qwen3 families
// (TorchTitan's TransformerModelArgs / Qwen3ModelArgs, with MoEArgs for Qwen3-MoE) and, with
// MLAArgs and YaRN, the deepseek_v3 family (DeepSeekV3ModelArgs). Families
// define their flavors as values of this struct; the Hugging Face adapter derives one from
// config.json.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "titan/models/common/block_part.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/init.h"
#include "titan/models/common/mla.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rope.h"

namespace titan::models {

struct TransformerArgs;

/// A family's own feed-forward part for the dense layers (a plugin's or a test's family), built
/// from the arguments, the layer's initialisation of input and (depth-scaled) output
/// projections, and the parameters' options.
using FeedForwardBuilder = std::function<std::shared_ptr<FeedForwardPart>(
    const TransformerArgs& args, const InitRule& in_init, const InitRule& out_init,
    const torch::TensorOptions& options)>;

struct TransformerArgs {
  int64_t dim = 256;         // model (residual stream) width
  int64_t n_layers = 6;      // transformer blocks
  int64_t n_heads = 16;      // query heads
  int64_t n_kv_heads = 0;    // key/value heads (grouped-query attention); 0 = n_heads
  int64_t head_dim = 0;      // per-head width; 0 = dim / n_heads (Qwen3 sets it explicitly)
  int64_t vocab_size = 2048;
  /// SwiGLU hidden width. 0 = TorchTitan's rule from multiple_of and ffn_dim_multiplier
  /// (see ffn_hidden_dim); Hugging Face configs and Qwen3 flavors give it explicitly.
  int64_t hidden_dim = 0;
  int64_t multiple_of = 256;
  std::optional<double> ffn_dim_multiplier;
  double norm_eps = 1e-5;    // RMSNorm epsilon (all norms of the model)
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;  // Llama 3.1 "llama3" frequency scaling
  std::optional<YarnScaling> yarn;          // YaRN frequency scaling (DeepSeek-V3)
  bool qk_norm = false;        // per-head RMSNorm on q and k before RoPE (Qwen3)
  bool tie_embeddings = false;  // classifier = token embedding matrix
  bool depth_init = true;      // output projections' init std shrinks with layer depth
  /// Mixture of experts in place of the SwiGLU from layer n_dense_layers on (Qwen3-MoE: every
  /// layer; DeepSeek-V3: all but the first); none = a dense model.
  std::optional<MoEArgs> moe;
  int64_t n_dense_layers = 0;
  /// Multi-head latent attention in place of grouped-query attention (DeepSeek-V3); its heads
  /// are n_heads, and head_dim / n_kv_heads / qk_norm do not apply.
  std::optional<MLAArgs> mla;
  /// Dense layers' feed-forward part; none: SwiGLU of width ffn_hidden().
  FeedForwardBuilder feed_forward;

  int64_t kv_heads() const { return n_kv_heads > 0 ? n_kv_heads : n_heads; }
  int64_t head_size() const { return head_dim > 0 ? head_dim : dim / n_heads; }
  int64_t ffn_hidden() const {
    return hidden_dim > 0 ? hidden_dim : ffn_hidden_dim(dim, multiple_of, ffn_dim_multiplier);
  }
  bool is_moe_layer(int64_t layer_id) const { return moe && layer_id >= n_dense_layers; }
  /// The width RoPE rotates: a head's, or MLA's rope part.
  int64_t rope_dim() const { return mla ? mla->qk_rope_head_dim : head_size(); }
  RopeOptions rope() const { return RopeOptions{rope_dim(), rope_theta, rope_scaling, yarn}; }
};

}  // namespace titan::models
