#include "titan/distributed/fsdp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

#include "titan/distributed/squared_norm.h"
#include "titan/models/common/transformer_block.h"
#include "titan/platform/autograd_state.h"
#include "titan/platform/clock.h"
#include "titan/platform/memory.h"

namespace titan::distributed {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::vector<int64_t> with_rows(std::vector<int64_t> shape, int64_t rows) {
  if (shape.empty()) return {rows};
  shape[0] = rows;
  return shape;
}

void free_storage(const torch::Tensor& t) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  impl->set_nbytes(0);
}

// all-gather forward, reduce-scatter backward, over one unit's parameters.
struct AllGatherFn : public torch::autograd::Function<AllGatherFn> {
  static variable_list forward(
      AutogradContext* ctx, at::TensorList shards,
      const c10::intrusive_ptr<platform::AutogradState<FsdpUnit*>>& unit) {
    platform::save_state(ctx, unit);
    auto full = unit->value->all_gather_full(shards.vec());
    if (!unit->value->aliases_shards()) ctx->save_for_backward(full);
    return full;
  }
  // Runs once every use of the gathered parameters has given its gradient: they are freed
  // here (FSDP2's reshard after backward), not when the step's graph goes.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto* unit = platform::saved_state<FsdpUnit*>(ctx);
    for (const auto& gathered : ctx->get_saved_variables()) free_storage(gathered);
    auto out = unit->reduce_grads(grads);
    out.emplace_back();  // no gradient for the unit pointer
    return out;
  }
};

void refill_storage(const torch::Tensor& t, const torch::Tensor& values) {
  auto* impl = t.storage().unsafeGetStorageImpl();
  size_t nbytes = values.numel() * values.element_size();
  impl->set_data_ptr_noswap(impl->allocator()->allocate(nbytes));
  impl->set_nbytes(nbytes);
  // A fresh alias of the storage, so the copy does not bump the version of the tensors that
  // autograd saved.
  auto alias = torch::empty({0}, values.options()).set_(t.storage(), 0, values.sizes());
  alias.copy_(values);
}

// A block's units, and under FsdpOptions::overlap those its forward and backward prefetch.
struct BlockUnits {
  std::vector<std::shared_ptr<FsdpUnit>> own, next, previous;
};

}  // namespace

FsdpUnit::FsdpUnit(std::vector<FsdpParam> params, std::shared_ptr<ProcessGroup> shard_group,
                   std::shared_ptr<ProcessGroup> replicate_group, FsdpOptions options,
                   std::string name, std::shared_ptr<FsdpShared> shared)
    : params_(std::move(params)),
      shard_group_(std::move(shard_group)),
      replicate_group_(std::move(replicate_group)),
      options_(options),
      name_(std::move(name)),
      shared_(std::move(shared)) {
  aliases_shards_ = shard_group_->size() == 1;
  for (const auto& p : params_) {
    aliases_shards_ = aliases_shards_ && p.shard.scalar_type() == options_.param_dtype;
  }
}

torch::Tensor FsdpUnit::wait_for(PendingWork& pending, ProcessGroup& group) {
  const auto start = platform::Clock::now();
  auto result = group.finish(pending);
  shared_->wait_seconds += platform::seconds_since(start);
  return result;
}

PendingWork FsdpUnit::start_all_gather(const std::vector<torch::Tensor>& shards) {
  platform::MemoryScope comm(platform::MemoryCategory::Communication);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> flat_parts;
  for (const auto& s : shards) flat_parts.push_back(s.reshape(-1).to(options_.param_dtype));
  return shard_group_->start_all_gather(torch::cat(flat_parts), "FSDP all-gather of " + name_);
}

void FsdpUnit::prefetch() {
  if (prefetched_.active() || aliases_shards_) return;
  std::vector<torch::Tensor> shards;
  for (const auto& p : params_) shards.push_back(p.shard);
  prefetched_ = start_all_gather(shards);
}

void FsdpUnit::drop_prefetch() {
  if (prefetched_.active()) wait_for(prefetched_, *shard_group_);
}

