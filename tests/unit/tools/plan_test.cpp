// The layout planner on meta-device models: parameter counts and memory against hand
// computations, and how FSDP, TP and activation checkpointing change them.
#include "titan/tools/plan.h"

#include <gtest/gtest.h>

#include "titan/errors.h"
#include "titan/protocols/train_spec.h"

namespace titan::tools {
namespace unit_tools_plan_test {

// Llama 3.1 8B by hand: dim 4096, 32 layers, 32 heads, 8 KV heads (head_dim 128), FFN hidden
// 14336, vocab 128256, untied output.
constexpr int64_t kDim = 4096, kKv = 1024, kFfn = 14336, kVocab = 128256, kLayers = 32;
constexpr int64_t kBlock = 2 * kDim * kDim + 2 * kDim * kKv + 3 * kDim * kFfn + 2 * kDim;
constexpr int64_t kNormParams = kLayers * 2 * kDim + kDim;  // the 1-D (replicated) weights
constexpr int64_t kLlama8B = kLayers * kBlock + 2 * kVocab * kDim + kDim;
static_assert(kLlama8B == 8'030'261'248, "Llama 3.1 8B has 8,030,261,248 parameters");

std::shared_ptr<models::CausalLM> meta_model(const std::string& family, const std::string& flavor) {
  return protocols::get_train_spec(family).build_on_device(flavor, torch::kMeta);
}

config::JobConfig job_for(const std::string& family, const std::string& flavor) {
  config::JobConfig job;
  job.model.name = family;
  job.model.flavor = flavor;
  job.training.local_batch_size = 1;
  job.training.seq_len = 8192;
  job.activation_checkpoint.mode = "none";
  return job;
}

distributed::ParallelDims mesh(int dp_shard, int tp) {
  distributed::ParallelDims d;
  d.dp_shard = dp_shard;
  d.tp = tp;
  d.world_size = dp_shard * tp;
  return d;
}

TEST(Plan, Llama8BOnOneRankHoldsEverythingInFp32) {
  auto model = meta_model("llama3", "8B");
  auto plan = plan_layout(*model, job_for("llama3", "8B"), mesh(1, 1));
  EXPECT_EQ(plan.total_params, kLlama8B);
  EXPECT_EQ(plan.embedding_params, kVocab * kDim);
  EXPECT_EQ(plan.params_per_rank, kLlama8B);
  EXPECT_DOUBLE_EQ(plan.memory.params, 4.0 * kLlama8B);  // 29.9 GiB
  EXPECT_DOUBLE_EQ(plan.memory.grads, 4.0 * kLlama8B);
  EXPECT_DOUBLE_EQ(plan.memory.optimizer, 8.0 * kLlama8B);  // exp_avg + exp_avg_sq
  EXPECT_EQ(plan.memory.gathered, 0.0);
  EXPECT_EQ(plan.compute_dtype, "float32");
  EXPECT_EQ(plan.root_unit_params, 2 * kVocab * kDim + kDim);  // embedding, norm, output
  EXPECT_EQ(plan.largest_block, "layers.0");
  EXPECT_EQ(plan.largest_block_params, kBlock);
}

TEST(Plan, ActivationsWithoutCheckpointingFollowTheDocumentedFormula) {
  auto model = meta_model("llama3", "8B");
  auto plan = plan_layout(*model, job_for("llama3", "8B"), mesh(1, 1));
  // 2 norms x (input + output) + q, k, v + attention output + log-sum-exp + 4 SwiGLU tensors.
  const int64_t per_token = 4 * kDim + (kDim + 2 * kKv) + kDim + 32 + 4 * kFfn;
  EXPECT_EQ(plan.activation_elements_per_token_layer, per_token);
  EXPECT_EQ(plan.tokens_per_rank, 8192);
  EXPECT_DOUBLE_EQ(plan.memory.activations, 4.0 * kLayers * per_token * 8192);
  EXPECT_DOUBLE_EQ(plan.memory.logits, 8192.0 * kVocab * (4 + 4));
}

// Compile mode's fused loss holds one block of logits (512 tokens x the whole vocabulary: one
// sweep) with its fp32 copy, and the hidden-state and weight gradients it keeps from forward to
// backward.
TEST(Plan, CompiledLossKeepsOneChunkOfLogits) {
  auto model = meta_model("llama3", "8B");
  auto job = job_for("llama3", "8B");
  job.compile.enable = true;
  job.compile.components = {"loss"};
  auto plan = plan_layout(*model, job, mesh(1, 1));
  EXPECT_DOUBLE_EQ(plan.memory.logits,
                   512.0 * kVocab * (4 + 4) + 8192.0 * kDim * 4 + double(kVocab) * kDim * 4);
  job.compile.components = {"model"};
  EXPECT_DOUBLE_EQ(plan_layout(*model, job, mesh(1, 1)).memory.logits, 8192.0 * kVocab * 8);
}

// Context parallelism splits each sequence's tokens; with allgather every attention also keeps
// the other cp - 1 ranks' keys and values (2 x kv per token each), the ring only its own.
TEST(Plan, ContextParallelSplitsTokensAndAllgatherKeepsTheGatheredKeys) {
  auto model = meta_model("llama3", "8B");
  auto dims = mesh(1, 1);
  dims.cp = 4;
  dims.world_size = 4;
  auto job = job_for("llama3", "8B");
  const int64_t per_token = 4 * kDim + (kDim + 2 * kKv) + kDim + 32 + 4 * kFfn;
  job.parallelism.context_parallel_rotate_method = "alltoall";
  auto ring = plan_layout(*model, job, dims);
  EXPECT_EQ(ring.tokens_per_rank, 8192 / 4);
  EXPECT_EQ(ring.activation_elements_per_token_layer, per_token);
  // FSDP over dp_shard x cp computes in bfloat16: 2 bytes per element.
  EXPECT_DOUBLE_EQ(ring.memory.activations, 2.0 * kLayers * per_token * 2048);
  job.parallelism.context_parallel_rotate_method = "allgather";
  auto gather = plan_layout(*model, job, dims);
  EXPECT_EQ(gather.activation_elements_per_token_layer, per_token + 3 * 2 * kKv);
  EXPECT_DOUBLE_EQ(gather.memory.activations, 2.0 * kLayers * (per_token + 3 * 2 * kKv) * 2048);
}

// Qwen3 8B's attention also keeps its q_norm / k_norm inputs (q + kv), which op-level selective
// checkpointing recomputes: dim 4096, 32 heads of 128 (q 4096), 8 KV heads (kv 1024), FFN 12288.
TEST(Plan, QkNormInputsCountUnlessOpLevelCheckpointingRecomputesThem) {
  auto model = meta_model("qwen3", "8B");
  auto job = job_for("qwen3", "8B");
  auto plan = plan_layout(*model, job, mesh(1, 1));
  constexpr int64_t q = 4096, kv = 1024, ffn = 12288;
  EXPECT_EQ(plan.activation_elements_per_token_layer,
            4 * kDim + (q + 2 * kv) + (q + kv) + q + 32 + 4 * ffn);
  EXPECT_EQ(plan.op_sac_elements_per_token_layer, 3 * kDim + (q + 2 * kv) + q + 32 + 2 * ffn);
}

TEST(Plan, DoublingFsdpHalvesThePerRankState) {
  auto model = meta_model("llama3", "8B");
  auto job = job_for("llama3", "8B");
  auto p8 = plan_layout(*model, job, mesh(8, 1));
  auto p16 = plan_layout(*model, job, mesh(16, 1));
  EXPECT_EQ(p8.params_per_rank, kLlama8B / 8);
  EXPECT_EQ(p8.params_per_rank, 2 * p16.params_per_rank);
  EXPECT_DOUBLE_EQ(p8.memory.optimizer, 2 * p16.memory.optimizer);
  // The all-gather working set and the activations do not depend on the FSDP degree.
  EXPECT_DOUBLE_EQ(p8.memory.gathered, p16.memory.gathered);
  EXPECT_DOUBLE_EQ(p8.memory.activations, p16.memory.activations);
  // Under FSDP, compute runs in mixed_precision_param: bf16 gathered params, fp32 grads.
  EXPECT_EQ(p8.compute_dtype, "bfloat16");
  // The root unit and one block gathered in bf16, the block's unsharded gradients in fp32.
  EXPECT_DOUBLE_EQ(p8.memory.gathered, (2 * kVocab * kDim + kDim + kBlock) * 2.0 + kBlock * 4.0);
}

TEST(Plan, WithoutSequenceParallelTheNormsAndResidualsStayWhole) {
  auto model = meta_model("llama3", "8B");
  auto job = job_for("llama3", "8B");
  job.parallelism.disable_sequence_parallel = true;
  auto plan = plan_layout(*model, job, mesh(16, 4));
  EXPECT_FALSE(plan.sequence_parallel);
  // 2 norms x (input + output) stay whole on every rank; the rest is divided by tp 4.
  const double per_token = 4 * kDim + (kDim + 2 * kKv + kDim + 32 + 4 * kFfn) / 4.0;
  EXPECT_DOUBLE_EQ(plan.memory.activations, kLayers * per_token * 8192 * 2.0);  // bf16
  job.parallelism.disable_sequence_parallel = false;
  EXPECT_TRUE(plan_layout(*model, job, mesh(16, 4)).sequence_parallel);
}

TEST(Plan, ReshardNeverKeepsEveryUnitGathered) {
  auto model = meta_model("llama3", "8B");
  auto job = job_for("llama3", "8B");
  job.parallelism.fsdp_reshard_after_forward = "never";
  auto plan = plan_layout(*model, job, mesh(8, 1));
  EXPECT_DOUBLE_EQ(plan.memory.gathered, kLlama8B * 2.0 + kBlock * 4.0);
}

TEST(Plan, TensorParallelSplitsMatricesAndReplicatesNorms) {
  auto model = meta_model("llama3", "8B");
  auto job = job_for("llama3", "8B");
  auto plan = plan_layout(*model, job, mesh(16, 4));
  EXPECT_EQ(plan.params_per_rank, ((kLlama8B - kNormParams) / 4 + kNormParams) / 16);
  EXPECT_EQ(plan.root_unit_params, 2 * kVocab * kDim / 4 + kDim);  // the final norm replicated
  EXPECT_EQ(plan.largest_block_params, (kBlock - 2 * kDim) / 4 + 2 * kDim);
  auto no_tp = plan_layout(*model, job, mesh(16, 1));
  EXPECT_DOUBLE_EQ(plan.memory.activations, no_tp.memory.activations / 4);
  EXPECT_DOUBLE_EQ(plan.memory.logits, no_tp.memory.logits / 4);
}

TEST(Plan, CheckpointingModesOrderTheActivationMemory) {
  auto model = meta_model("qwen3", "8B");
  auto job = job_for("qwen3", "8B");
  auto activations = [&](const std::string& mode, const std::string& option) {
    job.activation_checkpoint.mode = mode;
    job.activation_checkpoint.selective_ac_option = option;
    return plan_layout(*model, job, mesh(16, 4)).memory.activations;
  };
  double none = activations("none", "op"), full = activations("full", "op");
  double op = activations("selective", "op"), every2 = activations("selective", "2");
  EXPECT_GT(none, op);
  EXPECT_GT(op, full);
  EXPECT_GT(none, every2);
  EXPECT_GT(every2, full);
  // Full checkpointing keeps each block's input (dim per token) and one block's activations.
  auto plan = plan_layout(*model, job, mesh(16, 4));
  const double tokens = 8192, bytes = 2, tp = 4;
  EXPECT_DOUBLE_EQ(full,
                   (36 * 4096 + plan.activation_elements_per_token_layer) * tokens * bytes / tp);
  EXPECT_THROW(activations("selective", "often"), ConfigError);
}

TEST(Plan, Qwen3_8BOnTp4Fsdp16FitsInAFewGiB) {
  auto model = meta_model("qwen3", "8B");
  auto job = job_for("qwen3", "8B");
  job.training.seq_len = 4096;
  job.activation_checkpoint.mode = "selective";
  job.activation_checkpoint.selective_ac_option = "op";
  auto plan = plan_layout(*model, job, mesh(16, 4));
  EXPECT_EQ(plan.total_params, model->num_params());
  EXPECT_NEAR(static_cast<double>(plan.params_per_rank), plan.total_params / 64.0,
              0.01 * plan.total_params / 64.0);
  EXPECT_GT(plan.memory.total(), 2.0 * (1 << 30));
  EXPECT_LT(plan.memory.total(), 12.0 * (1 << 30));
  EXPECT_TRUE(plan.caveats.empty());
}

}  // namespace unit_tools_plan_test
}  // namespace titan::tools
