// The tensor-parallel plan of the common Transformer (llama3, qwen3), TorchTitan's apply_tp
// for Llama, one plan per kind of block part (block_part.h; a part without one is refused): per
// block, attention_norm and ffn_norm sequence-parallel; grouped-query attention's wq, wk, wv
// and SwiGLU's w1, w3 column-parallel; wo, w2 row-parallel; the attention and feed-forward
// inputs gathered and their outputs reduced at the region boundaries; q_norm / k_norm
// replicated over head groups; MLA's query and key/value up-projections column-parallel and its
// latents replicated; a mixture of experts replicated (each rank computes the tokens
// it holds: with sequence parallelism its sequence shard); tok_embeddings vocab-parallel (output
// reduced onto sequence shards); the final norm sequence-parallel; the output vocab-parallel
// (logits kept sharded for loss parallelism).
#pragma once

#include "titan/distributed/tensor_parallel.h"
#include "titan/models/common/transformer.h"

namespace titan::models {

/// Applies the plan to `model` (whole and initialised; each rank keeps its slices) for
/// `tp.size()` ranks. Throws ConfigError (check_tensor_parallel) when the model's heads, FFN
/// width or vocabulary do not divide.
void apply_tensor_parallel(Transformer& model, distributed::TensorParallel& tp);

}  // namespace titan::models
