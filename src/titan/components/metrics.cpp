#include "titan/components/metrics.h"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "titan/components/tensorboard/writer.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"
#include "titan/platform/progress.h"

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
             "step: {}{}  loss: {:.4f}  grad_norm: {:.4f}  memory: {:.2f}GiB({:.2f}%)  tps: {}  "
             "tflops: {:.2f}  mfu: {}",
             m.step, m.total_steps > 0 ? fmt::format("/{}", m.total_steps) : "", m.loss,
             m.grad_norm, m.memory_gib, m.memory_pct,
             with_commas(static_cast<int64_t>(std::llround(m.tps))), m.tflops,
             m.mfu ? fmt::format("{:.2f}%", *m.mfu) : "n/a") +
         (m.eta_s ? "  eta: " + platform::format_duration(*m.eta_s) : "") +
         (m.skipped_steps > 0 ? fmt::format("  skipped: {}", m.skipped_steps) : "");
}

std::string format_validation_line(const StepMetrics& m) {
  return fmt::format("validate step: {}  loss: {:.4f}  memory: {:.2f}GiB({:.2f}%)  tps: {}", m.step,
                     m.validation_loss.value_or(0), m.memory_gib, m.memory_pct,
                     with_commas(static_cast<int64_t>(std::llround(m.validation_tps.value_or(0)))));
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const StepMetrics& m) {
  std::vector<std::pair<std::string, double>> out = {
      {"loss_metrics/global_avg_loss", m.loss},
      {"loss_metrics/global_max_loss", m.max_loss},
      {"grad_norm", m.grad_norm},
      {"lr", m.lr},
      {"throughput(tps)", m.tps},
      {"tflops", m.tflops},
      {"time_metrics/end_to_end(s)", m.step_time_s},
      {"time_metrics/data_loading(s)", m.data_time_s},
      {"time_metrics/data_loading(%)",
       m.step_time_s > 0 ? 100.0 * m.data_time_s / m.step_time_s : 0.0},
      {"memory/max_active(GiB)", m.max_active_gib},
      {"memory/max_active(%)", m.max_active_pct},
      {"memory/max_reserved(GiB)", m.max_reserved_gib},
      {"memory/max_reserved(%)", m.max_reserved_pct},
      {"memory/num_alloc_retries", static_cast<double>(m.num_alloc_retries)},
      {"memory/num_ooms", static_cast<double>(m.num_ooms)},
      {"memory/num_system_allocs", static_cast<double>(m.num_system_allocs)},
      {"n_tokens_seen", static_cast<double>(m.tokens_seen)},
  };
  if (m.mfu) out.emplace_back("mfu(%)", *m.mfu);
  if (m.validation_loss) {
    out.emplace_back("validation_metrics/loss", *m.validation_loss);
    out.emplace_back("validation_metrics/throughput(tps)", m.validation_tps.value_or(0));
  }
  return out;
}

MetricsLogger::MetricsLogger(const std::string& jsonl_path, const std::string& tb_folder) {
  if (!tb_folder.empty()) {
    tb_ = std::make_unique<tensorboard::EventWriter>(tb_folder);
    log::info("TensorBoard logging enabled. Logs will be saved at {}", tb_folder);
  }
  if (jsonl_path.empty()) return;
  std::filesystem::create_directories(std::filesystem::path(jsonl_path).parent_path());
  jsonl_ = std::make_unique<std::ofstream>(jsonl_path, std::ios::app);
  if (!*jsonl_) throw Error("cannot write metrics file " + jsonl_path);
}

MetricsLogger::~MetricsLogger() = default;

void MetricsLogger::record(const StepMetrics& m) {
  log::info(format_step_line(m));
  if (m.validation_loss) log::info(format_validation_line(m));
  if (tb_) tb_->add_scalars(m.step, tensorboard_scalars(m));
  if (!jsonl_) return;
  nlohmann::json j = {{"step", m.step},
                      {"loss", m.loss},
                      {"max_loss", m.max_loss},
                      {"grad_norm", m.grad_norm},
                      {"skipped_steps", m.skipped_steps},
                      {"lr", m.lr},
                      {"tps", m.tps},
                      {"tflops", m.tflops},
                      {"mfu", m.mfu ? nlohmann::json(*m.mfu) : nlohmann::json()},
                      {"memory_gib", m.memory_gib},
                      {"max_active_gib", m.max_active_gib},
                      {"max_reserved_gib", m.max_reserved_gib},
                      {"num_alloc_retries", m.num_alloc_retries},
                      {"num_ooms", m.num_ooms},
                      {"num_system_allocs", m.num_system_allocs},
                      {"tokens_seen", m.tokens_seen},
                      {"consumed_samples", m.consumed_samples},
                      {"step_time_s", m.step_time_s},
                      {"data_time_s", m.data_time_s},
                      {"cpu_threads", m.cpu_threads}};
  if (m.all_to_all_s) j["all_to_all_s"] = *m.all_to_all_s;
  if (m.fsdp_wait_s) j["fsdp_wait_s"] = *m.fsdp_wait_s;
  if (m.validation_loss) {
    j["validation_loss"] = *m.validation_loss;
    j["validation_tps"] = m.validation_tps.value_or(0);
  }
  for (const auto& load : m.expert_loads) {
    j["expert_load"][std::to_string(load.layer)] = {{"max", load.max}, {"min", load.min}};
  }
  *jsonl_ << j.dump() << "\n";
  jsonl_->flush();
}

}  // namespace titan::components
