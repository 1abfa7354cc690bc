// Mixture of experts (TorchTitan's MoE; Shazeer et al. 2017, "Outrageously Large Neural
// Networks"; DeepSeek-V3, arXiv:2412.19437): a token-choice top-k router, routed experts computed
// on the tokens sorted by expert (a grouped GEMM over the per-expert token counts: no capacity,
// no padding, no token dropped), and optional shared experts every token passes through.
// Submodule names follow TorchTitan's: router.gate, experts.{w1,w2,w3}, shared_experts, and the
// expert_bias buffer of auxiliary-loss-free load balancing (Wang et al. 2024, arXiv:2408.15664).
#pragma once

#include <torch/torch.h>

#include <functional>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "titan/models/common/block_part.h"
#include "titan/models/common/elementwise_op.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/linear.h"

namespace titan::models {

/// TorchTitan's MoEArgs, plus the experts' hidden width.
struct MoEArgs {
  enum class ScoreFunc { Softmax, Sigmoid };

  int64_t num_experts = 8;
  int64_t hidden_dim = 0;          // each routed expert's SwiGLU width (HF moe_intermediate_size)
  int64_t num_shared_experts = 0;  // one SwiGLU of width hidden_dim x this, unweighted
  int64_t top_k = 1;
  ScoreFunc score_func = ScoreFunc::Softmax;
  bool route_norm = false;     // divide the k gate values by their sum (+1e-20)
  double route_scale = 1.0;    // then multiply them by this
  /// Scale each expert's input by its gate value instead of its output (TorchTitan's option;
  /// Hugging Face's DeepSeek-V3 and Qwen3-MoE scale the output).
  bool score_before_experts = false;
  /// Group-limited routing: experts in num_expert_groups groups, only the num_limited_groups
  /// groups with the largest sum of their two best biased scores are eligible. 0 = off.
  int64_t num_expert_groups = 0;
  int64_t num_limited_groups = 0;
  /// Auxiliary-loss-free load balancing step size; 0 = off (no expert_bias).
  double load_balance_coeff = 1e-3;
};

/// Throws ConfigError naming the field for sizes that cannot route (k outside [1, experts],
/// groups not dividing the experts or with fewer than 2 experts each, limited groups outside
/// [1, groups] or too few for k, a negative coefficient).
void validate(const MoEArgs& args);

/// The routing of T tokens to k of E experts.
struct Routing {
  torch::Tensor experts;  // [T, K] int64, best first
  torch::Tensor gates;    // [T, K] float32 (float64 for a float64 model): each copy's weight
};

/// Where the N = T K routed copies sit once sorted by expert (ties in copy order t K + k).
struct CopyOrder {
  torch::Tensor position;  // [T, K] int64: the sorted row of copy (t, k)
  torch::Tensor copy;      // [N] int64: the copy t K + k each sorted row holds
  torch::Tensor counts;    // [E] int64: the rows of each expert
};

/// Token-choice top-k (TorchTitan's TokenChoiceTopKRouter): scores are computed in float32;
/// experts are chosen on scores + expert_bias (group-limited when configured), the gates come
/// from the unbiased scores. Ties go to the lower expert (and group) index, on every device.
class TokenChoiceRouterImpl : public torch::nn::Module {
 public:
  /// gate: [E, dim], uninitialised.
  TokenChoiceRouterImpl(int64_t dim, const MoEArgs& args, const torch::TensorOptions& options);

  /// x: [T, dim]; expert_bias: [E] float32 or undefined.
  Routing forward(const torch::Tensor& x, const torch::Tensor& expert_bias);

  using Choose = std::function<Routing(const torch::Tensor& logits,
                                       const torch::Tensor& expert_bias, const MoEArgs& args)>;

  MoEArgs args;
  Linear gate{nullptr};
  /// The choice from the logits [T, E]: eager by default; compile mode installs the fused
  /// kernel (kernels/moe_routing.h), which decides the same.
  Choose choose;
};
TORCH_MODULE(TokenChoiceRouter);

/// A [E, rows, cols] weight stored as one tensor (FSDP shards it on the expert dimension).
class ExpertWeightImpl : public WeightModule {
 public:
  ExpertWeightImpl(int64_t experts, int64_t rows, int64_t cols,
                   const torch::TensorOptions& options);
};
TORCH_MODULE(ExpertWeight);

/// E SwiGLU experts: w1, w3 [E, hidden, dim], w2 [E, dim, hidden].
class GroupedExpertsImpl : public torch::nn::Module {
 public:
  GroupedExpertsImpl(int64_t dim, int64_t hidden_dim, int64_t num_experts,
                     const torch::TensorOptions& options);

