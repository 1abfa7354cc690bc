#include "titan/components/validate.h"

#include <fmt/format.h>

#include "titan/errors.h"
#include "titan/platform/clock.h"
#include "titan/platform/progress.h"

namespace titan::components {
namespace {

data::DataLoaderOptions validation_options(const config::JobConfig& job, int64_t dp_rank,
                                           int64_t dp, int64_t local_rank) {
  auto options = data::data_loader_options(job, dp_rank, dp, local_rank);
  options.dataset = job.validation.dataset;
  options.dataset_path = job.validation.dataset_path;
  options.seq_len = job.validation.seq_len;
  options.local_batch_size = job.validation.local_batch_size;
  options.global_batch_size = -1;  // no accumulation: one local batch per rank and step
  return options;
}

// The models in eval mode for its lifetime, back in train mode after.
class EvalMode {
 public:
  explicit EvalMode(const std::vector<models::CausalLM*>& models) : models_(models) {
    for (auto* m : models_) m->eval();
  }
  ~EvalMode() {
    for (auto* m : models_) m->train();
  }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  std::vector<models::CausalLM*> models_;
};

}  // namespace

void check_validation(const config::JobConfig& job, const distributed::ParallelDims& dims) {
  const auto& v = job.validation;
  if (v.steps == 0) {
    throw ConfigError("validation.steps = 0: set a number of batches, or -1 for the whole "
                      "dataset");
  }
  const int64_t microbatch = job.parallelism.pipeline_parallel_microbatch_size;
  if (dims.pp_enabled() && v.local_batch_size % microbatch != 0) {
    throw ConfigError(fmt::format("validation.local_batch_size = {} must be divisible by "
                                  "parallelism.pipeline_parallel_microbatch_size = {}",
                                  v.local_batch_size, microbatch));
  }
}

Validator::Validator(const config::JobConfig& job, const distributed::ParallelDims& dims,
                     int64_t dp_rank, int64_t local_rank, const Tokenizer& tokenizer,
                     std::shared_ptr<distributed::ProcessGroup> loss_group)
    : data_(validation_options(job, dp_rank, dims.dp(), local_rank), tokenizer),
      loss_group_(std::move(loss_group)),
      freq_(job.validation.freq),
      steps_(job.validation.steps),
      non_data_parallel_size_(dims.non_data_parallel_size()) {
  const int64_t global_batch = data_.layout().global_batch_size();
  if (steps_ == -1) steps_ = data_.num_samples() / global_batch;
  if (steps_ < 1) {
    throw ConfigError(fmt::format(
        "validation.steps = -1: the validation data ({}) holds {} samples of validation.seq_len "
        "{}, less than one global validation batch of {} (validation.local_batch_size x the "
        "data-parallel degree); set a smaller batch or a larger dataset",
        data_.describe(), data_.num_samples(), data_.seq_len(), global_batch));
  }
}

ValidationResult Validator::validate(distributed::ForwardBackward& forward,
                                     const std::vector<models::CausalLM*>& models,
                                     torch::Device device) {
  const auto start = platform::Clock::now();
  EvalMode eval(models);
  double loss_sum = 0;
  const int64_t global_batch = data_.layout().global_batch_size();
  platform::Progress progress("validating", static_cast<double>(steps_), "batches");
  for (int64_t s = 0; s < steps_; ++s) {
    auto batch = data_.get(s * global_batch, 0);
    loss_sum += forward.evaluate(batch.input.to(device), batch.label.to(device));
    progress.update(static_cast<double>(s + 1));
  }
  auto sum = torch::tensor({loss_sum}, torch::kDouble);
  loss_group_->all_reduce_(sum, distributed::ReduceOp::Sum, "validation loss all-reduce");
  const double tokens = static_cast<double>(steps_ * global_batch * data_.seq_len());
  ValidationResult r;
  r.loss = forward.sum_over_stages(sum.item<double>()) / tokens;
  r.seconds = platform::seconds_since(start);
  const double local_tokens = tokens / static_cast<double>(data_.layout().dp_degree());
  r.tps = local_tokens / r.seconds / static_cast<double>(non_data_parallel_size_);
  return r;
}

}  // namespace titan::components
