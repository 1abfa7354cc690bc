// A family added from outside titan's source tree, as a plugin would add one: "toy_relu", the
// common Transformer with a ReLU MLP (out = w2(relu(w1 x)), no gate) in place of SwiGLU. All of
// it is in this file; one line registers it (protocols::register_train_spec), and titan's code
// does not change. Checked: the registry finds it like a built-in family; every block's
// feed-forward is the ReLU MLP, its output the formula written out (float64, 1e-12); and
// parallelize_transformer (the shared train spec's) trains it with FSDP over 2 thread ranks to
// the single-rank loss and gradient norm (float32, 1e-5 relative).
#include <gtest/gtest.h>

#include <cmath>
#include <mutex>

#include "support/thread_ranks.h"
#include "titan/config/job_config.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/model_part.h"
#include "titan/models/common/infra/transformer_train_spec.h"
#include "titan/models/common/loss.h"
#include "titan/models/common/transformer.h"
#include "titan/models/common/transformer_block.h"
#include "titan/protocols/train_spec.h"

namespace titan::unit_models_toy_relu_toy_relu_test {

// The family's own feed-forward part.
class ReluMlpImpl : public models::FeedForwardPart {
 public:
  ReluMlpImpl(int64_t dim, int64_t hidden, const models::InitRule& in_init,
              const models::InitRule& out_init, const torch::TensorOptions& options)
      : hidden(hidden),
        w1(register_module("w1", models::Linear(dim, hidden, options))),
        w2(register_module("w2", models::Linear(hidden, dim, options))) {
    w1->init = in_init;
    w2->init = out_init;
  }

  torch::Tensor forward(const torch::Tensor& x) override {  // x: [B, S, dim]
    return w2(torch::relu(w1(x)));                          // [B, S, dim]
  }
  std::vector<models::ShardedSize> tensor_parallel_sizes() const override {
    return {{"ReLU MLP hidden width", hidden}};
  }
  models::SavedElements saved_elements(bool) const override { return {0, 2 * hidden}; }
  int64_t flops_per_token(int64_t) const override { return 6 * num_params(); }
  std::vector<models::ElementwiseOp*> recomputed_ops() override { return {}; }

  int64_t hidden;
  models::Linear w1{nullptr};
  models::Linear w2{nullptr};
};

protocols::TrainSpec toy_relu_spec() {
  models::TransformerArgs a;
  a.dim = 32;
  a.n_layers = 2;
  a.n_heads = 4;
  a.vocab_size = 64;
  a.feed_forward = [](const models::TransformerArgs& args, const models::InitRule& in_init,
                      const models::InitRule& out_init, const torch::TensorOptions& options) {
    return std::make_shared<ReluMlpImpl>(args.dim, 4 * args.dim, in_init, out_init, options);
  };
  return models::transformer_train_spec("toy_relu", {{"debugmodel", a}},
                                        {"toy_relu", "ToyReluForCausalLM", "", ""}, false);
}

// The registered spec (registered once per process: the one line a family needs).
const protocols::TrainSpec& toy_relu() {
  static const bool registered = (protocols::register_train_spec(toy_relu_spec()), true);
  (void)registered;
  return protocols::get_train_spec("toy_relu");
}

constexpr uint64_t kSeed = 5;
constexpr int64_t kBatch = 4, kSeq = 16;

TEST(ToyReluFamily, RegistersAndBuildsItsOwnFeedForward) {
  const auto& spec = toy_relu();
  EXPECT_EQ(spec.flavors, (std::vector<std::string>{"debugmodel"}));
  auto model = spec.build("debugmodel");
  model->to(torch::kDouble);
  model->init_weights(kSeed);
  auto& transformer = dynamic_cast<models::Transformer&>(*model);
  ASSERT_EQ(transformer.layers->size(), 2u);
  for (const auto& [name, layer] : transformer.layers->items()) {
    auto& block = *layer->as<models::TransformerBlockImpl>();
    auto* mlp = dynamic_cast<ReluMlpImpl*>(block.feed_forward.get());
    ASSERT_NE(mlp, nullptr) << name;
    auto x = torch::randn({2, 5, 32}, torch::kDouble);
    auto expected = torch::matmul(torch::clamp_min(torch::matmul(x, mlp->w1->weight.t()), 0.0),
                                  mlp->w2->weight.t());
    EXPECT_LT((block.feed_forward->forward(x) - expected).abs().max().item<double>(), 1e-12);
  }
  EXPECT_EQ(model->forward(torch::zeros({1, 3}, torch::kInt64)).sizes(),
            (std::vector<int64_t>{1, 3, 64}));
}

TEST(ToyReluFamily, TrainsUnderParallelizeTransformerLikeOneRank) {
  const auto& spec = toy_relu();
  auto tokens = torch::randint(0, 64, {kBatch, kSeq + 1}, at::detail::createCPUGenerator(1));
  auto input = tokens.narrow(1, 0, kSeq), labels = tokens.narrow(1, 1, kSeq);
  const double tokens_in_step = double(kBatch * kSeq);

  auto whole = spec.build("debugmodel");
  whole->init_weights(kSeed);
  auto loss = models::cross_entropy_sum(whole->forward(input), labels) / tokens_in_step;
  loss.backward();
  double whole_sq = 0;
  for (const auto& p : whole->parameters()) whole_sq += p.grad().pow(2).sum().item<double>();

  config::JobConfig job;  // FSDP over both ranks (data_parallel_shard_degree -1), in float32
  job.training.mixed_precision_param = "float32";
  const auto dims = distributed::ParallelDims::from_config(job.parallelism, 2);
  std::mutex mu;
  double fsdp_loss = 0, fsdp_sq = 0;
  testing::run_thread_ranks(2, [&](int rank, distributed::World& world) {
    const auto mesh = distributed::DeviceMesh::build(dims, world);
    distributed::ModelPart part(spec.build_on_device("debugmodel", torch::kMeta), mesh);
    spec.parallelize(part, dims, mesh, job);
    part.init_weights(torch::kCPU, kSeed);
    const int64_t half = kBatch / 2;
    auto l = part.forward_loss_sum(input.narrow(0, rank * half, half),
                                   labels.narrow(0, rank * half, half)) /
             tokens_in_step;
    l.backward();
    part.finish_backward();
    const double sq = part.grad_sq_sum();
    std::lock_guard<std::mutex> lock(mu);
    fsdp_loss += l.item<double>();
    fsdp_sq = sq;  // the same on every rank: summed over the shards
  });
  EXPECT_NEAR(fsdp_loss, loss.item<double>(), 1e-5 * loss.item<double>());
  EXPECT_NEAR(std::sqrt(fsdp_sq), std::sqrt(whole_sq), 1e-5 * std::sqrt(whole_sq));
}

}  // namespace titan::unit_models_toy_relu_toy_relu_test
