#include "titan/distributed/parallelize.h"

#include "titan/distributed/compile.h"
#include "titan/distributed/context_parallel.h"
#include "titan/platform/logging.h"

namespace titan::distributed {

TensorParallel& enable_tensor_parallel(ModelPart& part, const DeviceMesh& mesh,
                                       const config::ParallelismSection& parallelism) {
  TensorParallelOptions options;
  options.sequence_parallel = !parallelism.disable_sequence_parallel;
  options.loss_parallel = !parallelism.disable_loss_parallel;
  auto group = mesh[MeshGroup::TP];
  log::info("Tensor parallel over {} ranks: sequence parallel {}, loss parallel {}",
            group->size(), options.sequence_parallel ? "on" : "off",
            options.loss_parallel ? "on" : "off");
  return part.enable_tensor_parallel(group, options);
}

void apply_context_parallel(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh,
                            const config::ParallelismSection& parallelism) {
  if (!dims.cp_enabled()) return;
  log::info("Context parallel over {} ranks: {} balancing, {} rotation", dims.cp,
            parallelism.context_parallel_load_balancer,
            parallelism.context_parallel_rotate_method);
  attach_context_parallel(
      part.model(),
      std::make_shared<ContextParallel>(
          mesh[MeshGroup::CP], load_balancer_from(parallelism.context_parallel_load_balancer),
          rotate_method_from(parallelism.context_parallel_rotate_method)));
}

void apply_expert_parallel(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh) {
  if (!dims.ep_enabled()) return;
  auto group = mesh[MeshGroup::EP];
  log::info("Expert parallel over {} ranks; expert weights sharded by FSDP over {} rank(s)",
            group->size(), dims.efsdp());
  part.enable_expert_parallel(group);
}

bool reshard_after_forward(const config::ParallelismSection& parallelism,
                           const ParallelDims& dims) {
  const auto& policy = parallelism.fsdp_reshard_after_forward;
  return policy == "always" || (policy == "default" && !dims.pp_enabled());
}

void apply_fsdp(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh,
                const config::JobConfig& job) {
  FsdpOptions options;
  if (dims.fsdp_enabled() && job.training.mixed_precision_param == "bfloat16") {
    options.param_dtype = torch::kBFloat16;
  }
  options.reshard_after_forward = reshard_after_forward(job.parallelism, dims);
  options.overlap = compiles(job.compile, "model");
  FsdpExpertGroup experts;
  if (auto* ep = part.expert_parallel()) experts = {mesh[MeshGroup::EFsdp], ep->modules()};
  part.set_fsdp(Fsdp::apply(part.model(), mesh[MeshGroup::DpShardCp], mesh[MeshGroup::DpReplicate],
                            options, experts),
                options.param_dtype);
}

}  // namespace titan::distributed
