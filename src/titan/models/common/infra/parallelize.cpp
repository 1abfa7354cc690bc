#include "titan/models/common/infra/parallelize.h"

#include "titan/distributed/activation_checkpoint.h"
#include "titan/distributed/compile.h"
#include "titan/distributed/parallelize.h"
#include "titan/models/common/infra/tensor_parallel_plan.h"

namespace titan::models {

void parallelize_transformer(distributed::ModelPart& part, const distributed::ParallelDims& dims,
                             const distributed::DeviceMesh& mesh, const config::JobConfig& job) {
  auto& model = dynamic_cast<Transformer&>(part.model());
  if (dims.tp_enabled()) {
    apply_tensor_parallel(model, distributed::enable_tensor_parallel(part, mesh, job.parallelism));
  }
  distributed::apply_context_parallel(part, dims, mesh, job.parallelism);
  distributed::apply_expert_parallel(part, dims, mesh);
  distributed::apply_activation_checkpointing(model, job.activation_checkpoint);
  distributed::apply_compile(part, job.compile);
  distributed::apply_fsdp(part, dims, mesh, job);
}

}  // namespace titan::models
