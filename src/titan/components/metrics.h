// Step metrics as TorchTitan reports them: the console step line and metrics.jsonl
// (DESIGN.md, "Outputs" and "Metrics definitions").
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

namespace titan::components {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;          // mean next-token cross-entropy over the global batch (nats)
  double grad_norm = 0;     // global L2 norm before clipping
  double lr = 0;
  double tps = 0;           // tokens per second per rank
  double tflops = 0;        // achieved training TFLOP/s per rank
  double mfu = 0;           // percent of the peak FLOP/s of one rank
  double memory_gib = 0;    // peak live tensor memory of this rank since the last record (GiB)
  double memory_pct = 0;    // of the device's (or machine's) memory
  int64_t tokens_seen = 0;  // global tokens trained on so far
  int64_t consumed_samples = 0;  // global samples trained on so far (the data position)
  double step_time_s = 0;   // mean seconds per step since the last record
  double data_time_s = 0;   // mean seconds per step spent loading data
  int64_t cpu_threads = 0;  // intra-op threads at the record (they follow the free cores)
};

/// "step: 10  loss: 5.1234  grad_norm: 1.2345  memory: 1.23GiB(4.56%)  tps: 12,345
///  tflops: 1.23  mfu: 12.34%" (one line).
std::string format_step_line(const StepMetrics& m);

/// Writes step lines to the log and, when `jsonl_path` is non-empty, one JSON object per
/// record to it (keys step, loss, grad_norm, lr, tps, tflops, mfu, memory_gib, tokens_seen,
/// consumed_samples, step_time_s, data_time_s, cpu_threads). A resumed run appends.
class MetricsLogger {
 public:
  explicit MetricsLogger(const std::string& jsonl_path);
  void record(const StepMetrics& m);

 private:
  std::unique_ptr<std::ofstream> jsonl_;
};

/// Thousands separators: 12345 -> "12,345".
std::string with_commas(int64_t n);

}  // namespace titan::components
