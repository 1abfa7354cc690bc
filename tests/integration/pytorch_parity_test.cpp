// titan against the plain-PyTorch reference (bench/reference, run by the PyTorch titan builds on,
// from the environment scripts/setup.sh creates): the same
// weights (a titan seed checkpoint) and the same batches (titan's token cache) must give the
// same losses, gradient norms, gradients and weight updates in float32.
//
// titan's gradients: with training.max_norm 0 (no clipping) one AdamW step leaves
// exp_avg = (1 - beta1) x grad in the step-1 checkpoint. The reference writes its step-1
// gradients (before clipping) and its final weights as safetensors.
//
// Tolerances. Losses and gradient norms of 5 steps (clipped at 1.0, warmup then decay):
// |titan - ref| / |ref| <= 1e-5 each. Step-1 gradients: max |titan - ref| / max |ref| <= 1e-5
// per tensor (elementwise relative error means nothing for entries near zero). The weight
// update over the 5 steps, w_5 - w_0: ||titan - ref|| / ||ref|| <= 1e-4 per tensor, looser
// because AdamW divides by sqrt(v) + eps: gradient entries near eps turn float32 rounding
// differences into update differences of up to a few percent of lr for those entries.
// Measured (bench/NOTES.md): losses equal, grad_norm 1e-8, gradients 4.9e-7, update 1.1e-5;
// two data-parallel ranks: losses 5.9e-8.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <fstream>
#include <regex>

#include "support/checkpoint_files.h"
#include "support/process.h"
#include "support/relative_error.h"
#include "support/skip.h"
#include "support/training.h"
#include "titan/components/checkpoint/safetensors.h"

