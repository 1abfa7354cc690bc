// The Hugging Face dialect of a family's models (models/common/hf_adapter.h), for tests that
// call the adapter's functions directly instead of through the family's TrainSpec.
#pragma once

#include <string>

#include "titan/models/common/hf_adapter.h"
#include "titan/models/deepseek_v3/hf_dialect.h"

namespace titan::testing {

inline const models::HfDialect& hf_dialect_of(const std::string& family) {
  static const models::HfDialect common;
  return family == "deepseek_v3" ? models::deepseek_v3::hf_dialect() : common;
}

}  // namespace titan::testing
