#include "titan/distributed/tensor_parallel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "titan/distributed/collectives.h"
#include "titan/distributed/loss_parallel.h"
#include "titan/errors.h"
#include "titan/models/common/loss.h"
#include "titan/models/common/transformer_block.h"

namespace titan::distributed {

void check_tensor_parallel(models::CausalLM& model, int tp, int64_t seq_len,
                           bool sequence_parallel, const char* seq_len_key) {
  if (tp <= 1) return;
  auto require = [tp](int64_t value, const std::string& what) {
    if (value % tp != 0) {
      throw ConfigError(fmt::format("parallelism.tensor_parallel_degree = {} does not divide the "
                                    "model's {} ({}); choose a degree that divides it",
                                    tp, what, value));
    }
  };
  for (const auto& block : model.blocks()) {
    for (const auto* part : block.module->parts()) {
      for (const auto& size : part->tensor_parallel_sizes()) require(size.value, size.what);
    }
  }
  require(model.shape().vocab_size, "vocabulary size");
  if (sequence_parallel && seq_len % tp != 0) {
    throw ConfigError(fmt::format("sequence parallelism shards {} ({}) over "
                                  "parallelism.tensor_parallel_degree = {} ranks: it must be "
                                  "divisible (or set parallelism.disable_sequence_parallel)",
                                  seq_len_key, seq_len, tp));
  }
}

TensorParallel::TensorParallel(std::shared_ptr<ProcessGroup> group, TensorParallelOptions options)
    : group_(std::move(group)), options_(options) {}

void TensorParallel::shard(models::WeightModule& m, int64_t dim, Layout layout) {
  torch::NoGradGuard no_grad;
  const int64_t n = m.weight.size(dim);
  if (n % size() != 0) {
    throw ConfigError(fmt::format("tensor parallelism cannot split a weight of shape [{}] on "
                                  "dim {} over {} ranks",
                                  fmt::join(m.weight.sizes(), ", "), dim, size()));
  }
  const int64_t part = n / size();
  m.weight.set_data(m.weight.narrow(dim, rank() * part, part).contiguous());
  by_param_[m.weight.unsafeGetTensorImpl()] = Placement{layout, false, m.weight};
}

void TensorParallel::colwise(models::WeightModule& m) { shard(m, 0, Layout::Rows); }

void TensorParallel::rowwise(models::WeightModule& m) { shard(m, 1, Layout::Columns); }

void TensorParallel::replicate(models::WeightModule& m, bool partial_grads) {
  by_param_[m.weight.unsafeGetTensorImpl()] = Placement{Layout::Replicate, partial_grads, m.weight};
}

void TensorParallel::exclude(models::WeightModule& m) {
  Placement elsewhere{Layout::Elsewhere, false, m.weight};
  by_param_[m.weight.unsafeGetTensorImpl()] = elsewhere;
  for (auto& [name, placement] : by_name_) {
    if (placement.param.is_same(m.weight)) placement = elsewhere;
  }
}

void TensorParallel::finish(torch::nn::Module& model) {
  for (const auto& item : model.named_parameters()) {
    auto it = by_param_.find(item.value().unsafeGetTensorImpl());
    if (it == by_param_.end()) {
      throw ConfigError(fmt::format("the tensor-parallel plan gives parameter {} no placement",
                                    item.key()));
    }
    by_name_[item.key()] = it->second;
  }
}

torch::Tensor TensorParallel::enter_region(const torch::Tensor& x) {
  return options_.sequence_parallel ? all_gather_along(x, 1, *group_)
                                    : copy_to_parallel_region(x, *group_);
}

torch::Tensor TensorParallel::leave_region(const torch::Tensor& y) {
  return options_.sequence_parallel ? reduce_scatter_along(y, 1, *group_)
                                    : reduce_from_parallel_region(y, *group_);
}

torch::Tensor TensorParallel::logits(const torch::Tensor& local_logits) {
  return options_.loss_parallel ? local_logits : gather_last_dim(local_logits, *group_);
}

torch::Tensor TensorParallel::loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  if (size() > 1 && options_.loss_parallel) {
    return vocab_parallel_cross_entropy_sum(logits, labels, *group_);
  }
  return models::cross_entropy_sum(logits, labels);
}

void TensorParallel::reduce_partial_grads() {
  if (size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& [name, p] : by_name_) {  // the same order on every rank
    if (p.partial_grads && p.param.grad().defined()) grads.push_back(p.param.grad());
  }
  if (grads.empty()) return;
  std::vector<torch::Tensor> flat;
  for (const auto& g : grads) flat.push_back(g.reshape(-1).to(torch::kFloat));
  auto packed = torch::cat(flat);
  group_->all_reduce_(packed, ReduceOp::Sum, "TP all-reduce of replicated parameters' gradients");
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(packed.narrow(0, offset, g.numel()).view_as(g));
    offset += g.numel();
  }
}

std::vector<double> TensorParallel::norm_weights(const std::vector<torch::Tensor>& params) const {
  std::vector<double> weights;
  for (const auto& p : params) {
    auto it = by_param_.find(p.unsafeGetTensorImpl());
    const bool replicated = it == by_param_.end() || it->second.layout == Layout::Replicate;
    weights.push_back(replicated ? 1.0 / size() : 1.0);
  }
  return weights;
}

const TensorParallel::Placement* TensorParallel::placement_of(const std::string& key,
                                                             const std::string& prefix) const {
  const bool prefixed = key.compare(0, prefix.size(), prefix) == 0;
  auto it = prefixed ? by_name_.find(key.substr(prefix.size())) : by_name_.end();
  if (it == by_name_.end()) {
    throw CheckpointError(fmt::format("tensor parallelism knows no parameter for checkpoint "
                                      "entry {}", key));
  }
  return &it->second;
}

ShardedStateDict TensorParallel::to_global(const ShardedStateDict& local,
                                           const std::string& prefix) {
  if (size() == 1) return local;
  torch::NoGradGuard no_grad;
  ShardedStateDict out;
  for (auto [key, piece] : local) {  // std::map order: the same collectives on every rank
    switch (placement_of(key, prefix)->layout) {
      case Layout::Replicate:
        piece.writer = piece.writer && rank() == 0;
        break;
      case Layout::Rows:
        piece.row_offset += rank() * piece.global_shape[0];
        piece.global_shape[0] *= size();
        break;
      case Layout::Columns:
        piece.local = all_gather_along(piece.local, 1, *group_);  // no autograd: plain tensors
        piece.global_shape[1] *= size();
        piece.writer = piece.writer && rank() == 0;
        break;
      case Layout::Elsewhere:
        break;
    }
    out[key] = piece;
  }
  return out;
}

ShardedStateDict TensorParallel::for_load(const ShardedStateDict& local,
                                          const std::string& prefix) {
  auto out = to_global(local, prefix);
  for (const auto& [key, piece] : local) {
    if (size() > 1 && placement_of(key, prefix)->layout == Layout::Columns) {
      pending_loads_.emplace_back(out.at(key).local, piece.local);
    }
  }
  return out;
}

void TensorParallel::finish_load() {
  torch::NoGradGuard no_grad;
  for (auto& [full, target] : pending_loads_) {
    const int64_t cols = target.size(1);
    target.copy_(full.narrow(1, rank() * cols, cols));
  }
  pending_loads_.clear();
}

}  // namespace titan::distributed
