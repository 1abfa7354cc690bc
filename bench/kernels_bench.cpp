// Compile mode's fused kernels against the eager compositions they replace, forward and
// backward, at the llama3 debug model's shapes at seq 2048 x batch 2 (dim 256, 16 heads of 16,
// SwiGLU width 768; MLA's rope width 64 for the interleaved RoPE; the MoE layer with
// debugmodel_moe's routing, 64 experts top 8, but experts of width 8 so that the routing, not
// the experts' GEMMs, is what is timed), and the loss at Qwen3 0.6B's shape (seq 1024 x 1, dim
// 1024, vocabulary 151,936; 5 tries at most): the median time of a forward
// + backward over `reps` tries, and the CPU bytes each try allocates at its peak above what
// was alive before it (the counting allocator), in one run so the ratios share the machine's
// load.
//   build/kernels_bench [threads=2] [reps=30]
#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "titan/distributed/linear_cross_entropy.h"
#include "titan/models/common/causal_attention.h"
#include "titan/models/common/kernels/attention.h"
#include "titan/models/common/kernels/cpu_isa.h"
#include "titan/models/common/kernels/moe_routing.h"
#include "titan/models/common/kernels/rms_norm.h"
#include "titan/models/common/kernels/rope.h"
#include "titan/models/common/kernels/swiglu.h"
#include "titan/models/common/loss.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/rope.h"
#include "titan/platform/device.h"
#include "titan/platform/memory.h"

