// Checkpoints in real training runs: stopping at step 4 of 8 and resuming gives exactly the
// per-step losses of an uninterrupted run (1 rank and FSDP 2, synchronous and async saves), and
// a checkpoint written under FSDP 4 resumes under 1 rank and FSDP 2 following the FSDP 4 run,
// and tensor- and pipeline-parallel checkpoints do the same. A truncated newest checkpoint falls
// back to the previous one; checkpoint.interval_seconds saves on a wall-clock cadence.
#include <gtest/gtest.h>

#include <cmath>

#include "support/training.h"
#include "titan/components/checkpoint/safetensors.h"

namespace titan {
namespace integration_checkpoint_test {

using testing::train;
using testing::TrainRun;

// Runs stop at step kStop and resume to kSteps (a checkpoint every kStop / 2 steps: the resume
// takes the latest of two). Constant learning rate, so that the stopped run and the whole run
// agree on every step's lr.
constexpr int kStop = 4;
constexpr int kSteps = 8;
const std::string kCommon =
    "--module llama3 --config llama3_debugmodel --training.seq_len 64 "
    "--training.global_batch_size 8 --lr_scheduler.warmup_steps 0 "
    "--lr_scheduler.decay_ratio 0 --checkpoint.interval 2 ";
const std::string kWhole = " --training.steps " + std::to_string(kSteps);

TrainRun run_in(const std::filesystem::path& dump, const std::string& env,
                const std::string& args) {
  TrainRun r;
  r.dump = dump;
  r.command = testing::run_command(env + " " + testing::titan_binary() + " launch " + kCommon +
                                   args + " --training.dataset_path " + testing::shakespeare() +
                                   " --metrics.log_freq 1 --job.dump_folder " + dump.string());
  EXPECT_EQ(r.command.exit_code, 0) << r.command.output;
  std::ifstream in(dump / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) r.records.push_back(nlohmann::json::parse(line));
  return r;
}

// kStop steps, then a second start that resumes and trains to kSteps, in one dump folder.
TrainRun stop_and_resume(const std::string& first_env, const std::string& second_env,
                         const std::string& first_args, const std::string& second_args) {
  auto dump = testing::make_temp_dir("titan_resume");
  run_in(dump, first_env,
         first_args + " --training.steps " + std::to_string(kStop) + " --checkpoint.enable");
  EXPECT_TRUE(std::filesystem::exists(dump / "checkpoint" / ("step-" + std::to_string(kStop))));
  auto resumed = run_in(dump, second_env, second_args + kWhole + " --checkpoint.enable");
  EXPECT_NE(resumed.command.output.find("Resumed from"), std::string::npos)
      << resumed.command.output;
  return resumed;
}

// Both runs logged kSteps steps; losses and gradient norms equal within `rtol` (0: bit-equal).
void expect_resumed_curves(const TrainRun& ref, const TrainRun& got, double rtol) {
  ASSERT_EQ(ref.records.size(), static_cast<size_t>(kSteps));
  testing::expect_same_curves(ref, got, rtol, "resumed run");
}

TEST(CheckpointResume, BitExactOnOneRankAndFsdp2SyncAndAsync) {
  for (const char* async : {"disabled", "async"}) {
    for (const auto& [env, batch] : {std::pair<std::string, std::string>{"NGPU=1", "8"},
                                     std::pair<std::string, std::string>{"NGPU=2", "4"}}) {
      std::string args = "--training.local_batch_size " + batch + " --checkpoint.async_mode " + async;
      auto straight = run_in(testing::make_temp_dir("titan_straight"), env,
                             args + kWhole);
      auto resumed = stop_and_resume(env, env, args, args);
      SCOPED_TRACE(env + " async_mode " + async);
      expect_resumed_curves(straight, resumed, 0.0);
    }
  }
}

TEST(CheckpointResume, Fsdp4CheckpointResumesUnderOtherLayouts) {
  auto fsdp4 = run_in(testing::make_temp_dir("titan_fsdp4"), "NGPU=4",
                      "--training.local_batch_size 2" + kWhole);
  auto on_one = stop_and_resume("NGPU=4", "NGPU=1", "--training.local_batch_size 2",
                                "--training.local_batch_size 8");
  expect_resumed_curves(fsdp4, on_one, 1e-5);
  auto on_two = stop_and_resume("NGPU=4", "NGPU=2", "--training.local_batch_size 2",
                                "--training.local_batch_size 4");
  expect_resumed_curves(fsdp4, on_two, 1e-5);
}

// Tensor-parallel slices are stored in the whole model's coordinates: TP 2 x FSDP 2 resumes
// bit-exactly, and its checkpoint resumes under 1 rank and under TP 4 (without sequence
// parallelism) following the uninterrupted run.
TEST(CheckpointResume, TensorParallelCheckpointsResumeUnderAnyLayout) {
  const std::string tp2 = "--training.local_batch_size 4 --parallelism.tensor_parallel_degree 2";
  auto straight = run_in(testing::make_temp_dir("titan_tp_straight"), "NGPU=4",
                         tp2 + kWhole);
  expect_resumed_curves(straight, stop_and_resume("NGPU=4", "NGPU=4", tp2, tp2), 0.0);
  expect_resumed_curves(straight,
                stop_and_resume("NGPU=4", "NGPU=1", tp2, "--training.local_batch_size 8"), 1e-5);
  expect_resumed_curves(straight,
                stop_and_resume("NGPU=4", "NGPU=4", tp2,
                                "--training.local_batch_size 8 "
                                "--parallelism.tensor_parallel_degree 4 "
                                "--parallelism.disable_sequence_parallel"),
                1e-5);
}

// Pipeline stages save their blocks under the whole model's names: PP 2 x FSDP 2 resumes
// bit-exactly; its checkpoint resumes on 1 rank and under TP 2 following the uninterrupted run
// (the first resumed step within 1e-6, the rest within 1e-5); an FSDP 2 checkpoint resumes
// under PP 2 with the V schedule (the last stage on the first rank).
TEST(CheckpointResume, PipelineCheckpointsResumeUnderAnyLayout) {
  const std::string pp2 = "--training.local_batch_size 4 --parallelism.pipeline_parallel_degree 2";
  auto straight = run_in(testing::make_temp_dir("titan_pp_straight"), "NGPU=4",
                         pp2 + kWhole);
  expect_resumed_curves(straight, stop_and_resume("NGPU=4", "NGPU=4", pp2, pp2), 0.0);
  for (const auto& [env, args] :
       {std::pair<std::string, std::string>{"NGPU=1", "--training.local_batch_size 8"},
        {"NGPU=2", "--training.local_batch_size 8 --parallelism.tensor_parallel_degree 2"}}) {
    SCOPED_TRACE(env + " " + args);
    auto resumed = stop_and_resume("NGPU=4", env, pp2, args);
    expect_resumed_curves(straight, resumed, 1e-5);
    const double first = straight.records[kStop]["loss"].get<double>();
    EXPECT_NEAR(resumed.records[kStop]["loss"].get<double>(), first, 1e-6 * first);
  }
  const std::string fsdp2 = "--training.local_batch_size 4";
  auto fsdp = run_in(testing::make_temp_dir("titan_fsdp_straight"), "NGPU=2",
                     fsdp2 + kWhole);
  expect_resumed_curves(fsdp,
                        stop_and_resume("NGPU=2", "NGPU=2", fsdp2,
                                        "--training.local_batch_size 8 "
                                        "--parallelism.pipeline_parallel_degree 2 "
                                        "--parallelism.pipeline_parallel_schedule ZBVZeroBubble"),
                        1e-5);
}

// The Hugging Face export of a pipeline run holds every stage's tensors: the seed checkpoint of
// PP 4 (Interleaved1F1B, 8 stages over 4 ranks) exports the same files as one rank's.
TEST(CheckpointExport, PipelineRunExportsTheWholeModelToHuggingFace) {
  auto export_seed = [](const std::string& env, const std::string& args) {
    auto dump = testing::make_temp_dir("titan_pp_export");
    auto r = testing::run_command(
        env + " " + testing::titan_binary() + " launch " + kCommon + args +
        " --checkpoint.enable --checkpoint.create_seed_checkpoint --checkpoint.last_save_in_hf "
        "--checkpoint.last_save_model_only --training.dataset_path " + testing::shakespeare() +
        " --job.dump_folder " + dump.string());
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return components::read_safetensors_folder(
        (dump / "checkpoint" / "step-0" / "hf").string());
  };
  auto whole = export_seed("NGPU=1", "--training.local_batch_size 8");
  auto piped = export_seed("NGPU=4", "--training.local_batch_size 8 "
                                     "--parallelism.pipeline_parallel_degree 4 "
                                     "--parallelism.pipeline_parallel_schedule Interleaved1F1B");
  ASSERT_EQ(piped.size(), whole.size());
  for (const auto& [name, tensor] : whole) {
    ASSERT_TRUE(piped.count(name)) << name;
    EXPECT_TRUE(torch::equal(piped.at(name), tensor)) << name;
  }
}

// The data position is the number of samples consumed (issue 12: it was step x global batch, so
// a run saved at global batch 12 and resumed at 6 trained on samples it had seen): resumed on 3
// ranks at global batch 6 and on 4 ranks at 24, each later step takes the next unseen samples.
TEST(CheckpointResume, AnotherGlobalBatchContinuesWithTheNextUnseenSample) {
  struct Later {
    std::string env, args;
    int64_t global_batch;
  };
  for (const auto& later : {Later{"NGPU=3", "--training.local_batch_size 2 "
                                            "--training.global_batch_size 6", 6},
                            Later{"NGPU=4", "--training.local_batch_size 6 "
                                            "--training.global_batch_size 24", 24}}) {
    auto dump = testing::make_temp_dir("titan_batch");
    run_in(dump, "NGPU=2", "--training.local_batch_size 6 --training.global_batch_size 12 "
                           "--checkpoint.enable --training.steps 2");
    auto resumed = run_in(dump, later.env, later.args + " --checkpoint.enable --training.steps 4");
    ASSERT_EQ(resumed.records.size(), 4u) << resumed.command.output;  // metrics.jsonl appends
    for (int64_t step = 1; step <= 4; ++step) {
      const auto& record = resumed.records[step - 1];
      ASSERT_EQ(record["step"].get<int64_t>(), step);
      const int64_t want = step <= 2 ? 12 * step : 24 + later.global_batch * (step - 2);
      EXPECT_EQ(record["consumed_samples"].get<int64_t>(), want) << later.env << " step " << step;
      EXPECT_EQ(record["tokens_seen"].get<int64_t>(), want * 64) << later.env << " step " << step;
    }
    EXPECT_NE(resumed.command.output.find("24 samples consumed, the data continues at sample 24"),
              std::string::npos)
        << resumed.command.output;
  }
}

// The launcher's summary shows the rank that failed on its own (here the one whose shard file
// is missing), not a rank that only saw a peer fail (issue 12: it showed rank 0's "another rank
// failed to load").
TEST(CheckpointResume, TheRankMissingItsFileIsTheOneShown) {
  auto dump = testing::make_temp_dir("titan_missing");
  const std::string args = "--training.local_batch_size 4 --checkpoint.enable ";
  run_in(dump, "NGPU=2", args + "--training.steps 2");
  ASSERT_TRUE(std::filesystem::remove(dump / "checkpoint" / "step-2" / "rank_1.bin"));
  auto r = testing::run_command("NGPU=2 " + testing::titan_binary() + " launch " + kCommon + args +
                                "--training.steps 4 --training.dataset_path " +
                                testing::shakespeare() + " --job.dump_folder " + dump.string());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("titan launch: rank 1 (local rank 1) exited"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("rank_1.bin"), std::string::npos) << r.output;
}

// A truncated newest checkpoint (a shard file cut short, as a save killed mid-write outside
// titan's rename would leave it): the resume warns naming the file, leaves the folder in place,
// and resumes from the previous complete checkpoint, repeating its steps exactly.
TEST(CheckpointResume, ATruncatedNewestCheckpointFallsBackToThePreviousOne) {
  auto dump = testing::make_temp_dir("titan_truncated");
  const std::string args = "--training.local_batch_size 4 --checkpoint.enable ";
  auto first = run_in(dump, "NGPU=2", args + "--training.steps 4");
  const auto shard = dump / "checkpoint" / "step-4" / "rank_1.bin";
  ASSERT_TRUE(std::filesystem::exists(shard));
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) / 2);
  std::filesystem::remove(dump / "metrics.jsonl");
  auto resumed = run_in(dump, "NGPU=2 LOG_RANK=0,1", args + "--training.steps 4");
  const auto& out = resumed.command.output;
  EXPECT_NE(out.find("step-4 cannot be loaded"), std::string::npos) << out;
  EXPECT_NE(out.find("rank_1.bin"), std::string::npos) << out;
  EXPECT_NE(out.find("Resumed from " + (dump / "checkpoint" / "step-2").string()),
            std::string::npos)
      << out;
  ASSERT_EQ(resumed.records.size(), 2u) << out;  // steps 3 and 4 again
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(resumed.records[i]["loss"], first.records[i + 2]["loss"]) << "step " << i + 3;
    EXPECT_EQ(resumed.records[i]["grad_norm"], first.records[i + 2]["grad_norm"]);
  }
}

