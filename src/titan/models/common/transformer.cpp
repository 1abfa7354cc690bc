#include "titan/models/common/transformer.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"
#include "titan/models/common/block_trace.h"
#include "titan/models/common/rope.h"
#include "titan/models/common/transformer_block.h"

namespace titan::models {
namespace {

void require_positive(const char* field, int64_t value) {
  if (value <= 0) {
    throw ConfigError(fmt::format("model argument {} must be positive, got {}", field, value));
  }
}

void validate(const TransformerArgs& a) {
  require_positive("dim", a.dim);
  require_positive("n_layers", a.n_layers);
  require_positive("n_heads", a.n_heads);
  require_positive("vocab_size", a.vocab_size);
  if (a.head_dim == 0 && a.dim % a.n_heads != 0) {
    throw ConfigError(fmt::format(
        "model argument dim ({}) must be divisible by n_heads ({}) unless head_dim is set",
        a.dim, a.n_heads));
  }
  require_positive("head_dim", a.head_size());
  require_positive("hidden_dim", a.ffn_hidden());
}

}  // namespace

Transformer::Transformer(const TransformerArgs& args, const torch::TensorOptions& options,
                         const PartRange& part)
    : args_(args) {
  validate(args_);
  const int64_t end = part.end_layer < 0 ? args_.n_layers : part.end_layer;
  if (part.first_layer < 0 || part.first_layer > end || end > args_.n_layers) {
    throw ConfigError(fmt::format("model part layers [{}, {}) are outside the model's {} layers",
                                  part.first_layer, end, args_.n_layers));
  }
  if (args_.tie_embeddings && part.embedding != part.output) {
    throw ConfigError("a model with tied embeddings cannot put its embedding and its output in "
                      "different model parts");
  }
  inv_freq_ = rope_inv_freq(args_.rope());
  const double out_std = 1.0 / std::sqrt(double(args_.dim));
  constexpr double kCutoff = 3.0;
  auto classifier_rule =
      InitRule::trunc_normal(0.0, out_std, -kCutoff * out_std, kCutoff * out_std);
  if (part.embedding) {
    tok_embeddings =
        register_module("tok_embeddings", Embedding(args_.vocab_size, args_.dim, options));
    tok_embeddings->init = args_.tie_embeddings ? classifier_rule : InitRule::normal(0.0, 1.0);
  }
  std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>> blocks;
  for (int64_t i = part.first_layer; i < end; ++i) {
    blocks.emplace_back(std::to_string(i), transformer_block(i, args_, options).ptr());
  }
  layers = register_module("layers", torch::nn::ModuleDict(blocks));
  if (part.output) {
    norm = register_module("norm", RMSNorm(args_.dim, args_.norm_eps, options));
    if (!args_.tie_embeddings) {
      output = register_module("output", Linear(args_.dim, args_.vocab_size, options));
      output->init = classifier_rule;
    }
  }
}

torch::Tensor Transformer::forward_impl(const torch::Tensor& input, const ClassifierLoss& loss) {
  auto h = tok_embeddings ? tok_embeddings(input) : input;  // h: [B, S, dim]
  const auto rope_dtype = h.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor cos, sin;  // [S, Dh] each
  const int64_t seq_len = tok_embeddings ? input.size(1) : input.size(1) * residual_sequence_shards;
  std::tie(cos, sin) =
      sequence_shard
          ? rope_cos_sin(inv_freq_, sequence_shard->positions(seq_len), rope_dtype, h.device())
          : rope_cos_sin(inv_freq_, seq_len, rope_dtype, h.device());
  for (const auto& [layer_id, block] : blocks()) {
    // Captured by value: activation checkpointing calls the block again during backward.
    h = run_block(layer_id, h, [block, cos, sin](const torch::Tensor& x) {
      return block->forward(x, cos, sin);  // [B, S, dim]
    });
  }
  if (!norm) return h;
  const TracedPiece piece{loss ? TracedPiece::kLoss : TracedPiece::kOutput};
  return with_traced_backward(piece, h, [&](const torch::Tensor& last) {
    TracedForward traced(piece);
    auto x = classifier_hooks.on_input(norm(last));                        // x: [B, S, dim]
    const auto& weight = output ? output->weight : tok_embeddings->weight;  // [vocab, dim]
    if (loss) return loss(x, weight);                                       // scalar
    return classifier_hooks.on_output(deferrable_linear(x, weight));        // [B, S, vocab]
  });
}

std::vector<BlockRef> Transformer::blocks() {
  std::vector<BlockRef> out;
  for (const auto& [key, module] : layers->items()) {
    auto* block = module->as<TransformerBlockImpl>();
    out.push_back({block->layer_id, block});
  }
  return out;
}

int64_t Transformer::flops_per_token(int64_t seq_len) {
  int64_t flops = 6 * (args_.dim + (args_.tie_embeddings ? 0 : args_.vocab_size * args_.dim));
  for (int64_t i = 0; i < args_.n_layers; ++i) {
    const auto key = std::to_string(i);
    if (layers->contains(key)) {
      flops += layers[key]->as<TransformerBlockImpl>()->flops_per_token(seq_len);
    } else {  // another part's block, as this family builds it
      flops += transformer_block(i, args_, torch::TensorOptions().device(torch::kMeta))
                   ->flops_per_token(seq_len);
    }
  }
  return flops;
}

ModelShape Transformer::shape() const {
  return {args_.dim, args_.n_layers, args_.vocab_size};
}

}  // namespace titan::models
