// The routings the mixture-of-experts tests run, at test sizes: Qwen3-MoE's (softmax, gates
// renormalised, shared experts), DeepSeek-V3's (sigmoid, group-limited, biased, scaled) and
// TorchTitan's score_before_experts option.
#pragma once

#include "titan/models/common/moe.h"

namespace titan::testing {

inline models::MoEArgs softmax_routing() {
  models::MoEArgs a;
  a.num_experts = 12;
  a.hidden_dim = 5;
  a.top_k = 2;
  a.route_norm = true;
  a.num_shared_experts = 2;
  a.load_balance_coeff = 0.0;
  return a;
}

inline models::MoEArgs sigmoid_group_routing() {
  models::MoEArgs a;
  a.num_experts = 8;
  a.hidden_dim = 4;
  a.top_k = 3;
  a.score_func = models::MoEArgs::ScoreFunc::Sigmoid;
  a.route_norm = true;
  a.route_scale = 2.5;
  a.num_expert_groups = 4;
  a.num_limited_groups = 2;
  a.num_shared_experts = 1;
  return a;
}

inline models::MoEArgs score_before_routing() {
  models::MoEArgs a;
  a.num_experts = 4;
  a.hidden_dim = 3;
  a.top_k = 2;
  a.score_before_experts = true;
  a.score_func = models::MoEArgs::ScoreFunc::Sigmoid;
  return a;
}

}  // namespace titan::testing
