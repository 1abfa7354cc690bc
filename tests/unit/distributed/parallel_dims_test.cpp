// ParallelDims: the -1 shard degree, the dense mesh's groups (tp fastest, as TorchTitan's
// [pp, dp_replicate, dp_shard, cp, tp]) and the sparse mesh's expert groups (TorchTitan's
// [pp, dp_replicate, efsdp, ep] over the same ranks), checked against hand-written layouts.
#include "titan/distributed/parallel_dims.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "titan/errors.h"

namespace titan::distributed {
namespace unit_distributed_parallel_dims_test {

ParallelDims dims(int world, int replicate, int tp, int ep, int cp = 1, int pp = 1) {
  config::ParallelismSection p;
  p.data_parallel_replicate_degree = replicate;
  p.tensor_parallel_degree = tp;
  p.expert_parallel_degree = ep;
  p.context_parallel_degree = cp;
  p.pipeline_parallel_degree = pp;
  return ParallelDims::from_config(p, world);
}

TEST(ParallelDims, TheShardDegreeTakesTheLeftoverRanks) {
  auto d = dims(16, 2, 2, 1, 1, 2);
  EXPECT_EQ(d.dp_shard, 2);
  EXPECT_EQ(d.non_data_parallel_size(), 4);
  EXPECT_EQ(d.describe(), "pp 2 x dp_replicate 2 x dp_shard 2 x cp 1 x tp 2 (world 16, ep 1)");
}

TEST(ParallelDims, DenseGroupsVaryTpFastest) {
  auto d = dims(8, 2, 2, 1);  // dp_replicate 2 x dp_shard 2 x tp 2
  EXPECT_EQ(d.group_ranks(5, {MeshDim::TP}), (std::vector<int>{4, 5}));
  EXPECT_EQ(d.group_ranks(5, {MeshDim::DpShard}), (std::vector<int>{5, 7}));
  EXPECT_EQ(d.group_ranks(5, {MeshDim::DpReplicate}), (std::vector<int>{1, 5}));
  EXPECT_EQ(d.group_ranks(5, {MeshDim::DpReplicate, MeshDim::DpShard}),
            (std::vector<int>{1, 3, 5, 7}));
  EXPECT_EQ(d.dp_rank(5), 2);
}

// dp_replicate 2 x dp_shard 2 x tp 2 with ep 2: each replica's 4 ranks are [efsdp 2, ep 2].
TEST(ParallelDims, ExpertGroupsAreTheSparseMeshOverTheDenseRegion) {
  auto d = dims(8, 2, 2, 2);
  EXPECT_EQ(d.efsdp(), 2);
  EXPECT_EQ(d.sparse_group_ranks(5, true), (std::vector<int>{4, 5}));
  EXPECT_EQ(d.sparse_group_ranks(5, false), (std::vector<int>{5, 7}));
  EXPECT_EQ(d.sparse_group_ranks(2, true), (std::vector<int>{2, 3}));
  EXPECT_EQ(d.sparse_group_ranks(2, false), (std::vector<int>{0, 2}));
  // ep 4 borrows all of dp_shard x tp: one expert group per replica, no expert FSDP.
  auto wide = dims(8, 2, 2, 4);
  EXPECT_EQ(wide.sparse_group_ranks(6, true), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(wide.sparse_group_ranks(6, false), (std::vector<int>{6}));
}

// Every rank is in exactly one ep group and one efsdp group, and the two cross in it alone.
TEST(ParallelDims, ExpertGroupsPartitionTheRanks) {
  auto d = dims(24, 1, 2, 3, 2, 2);  // pp 2 x dp_shard 3 x cp 2 x tp 2, ep 3
  for (int r = 0; r < d.world_size; ++r) {
    const auto ep = d.sparse_group_ranks(r, true), efsdp = d.sparse_group_ranks(r, false);
    ASSERT_EQ(static_cast<int>(ep.size()), 3);
    ASSERT_EQ(static_cast<int>(efsdp.size()), d.efsdp());
    std::set<int> common;
    for (int m : ep) {
      if (std::count(efsdp.begin(), efsdp.end(), m)) common.insert(m);
      EXPECT_EQ(d.sparse_group_ranks(m, true), ep) << "rank " << m;
      EXPECT_EQ(d.coords(m)[0], d.coords(r)[0]) << "an expert group stays in its stage";
    }
    EXPECT_EQ(common, std::set<int>{r});
  }
}

TEST(ParallelDims, AnExpertDegreeThatDoesNotDivideTheRegionIsRefused) {
  try {
    dims(8, 2, 2, 3);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("expert_parallel_degree = 3 must divide"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("2 x 1 x 2 = 4"), std::string::npos) << e.what();
  }
}

}  // namespace unit_distributed_parallel_dims_test
}  // namespace titan::distributed