// checkpoint.interval_seconds: with a cadence shorter than a step every step saves, on every
// rank the same step (rank 0's clock decides); without it only the interval's steps do.
TEST(CheckpointCadence, WallClockIntervalSavesTheSameStepOnEveryRank) {
  auto timed = testing::make_temp_dir("titan_cadence");
  auto r = run_in(timed, "NGPU=2",
                  "--training.local_batch_size 4 --checkpoint.enable --checkpoint.interval 100 "
                  "--checkpoint.interval_seconds 0.001 --training.steps 3");
  for (int step = 1; step <= 3; ++step) {
    EXPECT_TRUE(std::filesystem::exists(timed / "checkpoint" / ("step-" + std::to_string(step))))
        << step << "\n" << r.command.output;
  }
  EXPECT_NE(r.command.output.find("since the last save (checkpoint.interval_seconds = 0.001)"),
            std::string::npos)
      << r.command.output;
  auto steps_only = testing::make_temp_dir("titan_cadence_off");
  run_in(steps_only, "NGPU=2",
         "--training.local_batch_size 4 --checkpoint.enable --checkpoint.interval 100 "
         "--training.steps 3");
  EXPECT_FALSE(std::filesystem::exists(steps_only / "checkpoint" / "step-1"));
  EXPECT_TRUE(std::filesystem::exists(steps_only / "checkpoint" / "step-3"));  // the last
}

