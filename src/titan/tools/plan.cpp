#include "titan/tools/plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "titan/distributed/compile.h"
#include "titan/distributed/linear_cross_entropy.h"
#include "titan/distributed/parallelize.h"
#include "titan/errors.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/transformer_block.h"

namespace titan::tools {
namespace {

constexpr int64_t kFp32 = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// An FSDP unit (as fsdp.h: one per transformer block, and the root unit holding the rest):
// its parameters after tensor parallelism, and this rank's FSDP shard of them.
struct Unit {
  std::string name;
  int64_t tp_params = 0;
  int64_t rank_params = 0;
};

// How a layout divides the parameters: tensor parallelism splits every 2-D weight (column- or
// row-wise, vocab-parallel for the embedding and output) and replicates the 1-D norm weights;
// FSDP then shards each over `fsdp` ranks. The routed experts' [E, ...] weights are whole
// across tp; expert parallelism keeps 1/ep of them, which FSDP shards over efsdp.
struct Division {
  int64_t tp = 1, fsdp = 1, ep = 1, efsdp = 1;
  std::unordered_set<const void*> experts;
};

// Adds the parameters not yet `seen` to `unit`.
void add_params(Unit& unit, const std::vector<torch::Tensor>& params, const Division& d,
                std::unordered_set<const void*>& seen) {
  for (const auto& p : params) {
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (d.experts.count(p.unsafeGetTensorImpl())) {
      const int64_t local = ceil_div(p.numel(), d.ep);
      unit.tp_params += local;
      unit.rank_params += ceil_div(local, d.efsdp);
      continue;
    }
    const int64_t tp_numel = p.dim() == 2 ? ceil_div(p.numel(), d.tp) : p.numel();
    unit.tp_params += tp_numel;
    unit.rank_params += ceil_div(tp_numel, d.fsdp);
  }
}

std::vector<Unit> fsdp_units(models::CausalLM& model, const Division& d) {
  std::vector<Unit> units;
  std::unordered_set<const void*> seen;
  for (const auto& block : model.blocks()) {
    units.push_back({fmt::format("layers.{}", block.layer_id)});
    add_params(units.back(), block.module->parameters(), d, seen);
  }
  units.push_back({"root"});
  add_params(units.back(), model.parameters(), d, seen);
  return units;
}

using models::SavedElements;

// Copies of the other context-parallel ranks' keys and values each attention keeps for
// backward: allgather keeps the whole sequence's, the ring only this rank's.
int64_t gathered_key_copies(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  return dims.cp_enabled() && job.parallelism.context_parallel_rotate_method == "allgather"
             ? dims.cp - 1
             : 0;
}

// What one block saves per token (it answers for itself: its norms and its parts,
// block_part.h), with `gathered` extra copies of its attention's keys and values.
SavedElements block_saved(const models::BlockRef& block, bool op_level, int64_t gathered) {
  return block.module->saved_elements(op_level) +
         SavedElements{0, gathered * block.module->attention->key_value_elements()};
}

// Elements saved per token over all blocks, and the mode's description.
std::pair<SavedElements, std::string> saved_elements(const config::ActivationCheckpointSection& ac,
                                                     models::CausalLM& model, int64_t gathered) {
  SavedElements none, op, inputs, largest;  // the largest block's full set is recomputed
  const auto blocks = model.blocks();
  for (const auto& block : blocks) {
    const SavedElements full = block_saved(block, false, gathered);
    none = none + full;
    op = op + block_saved(block, true, gathered);
    inputs = inputs + SavedElements{block.module->dim, 0};
    if (full.total() > largest.total()) largest = full;
  }
  if (ac.mode == "none") return {none, "none"};
  // Checkpointed blocks keep their input; one block at a time is recomputed during backward.
  if (ac.mode == "full") return {inputs + largest, "full"};
  if (ac.selective_ac_option == "op") return {op + largest, "selective op"};
  const std::string& option = ac.selective_ac_option;
  auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  const bool digits =
      !option.empty() && option.size() < 10 && std::all_of(option.begin(), option.end(), is_digit);
  const int64_t every = digits ? std::stoll(option) : 0;
  if (every <= 0) {
    throw ConfigError(
        fmt::format("activation_checkpoint.selective_ac_option = '{}': expected "
                    "'op' or a positive integer",
                    ac.selective_ac_option));
  }
  // TorchTitan checkpoints the blocks whose 1-based index is a multiple of `every`.
  SavedElements saved;
  bool any_checkpointed = false;
  for (const auto& block : blocks) {
    const bool checkpointed = (block.layer_id + 1) % every == 0;
    any_checkpointed = any_checkpointed || checkpointed;
    saved = saved + (checkpointed ? SavedElements{block.module->dim, 0}
                                  : block_saved(block, false, gathered));
  }
  return {any_checkpointed ? saved + largest : saved,
          fmt::format("selective, every {} block(s)", every)};
}

}  // namespace

int64_t dtype_bytes(const std::string& dtype) {
  if (dtype == "bfloat16") return 2;
  if (dtype == "float32") return 4;
  throw ConfigError(
      fmt::format("training.mixed_precision_param / mixed_precision_reduce: "
                  "'{}' is not a dtype (expected bfloat16 or float32)",
                  dtype));
}

LayoutPlan plan_layout(models::CausalLM& model, const config::JobConfig& job,
                       const distributed::ParallelDims& dims, const StageLoad& load) {
  const models::ModelShape shape = model.shape();
  const int64_t tp = dims.tp, fsdp = static_cast<int64_t>(dims.dp_shard) * dims.cp;
  LayoutPlan plan;
  plan.total_params = model.num_params();
  plan.embedding_params = model.num_embedding_params();
  plan.compute_dtype = dims.fsdp_enabled() ? job.training.mixed_precision_param : "float32";
  const int64_t compute_bytes = dtype_bytes(plan.compute_dtype);
  const int64_t reduce_bytes = dtype_bytes(job.training.mixed_precision_reduce);

  Division division{tp, fsdp, dims.ep, dims.ep_enabled() ? dims.efsdp() : fsdp, {}};
  std::vector<models::MoEImpl*> moe_layers;
  for (const auto& block : model.blocks()) {
    if (auto* moe = block.module->feed_forward->as<models::MoEImpl>()) {
      moe_layers.push_back(moe);
      for (const auto& p : moe->experts->parameters()) {
        division.experts.insert(p.unsafeGetTensorImpl());
      }
    }
  }
  Unit experts;
  std::unordered_set<const void*> seen;
  for (auto* moe : moe_layers) add_params(experts, moe->experts->parameters(), division, seen);
  plan.expert_params_per_rank = experts.rank_params;

  int64_t gathered_all = 0;
  const auto units = fsdp_units(model, division);
  for (const auto& unit : units) {
    plan.params_per_rank += unit.rank_params;
    gathered_all += unit.tp_params;
    if (&unit != &units.back() && unit.tp_params > plan.largest_block_params) {
      plan.largest_block = unit.name;
      plan.largest_block_params = unit.tp_params;
    }
  }
  plan.root_unit_params = units.back().tp_params;

  MemoryEstimate& m = plan.memory;
  m.params = static_cast<double>(plan.params_per_rank) * kFp32;
  m.grads = static_cast<double>(plan.params_per_rank) * kFp32;
  m.optimizer = 2.0 * plan.params_per_rank * kFp32;
  if (dims.fsdp_enabled()) {
    const bool keep_gathered = !distributed::reshard_after_forward(job.parallelism, dims);
    const int64_t kept =
        keep_gathered ? gathered_all : plan.root_unit_params + plan.largest_block_params;
    m.gathered = static_cast<double>(kept) * compute_bytes +
                 static_cast<double>(plan.largest_block_params) * reduce_bytes;
  }

  const int64_t sequences = load.sequences > 0 ? load.sequences : job.training.local_batch_size;
  plan.tokens_per_rank = sequences * job.training.seq_len / dims.cp;
  plan.in_flight = load.in_flight;
  const int64_t gathered = gathered_key_copies(job, dims);
  for (const auto& block : model.blocks()) {
    plan.activation_elements_per_token_layer = std::max(
        plan.activation_elements_per_token_layer, block_saved(block, false, gathered).total());
    plan.op_sac_elements_per_token_layer =
        std::max(plan.op_sac_elements_per_token_layer, block_saved(block, true, gathered).total());
  }
  auto [saved, mode] = saved_elements(job.activation_checkpoint, model, gathered);
  plan.activation_checkpointing = mode;
  plan.sequence_parallel = tp > 1 && !job.parallelism.disable_sequence_parallel;
  const double per_token =
      static_cast<double>(saved.sequence) / static_cast<double>(plan.sequence_parallel ? tp : 1) +
      static_cast<double>(saved.tensor) / static_cast<double>(tp);
  m.activations = per_token * static_cast<double>(plan.tokens_per_rank * compute_bytes) *
                  static_cast<double>(plan.in_flight);
  if (model.holds_output()) {
    const double vocab = static_cast<double>(ceil_div(shape.vocab_size, tp));
    const double tokens = static_cast<double>(plan.tokens_per_rank);
    if (distributed::compiles(job.compile, "loss")) {  // one block; dx and dw, kept from forward
      const auto block =
          distributed::loss_block(plan.tokens_per_rank, ceil_div(shape.vocab_size, tp), tp > 1);
      m.logits = static_cast<double>(block.tokens * block.vocab) * (compute_bytes + kFp32) +
                 tokens * static_cast<double>(shape.dim * compute_bytes) +
                 vocab * static_cast<double>(shape.dim) * kFp32;
    } else {
      m.logits = tokens * vocab * (compute_bytes + kFp32);
    }
  }
  if (dims.ep_enabled()) {
    // Every routed copy of this rank's step tokens goes out and back in forward, and again
    // for the gradients; (ep - 1) / ep of them leave the rank.
    const int64_t dp_batch = job.training.global_batch_size > 0
                                 ? job.training.global_batch_size / dims.dp()
                                 : job.training.local_batch_size;
    const int64_t step_tokens =
        dp_batch * job.training.seq_len / dims.cp / (plan.sequence_parallel ? tp : 1);
    for (auto* moe : moe_layers) {
      plan.all_to_all_bytes_per_step +=
          4 * step_tokens * moe->args.top_k * shape.dim * compute_bytes * (dims.ep - 1) / dims.ep;
    }
  }
  return plan;
}

}  // namespace titan::tools
