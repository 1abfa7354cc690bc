#include "titan/models/qwen3/infra/train_spec.h"

#include "titan/models/common/infra/transformer_train_spec.h"
#include "titan/models/qwen3/flavors.h"

namespace titan::models::qwen3 {

protocols::TrainSpec train_spec() {
  return transformer_train_spec("qwen3", flavors(),
                                {"qwen3", "Qwen3ForCausalLM", "qwen3_moe", "Qwen3MoeForCausalLM"},
                                /*qk_norm=*/true);
}

}  // namespace titan::models::qwen3
