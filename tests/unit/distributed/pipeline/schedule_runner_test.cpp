// The schedule runtime against the whole model, the llm.c way: a float64 Transformer of 6
// blocks cut into 2 ranks x 1 or 2 stages computes, for every schedule, the loss and every
// parameter's gradient of one forward-backward over 4 microbatches that the uncut model
// computes over the same 4 microbatches one after the other (1e-12: only the order in which
// the microbatches' gradients are summed differs; the cross-entropy itself runs in fp32, as
// TorchTitan's, so against one pass over the whole batch the gradients agree to 1e-6 only).
// And a peer that never sends is a CommError within comm.train_timeout_seconds naming the rank,
// the action, its stage and microbatch, not a hang.
#include <gtest/gtest.h>

#include <thread>

#include "support/thread_ranks.h"
#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parallelize.h"
#include "titan/distributed/pipeline/schedule_runner.h"
#include "titan/errors.h"
#include "titan/models/common/loss.h"
#include "titan/models/common/transformer.h"

namespace titan::distributed::pipeline {
namespace unit_distributed_pipeline_schedule_runner_test {

constexpr uint64_t kSeed = 7;
constexpr int64_t kBatch = 4, kSeq = 8;

models::TransformerArgs tiny() {
  models::TransformerArgs a;
  a.dim = 16;
  a.n_layers = 6;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.vocab_size = 32;
  a.hidden_dim = 24;
  return a;
}

torch::TensorOptions f64(torch::Device device) {
  return torch::TensorOptions().dtype(torch::kDouble).device(device);
}

std::pair<torch::Tensor, torch::Tensor> batch() {
  auto gen = at::detail::createCPUGenerator(3);
  auto tokens = torch::randint(0, tiny().vocab_size, {kBatch, kSeq + 1}, gen);
  return {tokens.narrow(1, 0, kSeq), tokens.narrow(1, 1, kSeq)};
}

// name -> gradient of the uncut model after forward-backward of the batch's microbatches.
std::map<std::string, torch::Tensor> whole_model_grads(double& loss) {
  models::Transformer model(tiny(), f64(torch::kCPU));
  model.init_weights(kSeed);
  auto [input, labels] = batch();
  loss = 0;
  for (int64_t mb = 0; mb < kBatch; ++mb) {
    auto l =
        models::cross_entropy_sum(model.forward(input.narrow(0, mb, 1)), labels.narrow(0, mb, 1)) /
        double(kBatch * kSeq);
    l.backward();
    loss += l.item<double>();
  }
  std::map<std::string, torch::Tensor> out;
  for (const auto& p : model.named_parameters()) out[p.key()] = p.value().grad();
  return out;
}

// FSDP over this rank alone, reducing in float64 (apply_fsdp reduces in mixed_precision_reduce,
// float32, which would round the gradients), and freeing each block's gathered parameters after
// its forward: every microbatch in flight must get its own back for its backward.
void wrap_in_float64(ModelPart& part, const DeviceMesh& mesh) {
  FsdpOptions options;
  options.param_dtype = options.reduce_dtype = torch::kDouble;
  options.reshard_after_forward = true;
  part.set_fsdp(
      Fsdp::apply(part.model(), mesh[MeshGroup::DpShardCp], mesh[MeshGroup::DpReplicate], options),
      torch::kDouble);
}

struct PipelineResult {
  double loss = 0;  // summed over the stages' ranks
  std::map<std::string, torch::Tensor> grads;
};

PipelineResult run_pipeline(const std::string& schedule) {
  PipelineResult result;
  std::mutex mu;
  config::JobConfig job;
  job.parallelism.pipeline_parallel_degree = 2;
  job.parallelism.pipeline_parallel_schedule = schedule;
  job.training.local_batch_size = kBatch;
  ParallelDims dims = ParallelDims::from_config(job.parallelism, 2);
  auto split = [](const models::PipelineSplit& s) {
    return models::split_for_pipeline(tiny().n_layers, s);
  };
  testing::run_thread_ranks(2, [&](int, World& world) {
    auto mesh = DeviceMesh::build(dims, world);
    ScheduleRunner runner(plan_pipeline(job, dims.pp, split), mesh[MeshGroup::PP], world);
    std::vector<std::unique_ptr<ModelPart>> parts;
    std::vector<ModelPart*> raw;
    for (const auto& piece : runner.local_pieces()) {
      parts.push_back(std::make_unique<ModelPart>(
          std::make_shared<models::Transformer>(tiny(), f64(torch::kMeta), piece), mesh));
      wrap_in_float64(*parts.back(), mesh);
      parts.back()->init_weights(torch::kCPU, kSeed);
      raw.push_back(parts.back().get());
    }
    runner.attach(raw);
    auto [input, labels] = batch();
    const double loss = runner.sum_over_stages(runner.run(input, labels, double(kBatch * kSeq)));
    std::lock_guard<std::mutex> lock(mu);
    result.loss = loss;
    for (auto& part : parts) {
      std::vector<torch::Tensor> grads;
      for (const auto& p : part->parameters()) grads.push_back(p.grad());
      for (const auto& [name, piece] : part->state(grads, "", false)) {
        result.grads[name] = piece.local;
      }
    }
  });
  return result;
}

TEST(ScheduleRunner, EveryScheduleComputesTheWholeModelsLossAndGradients) {
  double loss = 0;
  const auto want = whole_model_grads(loss);
  for (const char* schedule : {"GPipe", "1F1B", "Interleaved1F1B", "ZBVZeroBubble"}) {
    SCOPED_TRACE(schedule);
    const auto got = run_pipeline(schedule);
    EXPECT_NEAR(got.loss, loss, 1e-12 * loss);
    ASSERT_EQ(got.grads.size(), want.size());
    for (const auto& [name, grad] : want) {
      ASSERT_TRUE(got.grads.count(name)) << name;
      ASSERT_TRUE(got.grads.at(name).defined()) << name;
      EXPECT_TRUE(torch::allclose(got.grads.at(name), grad, 1e-12, 1e-14))
          << name << ": max difference "
          << (got.grads.at(name) - grad).abs().max().item<double>() << " of max "
          << grad.abs().max().item<double>();
    }
  }
}

TEST(ScheduleRunner, APeerThatNeverSendsTimesOutNamingTheActionAndMicrobatch) {
  config::JobConfig job;
  job.parallelism.pipeline_parallel_degree = 2;
  job.training.local_batch_size = kBatch;
  ParallelDims dims = ParallelDims::from_config(job.parallelism, 2);
  auto split = [](const models::PipelineSplit& s) {
    return models::split_for_pipeline(tiny().n_layers, s);
  };
  std::string error;
  testing::run_thread_ranks(
      2,
      [&](int rank, World& world) {
        auto mesh = DeviceMesh::build(dims, world);
        ScheduleRunner runner(plan_pipeline(job, dims.pp, split), mesh[MeshGroup::PP], world);
        if (rank == 1) {  // stage 1 never runs: rank 0 waits for its first gradient
          std::this_thread::sleep_for(std::chrono::seconds(4));
          return;
        }
        ModelPart part(std::make_shared<models::Transformer>(tiny(), f64(torch::kMeta),
                                                             runner.local_pieces().front()),
                       mesh);
        apply_fsdp(part, dims, mesh, job);
        part.init_weights(torch::kCPU, kSeed);
        runner.attach({&part});
        auto [input, labels] = batch();
        try {
          runner.run(input, labels, 1.0);
        } catch (const CommError& e) {
          error = e.what();
        }
      },
      std::chrono::seconds(1));
  for (const char* expected : {"rank 0:", "pipeline gradient receive for action 0B0 (stage 0, "
                               "microbatch 0) from pipeline rank 1",
                               "comm.train_timeout_seconds = 1"}) {
    EXPECT_NE(error.find(expected), std::string::npos) << expected << "\n" << error;
  }
}

}  // namespace unit_distributed_pipeline_schedule_runner_test
}  // namespace titan::distributed::pipeline
