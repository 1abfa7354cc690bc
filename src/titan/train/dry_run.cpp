#include "titan/train/dry_run.h"

#include <fmt/format.h>

#include "titan/config/resolve.h"
#include "titan/distributed/parallel_dims.h"

namespace titan::train {

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
                     global / (t.local_batch_size * dims.dp()), global * t.seq_len);
  out << "  config is valid for this world size\n";
  return 0;
}

}  // namespace titan::train