TEST(CheckpointGenerate, ScoresTheSameAsItsHuggingFaceExport) {
  auto dump = testing::make_temp_dir("titan_generate");
  run_in(dump, "NGPU=2", "--training.local_batch_size 4 --training.steps 5 --checkpoint.enable");
  auto step = (dump / "checkpoint" / "step-5").string();
  auto hf = (dump / "hf").string();
  auto convert = testing::run_command(testing::titan_binary() + " convert --to hf --checkpoint " +
                                      step + " --output " + hf);
  ASSERT_EQ(convert.exit_code, 0) << convert.output;
  const std::string prompt = " --prompt_ids 256,70,105,114,115,116 --score";
  auto from_ckpt = testing::run_command(testing::titan_binary() + " generate --checkpoint " +
                                        step + prompt);
  auto from_hf = testing::run_command(testing::titan_binary() + " generate --hf_assets_path " +
                                      hf + prompt);
  ASSERT_EQ(from_ckpt.exit_code, 0) << from_ckpt.output;
  ASSERT_EQ(from_ckpt.output.rfind("loss: ", 0), 0u) << from_ckpt.output;
  EXPECT_EQ(from_ckpt.output, from_hf.output);
  auto greedy = testing::run_command(testing::titan_binary() + " generate --checkpoint " + step +
                                     " --prompt_ids 256,70 --max_new_tokens 5");
  EXPECT_EQ(greedy.exit_code, 0) << greedy.output;
  EXPECT_EQ(greedy.output.rfind("ids: ", 0), 0u) << greedy.output;
  // The run's tokenizer (the built-in byte one) comes with the checkpoint.
  auto text = testing::run_command(testing::titan_binary() + " generate --checkpoint " + step +
                                   " --prompt Fir --max_new_tokens 3 --temperature 1 --seed 2");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("\ntext: "), std::string::npos) << text.output;
}

}  // namespace integration_checkpoint_test
}  // namespace titan