namespace titan {
namespace integration_pytorch_parity_test {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::max_rel;
using testing::read_checkpoint;
using testing::run_command;

constexpr double kTolerance = 1e-5;
constexpr double kUpdateTolerance = 1e-4;
constexpr double kBeta1 = 0.9;  // optimizer.beta1 of llama3_debugmodel (TorchTitan's default)
constexpr int kSteps = 5;
const char* const kPython = TITAN_PYTHON;
const std::string kNoTorch = fmt::format(
    "'{}' (CMake's TITAN_PYTHON, set by scripts/setup.sh) cannot import torch: the PyTorch "
    "reference of bench/reference cannot run", kPython);

// llama3 debugmodel at seq 64 x batch 2: a few seconds per run on 2 cores.
const std::string kShape =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.local_batch_size 2 --optimizer.beta1 0.9 --training.dataset_path ";

std::string reference_script() {
  return std::string(TITAN_SOURCE_DIR) + "/bench/reference/train.py";
}

bool have_torch() {
  return run_command(std::string(kPython) + " -c 'import torch'").exit_code == 0;
}

// One intra-op thread per process on both sides: the comparison is about numbers, and with
// other processes on the cores a single thread avoids OpenMP's spin-waiting (bench/NOTES.md;
// 1.5 s instead of up to 47 s for one of these runs under load).
const char* const kThreads = "OMP_NUM_THREADS=1";

CommandResult titan(const std::string& args, int ranks = 1) {
  return run_command(fmt::format("{} NGPU={} {} launch {}{} {}", kThreads, ranks,
                                 testing::titan_binary(), kShape, testing::shakespeare(), args));
}

// Writes the step-0 weights to DIR/seed/checkpoint/step-0 and returns that folder and the
// token cache titan reads.
std::pair<std::string, std::string> seed_checkpoint(const fs::path& dir) {
  auto r = titan("--checkpoint.enable --checkpoint.create_seed_checkpoint --job.dump_folder " +
                 (dir / "seed").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::smatch cache;
  EXPECT_TRUE(std::regex_search(r.output, cache, std::regex(R"(token cache (\S+\.tokens))")))
      << r.output;
  return {(dir / "seed" / "checkpoint" / "step-0").string(), cache.empty() ? "" : cache[1].str()};
}

// Resolves titan's config for `args` into DIR/NAME.toml, the reference's --config.
std::string resolved_config(const fs::path& dir, const std::string& name,
                            const std::string& args) {
  const std::string path = (dir / (name + ".toml")).string();
  auto r = run_command(fmt::format("{} config {}{} {} > {}", testing::titan_binary(), kShape,
                                   testing::shakespeare(), args, path));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return path;
}

std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

double rel(double a, double ref) { return std::abs(a - ref) / std::abs(ref); }

// ||a - ref|| / ||ref|| (2-norms), in float64; 0 when both are zero.
double norm_rel(const torch::Tensor& a, const torch::Tensor& ref) {
  const double diff = (a - ref).norm().item<double>(), scale = ref.norm().item<double>();
  return scale > 0 ? diff / scale : diff;
}

// Checks that `titan` holds `prefix + name` for exactly the names of `ref`, with the same
// shapes, and that `distance(titan tensor, ref tensor)` <= `tolerance` for each; returns the
// largest distance.
template <typename Distance>
double expect_tensors_close(const components::TensorMap& titan, const std::string& prefix,
                            const components::TensorMap& ref, double tolerance,
                            Distance distance, const char* what) {
  size_t matching = 0;
  for (const auto& [name, t] : titan) matching += name.rfind(prefix, 0) == 0 ? 1 : 0;
  EXPECT_EQ(matching, ref.size()) << what << ": titan and the reference have different tensors";
  double worst = 0;
  for (const auto& [name, r] : ref) {
    auto it = titan.find(prefix + name);
    if (it == titan.end()) {
      ADD_FAILURE() << what << ": titan has no " << prefix + name;
      continue;
    }
    EXPECT_EQ(it->second.sizes(), r.sizes()) << what << " " << name;
    if (it->second.sizes() != r.sizes()) continue;
    const double d = distance(name, it->second, r);
    EXPECT_LE(d, tolerance) << what << " " << name;
    worst = std::max(worst, d);
  }
  return worst;
}

// Checks per-step losses, gradient norms and learning rates of two metrics files; returns the
// largest relative differences of loss and grad_norm.
std::pair<double, double> expect_same_steps(const std::vector<nlohmann::json>& titan_metrics,
                                            const std::vector<nlohmann::json>& ref_metrics,
                                            size_t steps) {
  EXPECT_EQ(titan_metrics.size(), steps);
  EXPECT_EQ(ref_metrics.size(), steps);
  double worst_loss = 0, worst_norm = 0;
  for (size_t s = 0; s < std::min({steps, titan_metrics.size(), ref_metrics.size()}); ++s) {
    const double loss = rel(titan_metrics[s]["loss"], ref_metrics[s]["loss"]);
    const double norm = rel(titan_metrics[s]["grad_norm"], ref_metrics[s]["grad_norm"]);
    EXPECT_LE(loss, kTolerance) << "loss at step " << s + 1;
    EXPECT_LE(norm, kTolerance) << "grad_norm at step " << s + 1;
    EXPECT_NEAR(titan_metrics[s]["lr"], ref_metrics[s]["lr"], 1e-15) << "lr at step " << s + 1;
    worst_loss = std::max(worst_loss, loss);
    worst_norm = std::max(worst_norm, norm);
  }
  return {worst_loss, worst_norm};
}

TEST(PytorchParity, SameWeightsAndBatchesGiveSameLossesGradientsAndWeights) {
  if (!have_torch()) TITAN_SKIP_OR_FAIL(kNoTorch);
  const fs::path dir = testing::make_temp_dir("titan_parity");
  const auto [seed, tokens] = seed_checkpoint(dir);
  ASSERT_FALSE(HasFailure());

  // titan A: one unclipped step from the seed weights, checkpointed (exp_avg = 0.1 grad).
  auto r = titan("--training.steps 1 --training.max_norm 0 --checkpoint.enable "
                 "--checkpoint.initial_load_path " + seed + " --job.dump_folder " +
                 (dir / "a").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // titan B: five clipped steps (max_norm 1.0) with a warmup-decay schedule, checkpointed at 5.
  const std::string b_args = fmt::format(
      "--training.steps {} --training.max_norm 1.0 --lr_scheduler.warmup_steps 2 "
      "--metrics.log_freq 1 --checkpoint.enable --checkpoint.initial_load_path {} ",
      kSteps, seed);
  r = titan(b_args + "--job.dump_folder " + (dir / "b").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // The reference with B's resolved config, from the same seed weights and token cache.
  const std::string config = resolved_config(dir, "b", b_args);
  r = run_command(fmt::format("{} {} {} --config {} --checkpoint {} --tokens {} --metrics {} "
                              "--save_grads {} --save_weights {}",
                              kThreads, kPython, reference_script(), config, seed, tokens,
                              (dir / "ref.jsonl").string(),
                              (dir / "ref_grads.safetensors").string(),
                              (dir / "ref_weights.safetensors").string()));
  ASSERT_EQ(r.exit_code, 0) << r.output;

  const auto [worst_loss, worst_norm] = expect_same_steps(
      read_jsonl(dir / "b" / "metrics.jsonl"), read_jsonl(dir / "ref.jsonl"), kSteps);
  const auto titan_state = read_checkpoint(dir / "a" / "checkpoint" / "step-1", "optimizer");
  const double worst_grad = expect_tensors_close(
      titan_state, "optimizer.exp_avg.",
      components::read_safetensors((dir / "ref_grads.safetensors").string()), kTolerance,
      [](const std::string&, const torch::Tensor& exp_avg, const torch::Tensor& grad) {
        return max_rel(exp_avg.to(torch::kFloat64) / (1.0 - kBeta1), grad);
      },
      "step-1 gradient");
  const auto seed_weights = read_checkpoint(seed, "model");
  const double worst_update = expect_tensors_close(
      read_checkpoint(dir / "b" / "checkpoint" / fmt::format("step-{}", kSteps), "model"), "",
      components::read_safetensors((dir / "ref_weights.safetensors").string()),
      kUpdateTolerance,
      [&](const std::string& name, const torch::Tensor& titan_w, const torch::Tensor& ref_w) {
        const auto& w0 = seed_weights.at(name);
        return norm_rel(titan_w.to(torch::kFloat64) - w0, ref_w.to(torch::kFloat64) - w0);
      },
      "update over all steps");
  std::cout << fmt::format("[parity] titan vs PyTorch, largest relative difference: loss {:.1e}, "
                           "grad_norm {:.1e}, step-1 gradients {:.1e} (tolerance {:.0e}); update "
                           "over {} steps {:.1e} (tolerance {:.0e})\n",
                           worst_loss, worst_norm, worst_grad, kTolerance, kSteps, worst_update,
                           kUpdateTolerance);
  if (!HasFailure()) fs::remove_all(dir);
}

// Two data-parallel ranks, as bench/run_throughput.sh runs them: titan's default FSDP and the
// reference's DistributedDataParallel split each step's batch alike and give the same losses.
TEST(PytorchParity, TwoDataParallelRanksGiveSameLosses) {
  if (!have_torch()) TITAN_SKIP_OR_FAIL(kNoTorch);
  const fs::path dir = testing::make_temp_dir("titan_parity_dp");
  const auto [seed, tokens] = seed_checkpoint(dir);
  ASSERT_FALSE(HasFailure());
  const std::string args = fmt::format(
      "--training.steps 3 --metrics.log_freq 1 --checkpoint.initial_load_path {} ", seed);
  auto r = titan(args + "--checkpoint.enable --checkpoint.interval 100 "
                 "--checkpoint.last_save_model_only --job.dump_folder " + (dir / "t").string(),
                 /*ranks=*/2);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config = resolved_config(dir, "dp", args);
  // Two reference ranks with torchrun's variables; fails if either fails.
  const std::string rank = fmt::format(
      "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} {} timeout 300 {} {} "
      "--config {} --checkpoint {} --tokens {} --metrics {}",
      testing::free_port(), kThreads, kPython, reference_script(), config, seed, tokens,
      (dir / "ref.jsonl").string());
  r = run_command(fmt::format(
      "RANK=1 {} & other=$!; RANK=0 {}; mine=$?; wait $other; exit $((mine | $?))", rank, rank));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto [worst_loss, worst_norm] = expect_same_steps(
      read_jsonl(dir / "t" / "metrics.jsonl"), read_jsonl(dir / "ref.jsonl"), 3);
  std::cout << fmt::format("[parity] 2 ranks, titan FSDP vs PyTorch DDP, largest relative "
                           "difference: loss {:.1e}, grad_norm {:.1e} (tolerance {:.0e})\n",
                           worst_loss, worst_norm, kTolerance);
  if (!HasFailure()) fs::remove_all(dir);
}

}  // namespace integration_pytorch_parity_test
}  // namespace titan