std::vector<torch::Tensor> FsdpUnit::all_gather_full(const std::vector<torch::Tensor>& shards) {
  if (aliases_shards_) return shards;
  platform::MemoryScope comm(platform::MemoryCategory::Communication);
  torch::NoGradGuard no_grad;
  if (!prefetched_.active()) prefetched_ = start_all_gather(shards);
  auto gathered = wait_for(prefetched_, *shard_group_);  // [size * n]
  int64_t size = shard_group_->size();
  auto per_rank = gathered.view({size, -1});  // [size, n]
  std::vector<torch::Tensor> full;
  int64_t offset = 0;
  for (const auto& p : params_) {
    int64_t len = p.shard_rows * row_numel(p.full_shape);
    auto padded = torch::empty(with_rows(p.full_shape, p.shard_rows * size),
                               per_rank.options());  // [size * shard_rows, ...]
    padded.view({size, len}).copy_(per_rank.narrow(1, offset, len));
    full.push_back(padded);
    offset += len;
  }
  return full;
}

torch::Tensor FsdpUnit::pack_grads(const std::vector<torch::Tensor>& full_grads) const {
  platform::MemoryScope comm(platform::MemoryCategory::Communication);
  torch::NoGradGuard no_grad;
  int64_t size = shard_group_->size();
  int64_t n = 0;
  for (const auto& p : params_) n += p.shard_rows * row_numel(p.full_shape);
  auto packed = torch::zeros({size, n},
                             params_.front().shard.options().dtype(options_.reduce_dtype));
  int64_t offset = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    int64_t len = params_[i].shard_rows * row_numel(params_[i].full_shape);
    if (full_grads[i].defined()) {
      packed.narrow(1, offset, len).copy_(full_grads[i].reshape({size, len}));
    }
    offset += len;
  }
  return packed.view(-1);
}

std::vector<torch::Tensor> FsdpUnit::split_shard_grads(const torch::Tensor& reduced) const {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> shard_grads;
  int64_t offset = 0;
  for (const auto& p : params_) {
    int64_t len = p.shard_rows * row_numel(p.full_shape);
    shard_grads.push_back(
        reduced.narrow(0, offset, len).view(p.shard.sizes()).to(p.shard.scalar_type()));
    // The shards' gradients from here on (a later microbatch's are added and freed).
    platform::retag_memory(shard_grads.back(), platform::MemoryCategory::Gradients);
    offset += len;
  }
  return shard_grads;
}

std::vector<torch::Tensor> FsdpUnit::reduce_scatter_grads(
    const std::vector<torch::Tensor>& full_grads) {
  auto pending =
      shard_group_->start_reduce_scatter(pack_grads(full_grads), "FSDP reduce-scatter of " + name_);
  auto reduced = wait_for(pending, *shard_group_);
  if (has_replicas()) {
    pending = replicate_group_->start_all_reduce(reduced, ReduceOp::Sum,
                                                 "HSDP all-reduce of " + name_);
    reduced = wait_for(pending, *replicate_group_);
  }
  return split_shard_grads(reduced);
}

std::vector<torch::Tensor> FsdpUnit::reduce_grads(const std::vector<torch::Tensor>& full_grads) {
  if (aliases_shards_ && !has_replicas()) {  // a world of one: the gradients are the shards'
    auto grads = full_grads;
    for (size_t i = 0; i < grads.size(); ++i) {
      // An unused parameter gets zeros, as from a reduction: the optimizer still steps it.
      if (!grads[i].defined()) grads[i] = torch::zeros_like(params_[i].shard);
      platform::retag_memory(grads[i], platform::MemoryCategory::Gradients);
    }
    return grads;
  }
  if (!options_.overlap) return reduce_scatter_grads(full_grads);
  start_reduce_scatter(full_grads);  // finish_gradients() fills the shards' .grad
  return std::vector<torch::Tensor>(full_grads.size());
}

void FsdpUnit::start_reduce_scatter(const std::vector<torch::Tensor>& full_grads) {
  finish_gradients();  // this unit's previous microbatch
  auto& reducing = shared_->reducing;
  for (auto* unit : reducing) unit->finish_reduce_scatter();
  reducing.erase(std::remove(reducing.begin(), reducing.end(), this), reducing.end());
  reducing_ =
      shard_group_->start_reduce_scatter(pack_grads(full_grads), "FSDP reduce-scatter of " + name_);
  reducing.push_back(this);
}

void FsdpUnit::finish_reduce_scatter() {
  if (!reducing_.active() || all_reducing_) return;
  auto reduced = wait_for(reducing_, *shard_group_);
  if (!has_replicas()) {
    add_to_grads(reduced);
    return;
  }
  reducing_ = replicate_group_->start_all_reduce(reduced, ReduceOp::Sum,
                                                 "HSDP all-reduce of " + name_);
  all_reducing_ = true;
}

