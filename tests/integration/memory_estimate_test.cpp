// The planner's per-rank memory estimate (what the fake-backend dry run prints) against the
// peak of live tensor bytes a real run measures (metrics.jsonl memory_gib, the largest over its
// steps), for layouts whose estimate is dominated by different terms: activations without
// checkpointing, the FSDP working set with full checkpointing, tensor + sequence parallelism,
// and bf16 compute with op-level selective checkpointing. The shapes are chosen so that
// activations, state and logits are each a visible share of the total.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "support/training.h"
#include "titan/config/resolve.h"
#include "titan/protocols/train_spec.h"
#include "titan/tools/plan.h"

namespace titan {
namespace integration_memory_estimate_test {

using testing::train;

struct Layout {
  const char* name;
  int ranks;
  std::string args;  // overrides on top of the shape below
};

const std::string kShape =
    "--module llama3 --config llama3_debugmodel --training.seq_len 256 "
    "--training.local_batch_size 2 --training.steps 2 --lr_scheduler.warmup_steps 1";

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

double estimate_bytes(const Layout& layout) {
  auto job = config::resolve(config::parse_command_line(split(kShape + " " + layout.args)));
  auto dims = distributed::ParallelDims::from_config(job.parallelism, layout.ranks);
  auto model =
      protocols::get_train_spec(job.model.name).build_on_device(job.model.flavor, torch::kMeta);
  return tools::plan_layout(*model, job, dims).memory.total();
}

// The estimate counts the model's own tensors at the peak; the measured peak also holds what it
// does not model (autograd's temporaries, the optimizer's update buffers, collective staging)
// and lacks what the estimate rounds up. Measured with PyTorch 2.15's fused attention (SDPA):
// x0.96, x0.87, x0.98 and x0.91 of the estimate in the order below (with milestone 1's chunked
// attention, whose score tiles the estimate never modeled, x1.03, x0.96, x1.05, x0.97). Byte
// counts do not depend on the machine's load, so the band is tight: an estimate that drops a
// term (the gradients are 15% of the 1-rank total: x1.13 there) or divides activations by tp
// twice falls out of it.
constexpr double kLow = 0.82, kHigh = 1.1;

TEST(MemoryEstimate, WithinAStatedFactorOfTheMeasuredPeak) {
  const std::vector<Layout> layouts = {
      {"1 rank, no checkpointing", 1, "--activation_checkpoint.mode none"},
      {"FSDP 2, full checkpointing", 2, "--activation_checkpoint.mode full"},
      {"TP 2 with sequence parallelism", 2,
       "--activation_checkpoint.mode none --parallelism.tensor_parallel_degree 2 "
       "--parallelism.data_parallel_shard_degree 1"},
      {"FSDP 2, bf16, op-level selective", 2,
       "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op "
       "--training.mixed_precision_param bfloat16"},
  };
  for (const auto& layout : layouts) {
    auto run = train("NGPU=" + std::to_string(layout.ranks), kShape + " " + layout.args);
    ASSERT_EQ(run.command.exit_code, 0) << layout.name << "\n" << run.command.output;
    const auto memory = run.series("memory_gib");
    ASSERT_EQ(memory.size(), 2u) << layout.name;
    const double measured = *std::max_element(memory.begin(), memory.end()) * (1 << 30);
    const double estimate = estimate_bytes(layout);
    std::cout << layout.name << ": measured peak " << measured / (1 << 20) << " MiB, estimate "
              << estimate / (1 << 20) << " MiB (x" << measured / estimate << ")\n";
    EXPECT_GE(measured, kLow * estimate) << layout.name << ": measured " << measured / (1 << 20)
                                         << " MiB, estimate " << estimate / (1 << 20) << " MiB";
    EXPECT_LE(measured, kHigh * estimate) << layout.name << ": measured "
                                          << measured / (1 << 20) << " MiB, estimate "
                                          << estimate / (1 << 20) << " MiB";
  }
}

}  // namespace integration_memory_estimate_test
}  // namespace titan
