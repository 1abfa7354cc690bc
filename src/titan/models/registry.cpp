// The families titan ships: one line each (protocols/train_spec.h declares the list; a plugin
// or a test adds one with protocols::register_train_spec).
#include "titan/models/deepseek_v3/infra/train_spec.h"
#include "titan/models/llama3/infra/train_spec.h"
#include "titan/models/qwen3/infra/train_spec.h"
#include "titan/protocols/train_spec.h"

namespace titan::protocols {

const std::vector<TrainSpec>& builtin_train_specs() {
  static const std::vector<TrainSpec> specs = {
      models::llama3::train_spec(),
      models::qwen3::train_spec(),
      models::deepseek_v3::train_spec(),
  };
  return specs;
}

}  // namespace titan::protocols
