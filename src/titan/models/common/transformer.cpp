#include "titan/models/common/transformer.h"

#include <fmt/format.h>

#include <cmath>

#include "titan/errors.h"
#include "titan/models/common/init.h"
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
  require_positive("attention_chunk_size", a.attention_chunk_size);
  if (a.head_dim == 0 && a.dim % a.n_heads != 0) {
    throw ConfigError(fmt::format(
        "model argument dim ({}) must be divisible by n_heads ({}) unless head_dim is set",
        a.dim, a.n_heads));
  }
  require_positive("head_dim", a.head_size());
  require_positive("hidden_dim", a.ffn_hidden());
}

}  // namespace

Transformer::Transformer(const TransformerArgs& args, const torch::TensorOptions& options)
    : args_(args) {
  validate(args_);
  inv_freq_ = rope_inv_freq(args_.rope());
  tok_embeddings =
      register_module("tok_embeddings", Embedding(args_.vocab_size, args_.dim, options));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < args_.n_layers; ++i) {
    layers->push_back(TransformerBlock(i, args_, options));
  }
  norm = register_module("norm", RMSNorm(args_.dim, args_.norm_eps, options));
  if (!args_.tie_embeddings) {
    output = register_module("output", Linear(args_.dim, args_.vocab_size, options));
  }
}

torch::Tensor Transformer::forward_impl(const torch::Tensor& tokens) {
  auto h = tok_embeddings(tokens);  // h: [B, S, dim]
  const auto rope_dtype = h.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
  torch::Tensor cos, sin;  // [S, Dh] each
  std::tie(cos, sin) = rope_cos_sin(inv_freq_, tokens.size(1), rope_dtype, h.device());
  for (size_t i = 0; i < layers->size(); ++i) {
    auto* block = layers[i]->as<TransformerBlockImpl>();
    // Captured by value: activation checkpointing calls the block again during backward.
    h = run_block(static_cast<int64_t>(i), h, [block, cos, sin](const torch::Tensor& x) {
      return block->forward(x, cos, sin);  // [B, S, dim]
    });
  }
  h = classifier_hooks.on_input(norm(h));  // h: [B, S, dim]
  auto logits = output ? output(h) : torch::linear(h, tok_embeddings->weight);  // [B, S, vocab]
  return classifier_hooks.on_output(logits);
}

void Transformer::init_weights(uint64_t seed) {
  auto gen = seeded_generator(seed);
  if (!args_.tie_embeddings) {
    init_normal_(tok_embeddings->weight, 0.0, 1.0, gen);
  }
  for (const auto& layer : *layers) {
    layer->as<TransformerBlockImpl>()->init_weights(gen);
  }
  norm->reset_parameters();
  const double out_std = 1.0 / std::sqrt(double(args_.dim));
  constexpr double kCutoff = 3.0;
  const auto& classifier = output ? output->weight : tok_embeddings->weight;
  init_trunc_normal_(classifier, 0.0, out_std, -kCutoff * out_std, kCutoff * out_std, gen);
}

ModelShape Transformer::shape() const {
  ModelShape s;
  s.dim = args_.dim;
  s.n_layers = args_.n_layers;
  s.n_heads = args_.n_heads;
  s.head_dim = args_.head_size();
  s.vocab_size = args_.vocab_size;
  s.n_kv_heads = args_.kv_heads();
  s.ffn_hidden_dim = args_.ffn_hidden();
  s.qk_norm = args_.qk_norm;
  return s;
}

}  // namespace titan::models
