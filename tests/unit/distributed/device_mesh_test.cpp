// The device mesh on 4 thread ranks (dp_shard 2 x tp 2, and dp_shard 4 with expert parallel
// 2): each named group holds the ranks ParallelDims names, shown by an all-reduce of the global
// ranks over it.
#include "titan/distributed/device_mesh.h"

#include <gtest/gtest.h>

#include "support/thread_ranks.h"

namespace titan::distributed {
namespace unit_distributed_device_mesh_test {

// Sum of the global ranks in this rank's `group`.
double rank_sum(const DeviceMesh& mesh, MeshGroup group, int rank) {
  auto t = torch::full({1}, static_cast<double>(rank), torch::kDouble);
  mesh[group]->all_reduce_(t, ReduceOp::Sum,
                           std::string("rank sum over ") + mesh_group_name(group));
  return t.item<double>();
}

TEST(DeviceMesh, DenseGroupsHoldTheirRanks) {
  config::ParallelismSection p;
  p.tensor_parallel_degree = 2;
  const auto dims = ParallelDims::from_config(p, 4);  // dp_shard 2 x tp 2
  testing::run_thread_ranks(4, [&](int r, World& world) {
    const auto mesh = DeviceMesh::build(dims, world);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::TP, r), r < 2 ? 0 + 1 : 2 + 3);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::DpShardCp, r), r % 2 == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::Loss, r), r % 2 == 0 ? 0 + 2 : 1 + 3);
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
    EXPECT_EQ(rank_sum(mesh, MeshGroup::EP, r), r < 2 ? 0 + 1 : 2 + 3);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::EFsdp, r), r % 2 == 0 ? 0 + 2 : 1 + 3);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::DpShardCp, r), 0 + 1 + 2 + 3);
    EXPECT_EQ(rank_sum(mesh, MeshGroup::TP, r), r);
  });
}

TEST(DeviceMesh, WithoutExpertParallelismThereAreNoExpertGroups) {
  config::ParallelismSection p;
  const auto dims = ParallelDims::from_config(p, 2);
  testing::run_thread_ranks(2, [&](int, World& world) {
    const auto mesh = DeviceMesh::build(dims, world);
    EXPECT_EQ(mesh[MeshGroup::DpShardCp]->size(), 2);
    EXPECT_THROW(mesh[MeshGroup::EP], std::out_of_range);
  });
}

// The names the groups go by in logs and timeouts: TorchTitan's.
TEST(DeviceMesh, GroupsHaveTorchTitansNames) {
  EXPECT_STREQ(mesh_group_name(MeshGroup::PP), "pp");
  EXPECT_STREQ(mesh_group_name(MeshGroup::TP), "tp");
  EXPECT_STREQ(mesh_group_name(MeshGroup::DpShardCp), "dp_shard_cp");
  EXPECT_STREQ(mesh_group_name(MeshGroup::Loss), "loss");
  EXPECT_STREQ(mesh_group_name(MeshGroup::EFsdp), "efsdp");
}

}  // namespace unit_distributed_device_mesh_test
}  // namespace titan::distributed
