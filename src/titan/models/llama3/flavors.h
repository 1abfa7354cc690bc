// The llama3 family (Llama 3 / 3.1 / 3.2; Grattafiori et al. 2024, "The Llama 3 Herd of
// Models", arXiv:2407.21783): TorchTitan's flavors and the Hugging Face "llama" model type.
#pragma once

#include "titan/models/common/flavors.h"

namespace titan::models::llama3 {

/// debugmodel (TorchTitan's: dim 256, 6 layers, 16 heads, vocab 2048), 100M (the benchmark
/// shape of bench/run_throughput.sh: dim 768, 12 layers, 12 heads, 4 KV heads, vocab 2048),
/// 1B and 3B (Llama 3.2, tied), 8B, 70B, 405B (Llama 3.1); real flavors use the 128,256-token
/// vocabulary. Every flavor has Llama 3.1's RoPE scaling with TorchTitan's factor 8, but 1B
/// and 3B, which have the released Llama 3.2's factor 32 (TorchTitan 0.3.0 gives them 8, its
/// default) so that Hugging Face's Llama 3.2 weights import under them.
const FlavorTable& flavors();

}  // namespace titan::models::llama3
