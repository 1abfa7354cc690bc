// The collective flight recorder (comm.trace_buf_size, comm.save_traces_folder): rank 1 of an
// FSDP 2 run stops for good before step 2 (the TITAN_TEST_STALL_AT hook), so rank 0 waits in
// step 2's first collective until comm.train_timeout_seconds (5 s) passes, dumps its records
// and fails; the launcher then has rank 1 dump its own (SIGUSR1), stops it, and names it and
// the collective rank 0 waited for. Both ranks' comm_traces files show the mismatch: rank 0's
// operation failed at a sequence number on its group that rank 1 never reached.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "support/training.h"

namespace titan {
namespace integration_flight_recorder_test {

TEST(FlightRecorder, TheLauncherNamesTheRankAndCollectiveOthersWaitedFor) {
  const auto start = std::chrono::steady_clock::now();
  auto run = testing::train("OMP_NUM_THREADS=1 NGPU=2 TITAN_TEST_STALL_AT=1:2",
                            "--module llama3 --config llama3_debugmodel --training.seq_len 32 "
                            "--training.local_batch_size 2 --training.steps 3 "
                            "--comm.train_timeout_seconds 5");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(run.command.exit_code, 0) << run.command.output;
  // The 5 s timeout, the startup and the launcher's 5 s wait for traces; far below the hour
  // rank 1 sleeps (a margin for a loaded machine: this bounds the wait, not the speed).
  EXPECT_LT(seconds, 120.0) << run.command.output;
  const auto& out = run.command.output;
  EXPECT_NE(out.find("titan launch: the flight recorder's traces in"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 0 failed in #"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 1 never started #"), std::string::npos) << out;

  std::map<int, nlohmann::json> traces;
  for (int r = 0; r < 2; ++r) {
    std::ifstream in(run.dump / "comm_traces" / ("rank_" + std::to_string(r) + ".json"));
    ASSERT_TRUE(in.good()) << "rank " << r << " wrote no comm trace\n" << out;
    traces[r] = nlohmann::json::parse(in);
    EXPECT_EQ(traces[r]["rank"], r);
    EXPECT_FALSE(traces[r]["entries"].empty());
  }
  EXPECT_NE(traces[0]["reason"].get<std::string>().find("comm.train_timeout_seconds = 5"),
            std::string::npos);
  EXPECT_NE(traces[1]["reason"].get<std::string>().find("SIGUSR1"), std::string::npos);
  nlohmann::json failed;
  for (const auto& e : traces[0]["entries"]) {
    if (e["state"] == "failed") failed = e;
  }
  ASSERT_FALSE(failed.is_null()) << traces[0].dump(1);
  EXPECT_GE(failed["end"].get<double>() - failed["start"].get<double>(), 4.5)
      << "rank 0 waited out the 5 s timeout: " << failed.dump();
  EXPECT_EQ(failed["ranks"], nlohmann::json::array({0, 1}));
  int64_t rank1_last = -1;
  for (const auto& e : traces[1]["entries"]) {
    EXPECT_EQ(e["state"], "completed") << "rank 1 stopped between collectives: " << e.dump();
    if (e["group"] == failed["group"]) rank1_last = std::max(rank1_last, e["seq"].get<int64_t>());
  }
  EXPECT_LT(rank1_last, failed["seq"].get<int64_t>())
      << "rank 1 never reached the operation rank 0 failed in: " << failed.dump();
  EXPECT_NE(out.find(fmt::format("#{} {} '{}' on group '{}'", failed["seq"].get<int64_t>(),
                                 failed["op"].get<std::string>(),
                                 failed["what"].get<std::string>(),
                                 failed["group"].get<std::string>())),
            std::string::npos)
      << out;
}

}  // namespace integration_flight_recorder_test
}  // namespace titan