void FsdpUnit::finish_gradients() {
  finish_reduce_scatter();
  if (!all_reducing_) return;
  all_reducing_ = false;
  add_to_grads(wait_for(reducing_, *replicate_group_));
}

void FsdpUnit::add_to_grads(const torch::Tensor& reduced) {
  torch::NoGradGuard no_grad;
  auto grads = split_shard_grads(reduced);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& grad = params_[i].shard.mutable_grad();
    if (grad.defined()) {
      grad.add_(grads[i]);
    } else {
      grad = grads[i];
    }
  }
}

std::vector<torch::Tensor> FsdpUnit::gather() {
  std::vector<torch::Tensor> shards;
  for (const auto& p : params_) shards.push_back(p.shard);
  auto full = AllGatherFn::apply(at::TensorList(shards), platform::autograd_state(this));
  for (size_t i = 0; i < params_.size(); ++i) {
    // Unpadded, the gathered tensor itself: a narrow's backward would copy the gradient.
    const int64_t rows = params_[i].full_shape[0];
    params_[i].module->weight = full[i].size(0) == rows ? full[i] : full[i].narrow(0, 0, rows);
  }
  return full;
}

void FsdpUnit::release(const std::vector<torch::Tensor>& gathered, bool free_storage_now) {
  for (auto& p : params_) p.module->weight = p.shard;
  if (free_storage_now && !aliases_shards_) {
    for (const auto& f : gathered) free_storage(f);
  }
}

bool FsdpUnit::regather(const std::vector<torch::Tensor>& gathered) {
  platform::MemoryScope comm(platform::MemoryCategory::Communication);
  if (gathered.empty() || gathered.front().storage().nbytes() > 0) {
    drop_prefetch();
    return false;
  }
  std::vector<torch::Tensor> shards;
  for (const auto& p : params_) shards.push_back(p.shard);
  auto values = all_gather_full(shards);
  for (size_t i = 0; i < gathered.size(); ++i) refill_storage(gathered[i], values[i]);
  return true;
}

