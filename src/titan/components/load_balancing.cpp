#include "titan/components/load_balancing.h"

#include <fmt/format.h>

#include "titan/models/common/transformer_block.h"

namespace titan::components {
namespace {

std::string bias_name(int64_t layer) { return fmt::format("layers.{}.moe.expert_bias", layer); }

}  // namespace

ExpertLoadBalancer::ExpertLoadBalancer(const std::vector<models::CausalLM*>& parts,
                                       const distributed::DeviceMesh& mesh)
    : loss_group_(mesh[distributed::MeshGroup::Loss]),
      tp_group_(mesh[distributed::MeshGroup::TP]),
      pp_group_(mesh[distributed::MeshGroup::PP]) {
  for (auto* part : parts) {
    n_layers_ = part->shape().n_layers;
    for (const auto& block : part->blocks()) {
      if (auto* moe = block.module->feed_forward->as<models::MoEImpl>()) {
        layers_.push_back({block.layer_id, moe});
      }
    }
  }
}

void ExpertLoadBalancer::discard() {
  for (const auto& l : layers_) {
    if (l.moe->tokens_per_expert.defined()) l.moe->tokens_per_expert.zero_();
  }
}

void ExpertLoadBalancer::step() {
  if (!active()) return;
  torch::NoGradGuard no_grad;
  const auto device = layers_.front().moe->router->gate->weight.device();
  std::vector<torch::Tensor> counts;
  for (const auto& l : layers_) {
    const auto& c = l.moe->tokens_per_expert;
    counts.push_back(c.defined() ? c
                                 : torch::zeros({l.moe->args.num_experts},
                                                torch::dtype(torch::kFloat32).device(device)));
  }
  auto all = torch::cat(counts);  // [sum of E]
  loss_group_->all_reduce_(all, distributed::ReduceOp::Sum, "expert token counts all-reduce");
  tp_group_->all_reduce_(all, distributed::ReduceOp::Sum, "expert token counts all-reduce (tp)");
  auto table = torch::zeros({n_layers_, 3}, torch::dtype(torch::kFloat32).device(device));
  int64_t offset = 0;
  for (const auto& l : layers_) {
    const auto& args = l.moe->args;
    auto count = all.narrow(0, offset, args.num_experts);  // [E]
    offset += args.num_experts;
    auto mean = count.mean();
    if (l.moe->expert_bias.defined()) {
      auto delta = args.load_balance_coeff * torch::sign(mean - count);  // [E]
      l.moe->expert_bias.add_(delta - delta.mean());
    }
    auto safe_mean = mean.clamp_min(1e-30);
    table[l.id] =
        torch::stack({torch::ones_like(mean), count.max() / safe_mean, count.min() / safe_mean});
    if (l.moe->tokens_per_expert.defined()) l.moe->tokens_per_expert.zero_();
  }
  pp_group_->all_reduce_(table, distributed::ReduceOp::Sum, "expert loads all-reduce (pp)");
  auto rows = table.cpu();
  loads_.clear();
  for (int64_t i = 0; i < n_layers_; ++i) {
    if (rows[i][0].item<float>() > 0) {
      loads_.push_back({i, rows[i][1].item<double>(), rows[i][2].item<double>()});
    }
  }
}

distributed::ShardedStateDict ExpertLoadBalancer::state(bool loading) {
  distributed::ShardedStateDict out;
  const bool writer = loss_group_->rank() == 0 && tp_group_->rank() == 0;
  for (const auto& l : layers_) {
    const auto& bias = l.moe->expert_bias;
    if (!bias.defined()) continue;
    distributed::ShardedTensor piece;
    piece.local = loading ? torch::zeros({bias.size(0)}, torch::kFloat32)
                          : bias.to(torch::kCPU, torch::kFloat32).contiguous();
    piece.global_shape = {bias.size(0)};
    piece.writer = writer;
    out[bias_name(l.id)] = piece;
  }
  if (loading) loading_ = out;
  return out;
}

void ExpertLoadBalancer::finish_load() {
  torch::NoGradGuard no_grad;
  for (const auto& l : layers_) {
    auto it = loading_.find(bias_name(l.id));
    if (it != loading_.end()) l.moe->expert_bias.copy_(it->second.local);
  }
  loading_.clear();
}

}  // namespace titan::components
