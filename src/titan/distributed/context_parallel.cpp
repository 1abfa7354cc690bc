#include "titan/distributed/context_parallel.h"

#include <fmt/format.h>

#include "titan/distributed/collectives.h"
#include "titan/errors.h"
#include "titan/models/common/chunked_attention.h"
#include "titan/models/common/transformer_block.h"
#include "titan/platform/autograd_state.h"
#include "titan/platform/device.h"

namespace titan::distributed {
namespace {

using models::ChunkLayout;
using models::PartialAttention;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Every rank's chunks in rank order: how the gathered keys are laid out.
std::vector<int64_t> all_chunks(const SequenceSplit& split) {
  std::vector<int64_t> out;
  for (int r = 0; r < split.cp; ++r) {
    for (int64_t c : split.chunks_of(r)) out.push_back(c);
  }
  return out;
}

struct Ring {
  ProcessGroup* group;
  SequenceSplit split;
  double scale;

  int rank() const { return group->rank(); }
  int next() const { return (rank() + 1) % split.cp; }
  int prev() const { return (rank() + split.cp - 1) % split.cp; }
  // The rank whose keys this rank holds at ring step t.
  int source(int t) const { return (rank() + split.cp - t) % split.cp; }
  // q [B, H, s, Dh] holds this rank's chunks; a block holds source(t)'s.
  ChunkLayout layout(const torch::Tensor& q, int t) const {
    const auto mine = split.chunks_of(rank());
    return {mine, split.chunks_of(source(t)), q.size(2) / static_cast<int64_t>(mine.size())};
  }
};
using RingState = c10::intrusive_ptr<platform::AutogradState<Ring>>;

// A rank's keys and values as one message: [B, Hkv, s, Dh + Dv].
torch::Tensor pack(const torch::Tensor& k, const torch::Tensor& v) {
  return torch::cat({k, v}, -1).contiguous();
}

// The ring (rotate method alltoall): at step t this rank computes on the keys of rank
// source(t) while passing them on to the next rank and receiving source(t + 1)'s. Backward
// rotates the keys again, and with them their gradient: each rank adds its part and passes it
// on, so after cp steps a block's gradient returns to its owner.
struct RingAttention : public torch::autograd::Function<RingAttention> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const RingState& state) {
    platform::save_state(ctx, state);
    const auto& ring = state->value;
    ProcessGroup& group = *ring.group;
    const int64_t dh = k.size(-1), dv = v.size(-1);
    const auto mine = ring.split.chunks_of(ring.rank());
    std::vector<PartialAttention> acc(mine.size());
    auto block = pack(k, v);  // [B, Hkv, s, Dh + Dv]: source(t)'s keys and values
    for (int t = 0; t < ring.split.cp; ++t) {
      const bool more = t + 1 < ring.split.cp;
      PendingWork send, recv;
      if (more) {
        send = group.send(block, ring.next(), t, "CP ring pass of keys and values");
        recv = group.start_recv(block, ring.prev(), t, "CP ring pass of keys and values");
      }
      models::attend_chunks(acc, q, block.narrow(-1, 0, dh), block.narrow(-1, dh, dv), ring.scale,
                            ring.layout(q, t));
      if (more) {
        block = group.finish(recv);
        group.finish(send);
      }
    }
    auto done = models::finish_chunks(acc, q.scalar_type());
    ctx->save_for_backward({q, k, v, done.out, done.lse});
    return done.out;  // [B, H, s, Dv]
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& ring = platform::saved_state<Ring>(ctx);
    ProcessGroup& group = *ring.group;
    const int cp = ring.split.cp;
    auto saved = ctx->get_saved_variables();
    const auto &q = saved[0], &k = saved[1], &v = saved[2];
    const PartialAttention finished{saved[3], saved[4]};
    const int64_t dh = k.size(-1), dv = v.size(-1);
    const auto acc = q.options().dtype(models::accumulate_dtype(q));
    auto dq = torch::zeros(q.sizes(), acc);
    auto block = pack(k, v);
    torch::Tensor dblock;      // [B, Hkv, s, Dh + Dv]: source(t)'s gradient so far
    PendingWork dsend, drecv;  // source(t)'s gradient, to the next rank / from the previous
    for (int t = 0; t < cp; ++t) {
      const bool more = t + 1 < cp;
      PendingWork send, recv;
      if (more) {
        send = group.send(block, ring.next(), cp + t, "CP ring pass of keys and values");
        recv = group.start_recv(block, ring.prev(), cp + t, "CP ring pass of keys and values");
      }
      auto dk = torch::zeros(k.sizes(), acc), dvv = torch::zeros(v.sizes(), acc);
      models::attend_chunks_backward(dq, dk, dvv, grads[0], q, block.narrow(-1, 0, dh),
                                     block.narrow(-1, dh, dv), finished, ring.scale,
                                     ring.layout(q, t));
      dblock = torch::cat({dk, dvv}, -1);
      if (t > 0) {  // the ranks before this one on the ring saw source(t)'s keys first
        dblock += group.finish(drecv);
        group.finish(dsend);
      }
      if (cp > 1) {
        dsend = group.send(dblock, ring.next(), 2 * cp + t, "CP ring pass of key gradients");
        drecv = group.start_recv(dblock, ring.prev(), 2 * cp + t, "CP ring pass of key gradients");
      }
      if (more) {
        block = group.finish(recv);
        group.finish(send);
      }
    }
    if (cp > 1) {  // the previous rank held this rank's keys last
      dblock = group.finish(drecv);
      group.finish(dsend);
    }
    return {dq.to(q.scalar_type()), dblock.narrow(-1, 0, dh).to(k.scalar_type()),
            dblock.narrow(-1, dh, dv).to(v.scalar_type()), torch::Tensor()};
  }
};

}  // namespace

