// Collectives as autograd functions (Megatron-LM's f / g operators, Shoeybi et al. 2019,
// arXiv:1909.08053; sequence parallelism's all-gather / reduce-scatter pairs, Korthikanti et al.
// 2022, arXiv:2205.05198): each forward collective has the backward that makes gradients exact,
// so tensor parallelism composes with FSDP and activation checkpointing through ordinary
// autograd. Reductions run in fp32 or fp64 (Gloo reduces no bf16); the result has the input's
// dtype. A group of one makes every function the identity. Every rank of `group` must call the
// same functions in the same order; failures throw CommError naming the group (process_group.h).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "titan/distributed/process_group.h"

namespace titan::distributed {

/// Identity forward; backward all-reduces (sums) the gradient over `group` (Megatron's f:
/// the input of column-parallel projections when every rank holds the whole activation).
torch::Tensor copy_to_parallel_region(const torch::Tensor& x, ProcessGroup& group);

/// Forward all-reduces (sums) partial results over `group`; identity backward (Megatron's g:
/// the output of row-parallel projections and of a vocab-parallel embedding).
torch::Tensor reduce_from_parallel_region(const torch::Tensor& x, ProcessGroup& group);

/// x: [..., n, ...] (n at `dim`) -> [..., size * n, ...], rank r's piece at [r * n, (r+1) * n);
/// backward reduce-scatters the gradient along `dim` (sequence parallelism entering a
/// tensor-parallel region; context parallelism's keys). `what` names it in errors.
torch::Tensor all_gather_along(const torch::Tensor& x, int64_t dim, ProcessGroup& group,
                               const std::string& what = "SP all-gather");

/// x: [..., size * n, ...] partial sums -> this rank's [..., n, ...] piece of their sum along
/// `dim`; backward all-gathers the gradient (sequence parallelism leaving a region). Throws
/// ConfigError when x.size(dim) is not divisible by the group size.
torch::Tensor reduce_scatter_along(const torch::Tensor& x, int64_t dim, ProcessGroup& group);

/// x: [..., n] -> [..., size * n] (rank-ordered); backward keeps this rank's n columns of the
/// gradient (every rank computes the same loss from the gathered tensor, e.g. logits gathered
/// over a vocab-parallel output without loss parallelism).
torch::Tensor gather_last_dim(const torch::Tensor& x, ProcessGroup& group);

/// x: [sum in_splits, ...], in_splits[j] rows for group rank j -> the rows every rank sent
/// here, [sum out_splits, ...] in rank order (ProcessGroup::all_to_all); backward sends each
/// row's gradient back to the rank it came from (expert parallelism's dispatch and combine).
/// `during` (optional) runs while the rows travel; the backward of what it computes runs while
/// their gradients travel back, as long as nothing it computes needs the result.
torch::Tensor all_to_all_rows(const torch::Tensor& x, const std::vector<int64_t>& out_splits,
                              const std::vector<int64_t>& in_splits, ProcessGroup& group,
                              const std::function<void()>& during = {});

}  // namespace titan::distributed
