#include "titan/models/common/infra/tensor_parallel_plan.h"

#include <fmt/format.h>

#include "titan/errors.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/mla.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/transformer_block.h"

namespace titan::models {
namespace {

// A region between column- and row-parallel projections.
void region_hooks(ModuleHooks& hooks, distributed::TensorParallel& tp) {
  hooks.input = [&tp](const torch::Tensor& x) { return tp.enter_region(x); };
  hooks.output = [&tp](const torch::Tensor& y) { return tp.leave_region(y); };
}

void apply_to_attention(AttentionImpl& attention, distributed::TensorParallel& tp) {
  tp.colwise(*attention.wq);
  tp.colwise(*attention.wk);
  tp.colwise(*attention.wv);
  tp.rowwise(*attention.wo);
  if (attention.options.qk_norm) {
    // Each rank normalises its own heads with the shared [head_dim] weights.
    tp.replicate(*attention.q_norm, true);
    tp.replicate(*attention.k_norm, true);
  }
  attention.options.n_heads /= tp.size();
  attention.options.n_kv_heads /= tp.size();
  region_hooks(attention.hooks, tp);
}

// MLA splits its heads: the query and key/value up-projections column-parallel, wo row-parallel;
// the latents (wq_a, wkv_a and their norms) are computed whole on every rank from the gathered
// input, each rank's gradient covering its heads only.
void apply_to_mla(MultiHeadLatentAttentionImpl& mla, distributed::TensorParallel& tp) {
  if (mla.wq) {
    tp.colwise(*mla.wq);
  } else {
    tp.replicate(*mla.wq_a, true);
    tp.replicate(*mla.q_norm, true);
    tp.colwise(*mla.wq_b);
  }
  tp.replicate(*mla.wkv_a, true);
  tp.replicate(*mla.kv_norm, true);
  tp.colwise(*mla.wkv_b);
  tp.rowwise(*mla.wo);
  mla.n_heads /= tp.size();
  region_hooks(mla.hooks, tp);
}

void apply_to_feed_forward(FeedForwardImpl& ffn, distributed::TensorParallel& tp) {
  tp.colwise(*ffn.w1);
  tp.colwise(*ffn.w3);
  tp.rowwise(*ffn.w2);
  region_hooks(ffn.hooks, tp);
}

// The experts are replicated, not split: each rank routes and computes the tokens it holds,
// which under sequence parallelism are its own sequence shard (the weights' gradients are then
// partial sums over the group's shards).
void apply_to_moe(MoEImpl& moe, distributed::TensorParallel& tp) {
  for (auto* m : weight_modules(moe)) tp.replicate(*m, tp.options().sequence_parallel);
}

[[noreturn]] void no_plan_for(const BlockPart& part, int64_t layer) {
  throw ConfigError(
      fmt::format("tensor parallelism has no plan for layers.{}'s {}: set "
                  "parallelism.tensor_parallel_degree = 1 for this model",
                  layer, part.name()));
}

// Asks the block what it holds: each kind of part has its plan.
void apply_to_block(TransformerBlockImpl& block, distributed::TensorParallel& tp) {
  const bool sp = tp.options().sequence_parallel;
  tp.replicate(*block.attention_norm, sp);
  tp.replicate(*block.ffn_norm, sp);
  if (auto* attention = block.attention->as<AttentionImpl>()) {
    apply_to_attention(*attention, tp);
  } else if (auto* mla = block.attention->as<MultiHeadLatentAttentionImpl>()) {
    apply_to_mla(*mla, tp);
  } else {
    no_plan_for(*block.attention, block.layer_id);
  }
  if (auto* ffn = block.feed_forward->as<FeedForwardImpl>()) {
    apply_to_feed_forward(*ffn, tp);
  } else if (auto* moe = block.feed_forward->as<MoEImpl>()) {
    apply_to_moe(*moe, tp);
  } else {
    no_plan_for(*block.feed_forward, block.layer_id);
  }
}

}  // namespace

void apply_tensor_parallel(Transformer& model, distributed::TensorParallel& tp) {
  if (tp.size() == 1) return;
  distributed::check_tensor_parallel(model, tp.size(), 0, false);
  if (model.tok_embeddings) {
    auto& embedding = *model.tok_embeddings;
    const int64_t vocab = embedding.weight.size(0);
    tp.colwise(embedding);
    embedding.vocab_parallel = true;
    embedding.vocab_start = tp.rank() * (vocab / tp.size());
    embedding.hooks.output = [&tp](const torch::Tensor& partial) {
      return tp.leave_region(partial);  // [B, S / tp, dim] with sequence parallelism
    };
  }
  if (tp.options().sequence_parallel) model.residual_sequence_shards = tp.size();
  for (const auto& block : model.blocks()) {
    apply_to_block(*block.module, tp);
  }
  if (model.norm) {
    tp.replicate(*model.norm, tp.options().sequence_parallel);
    if (model.output) tp.colwise(*model.output);  // else the classifier is the embedding
    model.classifier_hooks.input = [&tp](const torch::Tensor& h) { return tp.enter_region(h); };
    model.classifier_hooks.output = [&tp](const torch::Tensor& logits) {
      return tp.logits(logits);
    };
  }
  tp.finish(model);
}

}  // namespace titan::models
