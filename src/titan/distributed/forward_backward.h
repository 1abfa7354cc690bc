// How this rank runs a batch forward and backward through its model parts: the whole model in
// one pass, or, under pipeline parallelism, its stages microbatch by microbatch in the
// schedule's order (pipeline/schedule_runner.h). The trainer sees only this interface: it asks
// which pieces of the model to build, hands the built parts over, and runs batches.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/pipeline/pipeline_plan.h"

namespace titan::distributed {

using pipeline::SplitFn;

class ForwardBackward {
 public:
  virtual ~ForwardBackward() = default;

  /// The pieces of the model this rank builds, in order: one per local pipeline stage, or the
  /// whole model.
  virtual std::vector<models::PartRange> local_pieces() const = 0;
  /// Takes the parts built for local_pieces() (same order), parallelized and initialised.
  virtual void attach(std::vector<ModelPart*> parts) = 0;
  /// Forward and backward of this rank's batch, input and labels [B, S] int64: each token's
  /// cross-entropy divided by `loss_divisor` (the global target tokens of the step), so that the
  /// gradients summed over microbatches, accumulation steps and ranks are the global mean's.
  /// Returns the divided loss this rank computed (0 on a rank without the last stage).
  virtual double run(const torch::Tensor& input, const torch::Tensor& labels,
                     double loss_divisor) = 0;
  /// Forward only, without gradients (validation): this rank's batch [B, S] through the model
  /// parts (in eval mode); returns the summed cross-entropy of the tokens whose loss this rank
  /// computed (0 on a rank without the last stage).
  virtual double evaluate(const torch::Tensor& input, const torch::Tensor& labels) = 0;
  /// `value` summed over the ranks holding the other stages of this rank's pipeline (the
  /// value itself without one): the loss, the squared gradient norm (collective).
  virtual double sum_over_stages(double value) = 0;
  /// A line for the end of training about how batches ran (the pipeline's time spent waiting
  /// for its peers), or empty.
  virtual std::string summary() const { return {}; }
};

/// The ForwardBackward of `job` on `dims` for this rank (its groups: `mesh`; the pipeline's
/// point-to-point groups are created in `world`), the model cut by `split` under pipeline
/// parallelism. Throws ConfigError as pipeline::plan_pipeline.
std::unique_ptr<ForwardBackward> make_forward_backward(const config::JobConfig& job,
                                                       const ParallelDims& dims,
                                                       const DeviceMesh& mesh, World& world,
                                                       const SplitFn& split);

/// The pieces of every model part of the layout over all ranks: each pipeline stage's, or the
/// whole model. Throws ConfigError as pipeline::plan_pipeline.
std::vector<models::PartRange> all_pieces(const config::JobConfig& job, const ParallelDims& dims,
                                          const SplitFn& split);

/// The global rank that logs the step line and writes metrics.jsonl: the first rank of the
/// pipeline rank holding the last stage (rank 0 without pipeline parallelism).
int metrics_rank(const config::JobConfig& job, const ParallelDims& dims, const SplitFn& split);

}  // namespace titan::distributed
