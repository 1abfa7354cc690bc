// The training loop (TorchTitan's train.py): builds everything from the job config in a fixed
// order, then runs train_step: next batch(es), forward-backward, gradient sync, clip, expert
// load balancing, step, log.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "titan/components/checkpoint/checkpoint_manager.h"
#include "titan/components/load_balancing.h"
#include "titan/components/lr_scheduler.h"
#include "titan/components/metrics.h"
#include "titan/components/optimizer.h"
#include "titan/components/tokenizer/tokenizer.h"
#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/forward_backward.h"
#include "titan/distributed/model_part.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/distributed/process_group.h"
#include "titan/platform/cpu_peak.h"
#include "titan/platform/cpu_threads.h"
#include "titan/protocols/train_spec.h"
#include "titan/tools/memory_snapshot.h"
#include "titan/tools/profiler.h"

namespace titan::components {
class Validator;
namespace data {
class DataLoader;
}
}  // namespace titan::components

namespace titan::train {

/// Refuses what this build cannot train with a ConfigError naming the key: a sequence that
/// context parallelism cannot cut (distributed::check_context_parallel), an expert-parallel
/// degree the model cannot use (no MoE layer, experts not divisible, tensor-parallel ranks
/// without sequence parallelism) or an expert tensor-parallel degree other than 1, a
/// tensor-parallel degree that does not divide the model (distributed::check_tensor_parallel),
/// model parts that cannot be cut or built (every one of distributed::all_pieces built on the
/// meta device: e.g. a pipeline the model or the batch cannot be cut into),
/// checkpoint.last_save_in_hf for a flavor without a Hugging Face config, compile mode's CPU
/// kernels with GPUs visible (distributed::check_compile), a profiling window longer than
/// profiling.profile_freq (tools::check_profiling), and a validation section that cannot run
/// (components::check_validation), and a training dataset that cannot be read (a missing path,
/// an unknown or unprepared name: components::data::resolve_dataset). The launcher calls it
/// before any worker starts.
void check_trainable(const config::JobConfig& job, const distributed::ParallelDims& dims);

/// The global rank that logs the step line and writes metrics.jsonl for `job` on `dims` (the
/// first rank of the last pipeline stage; the launcher's LOG_RANK default).
int metrics_rank(const config::JobConfig& job, const distributed::ParallelDims& dims);

class Trainer {
 public:
  /// Joins the world and builds model, data, optimizer and metrics. Throws ConfigError for
  /// settings this build cannot honour, DataError / CommError as their layers do.
  Trainer(config::JobConfig job, distributed::WorldInfo world);
  ~Trainer();

  /// Runs training.steps steps, logging every metrics.log_freq steps (and the first and last).
  void train();

 private:
  struct StepResult {
    double loss = 0;       // global mean loss of the step
    double max_loss = 0;   // the largest of the data (and context) ranks' mean losses
    double grad_norm = 0;  // before clipping
    double data_time_s = 0;
  };

