// Validation (TorchTitan's components/validate.py, `[validation]`): a held-out loss at step 1
// and every validation.freq steps, forward only and without gradients, over validation.steps
// batches of validation.local_batch_size x validation.seq_len per data-parallel rank (-1: every
// whole global batch of the dataset). The loss is the token sum over the data and context
// ranks divided by their token count: nothing about the training's accumulation steps or
// microbatches enters it (TorchTitan #1759 scaled it by them). Every validation reads the same
// batches, from the dataset's first sample.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "titan/components/data/dataloader.h"
#include "titan/config/job_config.h"
#include "titan/distributed/forward_backward.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/process_group.h"
#include "titan/models/common/causal_lm.h"

namespace titan::components {

struct ValidationResult {
  double loss = 0;     // mean cross-entropy per token (nats)
  double tps = 0;      // validation tokens per second per device
  double seconds = 0;  // wall time of the validation
};

/// Refuses, naming the keys, a validation batch the layout cannot run: validation.steps 0, a
/// local batch the pipeline's microbatch size does not divide; seq_len as the training's under
/// context and tensor parallelism is checked by the caller.
void check_validation(const config::JobConfig& job, const distributed::ParallelDims& dims);

class Validator {
 public:
  /// The validation data of `job` for the data-parallel rank `dp_rank` of `dims`, tokenized
  /// by `tokenizer` (local rank 0 builds the token cache); losses are summed over
  /// `loss_group` (data x context ranks). Throws ConfigError when the dataset holds less than
  /// one global validation batch and validation.steps is -1.
  Validator(const config::JobConfig& job, const distributed::ParallelDims& dims, int64_t dp_rank,
            int64_t local_rank, const Tokenizer& tokenizer,
            std::shared_ptr<distributed::ProcessGroup> loss_group);

  bool should_validate(int64_t step) const { return step == 1 || step % freq_ == 0; }

  /// Runs the validation batches through `forward` with `models` in eval mode (MoE layers do
  /// not count their loads), on `device`; collective over every rank.
  ValidationResult validate(distributed::ForwardBackward& forward,
                            const std::vector<models::CausalLM*>& models, torch::Device device);

 private:
  data::DataLoader data_;
  std::shared_ptr<distributed::ProcessGroup> loss_group_;
  int64_t freq_;
  int64_t steps_;
  int64_t non_data_parallel_size_;
};

}  // namespace titan::components
