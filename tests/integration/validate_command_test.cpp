// `titan validate` (the first best practice as a command) on the default config (llama3 debug
// model, 2 ranks, 6 steps and 3 resumed): every check passes and it exits 0. With a learning
// rate that makes the loss diverge it exits 1, naming the failed check in its table. A tuning
// run (TP 2) notes the missing validated baseline, except in a folder that holds one.
#include <gtest/gtest.h>

#include "support/training.h"

namespace titan {
namespace integration_validate_command_test {

// `home` is the HOME the command runs with: where the validated baselines are recorded.
testing::CommandResult titan(const std::string& command, const std::string& args,
                             const std::filesystem::path& dump,
                             const std::filesystem::path& home) {
  return testing::run_command("HOME=" + home.string() + " OMP_NUM_THREADS=1 NGPU=2 " +
                              testing::titan_binary() + " " + command +
                              " --module llama3 --config llama3_debugmodel " + args +
                              " --training.dataset_path " + testing::shakespeare() +
                              " --job.dump_folder " + dump.string());
}

testing::CommandResult validate(const std::string& args) {
  return titan("validate", args, testing::make_temp_dir("titan_validate"),
               testing::make_temp_dir("titan_home"));
}

// It also leaves the validated baseline that silences titan launch's note on tuning runs, in
// its dump folder and in any other (issue 40: every run in another folder noted it).
TEST(ValidateCommand, PassesOnTheDefaultConfig) {
  const auto dump = testing::make_temp_dir("titan_validate");
  const auto home = testing::make_temp_dir("titan_home");
  const auto r = titan("validate", "", dump, home);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* check :
       {"| every rank steps | pass |", "| loss finite | pass |", "| loss falls | pass |",
        "| checkpoints written | pass |", "| reload is bit-equal | pass |"}) {
    EXPECT_NE(r.output.find(check), std::string::npos) << check << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("(llama3 debugmodel, parameters in float32, activation "
                          "checkpointing none, compile off; run eager)"),
            std::string::npos)
      << r.output;
  const std::string tp2 =
      "--parallelism.tensor_parallel_degree 2 --training.steps 1 "
      "--training.seq_len 64";
  const std::string note = "no validated eager baseline";
  EXPECT_EQ(titan("launch", tp2, dump, home).output.find(note), std::string::npos);
  const auto elsewhere = titan("launch", tp2, testing::make_temp_dir("titan_other"), home);
  EXPECT_EQ(elsewhere.output.find(note), std::string::npos) << elsewhere.output;
  const auto fresh = titan("launch", tp2, testing::make_temp_dir("titan_unvalidated"),
                           testing::make_temp_dir("titan_home"));
  EXPECT_NE(fresh.output.find("info: parallelism.tensor_parallel_degree set, but"),
            std::string::npos)
      << fresh.output;
}

TEST(ValidateCommand, FailsNamingTheCheckWhenTheLossDiverges) {
  const auto r = validate("--optimizer.lr 30 --lr_scheduler.warmup_steps 0 --training.seq_len 64");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const bool named = r.output.find("| loss falls | FAIL |") != std::string::npos ||
                     r.output.find("| loss finite | FAIL |") != std::string::npos;
  EXPECT_TRUE(named) << r.output;
  EXPECT_NE(r.output.find("titan validate: a check failed"), std::string::npos);
}

}  // namespace integration_validate_command_test
}  // namespace titan
