// Auxiliary-loss-free load balancing of mixture-of-experts layers (Wang et al. 2024,
// arXiv:2408.15664; DeepSeek-V3, arXiv:2412.19437 section 2.1.2; TorchTitan's MoE
// load-balancing optimizer hook). Once per step, before the optimizer step, each MoE layer's
// tokens per expert are summed over the ranks that trained on different tokens with the same
// layer (data x context, and tensor ranks, which route their own sequence shard), and its
// selection bias moves towards balance:
//   delta = coeff * sign(mean(count) - count);  delta -= mean(delta);  expert_bias += delta
// so every rank holding the router keeps the same bias. The bias is model state: checkpointed,
// resumed exactly.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "titan/components/metrics.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/sharded_tensor.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/moe.h"

namespace titan::components {

class ExpertLoadBalancer {
 public:
  /// Balances the MoE layers of `parts` (this rank's model parts) over `mesh`'s groups: "loss"
  /// and "tp" for the counts, "pp" to gather every stage's loads.
  ExpertLoadBalancer(const std::vector<models::CausalLM*>& parts, const distributed::DeviceMesh& mesh);

  /// Whether the model has MoE layers (otherwise every call is a no-op).
  bool active() const { return !layers_.empty(); }
  /// Before the optimizer step: sums the counts, updates the biases (layers with
  /// load_balance_coeff > 0), zeroes the counts and records loads() (collective over the loss,
  /// tp and pp groups).
  void step();
  /// A skipped step: zeroes the counts, leaving the biases and loads() as they were.
  void discard();
  /// Every MoE layer's load in the last step(), over all pipeline stages, by layer.
  const std::vector<ExpertLoad>& loads() const { return loads_; }

  /// The biases as whole replicated pieces "layers.{i}.moe.expert_bias", written by the first
  /// rank of the loss x tp groups; for `loading`, CPU buffers that finish_load() copies in.
  distributed::ShardedStateDict state(bool loading);
  void finish_load();

 private:
  struct Layer {
    int64_t id;
    models::MoEImpl* moe;
  };

  std::vector<Layer> layers_;
  int64_t n_layers_ = 0;  // of the whole model
  std::shared_ptr<distributed::ProcessGroup> loss_group_, tp_group_, pp_group_;
  distributed::ShardedStateDict loading_;
  std::vector<ExpertLoad> loads_;
};

}  // namespace titan::components
