// The flight recorder's ring buffer, its dump, and the launcher's reading of several ranks'
// dumps: the failed operation, a member waiting in the same one, a member that never started
// it, and a member that wrote nothing; without a failure, the operation a rank was blocked in
// is named before one merely not finished.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/process.h"
#include "titan/distributed/flight_recorder.h"

namespace titan::distributed {
namespace unit_distributed_flight_recorder_test {

TEST(FlightRecorder, KeepsTheLastRecordsAndDumpsThem) {
  const auto dir = testing::make_temp_dir("titan_fr");
  FlightRecorder recorder(3, 2, dir);
  const auto t = torch::zeros({4, 2});
  for (int i = 0; i < 3; ++i) {
    recorder.end(recorder.start("dp_shard", {2, 3}, i, "all_gather", "gather " + std::to_string(i), t),
                 true);
  }
  const int64_t open = recorder.start("dp_shard", {2, 3}, 3, "reduce_scatter", "reduce", t);
  recorder.end(0, false);  // left the buffer: ignored
  const auto records = recorder.records();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].what, "gather 2");
  EXPECT_EQ(records[0].state, "completed");
  EXPECT_EQ(records[1].id, open);
  EXPECT_EQ(records[1].state, "started");
  EXPECT_EQ(records[1].shape, (std::vector<int64_t>{4, 2}));
  recorder.dump("because");
  std::ifstream in(dir / "rank_3.json");
  const auto j = nlohmann::json::parse(in);
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["reason"], "because");
  ASSERT_EQ(j["entries"].size(), 2u);
  EXPECT_EQ(j["entries"][1]["op"], "reduce_scatter");
  EXPECT_EQ(j["entries"][1]["dtype"], "Float");
  FlightRecorder off(0, 0, dir / "off");
  EXPECT_EQ(off.start("g", {0}, 0, "all_reduce", "x", t), -1);
  off.dump("nothing");
  EXPECT_FALSE(std::filesystem::exists(dir / "off"));
}

TEST(FlightRecorder, ExplainsWhoNeverStartedTheFailedCollective) {
  const auto dir = testing::make_temp_dir("titan_fr_explain");
  const auto t = torch::zeros({1});
  const std::vector<int> ranks = {0, 1, 2, 3};
  FlightRecorder r0(0, 10, dir), r1(1, 10, dir), r2(2, 10, dir);
  for (auto* r : {&r0, &r1, &r2}) r->end(r->start("world", ranks, 0, "all_reduce", "loss", t), true);
  r0.end(r0.start("world", ranks, 1, "all_gather", "FSDP all-gather of layers.0", t), false);
  r2.waiting(r2.start("world", ranks, 1, "all_gather", "FSDP all-gather of layers.0", t));
  r1.end(r1.start("pp_0_to_1", {1, 2}, 0, "send", "activation", t), true);
  for (auto* r : {&r0, &r1, &r2}) r->dump("test");
  const auto lines = explain_comm_traces(dir);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].rfind("rank 0 failed in #1 all_gather 'FSDP all-gather of layers.0' on "
                           "group 'world' (failed)", 0),
            0u)
      << lines[0];
  EXPECT_EQ(lines[1],
            "rank 1 never started #1 on group 'world': its last operation there was #0 "
            "all_reduce 'loss' on group 'world' (completed); its last overall #0 send "
            "'activation' on group 'pp_0_to_1' (completed)");
  EXPECT_EQ(lines[2], "rank 2 was in the same operation (waiting)");
  EXPECT_EQ(lines[3], "rank 3 wrote no comm trace");
  EXPECT_TRUE(explain_comm_traces(dir / "missing").empty());

  const auto hung = testing::make_temp_dir("titan_fr_hung");
  FlightRecorder h0(0, 10, hung), h1(1, 10, hung);
  h0.start("pp_0_to_1", {0, 1}, 0, "send", "activation", t);  // posted, not waited for yet
  h0.waiting(h0.start("world", {0, 1}, 0, "all_reduce", "loss", t));
  h1.waiting(h1.start("world", {0, 1}, 0, "all_reduce", "loss", t));
  h0.dump("test");
  h1.dump("test");
  const auto hung_lines = explain_comm_traces(hung);
  ASSERT_EQ(hung_lines.size(), 2u);
  EXPECT_EQ(hung_lines[0].rfind("rank 0 was waiting in #0 all_reduce 'loss' on group 'world'", 0),
            0u)
      << hung_lines[0];
  EXPECT_EQ(hung_lines[1], "rank 1 was in the same operation (waiting)");
}

}  // namespace unit_distributed_flight_recorder_test
}  // namespace titan::distributed
