#include "titan/models/llama3/infra/train_spec.h"

#include "titan/models/common/infra/transformer_train_spec.h"
#include "titan/models/llama3/flavors.h"

namespace titan::models::llama3 {

protocols::TrainSpec train_spec() {
  return transformer_train_spec("llama3", flavors(), {"llama", "LlamaForCausalLM", "", ""},
                                /*qk_norm=*/false);
}

}  // namespace titan::models::llama3
