#include "titan/train/dry_run.h"

#include <fmt/format.h>

#include "titan/components/metrics.h"
#include "titan/config/resolve.h"
#include "titan/distributed/compile.h"
#include "titan/distributed/context_parallel.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/parallelize.h"
#include "titan/distributed/pipeline/pipeline_plan.h"
#include "titan/distributed/pipeline/schedule_stats.h"
#include "titan/distributed/tensor_parallel.h"
#include "titan/protocols/train_spec.h"
#include "titan/tools/plan.h"

namespace titan::train {
namespace {

double gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

void print_plan(const tools::LayoutPlan& plan, const distributed::ParallelDims& dims,
                const config::JobConfig& job, std::ostream& out) {
  using components::with_commas;
  const auto& m = plan.memory;
  const int64_t fsdp = static_cast<int64_t>(dims.dp_shard) * dims.cp;
  out << fmt::format("  parameters per rank: {} (tp {} splits the attention/FFN matrices and "
                     "the vocab-parallel embedding and output{}; FSDP over dp_shard x cp = {} "
                     "shards every parameter)\n",
                     with_commas(plan.params_per_rank), dims.tp,
                     plan.expert_params_per_rank > 0 ? ", not the routed experts" : "", fsdp);
  if (plan.expert_params_per_rank > 0) {
    const std::string split =
        dims.ep_enabled()
            ? fmt::format("expert parallel: 1/{} of the experts, FSDP shards them over efsdp = {}",
                          dims.ep, dims.efsdp())
            : "replicated across tp, FSDP shards them on the expert dimension";
    out << fmt::format("  routed experts per rank: {} parameters, {:.2f} GiB with their gradients "
                       "and AdamW state ({})\n",
                       with_commas(plan.expert_params_per_rank),
                       gib(4.0 * plan.expert_params_per_rank * sizeof(float)), split);
  }
  if (plan.all_to_all_bytes_per_step > 0) {
    out << fmt::format("  expert all-to-all per rank and step: {:.3f} GiB sent (routed copies "
                       "out and back, forward and backward, in {})\n",
                       gib(static_cast<double>(plan.all_to_all_bytes_per_step)),
                       plan.compute_dtype);
  }
  out << fmt::format("  memory per rank (estimate): {:.2f} GiB\n", gib(m.total()));
  out << fmt::format("    parameters   {:8.2f} GiB  fp32 shards\n", gib(m.params));
  out << fmt::format("    gradients    {:8.2f} GiB  fp32 shards\n", gib(m.grads));
  out << fmt::format("    AdamW state  {:8.2f} GiB  2 x fp32 shards\n", gib(m.optimizer));
  if (dims.fsdp_enabled()) {
    const std::string kept =
        distributed::reshard_after_forward(job.parallelism, dims)
            ? fmt::format("root unit ({} parameters) and largest block '{}' ({})",
                          with_commas(plan.root_unit_params), plan.largest_block,
                          with_commas(plan.largest_block_params))
            : "every unit, kept gathered from forward to backward";
    out << fmt::format("    FSDP gather  {:8.2f} GiB  {} in {}, the largest block's gradients in "
                       "{} (reshard_after_forward {}{})\n",
                       gib(m.gathered), kept, plan.compute_dtype,
                       job.training.mixed_precision_reduce,
                       job.parallelism.fsdp_reshard_after_forward,
                       dims.pp_enabled() ? ": off under pipeline parallelism by default" : "");
  } else {
    out << "    FSDP gather      0.00 GiB  no FSDP: parameters stay whole\n";
  }
  out << fmt::format("    activations  {:8.2f} GiB  checkpointing {}; {} tokens per rank in {}; "
                     "a block keeps {} elements per token without checkpointing ({} with op "
                     "SAC), / tp {} ({})\n",
                     gib(m.activations), plan.activation_checkpointing,
                     with_commas(plan.tokens_per_rank), plan.compute_dtype,
                     with_commas(plan.activation_elements_per_token_layer),
                     with_commas(plan.op_sac_elements_per_token_layer), dims.tp,
                     plan.sequence_parallel ? "norms and residuals too: sequence parallel"
                                            : "not the norms and residuals");
  out << fmt::format("    logits       {:8.2f} GiB  {} tokens x vocab / tp in {} + fp32 for "
                     "the loss\n",
                     gib(m.logits), with_commas(plan.tokens_per_rank), plan.compute_dtype);
  for (const auto& caveat : plan.caveats) out << "    note: " << caveat << "\n";
}

// What one pipeline rank holds: `stage`'s plan added to the plan of the rank's earlier stages
// (the first one's when `rank` is empty).
void add_stage(tools::LayoutPlan& rank, const tools::LayoutPlan& stage) {
  if (rank.tokens_per_rank == 0) {
    rank = stage;
    return;
  }
  rank.params_per_rank += stage.params_per_rank;
  rank.root_unit_params += stage.root_unit_params;
  if (stage.largest_block_params > rank.largest_block_params) {
    rank.largest_block = stage.largest_block;
    rank.largest_block_params = stage.largest_block_params;
  }
  rank.in_flight = std::max(rank.in_flight, stage.in_flight);
  auto& m = rank.memory;
  const auto& o = stage.memory;
  m.params += o.params;
  m.grads += o.grads;
  m.optimizer += o.optimizer;
  m.gathered += o.gathered;
  m.activations += o.activations;
  m.logits += o.logits;
}

// Under pipeline parallelism: the schedule, its bubble, and per pipeline rank its stages with
// their parameters and memory (each stage planned for its microbatch size and the microbatches
// its schedule keeps in flight), then the breakdown of the rank that holds the most.
void print_pipeline(const protocols::TrainSpec& spec, const config::JobConfig& job,
                    const distributed::ParallelDims& dims, std::ostream& out) {
  namespace pipe = distributed::pipeline;
  const auto pipeline = pipe::plan_pipeline(job, dims.pp, [&](const models::PipelineSplit& split) {
    return spec.pipeline_split(job.model.flavor, split);
  });
  const auto& s = pipeline.schedule;
  const std::string formula =
      pipe::is_multi_stage(s.kind)
          ? ""
          : fmt::format("; (pp - 1) / (microbatches + pp - 1) = {:.1f}%",
                        100.0 * (s.pp - 1) / (s.microbatches + s.pp - 1));
  out << fmt::format("  pipeline: {} over {} ranks, {} stages, {} microbatches of {} per local "
                     "batch; bubble {:.1f}% of rank time (simulated with a backward taking two "
                     "forwards{})\n",
                     pipe::schedule_name(s.kind), s.pp, s.num_stages, s.microbatches,
                     pipeline.microbatch_size, 100.0 * pipe::simulated_bubble(s), formula);
  const auto ranks = plan_pipeline_ranks(spec, job, dims);
  size_t heaviest = 0;
  for (size_t r = 0; r < ranks.size(); ++r) {
    out << fmt::format("    pp rank {}: {}; {} parameters per rank, memory {:.2f} GiB "
                       "(estimate)\n",
                       r, ranks[r].stages, components::with_commas(ranks[r].plan.params_per_rank),
                       gib(ranks[r].plan.memory.total()));
    if (ranks[r].plan.memory.total() > ranks[heaviest].plan.memory.total()) heaviest = r;
  }
  out << fmt::format("  the rank holding the most, pp rank {} (its stages together):\n",
                     heaviest);
  print_plan(ranks[heaviest].plan, dims, job, out);
}

}  // namespace

std::vector<PipelineRankPlan> plan_pipeline_ranks(const protocols::TrainSpec& spec,
                                                  const config::JobConfig& job,
                                                  const distributed::ParallelDims& dims) {
  namespace pipe = distributed::pipeline;
  const auto pipeline = pipe::plan_pipeline(job, dims.pp, [&](const models::PipelineSplit& split) {
    return spec.pipeline_split(job.model.flavor, split);
  });
  const auto& s = pipeline.schedule;
  const auto in_flight = pipe::peak_in_flight(s);
  std::vector<PipelineRankPlan> out(s.pp);
  for (int r = 0; r < s.pp; ++r) {
    for (int stage : s.stages_of_rank(r)) {
      const auto& piece = pipeline.stages.at(stage);
      auto part = spec.build_part(job.model.flavor, torch::kMeta, piece);
      add_stage(out[r].plan, tools::plan_layout(*part, job, dims,
                                                {pipeline.microbatch_size, in_flight.at(stage)}));
      out[r].stages += fmt::format(
          "{}stage {} ({}blocks [{}, {}){}, {} microbatch(es) in flight)",
          out[r].stages.empty() ? "" : ", ", stage, piece.embedding ? "embedding, " : "",
          piece.first_layer, piece.end_layer, piece.output ? ", norm and output" : "",
          in_flight.at(stage));
    }
  }
  return out;
}

tools::LayoutPlan plan_heaviest_rank(const config::JobConfig& job, int world_size) {
  config::validate_for_world(job, world_size);
  auto dims = distributed::ParallelDims::from_config(job.parallelism, world_size);
  const auto& spec = protocols::get_train_spec(job.model.name);
  auto model = spec.build_on_device(job.model.flavor, torch::kMeta);
  distributed::check_tensor_parallel(*model, dims.tp, job.training.seq_len,
                                     !job.parallelism.disable_sequence_parallel);
  distributed::check_context_parallel(job.parallelism, dims.cp, job.training.seq_len);
  if (!dims.pp_enabled()) return tools::plan_layout(*model, job, dims);
  tools::LayoutPlan heaviest;
  for (auto& rank : plan_pipeline_ranks(spec, job, dims)) {
    if (rank.plan.memory.total() > heaviest.memory.total()) heaviest = rank.plan;
  }
  return heaviest;
}

int dry_run(const config::JobConfig& job, int world_size, std::ostream& out) {
  config::validate_for_world(job, world_size);
  auto dims = distributed::ParallelDims::from_config(job.parallelism, world_size);
  const auto& t = job.training;
  int64_t global = t.global_batch_size == -1 ? t.local_batch_size * dims.dp()
                                             : t.global_batch_size;
  out << fmt::format("fake_backend dry run: {} {} on {} ranks\n", job.model.name,
                     job.model.flavor, world_size);
  out << fmt::format("  mesh: {}\n", dims.describe());
  out << fmt::format("  data parallel degree {}: local batch {} x seq_len {}, global batch {} "
                     "sequences ({} accumulation step(s)), {} tokens per step\n",
                     dims.dp(), t.local_batch_size, t.seq_len, global,
                     global / (t.local_batch_size * dims.dp()),
                     components::with_commas(global * t.seq_len));
  const auto& spec = protocols::get_train_spec(job.model.name);
  auto model = spec.build_on_device(job.model.flavor, torch::kMeta);
  distributed::check_tensor_parallel(*model, dims.tp, t.seq_len,
                                     !job.parallelism.disable_sequence_parallel);
  distributed::check_context_parallel(job.parallelism, dims.cp, t.seq_len);
  distributed::check_compile(job.compile);
  auto plan = tools::plan_layout(*model, job, dims);
  const int64_t active = model->num_active_params();
  out << fmt::format("  model: {} parameters ({} in the embedding{}), {:.3g} training FLOPs per "
                     "token at seq_len {} (built on the meta device: nothing allocated)\n",
                     components::with_commas(plan.total_params),
                     components::with_commas(plan.embedding_params),
                     active == plan.total_params
                         ? std::string()
                         : fmt::format("; {} active per token", components::with_commas(active)),
                     static_cast<double>(model->flops_per_token(t.seq_len)), t.seq_len);
  if (dims.pp_enabled()) {
    print_pipeline(spec, job, dims, out);
  } else {
    print_plan(plan, dims, job, out);
  }
  out << "  config is valid for this world size\n";
  return 0;
}

}  // namespace titan::train