namespace {

using titan::models::kernels::RopeLayout;
using Fn = std::function<torch::Tensor(const std::vector<torch::Tensor>&)>;

struct Figure {
  double ms = 0;
  double peak_mib = 0;
};

// Median milliseconds of fn(inputs).backward(dout), and its peak allocation.
Figure measure(const Fn& fn, const std::vector<torch::Tensor>& inputs, const torch::Tensor& dout,
               int reps) {
  std::vector<torch::Tensor> leaves;
  for (const auto& t : inputs) {
    leaves.push_back(t.requires_grad() ? t.detach().clone().requires_grad_() : t);
  }
  std::vector<double> times;
  Figure f;
  for (int i = 0; i < reps + 2; ++i) {  // two warm-up tries
    for (auto& l : leaves) l.mutable_grad() = torch::Tensor();
    const int64_t before = titan::platform::live_tensor_bytes();
    titan::platform::reset_peak_tensor_bytes();
    const auto start = std::chrono::steady_clock::now();
    fn(leaves).backward(dout);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2) times.push_back(ms);
    f.peak_mib = (titan::platform::peak_tensor_bytes() - before) / double(1 << 20);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  f.ms = times[times.size() / 2];
  return f;
}

void row(const std::string& name, const Fn& eager, const Fn& fused,
         const std::vector<torch::Tensor>& inputs, int reps) {
  const auto dout = torch::randn_like(eager(inputs));
  const Figure e = measure(eager, inputs, dout, reps), f = measure(fused, inputs, dout, reps);
  fmt::print("| {} | {:.2f} | {:.2f} | {:.2f}x | {:.1f} | {:.1f} |\n", name, e.ms, f.ms,
             e.ms / f.ms, e.peak_mib, f.peak_mib);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::stoi(argv[1]) : 2;
  const int reps = argc > 2 ? std::stoi(argv[2]) : 30;
  at::set_num_threads(threads);
  titan::platform::enable_memory_counting();
  torch::manual_seed(0);
  const int64_t B = 2, S = 2048, H = 16, Dh = 16, dim = 256, hidden = 768;
  fmt::print("{}; fp32, {} threads, median of {} forward + backward tries; {}\n\n",
             titan::platform::cpu_model(), threads, reps,
             titan::models::kernels::describe_kernel_isa());
  fmt::print("| kernel (shape) | eager ms | fused ms | speed-up | eager peak MiB | fused peak "
             "MiB |\n|---|---|---|---|---|---|\n");

  titan::models::RopeOptions rope_options;
  for (const auto& [layout, width] : {std::pair{RopeLayout::kHalves, Dh},
                                      std::pair{RopeLayout::kInterleaved, int64_t(64)}}) {
    rope_options.head_dim = width;
    const auto [cos, sin] = titan::models::rope_cos_sin(titan::models::rope_inv_freq(rope_options),
                                                        S, torch::kFloat, torch::kCPU);
    const bool halves = layout == RopeLayout::kHalves;
    row(fmt::format("RoPE {} [{}, {}, {}, {}]", halves ? "halves" : "interleaved", B, S, H, width),
        [halves](const auto& in) {
          return halves ? titan::models::apply_rope(in[0], in[1], in[2])
                        : titan::models::apply_rope_interleaved(in[0], in[1], in[2]);
        },
        [layout](const auto& in) {
          return titan::models::kernels::rope(in[0], in[1], in[2], layout);
        },
        {torch::randn({B, S, H, width}).requires_grad_(), cos, sin}, reps);
  }
  titan::models::RMSNorm norm(dim, 1e-5, torch::TensorOptions());  // the eager module
  row(fmt::format("RMSNorm [{}, {}, {}]", B, S, dim),
      [&norm](const auto& in) { return norm->forward(in[0]); },
      [&norm](const auto& in) { return titan::models::kernels::rms_norm(in[0], norm->weight, 1e-5); },
      {torch::randn({B, S, dim}).requires_grad_()}, reps);
  const auto qkv = [&](int64_t heads) {
    return torch::randn({B, S, heads, Dh}).transpose(1, 2).requires_grad_();
  };
  const auto best = titan::models::kernels::kernel_isa();
  for (const auto isa : titan::models::kernels::supported_isas()) {  // every variant this CPU runs
    titan::models::kernels::set_kernel_isa(isa);
    row(fmt::format("SwiGLU [{}, {}, {}], {}", B, S, hidden, titan::models::kernels::isa_name(isa)),
        [](const auto& in) { return torch::silu(in[0]) * in[1]; },
        [](const auto& in) { return titan::models::kernels::swiglu(in[0], in[1]); },
        {torch::randn({B, S, hidden}).requires_grad_(),
         torch::randn({B, S, hidden}).requires_grad_()},
        reps);
    row(fmt::format("causal attention [{}, {}, {}, {}], {}", B, H, S, Dh,
                    titan::models::kernels::isa_name(isa)),
        [](const auto& in) { return titan::models::causal_attention(in[0], in[1], in[2], 0.25); },
        [](const auto& in) {
          return titan::models::kernels::causal_attention(in[0], in[1], in[2], 0.25);
        },
        {qkv(H), qkv(H), qkv(H)}, reps);
  }
  titan::models::kernels::set_kernel_isa(best);
  titan::models::MoEArgs moe_args;
  moe_args.num_experts = 64;
  moe_args.top_k = 8;
  moe_args.hidden_dim = 8;
  moe_args.route_norm = true;
  titan::models::MoE eager_moe(dim, moe_args, torch::TensorOptions()),
      fused_moe(dim, moe_args, torch::TensorOptions());
  {
    torch::NoGradGuard no_grad;
    auto from = eager_moe->parameters(), to = fused_moe->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i].normal_(0.0, 0.05));
  }
  fused_moe->router->choose = titan::models::kernels::route;
  fused_moe->moves = {titan::models::kernels::sort_copies, titan::models::kernels::permute_copies,
                      titan::models::kernels::combine_copies};
  row(fmt::format("MoE routing [{}, {}, {}], {} experts, top {}", B, S, dim,
                  moe_args.num_experts, moe_args.top_k),
      [&eager_moe](const auto& in) { return eager_moe->forward(in[0]); },
      [&fused_moe](const auto& in) { return fused_moe->forward(in[0]); },
      {torch::randn({B, S, dim}).requires_grad_()}, reps);
  const int64_t tokens = 1024, model_dim = 1024, vocab = 151936;  // Qwen3 0.6B
  row(
      fmt::format("output projection + cross-entropy [1, {}, {}] x {}", tokens, model_dim, vocab),
      [](const auto& in) {
        return titan::models::cross_entropy_sum(torch::linear(in[0], in[1]), in[2]);
      },
      [](const auto& in) {
        return titan::distributed::linear_cross_entropy_sum(in[0], in[1], in[2]);
      },
      {torch::randn({1, tokens, model_dim}).requires_grad_(),
       (torch::randn({vocab, model_dim}) * 0.02).requires_grad_(),
       torch::randint(0, vocab, {1, tokens})},
      std::min(reps, 5));
  return 0;
}