LoadBalancer load_balancer_from(const std::string& name) {
  if (name == "headtail") return LoadBalancer::HeadTail;
  if (name == "none") return LoadBalancer::None;
  throw ConfigError(fmt::format(
      "parallelism.context_parallel_load_balancer = '{}': expected 'headtail' or 'none'", name));
}

RotateMethod rotate_method_from(const std::string& name) {
  if (name == "allgather") return RotateMethod::AllGather;
  if (name == "alltoall") return RotateMethod::AllToAll;
  throw ConfigError(fmt::format(
      "parallelism.context_parallel_rotate_method = '{}': expected 'allgather' or 'alltoall'",
      name));
}

int64_t SequenceSplit::num_chunks() const {
  return balancer == LoadBalancer::HeadTail ? 2 * cp : cp;
}

std::vector<int64_t> SequenceSplit::chunks_of(int rank) const {
  if (balancer == LoadBalancer::HeadTail) return {rank, 2 * cp - 1 - rank};
  return {rank};
}

torch::Tensor SequenceSplit::shard(const torch::Tensor& x, int rank) const {
  const int64_t seq = x.size(1), n = num_chunks();
  TORCH_CHECK(seq % n == 0, "context parallelism: a sequence of ", seq,
              " tokens does not divide into ", n, " chunks");
  std::vector<torch::Tensor> pieces;
  for (int64_t c : chunks_of(rank)) pieces.push_back(x.narrow(1, c * (seq / n), seq / n));
  return torch::cat(pieces, 1);  // [B, S / cp, ...]
}

ContextParallel::ContextParallel(std::shared_ptr<ProcessGroup> cp_group, LoadBalancer balancer,
                                 RotateMethod rotate)
    : group_(std::move(cp_group)), split_{group_->size(), balancer}, rotate_(rotate) {}

torch::Tensor ContextParallel::positions(int64_t local_len) const {
  const auto mine = split_.chunks_of(group_->rank());
  const int64_t len = local_len / static_cast<int64_t>(mine.size());
  std::vector<torch::Tensor> pieces;
  for (int64_t c : mine) pieces.push_back(torch::arange(c * len, (c + 1) * len, torch::kInt64));
  return torch::cat(pieces);  // [local_len]
}

torch::Tensor ContextParallel::attention(const torch::Tensor& q, const torch::Tensor& k,
                                         const torch::Tensor& v, double scale) {
  if (rotate_ == RotateMethod::AllToAll) {
    return RingAttention::apply(q, k, v,
                                platform::autograd_state(Ring{group_.get(), split_, scale}));
  }
  const auto mine = split_.chunks_of(group_->rank());
  const ChunkLayout layout{mine, all_chunks(split_), q.size(2) / static_cast<int64_t>(mine.size())};
  return models::chunked_causal_attention(q, all_gather_along(k, 2, *group_, "CP all-gather"),
                                          all_gather_along(v, 2, *group_, "CP all-gather"), scale,
                                          layout);
}

void check_context_parallel(const config::ParallelismSection& parallelism, int cp,
                            int64_t seq_len, const char* seq_len_key) {
  if (cp <= 1) return;
  const SequenceSplit split{cp, load_balancer_from(parallelism.context_parallel_load_balancer)};
  rotate_method_from(parallelism.context_parallel_rotate_method);
  if (seq_len % split.num_chunks() != 0) {
    throw ConfigError(fmt::format(
        "{} = {} must divide into the {} chunks of "
        "parallelism.context_parallel_degree = {} with context_parallel_load_balancer = '{}'",
        seq_len_key, seq_len, split.num_chunks(), cp, parallelism.context_parallel_load_balancer));
  }
  const int64_t tp = parallelism.tensor_parallel_degree;
  if (tp > 1 && !parallelism.disable_sequence_parallel && (seq_len / cp) % tp != 0) {
    throw ConfigError(fmt::format(
        "{} = {} leaves each of the {} context-parallel ranks {} tokens, which "
        "sequence parallelism cannot split over tensor_parallel_degree = {}; choose a seq_len "
        "divisible by {}",
        seq_len_key, seq_len, cp, seq_len / cp, tp, cp * tp * (split.num_chunks() / cp)));
  }
  if (platform::visible_gpus() > 0) {
    throw ConfigError(
        "parallelism.context_parallel_degree > 1 runs attention on the CPU's fused kernel; its "
        "CUDA kernel is not built yet (hide the GPUs with CUDA_VISIBLE_DEVICES= to train on the "
        "CPU)");
  }
}

void attach_context_parallel(models::CausalLM& model, std::shared_ptr<ContextParallel> cp) {
  model.sequence_shard = cp;
  for (const auto& block : model.blocks()) block.module->attention->sequence_shard = cp;
}

}  // namespace titan::distributed
