// Auxiliary-loss-free load balancing, measured: qwen3's debugmodel_moe_small shape (2 MoE layers
// of 8 experts, top 2) trained for 100 AdamW steps on tinyshakespeare's bytes (seq 64 x batch 8,
// the same windows for both runs), once with load_balance_coeff 1e-3 (every flavor's) and once
// with 0. Prints, every 10 steps, the mean over layers of the max / mean and min / mean expert
// load of those steps: with balancing the max / mean should fall; without, it should not.
//   build/load_balance_bench [steps] [corpus]
#include <fmt/format.h>
#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <random>

#include "titan/components/load_balancing.h"
#include "titan/distributed/device_mesh.h"
#include "titan/distributed/parallel_dims.h"
#include "titan/models/common/transformer.h"
#include "titan/models/qwen3/flavors.h"

namespace {

using titan::components::ExpertLoad;

std::vector<int64_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<int64_t> out;
  for (char c; in.get(c);) out.push_back(static_cast<unsigned char>(c));
  return out;
}

// Mean over layers of max / mean and min / mean, averaged over the steps of a window.
struct Window {
  double max = 0, min = 0;
  int steps = 0;
  void add(const std::vector<ExpertLoad>& loads) {
    for (const auto& l : loads) {
      max += l.max / loads.size();
      min += l.min / loads.size();
    }
    ++steps;
  }
};

std::vector<Window> train(double coeff, const std::vector<int64_t>& corpus, int steps,
                          const titan::distributed::DeviceMesh& mesh) {
  auto args =
      titan::models::find_flavor(titan::models::qwen3::flavors(), "qwen3", "debugmodel_moe_small");
  args.moe->load_balance_coeff = coeff;
  titan::models::Transformer model(args);
  model.init_weights(42);
  titan::components::ExpertLoadBalancer balancer({&model}, mesh);
  torch::optim::AdamW optimizer(model.parameters(), torch::optim::AdamWOptions(8e-4));
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> start(0, static_cast<int64_t>(corpus.size()) - 66);
  constexpr int64_t kBatch = 8, kSeq = 64;
  std::vector<Window> windows;
  for (int step = 1; step <= steps; ++step) {
    std::vector<int64_t> tokens;
    for (int64_t b = 0; b < kBatch; ++b) {
      const int64_t s = start(rng);
      tokens.insert(tokens.end(), corpus.begin() + s, corpus.begin() + s + kSeq + 1);
    }
    auto batch = torch::tensor(tokens).view({kBatch, kSeq + 1});  // [B, S + 1]
    auto logits = model.forward(batch.narrow(1, 0, kSeq));        // [B, S, V]
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                     batch.narrow(1, 1, kSeq).reshape(-1));
    optimizer.zero_grad();
    loss.backward();
    balancer.step();
    optimizer.step();
    if ((step - 1) % 10 == 0) windows.emplace_back();
    windows.back().add(balancer.loads());
  }
  return windows;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 100;
  const std::string corpus_path =
      argc > 2 ? argv[2]
               : std::string(TITAN_SOURCE_DIR) + "/../shared/data/corpora/tinyshakespeare.txt";
  torch::set_num_threads(1);
  const auto corpus = read_bytes(corpus_path);
  titan::distributed::WorldInfo info;
  info.master_port = 20000 + static_cast<int>(std::random_device()() % 20000);
  auto world = titan::distributed::World::join(info, {});
  const auto mesh = titan::distributed::DeviceMesh::build(
      titan::distributed::ParallelDims::from_config({}, 1), *world);
  const auto on = train(1e-3, corpus, steps, mesh);
  const auto off = train(0.0, corpus, steps, mesh);
  std::cout << "load_balance_bench: qwen3 debugmodel_moe_small, " << steps
            << " steps, expert load (tokens / mean) averaged over layers and 10-step windows\n";
  std::cout << "steps      coeff 1e-3: max   min    coeff 0: max   min\n";
  for (size_t w = 0; w < on.size(); ++w) {
    const auto& a = on[w];
    const auto& b = off[w];
    std::cout << fmt::format("{:3}-{:<3}         {:6.3f} {:5.3f}          {:6.3f} {:5.3f}\n",
                             w * 10 + 1, w * 10 + a.steps, a.max / a.steps, a.min / a.steps,
                             b.max / b.steps, b.min / b.steps);
  }
  return 0;
}