std::shared_ptr<Fsdp> Fsdp::apply(models::CausalLM& model,
                                  std::shared_ptr<ProcessGroup> shard_group,
                                  std::shared_ptr<ProcessGroup> replicate_group,
                                  FsdpOptions options, const FsdpExpertGroup& experts) {
  torch::NoGradGuard no_grad;
  auto fsdp = std::make_shared<Fsdp>();
  std::map<c10::TensorImpl*, std::string> names;
  for (const auto& item : model.named_parameters()) {
    names[item.value().unsafeGetTensorImpl()] = item.key();
  }
  auto make_unit = [&](const std::vector<models::WeightModule*>& modules, const std::string& name,
                       FsdpOptions unit_options, const std::shared_ptr<ProcessGroup>& group) {
    const int64_t size = group->size(), rank = group->rank();
    std::vector<FsdpParam> params;
    for (auto* m : modules) {
      FsdpParam p;
      p.module = m;
      p.name = names.at(m->weight.unsafeGetTensorImpl());
      p.full_shape = m->weight.sizes().vec();
      p.shard_rows = (p.full_shape[0] + size - 1) / size;
      auto padded = torch::zeros(with_rows(p.full_shape, p.shard_rows * size),
                                 m->weight.options());
      padded.narrow(0, 0, p.full_shape[0]).copy_(m->weight);
      m->weight.set_data(padded.narrow(0, rank * p.shard_rows, p.shard_rows).clone());
      p.shard = m->weight;
      params.push_back(p);
    }
    return std::make_shared<FsdpUnit>(std::move(params), group, replicate_group, unit_options,
                                      name, fsdp->shared_);
  };
  const std::set<models::WeightModule*> expert_modules(experts.modules.begin(),
                                                       experts.modules.end());
  std::vector<torch::nn::Module*> block_modules;
  std::map<int64_t, BlockUnits> block_units;  // by global layer id, in forward order
  for (const auto& block : model.blocks()) {
    block_modules.push_back(block.module);
    std::vector<models::WeightModule*> dense, routed;
    for (auto* m : models::weight_modules(*block.module)) {
      (expert_modules.count(m) ? routed : dense).push_back(m);
    }
    const auto name = fmt::format("layers.{}", block.layer_id);
    auto& units = block_units[block.layer_id].own;
    units.push_back(make_unit(dense, name, options, shard_group));
    if (!routed.empty()) {
      units.push_back(make_unit(routed, name + " experts", options, experts.shard_group));
    }
    fsdp->units_.insert(fsdp->units_.end(), units.begin(), units.end());
  }
  if (options.overlap) {
    for (auto it = block_units.begin(); it != block_units.end(); ++it) {
      if (auto next = std::next(it); next != block_units.end()) {
        it->second.next = next->second.own;
        next->second.previous = it->second.own;
      }
    }
  }
  model.add_block_wrapper([block_units](int64_t layer, const torch::Tensor& x,
                                        const models::CausalLM::TensorFn& inner) {
    const auto& units = block_units.at(layer);
    std::vector<std::vector<torch::Tensor>> gathered;
    for (const auto& unit : units.own) gathered.push_back(unit->gather());
    for (const auto& unit : units.next) unit->prefetch();
    auto out = inner(x);
    const bool reshard =
        units.own.front()->options().reshard_after_forward && out.requires_grad();
    for (size_t i = 0; i < units.own.size(); ++i) units.own[i]->release(gathered[i], reshard);
    if (reshard) {
      out.register_hook([units, gathered](const torch::Tensor& grad) {
        bool refilled = false;
        for (size_t i = 0; i < units.own.size(); ++i) {
          refilled = units.own[i]->regather(gathered[i]) || refilled;
        }
        // A second backward pass (a pipeline's weight pass) finds the block whole: the block
        // before needs no prefetch either.
        if (refilled) {
          for (const auto& unit : units.previous) unit->prefetch();
        }
        return grad;
      });
    }
    return out;
  });
  // The root unit: what is outside the blocks (a middle pipeline stage has none).
  auto root_modules = models::weight_modules(model, block_modules);
  if (root_modules.empty()) return fsdp;
  FsdpOptions root_options = options;
  root_options.reshard_after_forward = false;
  auto root = make_unit(root_modules, "root", root_options, shard_group);
  fsdp->units_.push_back(root);
  std::vector<std::shared_ptr<FsdpUnit>> first_block;
  if (options.overlap && !block_units.empty()) first_block = block_units.begin()->second.own;
  model.add_model_wrapper([root, first_block](int64_t, const torch::Tensor& input,
                                              const models::CausalLM::TensorFn& inner) {
    auto gathered = root->gather();
    for (const auto& unit : first_block) unit->prefetch();
    auto out = inner(input);
    root->release(gathered, false);
    return out;
  });
  return fsdp;
}

std::vector<torch::Tensor> Fsdp::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& u : units_) {
    for (const auto& p : u->params()) out.push_back(p.shard);
  }
  return out;
}

double Fsdp::grad_sq_sum(const std::vector<double>& weights) {
  torch::NoGradGuard no_grad;
  auto params = parameters();
  auto total = torch::zeros({1}, params.front().options().dtype(torch::kDouble));
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& g = params[i].grad();
    if (g.defined()) total += weights.at(i) * squared_norm(g);
  }
  units_.front()->shard_group().all_reduce_(total, ReduceOp::Sum, "gradient norm all-reduce");
  return total.item<double>();
}

void Fsdp::finish_gradients() {
  for (auto* unit : shared_->reducing) unit->finish_gradients();
  shared_->reducing.clear();
  for (const auto& unit : units_) unit->drop_prefetch();
}

ShardedStateDict Fsdp::shard_view(const std::vector<torch::Tensor>& tensors,
                                  const std::string& prefix) const {
  ShardedStateDict out;
  size_t i = 0;
  for (const auto& u : units_) {
    auto* replicas = const_cast<FsdpUnit&>(*u).replicate_group();
    int64_t rank = const_cast<FsdpUnit&>(*u).shard_group().rank();
    for (const auto& p : u->params()) {
      int64_t start = rank * p.shard_rows;
      int64_t rows = std::clamp<int64_t>(p.full_shape[0] - start, 0, p.shard_rows);
      ShardedTensor t;
      t.local = tensors.at(i++).narrow(0, 0, rows);
      t.global_shape = p.full_shape;
      t.row_offset = start;
      t.writer = !replicas || replicas->rank() == 0;
      out[prefix + p.name] = t;
    }
  }
  return out;
}

}  // namespace titan::distributed
