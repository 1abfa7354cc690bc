// Context parallelism (TorchTitan's context_parallel; Liu et al. 2023, "Ring Attention",
// arXiv:2310.01889): the ranks of the mesh's `cp` group share every sequence. The sequence is cut
// into chunks; each rank holds its chunks of the inputs, labels and positions, and everything
// but attention is per token. Attention brings the other ranks' keys and values to each rank's
// queries, by one of TorchTitan's two rotate methods:
//   allgather  every rank gathers all keys and values once (backward reduce-scatters their
//              gradients);
//   alltoall   the keys and values travel around the ring, one rank's block per step, the next
//              block in flight while the current one is computed on; their gradients travel
//              with them in backward.
// Both compute (query chunk, key chunk) pairs with online softmax (models/common/
// chunked_attention.h). With head-tail balancing (TorchTitan's default) rank i of cp holds
// chunks i and 2 cp - 1 - i of 2 cp, so every rank has the same causal work.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/distributed/process_group.h"
#include "titan/models/common/causal_lm.h"
#include "titan/models/common/sequence_shard.h"

namespace titan::distributed {

enum class LoadBalancer { HeadTail, None };
enum class RotateMethod { AllGather, AllToAll };

/// parallelism.context_parallel_load_balancer ("headtail", "none") and
/// parallelism.context_parallel_rotate_method ("allgather", "alltoall"); throws ConfigError
/// naming the key and the choices otherwise.
LoadBalancer load_balancer_from(const std::string& name);
RotateMethod rotate_method_from(const std::string& name);

/// Which chunks of a sequence each of `cp` ranks holds.
struct SequenceSplit {
  int cp = 1;
  LoadBalancer balancer = LoadBalancer::HeadTail;

  /// 2 cp (head-tail) or cp.
  int64_t num_chunks() const;
  /// Rank r's chunks, in its local order: {r, 2 cp - 1 - r} (head-tail) or {r}.
  std::vector<int64_t> chunks_of(int rank) const;
  /// x [B, S, ...] whole sequences -> rank's chunks, [B, S / cp, ...] (along dim 1). Throws
  /// c10::Error when S does not divide into num_chunks() (check_context_parallel refuses such
  /// a training.seq_len at start).
  torch::Tensor shard(const torch::Tensor& x, int rank) const;
};

class ContextParallel : public models::SequenceShard {
 public:
  ContextParallel(std::shared_ptr<ProcessGroup> cp_group, LoadBalancer balancer,
                  RotateMethod rotate);

  /// This rank's chunks of x [B, S, ...] (SequenceSplit::shard).
  torch::Tensor shard(const torch::Tensor& x) const { return split_.shard(x, group_->rank()); }
  torch::Tensor positions(int64_t local_len) const override;
  torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                          double scale) override;

 private:
  std::shared_ptr<ProcessGroup> group_;
  SequenceSplit split_;
  RotateMethod rotate_;
};

/// Throws ConfigError naming the keys when `seq_len` does not divide into the chunks of `cp`
/// ranks under `parallelism`'s load balancer (or a rank's tokens over tp under sequence
/// parallelism), a context_parallel_* choice is unknown, or the ranks would compute on GPUs.
/// `seq_len_key` names the sequence length in the error.
void check_context_parallel(const config::ParallelismSection& parallelism, int cp,
                            int64_t seq_len, const char* seq_len_key = "training.seq_len");

/// Makes `cp` the sequence shard of `model` (its RoPE positions) and of every attention part.
void attach_context_parallel(models::CausalLM& model, std::shared_ptr<ContextParallel> cp);

}  // namespace titan::distributed
