#include "titan/distributed/expert_parallel.h"

#include <fmt/format.h>

#include <numeric>

#include "titan/distributed/collectives.h"
#include "titan/errors.h"
#include "titan/models/common/transformer_block.h"
#include "titan/models/common/weight_module.h"

namespace titan::distributed {
namespace {

int64_t sum(const int64_t* begin, int64_t n) {
  return std::accumulate(begin, begin + n, int64_t{0});
}

}  // namespace

AllToAllDispatcher::AllToAllDispatcher(std::shared_ptr<ProcessGroup> ep_group, int64_t num_experts)
    : group_(std::move(ep_group)), local_experts_(num_experts / group_->size()) {}

std::pair<torch::Tensor, std::vector<int64_t>> AllToAllDispatcher::dispatch(
    const torch::Tensor& routed, const std::vector<int64_t>& counts,
    const std::function<void()>& during) {
  const int64_t ep = group_->size(), local = local_experts_;
  // recv[s L + e]: copies rank s sends for this rank's local expert e.
  auto recv = group_->all_to_all(torch::tensor(counts, torch::kInt64),
                                 std::vector<int64_t>(ep, local), std::vector<int64_t>(ep, local),
                                 "EP all-to-all of token counts");  // [ep L]
  const auto* r = recv.data_ptr<int64_t>();
  sent_.assign(ep, 0);
  received_.assign(ep, 0);
  for (int64_t j = 0; j < ep; ++j) {
    sent_[j] = sum(counts.data() + j * local, local);
    received_[j] = sum(r + j * local, local);
  }
  // Received rows are source-major (rank s's rows for its local experts in order); the grouped
  // GEMM wants them local-expert-major.
  std::vector<int64_t> source_start(ep, 0), order, local_counts(local, 0);
  for (int64_t s = 1; s < ep; ++s) source_start[s] = source_start[s - 1] + received_[s - 1];
  for (int64_t e = 0; e < local; ++e) {
    for (int64_t s = 0; s < ep; ++s) {
      const int64_t begin = source_start[s] + sum(r + s * local, e), n = r[s * local + e];
      for (int64_t i = 0; i < n; ++i) order.push_back(begin + i);
      local_counts[e] += n;
    }
  }
  order_ = torch::tensor(order, torch::dtype(torch::kInt64).device(routed.device()));  // [M]
  auto rows = all_to_all_rows(routed, received_, sent_, *group_, during);  // [M, dim] source-major
  return {rows.index_select(0, order_), local_counts};  // [M, dim] local-expert-major
}

torch::Tensor AllToAllDispatcher::combine(const torch::Tensor& expert_out) {
  auto source_major = torch::empty_like(order_).scatter_(
      0, order_, torch::arange(order_.size(0), order_.options()));  // [M]: inverse of order_
  return all_to_all_rows(expert_out.index_select(0, source_major), sent_, received_,
                         *group_);  // [N, dim] in the routed order
}

void shard_experts(models::MoEImpl& moe, std::shared_ptr<ProcessGroup> ep_group) {
  const int64_t experts = moe.args.num_experts, ep = ep_group->size();
  if (experts % ep != 0) {
    throw ConfigError(
        fmt::format("parallelism.expert_parallel_degree = {} must divide the {} "
                    "routed experts of each MoE layer",
                    ep, experts));
  }
  torch::NoGradGuard no_grad;
  const int64_t local = experts / ep;
  for (auto* w : models::weight_modules(*moe.experts)) {
    w->weight.set_data(w->weight.narrow(0, ep_group->rank() * local, local).clone());
  }
  moe.dispatcher = std::make_shared<AllToAllDispatcher>(std::move(ep_group), experts);
}

ExpertParallel::ExpertParallel(models::CausalLM& model, std::shared_ptr<ProcessGroup> ep_group)
    : group_(std::move(ep_group)) {
  for (const auto& block : model.blocks()) {
    auto* moe = block.module->feed_forward->as<models::MoEImpl>();
    if (!moe) continue;
    shard_experts(*moe, group_);
    for (auto* w : models::weight_modules(*moe->experts)) modules_.push_back(w);
  }
  for (const auto& item : model.named_parameters()) {
    for (auto* m : modules_) {
      if (item.value().is_same(m->weight)) names_.insert(item.key());
    }
  }
}

ShardedStateDict ExpertParallel::to_global(ShardedStateDict pieces,
                                           const std::string& prefix) const {
  for (auto& [key, piece] : pieces) {
    if (key.compare(0, prefix.size(), prefix) != 0 || !names_.count(key.substr(prefix.size()))) {
      continue;
    }
    piece.row_offset += group_->rank() * piece.global_shape[0];  // local experts [E / ep, ...]
    piece.global_shape[0] *= group_->size();
  }
  return pieces;
}

}  // namespace titan::distributed
