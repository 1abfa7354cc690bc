#include "titan/distributed/parallelize.h"

#include "titan/platform/logging.h"

namespace titan::distributed {

TensorParallel& enable_tensor_parallel(ModelPart& part, const DeviceMesh& mesh,
                                       const config::ParallelismSection& parallelism) {
  TensorParallelOptions options;
  options.sequence_parallel = !parallelism.disable_sequence_parallel;
  options.loss_parallel = !parallelism.disable_loss_parallel;
  auto group = mesh["tp"];
  log::info("Tensor parallel over {} ranks: sequence parallel {}, loss parallel {}",
            group->size(), options.sequence_parallel ? "on" : "off",
            options.loss_parallel ? "on" : "off");
  return part.enable_tensor_parallel(group, options);
}

void apply_fsdp(ModelPart& part, const ParallelDims& dims, const DeviceMesh& mesh,
                const config::JobConfig& job) {
  FsdpOptions options;
  if (dims.fsdp_enabled() && job.training.mixed_precision_param == "bfloat16") {
    options.param_dtype = torch::kBFloat16;
  }
  // "default": reshard, except under pipeline parallelism (as TorchTitan: each microbatch's
  // backward would gather the parameters again).
  const auto& policy = job.parallelism.fsdp_reshard_after_forward;
  options.reshard_after_forward =
      policy == "always" || (policy == "default" && !dims.pp_enabled());
  part.set_fsdp(Fsdp::apply(part.model(), mesh["dp_shard_cp"], mesh["dp_replicate"], options),
                options.param_dtype);
}

}  // namespace titan::distributed
