// Checkpoint throughput: saves and loads argv[1] MB (default 400) of float32 tensors through
// CheckpointManager in one process (a world of one) under argv[2] (default: the system temp
// folder), and prints MB/s (10^6 bytes per second) for a synchronous save (write + fsync +
// SHA-256 + metadata + rename), a load (size and SHA-256 checks + copy), a load resharded from 4
// writers into 2 pieces per tensor, and the time an async save blocks the caller (host copy)
// against the time of a synchronous one. Figures depend on the disk and page cache: a load right
// after a save reads from memory.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>

#include "titan/components/checkpoint/checkpoint_manager.h"
#include "titan/components/checkpoint/shard_reader.h"
#include "titan/components/checkpoint/shard_writer.h"

namespace {

namespace fs = std::filesystem;
namespace ckpt = titan::components::checkpoint;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rows [begin, end) of a dim of `rows` for rank `rank` of `world` (FSDP's torch.chunk split).
std::pair<int64_t, int64_t> rows_of(int64_t rows, int rank, int world) {
  const int64_t per = (rows + world - 1) / world;
  return {std::min(rows, rank * per), std::min(rows, (rank + 1) * per)};
}

titan::distributed::ShardedStateDict shard(const std::map<std::string, torch::Tensor>& full,
                                           int rank, int world) {
  titan::distributed::ShardedStateDict out;
  for (const auto& [name, t] : full) {
    auto [begin, end] = rows_of(t.size(0), rank, world);
    out[name] = titan::distributed::ShardedTensor{t.narrow(0, begin, end - begin).contiguous(),
                                                  t.sizes().vec(), begin, true};
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t megabytes = argc > 1 ? std::stoll(argv[1]) : 400;
  const fs::path root =
      (argc > 2 ? fs::path(argv[2]) : fs::temp_directory_path()) / "titan_checkpoint_bench";
  fs::remove_all(root);
  constexpr int64_t kCols = 4096;
  const int64_t rows = 1024;  // 16 MiB-ish per tensor
  const int64_t tensors = std::max<int64_t>(1, megabytes * 1'000'000 / (rows * kCols * 4));
  std::map<std::string, torch::Tensor> full;
  for (int64_t i = 0; i < tensors; ++i) {
    full[fmt::format("layers.{}.weight", i)] = torch::randn({rows, kCols});  // [1024, 4096]
  }
  const double mb = static_cast<double>(tensors * rows * kCols * 4) / 1e6;
  std::cout << fmt::format("checkpoint_bench: {:.0f} MB of float32 ({} x [{}, {}]) in {}\n", mb,
                           tensors, rows, kCols, root.string());

  titan::config::CheckpointSection config;
  config.enable = true;
  config.keep_latest_k = 0;
  auto world = std::make_shared<titan::distributed::ProcessGroup>(
      c10::intrusive_ptr<c10d::Backend>(), std::vector<int>{0}, "world", 0,
      std::chrono::seconds(60));
  const ckpt::ModelIdentity model{"bench", "bench"};
  const auto pieces = shard(full, 0, 1);
  const titan::distributed::ShardedStateDict no_optimizer;
  const nlohmann::json state = nlohmann::json::object();
  {
    ckpt::CheckpointManager sync(config, root.string(), world, model);
    auto start = Clock::now();
    sync.save(1, pieces, no_optimizer, state, "", false);
    const double save_s = since(start);
    std::cout << fmt::format("save, synchronous:  {:6.2f} s  {:7.0f} MB/s\n", save_s,
                             mb / save_s);

    auto target = shard(full, 0, 1);
    for (auto& [name, p] : target) p.local = torch::empty_like(p.local);
    titan::distributed::ShardedStateDict opt;
    nlohmann::json loaded;
    start = Clock::now();
    sync.load(target, opt, loaded);
    const double load_s = since(start);
    std::cout << fmt::format("load:               {:6.2f} s  {:7.0f} MB/s\n", load_s,
                             mb / load_s);

    const fs::path resharded = root / "resharded";
    fs::create_directories(resharded);
    for (int r = 0; r < 4; ++r) {
      const auto part = shard(full, r, 4);
      ckpt::write_rank_part(resharded.string(), r, {{"model", &part}}, state);
    }
    const auto metadata =
        ckpt::finalize_checkpoint(resharded.string(), 4, ckpt::CheckpointHeader{1, model});
    start = Clock::now();
    for (int r = 0; r < 2; ++r) {
      auto half = shard(full, r, 2);
      for (auto& [name, p] : half) p.local = torch::empty_like(p.local);
      ckpt::read_sections(resharded.string(), metadata, {{"model", &half}});
    }
    const double reshard_s = since(start);
    std::cout << fmt::format("load 4 -> 2 ranks:  {:6.2f} s  {:7.0f} MB/s (each rank verifies "
                             "the files it reads)\n",
                             reshard_s, mb / reshard_s);

    config.async_mode = "async";
    ckpt::CheckpointManager async(config, root.string(), world, model);
    start = Clock::now();
    async.save(2, pieces, no_optimizer, state, "", false);
    const double blocked_s = since(start);
    start = Clock::now();
    async.wait();
    const double wait_s = since(start);
    std::cout << fmt::format("save, async:        blocks the caller {:.2f} s (host copy; "
                             "synchronous: {:.2f} s), then {:.2f} s more until complete at "
                             "wait()\n",
                             blocked_s, save_s, wait_s);
  }
  fs::remove_all(root);
  return 0;
}
