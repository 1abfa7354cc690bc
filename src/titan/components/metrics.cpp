#include "titan/components/metrics.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "titan/errors.h"
#include "titan/platform/logging.h"

namespace titan::components {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_step_line(const StepMetrics& m) {
  return fmt::format(
      "step: {}  loss: {:.4f}  grad_norm: {:.4f}  memory: {:.2f}GiB({:.2f}%)  tps: {}  "
      "tflops: {:.2f}  mfu: {}",
      m.step, m.loss, m.grad_norm, m.memory_gib, m.memory_pct,
      with_commas(static_cast<int64_t>(std::llround(m.tps))), m.tflops,
      m.mfu ? fmt::format("{:.2f}%", *m.mfu) : "n/a");
}

MetricsLogger::MetricsLogger(const std::string& jsonl_path) {
  if (jsonl_path.empty()) return;
  std::filesystem::create_directories(std::filesystem::path(jsonl_path).parent_path());
  jsonl_ = std::make_unique<std::ofstream>(jsonl_path, std::ios::app);
  if (!*jsonl_) throw Error("cannot write metrics file " + jsonl_path);
}

void MetricsLogger::record(const StepMetrics& m) {
  log::info(format_step_line(m));
  if (!jsonl_) return;
  nlohmann::json j = {{"step", m.step},
                      {"loss", m.loss},
                      {"grad_norm", m.grad_norm},
                      {"lr", m.lr},
                      {"tps", m.tps},
                      {"tflops", m.tflops},
                      {"mfu", m.mfu ? nlohmann::json(*m.mfu) : nlohmann::json()},
                      {"memory_gib", m.memory_gib},
                      {"max_active_gib", m.max_active_gib},
                      {"max_reserved_gib", m.max_reserved_gib},
                      {"num_alloc_retries", m.num_alloc_retries},
                      {"num_ooms", m.num_ooms},
                      {"tokens_seen", m.tokens_seen},
                      {"consumed_samples", m.consumed_samples},
                      {"step_time_s", m.step_time_s},
                      {"data_time_s", m.data_time_s},
                      {"cpu_threads", m.cpu_threads}};
  if (m.all_to_all_s) j["all_to_all_s"] = *m.all_to_all_s;
  if (m.fsdp_wait_s) j["fsdp_wait_s"] = *m.fsdp_wait_s;
  for (const auto& load : m.expert_loads) {
    j["expert_load"][std::to_string(load.layer)] = {{"max", load.max}, {"min", load.min}};
  }
  *jsonl_ << j.dump() << "\n";
  jsonl_->flush();
}

}  // namespace titan::components
