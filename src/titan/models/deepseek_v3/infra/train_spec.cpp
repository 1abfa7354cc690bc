#include "titan/models/deepseek_v3/infra/train_spec.h"

#include "titan/models/common/infra/transformer_train_spec.h"
#include "titan/models/deepseek_v3/flavors.h"
#include "titan/models/deepseek_v3/hf_dialect.h"

namespace titan::models::deepseek_v3 {

protocols::TrainSpec train_spec() {
  return transformer_train_spec("deepseek_v3", flavors(),
                                {"deepseek_v3", "DeepseekV3ForCausalLM", "", ""},
                                /*qk_norm=*/false, hf_dialect());
}

}  // namespace titan::models::deepseek_v3
