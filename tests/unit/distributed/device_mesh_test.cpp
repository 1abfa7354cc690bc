// The device mesh on 4 thread ranks (dp_shard 2 x tp 2, and dp_shard 4 with expert parallel
// 2): each named group holds the ranks ParallelDims names, shown by an all-reduce of the global
// ranks over it.
#include "titan/distributed/device_mesh.h"

#include <gtest/gtest.h>

#include "support/thread_ranks.h"

namespace titan::distributed {
namespace unit_distributed_device_mesh_test {

// Sum of the global ranks in this rank's group `name`.
double rank_sum(const DeviceMesh& mesh, const std::string& name, int rank) {
  auto t = torch::full({1}, static_cast<double>(rank), torch::kDouble);
  mesh[name]->all_reduce_(t, ReduceOp::Sum, "rank sum over " + name);
  return t.item<double>();
}

TEST(DeviceMesh, DenseGroupsHoldTheirRanks) {
  config::ParallelismSection p;
  p.tensor_parallel_degree = 2;
  const auto dims = ParallelDims::from_config(p, 4);  // dp_shard 2 x tp 2
  testing::run_thread_ranks(4, [&](int r, World& world) {
    const auto mesh = DeviceMesh::build(dims, world);
    EXPECT_EQ(rank_sum(mesh, "tp", r), r < 2 ? 0 + 1 : 2 + 3);
    EXPECT_EQ(rank_sum(mesh, "dp_shard_cp", r), r % 2 == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(rank_sum(mesh, "loss", r), r % 2 == 0 ? 0 + 2 : 1 + 3);
  });
}

// dp_shard 4 with ep 2: the sparse mesh [efsdp 2, ep 2] over ranks 0-3, while FSDP of the
// dense weights spans all four and tp is each rank alone.
TEST(DeviceMesh, ExpertGroupsAreTheSparseMesh) {
  config::ParallelismSection p;
  p.expert_parallel_degree = 2;
  const auto dims = ParallelDims::from_config(p, 4);
  testing::run_thread_ranks(4, [&](int r, World& world) {
    const auto mesh = DeviceMesh::build(dims, world);
    EXPECT_EQ(rank_sum(mesh, "ep", r), r < 2 ? 0 + 1 : 2 + 3);
    EXPECT_EQ(rank_sum(mesh, "efsdp", r), r % 2 == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(rank_sum(mesh, "dp_shard_cp", r), 0 + 1 + 2 + 3);
    EXPECT_EQ(rank_sum(mesh, "tp", r), r);
  });
}

TEST(DeviceMesh, WithoutExpertParallelismThereAreNoExpertGroups) {
  config::ParallelismSection p;
  const auto dims = ParallelDims::from_config(p, 2);
  testing::run_thread_ranks(2, [&](int, World& world) {
    const auto mesh = DeviceMesh::build(dims, world);
    EXPECT_EQ(mesh["dp_shard_cp"]->size(), 2);
    EXPECT_THROW(mesh["ep"], std::out_of_range);
  });
}

}  // namespace unit_distributed_device_mesh_test
}  // namespace titan::distributed