  void setup_parallelism(const distributed::WorldInfo& world);
  /// Builds the model on the meta device, parallelizes it with the family's spec, then
  /// allocates and initialises this rank's pieces.
  void setup_model();
  /// Applies the thread count threads_ decided at each block's forward and backward.
  void follow_free_cores(models::CausalLM& model);
  void setup_data();
  void log_header();
  /// Resumes from the latest checkpoint (or checkpoint.initial_load_path) when there is one;
  /// returns the first step to train.
  int64_t resume();
  /// The samples a checkpointed run consumed, from its saved state (checkpoints older than
  /// consumed_samples: tokens_seen / seq_len; 0 when the dataloader state is excluded).
  /// Throws ConfigError naming both values when training.seq_len differs from the
  /// checkpoint's, as the position cannot carry over exactly.
  int64_t restore_data_position(const nlohmann::json& state, const std::string& path) const;
  /// Saves checkpoint `step` (this rank's shards and state); the `last` one model-only when
  /// checkpoint.last_save_model_only (as TorchTitan, also for the seed checkpoint).
  void save_checkpoint(int64_t step, bool last);
  /// This rank's pieces of `tensors` (params_ order) named `prefix` + parameter name, in the
  /// whole model's coordinates, over every model part (ModelPart::state; collective).
  distributed::ShardedStateDict global_pieces(const std::vector<torch::Tensor>& tensors,
                                              const std::string& prefix, bool loading);
  /// This rank's pieces of the model and of the optimizer state, as global_pieces.
  distributed::ShardedStateDict model_state(bool loading);
  distributed::ShardedStateDict optimizer_state(bool loading);
  /// Logs the bytes of parameters, gradients and optimizer state this rank holds.
  void log_state_memory();
  /// The memory peaks since the last record into `m`, then a new peak window.
  void record_memory(components::StepMetrics& m);
  StepResult train_step(int64_t step);
  /// The step's global mean loss and global max loss from this rank's loss sum.
  std::pair<double, double> global_losses(double local_loss);
  /// A step whose loss or gradient norm `r` is not finite: throws Error naming it, or under
  /// training.on_nonfinite = skip drops its gradients and expert counts and counts it.
  void skip_nonfinite_step(int64_t step, const StepResult& r);
  /// Runs step `step`'s `work`, writing the memory snapshot of a failed allocation
  /// (c10::OutOfMemoryError) before rethrowing it.
  void snapshot_on_allocation_failure(int64_t step, const std::function<void()>& work);
  /// Global L2 norm of the gradients over every mesh dimension.
  double grad_norm();
  /// The factor gradient clipping (training.max_norm) multiplies the gradients by at `norm`.
  double clip_scale(double norm) const;
  void write_manifest();
  /// The models of this rank's parts, in order.
  std::vector<models::CausalLM*> local_models() const;

  config::JobConfig job_;
  platform::ThreadGovernor threads_;
  std::shared_ptr<distributed::World> world_;
  distributed::ParallelDims dims_;
  distributed::DeviceMesh mesh_;
  const protocols::TrainSpec* spec_ = nullptr;
  models::ModelShape shape_;  // of the whole model
  std::unique_ptr<distributed::ForwardBackward> forward_backward_;  // runs batches through:
  std::vector<std::unique_ptr<distributed::ModelPart>> model_parts_;  // this rank's, in order
  std::vector<torch::Tensor> params_;  // every part's, in order
  std::unique_ptr<components::Tokenizer> tokenizer_;
  std::unique_ptr<components::data::DataLoader> data_;
  std::unique_ptr<components::Adam> optimizer_;
  std::unique_ptr<components::LrScheduler> scheduler_;
  std::unique_ptr<components::ExpertLoadBalancer> load_balancer_;  // MoE layers' expert biases
  std::unique_ptr<components::MetricsLogger> metrics_;
  std::unique_ptr<components::Validator> validator_;  // with validation.enable
  std::unique_ptr<tools::Profiler> profiler_;
  std::unique_ptr<tools::MemorySnapshot> memory_snapshot_;
  std::unique_ptr<components::checkpoint::CheckpointManager> checkpoint_;
  int64_t flops_per_token_ = 0;
  int64_t num_params_ = 0;         // of the whole model
  int64_t num_active_params_ = 0;  // of them, what one token uses (MoE: its k experts)
  torch::Device device_ = torch::kCPU;  // where this rank computes (platform/device.h)
  std::optional<double> peak_flops_;    // FLOP/s of one rank for MFU; none: unknown device
  std::unique_ptr<platform::CpuPeak> cpu_peak_;  // on the CPU: what peak_flops_ follows
  torch::ScalarType compute_dtype_ = torch::kFloat;
  int64_t global_tokens_per_step_ = 0;
  int64_t local_tokens_per_step_ = 0;
  /// Global samples trained on before the next step: where the data continues, under any global
  /// batch size, data-parallel degree or accumulation split (Megatron's consumed_samples).
  int64_t consumed_samples_ = 0;
  int64_t skipped_steps_ = 0;  // non-finite steps whose update was skipped
};

}  // namespace titan::train
