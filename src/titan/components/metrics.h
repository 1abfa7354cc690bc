// Step metrics as TorchTitan reports them: the console step line and metrics.jsonl
// (DESIGN.md, "Outputs" and "Metrics definitions").
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace titan::components {

namespace tensorboard {
class EventWriter;
}

/// One MoE layer's load over a step: its busiest and idlest expert's tokens over the mean.
struct ExpertLoad {
  int64_t layer = 0;
  double max = 0;
  double min = 0;
};

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;          // mean next-token cross-entropy over the global batch (nats)
  double max_loss = 0;      // the largest data (and context) rank's mean loss
  double grad_norm = 0;     // global L2 norm before clipping
  int64_t skipped_steps = 0;  // non-finite steps so far whose update was skipped
  double lr = 0;
  double tps = 0;           // tokens per second per rank
  double tflops = 0;        // achieved training TFLOP/s per rank
  std::optional<double> mfu;  // percent of the peak FLOP/s of one rank; none: peak unknown
  // The step line's memory since the last record: on a GPU the caching allocator's peak
  // reserved bytes (as TorchTitan's), on the CPU the peak of live tensors (the CPU allocator
  // returns freed memory to the system, so the process's RSS mostly shows LibTorch's code).
  double memory_gib = 0;
  double memory_pct = 0;    // of the device's (or machine's) memory
  double max_active_gib = 0;    // peak live tensor bytes
  double max_reserved_gib = 0;  // GPU: peak bytes the allocator held; CPU: the peak RSS
  double max_active_pct = 0;    // of the device's (or machine's) memory
  double max_reserved_pct = 0;
  int64_t num_alloc_retries = 0;  // allocations that had to free the cache and retry
  int64_t num_ooms = 0;           // GPU: out-of-memory errors
  int64_t num_system_allocs = 0;  // blocks taken from the system since the last record (0
                                  // once compile mode's cache, or CUDA's, holds the shapes)
  int64_t tokens_seen = 0;  // global tokens trained on so far
  int64_t consumed_samples = 0;  // global samples trained on so far (the data position)
  double step_time_s = 0;   // mean seconds per step since the last record
  double data_time_s = 0;   // mean seconds per step spent loading data
  int64_t cpu_threads = 0;  // intra-op threads at the record (they follow the free cores)
  std::vector<ExpertLoad> expert_loads;  // every MoE layer's, in the recorded step
  /// Expert parallelism: mean seconds per step in the forward dispatch / combine all-to-alls.
  std::optional<double> all_to_all_s;
  /// Data parallelism: mean seconds per step this rank waited on FSDP's all-gathers and
  /// gradient reductions (the communication compute did not hide).
  std::optional<double> fsdp_wait_s;
  /// Console only (not in metrics.jsonl or TensorBoard, whose keys are TorchTitan's): the run's
  /// last step, shown as "step: N/M" when positive, and the estimated time to reach it.
  int64_t total_steps = 0;
  std::optional<double> eta_s;
  /// A validation ran after this step (components/validate.h): its loss and tokens/s.
  std::optional<double> validation_loss;
  std::optional<double> validation_tps;
};

/// "step: 10/100  loss: 5.1234  grad_norm: 1.2345  memory: 1.23GiB(4.56%)  tps: 12,345
///  tflops: 1.23  mfu: 12.34%  eta: 3m05s" (one line; TorchTitan's, with the run's last step and
/// the time left added; "step: 10" without a total, no eta without an estimate; "mfu: n/a" when
/// the device's peak is unknown; "  skipped: N" at the end once a non-finite step was skipped;
/// NaN prints as "nan").
std::string format_step_line(const StepMetrics& m);
/// TorchTitan's validation line: "validate step: 10  loss: 5.1234  memory: 1.23GiB(4.56%)
/// tps: 12,345" (the memory peak since the last record, which includes the validation).
std::string format_validation_line(const StepMetrics& m);

/// Writes step lines to the log; when `jsonl_path` is non-empty, one JSON object per record to
/// it (keys step, loss, max_loss, grad_norm (a non-finite value as null), skipped_steps, lr,
/// tps, tflops, mfu (null when unknown), memory_gib, max_active_gib, max_reserved_gib,
/// num_alloc_retries, num_ooms, num_system_allocs, tokens_seen,
/// consumed_samples, step_time_s, data_time_s, cpu_threads; for MoE models expert_load:
/// {"<layer>": {"max": .., "min": ..}}; with expert parallelism all_to_all_s; with data
/// parallelism fsdp_wait_s; after a validation validation_loss and validation_tps; a resumed
/// run appends); when `tb_folder` is non-empty, the same
/// record as TensorBoard scalars with TorchTitan's tags into an event file there.
class MetricsLogger {
 public:
  MetricsLogger(const std::string& jsonl_path, const std::string& tb_folder);
  ~MetricsLogger();
  void record(const StepMetrics& m);

 private:
  std::unique_ptr<std::ofstream> jsonl_;
  std::unique_ptr<tensorboard::EventWriter> tb_;
};

/// TorchTitan's TensorBoard tags and values for a record: loss_metrics/global_avg_loss, grad_norm,
/// throughput(tps), memory/max_active(GiB), ... (mfu(%) only when the peak is known;
/// validation_metrics/loss and validation_metrics/throughput(tps) after a validation).
std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& m);

/// Thousands separators: 12345 -> "12,345".
std::string with_commas(int64_t n);

}  // namespace titan::components