  /// x: [N, dim], rows sorted by expert; counts[e] rows for expert e (sum N) -> [N, dim].
  /// One expert's rows: w2[e](silu(w1[e] x) * w3[e] x), through `gate`.
  torch::Tensor forward(const torch::Tensor& x, const std::vector<int64_t>& counts);

  int64_t num_experts;
  int64_t hidden_dim;
  ExpertWeight w1{nullptr}, w2{nullptr}, w3{nullptr};
  ElementwiseOp gate;
};
TORCH_MODULE(GroupedExperts);

/// Where the routed copies meet their experts (TorchTitan's token dispatcher). Without one,
/// every expert is on this rank; expert parallelism (distributed/expert_parallel.h) sends each
/// copy to the rank holding its expert and brings the outputs back.
class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;
  /// routed: [N, dim] copies sorted by expert, counts[e] for each of the E experts ->
  /// the copies this rank's experts compute, [M, dim] sorted by local expert, and their counts
  /// (one per local expert). Differentiable. Calls `during` once, while the copies travel (the
  /// shared experts compute then).
  virtual std::pair<torch::Tensor, std::vector<int64_t>> dispatch(
      const torch::Tensor& routed, const std::vector<int64_t>& counts,
      const std::function<void()>& during) = 0;
  /// The experts' outputs [M, dim] for the latest dispatch -> [N, dim] in `routed`'s order.
  virtual torch::Tensor combine(const torch::Tensor& expert_out) = 0;
};

/// How the routed copies go to expert order and back: eager compositions (argsort,
/// index_select, a [T, K, dim] weighted sum) by default; compile mode installs the fused kernels
/// (kernels/moe_routing.h). The same results either way.
struct CopyMoves {
  /// experts: [T, K] -> their order (no gradient).
  std::function<CopyOrder(const torch::Tensor& experts, int64_t num_experts)> sort;
  /// tokens: [T, dim], gates: [T, K] or undefined -> [N, dim]: row r = tokens[copy[r] / K],
  /// times its gate when given.
  std::function<torch::Tensor(const torch::Tensor& tokens, const CopyOrder& order,
                              const torch::Tensor& gates)>
      permute;
  /// expert_out: [N, dim] sorted, gates: [T, K] or undefined -> [T, dim]: each token's K rows
  /// summed, weighted by the gates when given.
  std::function<torch::Tensor(const torch::Tensor& expert_out, const CopyOrder& order,
                              const torch::Tensor& gates)>
      combine;
};

class MoEImpl : public FeedForwardPart {
 public:
  /// Parameters uninitialised; expert_bias (when args.load_balance_coeff > 0) float32 zeros on
  /// `options`' device. Throws as validate(args).
  MoEImpl(int64_t dim, const MoEArgs& args, const torch::TensorOptions& options);

  /// x: [B, S, dim] -> [B, S, dim]: the routed experts' outputs weighted by their gates, plus
  /// the shared experts'. In training mode, adds the tokens each expert received to
  /// tokens_per_expert (not again when activation checkpointing recomputes the forward).
  torch::Tensor forward(const torch::Tensor& x) override;

  /// None: the experts are not split by tensor parallelism.
  std::vector<ShardedSize> tensor_parallel_sizes() const override { return {}; }
  /// Per token, with k routed copies: the router's logits and scores (2E); per copy its input,
  /// the w1 and w3 outputs, silu(w1 x), the w2 input and the output (2 dim + 4 hidden; 2 dim +
  /// 2 hidden under op-level checkpointing); the shared experts as a SwiGLU. All in the
  /// sequence region (the experts are replicated across tensor parallelism).
  SavedElements saved_elements(bool op_level) const override;
  /// 6 x the parameters a token uses: the router, the shared experts and k of E experts
  /// (TorchTitan's get_moe_model_nparams_and_flops).
  int64_t flops_per_token(int64_t seq_len) const override;
  /// The experts' SwiGLU gate and the shared experts'.
  std::vector<ElementwiseOp*> recomputed_ops() override;
  /// The E - k experts a token is not routed to.
  int64_t unused_params_per_token() const override;
  const char* slot_name() const override { return "moe"; }

  int64_t dim;
  MoEArgs args;
  TokenChoiceRouter router{nullptr};
  GroupedExperts experts{nullptr};
  FeedForward shared_experts{nullptr};  // null without shared experts
  /// Null: all E experts are here (`experts` holds them all).
  std::shared_ptr<TokenDispatcher> dispatcher;
  CopyMoves moves;
  /// [E] float32 buffer (checkpointed), added to the scores to choose experts; undefined when
  /// balancing is off. The load balancer (components/load_balancing.h) updates it.
  torch::Tensor expert_bias;
  /// [E] float32 tokens routed to each expert since the load balancer last read them, on the
  /// device of the forward (undefined before the first training forward; not checkpointed).
  torch::Tensor tokens_per_expert;
};
TORCH_MODULE(MoE);

}  // namespace titan::models
