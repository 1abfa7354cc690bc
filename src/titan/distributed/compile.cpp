#include "titan/distributed/compile.h"

#include <algorithm>
#include <mutex>

#include "titan/errors.h"
#include "titan/models/common/attention.h"
#include "titan/models/common/feed_forward.h"
#include "titan/models/common/kernels/attention.h"
#include "titan/models/common/kernels/cpu_isa.h"
#include "titan/models/common/kernels/moe_routing.h"
#include "titan/models/common/kernels/rms_norm.h"
#include "titan/models/common/kernels/rope.h"
#include "titan/models/common/kernels/swiglu.h"
#include "titan/models/common/mla.h"
#include "titan/models/common/moe.h"
#include "titan/models/common/rmsnorm.h"
#include "titan/models/common/transformer_block.h"
#include "titan/platform/device.h"
#include "titan/platform/logging.h"
#include "titan/platform/memory.h"

namespace titan::distributed {
namespace {

torch::Tensor fused_swiglu(const std::vector<torch::Tensor>& in) {
  return models::kernels::swiglu(in[0], in[1]);
}

models::ElementwiseOp::Fn fused_rope(models::kernels::RopeLayout layout) {
  return [layout](const std::vector<torch::Tensor>& in) {
    return models::kernels::rope(in[0], in[1], in[2], layout);
  };
}

// Whether the fused attention beats eager's (SDPA) on this CPU's kernel variant: the baseline
// (SSE) tiles ran at 0.48x its speed on an AMD EPYC (bench/NOTES.md), so there attention stays
// eager's.
bool fused_attention_pays() {
  return models::kernels::kernel_isa() != models::kernels::CpuIsa::kBaseline;
}

// Every RMSNorm (a block's second one with the residual add before it), RoPE, attention (where
// it pays), SwiGLU gate and MoE routing of the part computes through its fused kernel.
void fuse_kernels(torch::nn::Module& model) {
  const bool attention_pays = fused_attention_pays();
  for (const auto& module : model.modules()) {
    if (auto* norm = module->as<models::RMSNormImpl>()) {
      norm->compute.fused = [eps = norm->eps](const std::vector<torch::Tensor>& in) {
        return models::kernels::rms_norm(in[0], in[1], eps);
      };
    } else if (auto* block = module->as<models::TransformerBlockImpl>()) {
      block->residual_norm = [](const torch::Tensor& x, const torch::Tensor& delta,
                                const models::RMSNormImpl& norm) {
        return models::kernels::residual_rms_norm(x, delta, norm.weight, norm.eps);
      };
    } else if (auto* attention = module->as<models::AttentionImpl>()) {
      attention->rotary.fused = fused_rope(models::kernels::RopeLayout::kHalves);
      if (attention_pays) attention->kernel = models::kernels::causal_attention;
    } else if (auto* mla = module->as<models::MultiHeadLatentAttentionImpl>()) {
      mla->rotary.fused = fused_rope(models::kernels::RopeLayout::kInterleaved);
      if (attention_pays) mla->kernel = models::kernels::causal_attention;
    } else if (auto* ffn = module->as<models::FeedForwardImpl>()) {
      ffn->gate.fused = fused_swiglu;
    } else if (auto* experts = module->as<models::GroupedExpertsImpl>()) {
      experts->gate.fused = fused_swiglu;
    } else if (auto* router = module->as<models::TokenChoiceRouterImpl>()) {
      router->choose = models::kernels::route;
    } else if (auto* moe = module->as<models::MoEImpl>()) {
      moe->moves = {models::kernels::sort_copies, models::kernels::permute_copies,
                    models::kernels::combine_copies};
    }
  }
}

}  // namespace

bool compiles(const config::CompileSection& compile, const std::string& component) {
  return compile.enable && std::find(compile.components.begin(), compile.components.end(),
                                     component) != compile.components.end();
}

void check_compile(const config::CompileSection& compile) {
  // A TITAN_KERNEL_ISA this CPU cannot run (or misspelt) is refused before a worker starts.
  if (compiles(compile, "model")) models::kernels::kernel_isa();
  if (compiles(compile, "model") && platform::visible_gpus() > 0) {
    throw ConfigError(
        "compile.enable with compile.components \"model\": the fused kernels run on the CPU; "
        "their CUDA versions are not built yet (use compile.components = [\"loss\"], or hide "
        "the GPUs with CUDA_VISIBLE_DEVICES= to train on the CPU)");
  }
}

void apply_compile(ModelPart& part, const config::CompileSection& compile) {
  if (compile.enable) platform::enable_allocation_cache();
  if (compiles(compile, "model")) {
    static std::once_flag logged;  // once a rank, however many model parts it holds
    std::call_once(logged, [] {
      log::info("{}{}", models::kernels::describe_kernel_isa(),
                fused_attention_pays() ? ""
                                       : "; causal attention stays eager's (SDPA): the baseline "
                                         "tiles run at half its speed");
    });
    fuse_kernels(part.model());
  }
  if (compiles(compile, "loss")) part.enable_fused_loss();
}

}  // namespace titan::distributed
