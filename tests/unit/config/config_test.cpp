// Config layering (defaults < named config < TOML file < CLI), CLI syntax, and the bad-input
// classes (unknown key with suggestion, wrong type, out of range, bad choice, impossible
// layout), both in-process and through the binary's exit code 2.
#include <gtest/gtest.h>

#include <fstream>

#include "support/process.h"
#include "titan/config/named_configs.h"
#include "titan/config/resolve.h"
#include "titan/errors.h"

namespace titan::config {
namespace unit_config_config_test {

JobConfig resolve_args(const std::vector<std::string>& args) {
  return resolve(parse_command_line(args));
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    resolve_args(args);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAreTorchTitans) {
  JobConfig c;
  EXPECT_EQ(c.optimizer.lr, 8e-4);
  EXPECT_EQ(c.optimizer.beta2, 0.95);
  EXPECT_EQ(c.training.seq_len, 2048);
  EXPECT_EQ(c.parallelism.data_parallel_shard_degree, -1);
  EXPECT_EQ(c.activation_checkpoint.mode, "selective");
  EXPECT_EQ(c.checkpoint.keep_latest_k, 10);
}

// Issue 40: NaN and infinity are refused where they are read, on the command line and in
// TOML (--optimizer.lr nan had trained a step, then stopped with exit 4).
TEST(Config, NonFiniteNumbersAreRefusedByKey) {
  for (const std::string key : {"optimizer.lr", "training.max_norm", "checkpoint.interval_seconds"}) {
    for (const std::string value : {"nan", "inf", "-inf", "NaN"}) {
      const std::string msg = error_of({"--" + key, value});
      EXPECT_NE(msg.find(key + " = "), std::string::npos) << key << " " << value << ": " << msg;
      EXPECT_NE(msg.find("is not a finite number"), std::string::npos) << msg;
    }
  }
  JobConfig c;
  EXPECT_THROW(apply_toml(c, "[optimizer]\nlr = nan\n", "t.toml"), ConfigError);
  EXPECT_THROW(apply_toml(c, "[training]\nmax_norm = inf\n", "t.toml"), ConfigError);
}

// Issue 40: without --config every entry point resolves the family's debug config, as
// run_train.sh does (titan validate had validated the schema's bf16 defaults while its
// banner said "llama3 debugmodel"); the banner line names what was resolved.
TEST(Config, WithoutConfigTheFamilysDebugConfigApplies) {
  EXPECT_EQ(to_toml(resolve_args({})),
            to_toml(resolve_args({"--module", "llama3", "--config", "llama3_debugmodel"})));
  EXPECT_EQ(to_toml(resolve_args({"--module", "qwen3", "--training.steps", "3"})),
            to_toml(resolve_args({"--module", "qwen3", "--config", "qwen3_debugmodel",
                                  "--training.steps", "3"})));
  EXPECT_EQ(base_config_name(parse_command_line({"--module", "deepseek_v3"})),
            "deepseek_v3_debugmodel");
  EXPECT_EQ(base_config_name(parse_command_line({"--config", "llama3_8b"})), "llama3_8b");
  EXPECT_EQ(describe_compute(resolve_args({})),
            "llama3 debugmodel, parameters in float32, activation checkpointing none, compile "
            "off");
  EXPECT_EQ(describe_compute(resolve_args({"--compile.enable", "--activation_checkpoint.mode",
                                           "selective"})),
            "llama3 debugmodel, parameters in float32, activation checkpointing selective (2), "
            "compile on (model, loss)");
  // A layout that computes in another dtype than the key asks (bf16 on one rank) says so.
  EXPECT_EQ(describe_compute(resolve_args({"--training.mixed_precision_param", "bfloat16"}),
                             "float32"),
            "llama3 debugmodel, parameters in float32 (training.mixed_precision_param bfloat16 "
            "does not apply to this layout), activation checkpointing none, compile off");
}

// Issue 40: the shipped debug configs validate 10 batches (TorchTitan's debug config), not the
// whole corpus (validation.steps = -1 took an hour on 2 cores).
TEST(Config, DebugConfigsValidateTenBatches) {
  for (const auto& [module, name] :
       std::vector<std::pair<std::string, std::string>>{{"llama3", "llama3_debugmodel"},
                                                        {"qwen3", "qwen3_debugmodel"},
                                                        {"qwen3", "qwen3_moe_debugmodel"},
                                                        {"deepseek_v3", "deepseek_v3_debugmodel"}}) {
    const auto c = resolve_args({"--module", module, "--config", name, "--validation.enable"});
    EXPECT_EQ(c.validation.steps, 10) << name;
    EXPECT_EQ(c.validation.seq_len, c.training.seq_len) << name;
  }
  EXPECT_EQ(JobConfig{}.validation.steps, -1);  // TorchTitan's default stays
}

TEST(Config, NamedConfigThenCliOverride) {
  auto c = resolve_args({"--module", "llama3", "--config", "llama3_debugmodel"});
  EXPECT_EQ(c.model.name, "llama3");
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 2);
  auto o = resolve_args({"--module", "llama3", "--config", "llama3_debugmodel",
                         "--training.steps", "10", "--optimizer.lr=0.001"});
  EXPECT_EQ(o.training.steps, 10);
  EXPECT_DOUBLE_EQ(o.optimizer.lr, 0.001);
}

TEST(Config, PrecedenceCliOverTomlOverNamedOverDefaults) {
  auto dir = testing::make_temp_dir("titan_config");
  auto file = (dir / "job.toml").string();
  std::ofstream(file) << "[training]\nsteps = 7\nseq_len = 64\n[optimizer]\nlr = 0.5\n";
  auto c = resolve_args({"--module", "llama3", "--config", "llama3_debugmodel",
                         "--job.config_file", file, "--training.steps", "3"});
  EXPECT_EQ(c.training.steps, 3);                 // CLI beats TOML
  EXPECT_EQ(c.training.seq_len, 64);              // TOML beats the named config
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.5);          // TOML beats the named config
  EXPECT_EQ(c.lr_scheduler.warmup_steps, 2);      // named config beats defaults
  EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.1);  // default
}

TEST(Config, BooleansAndLists) {
  auto c = resolve_args({"--checkpoint.enable", "--metrics.no_enable_tensorboard",
                         "--checkpoint.exclude_from_loading", "optimizer,dataloader",
                         "--training.deterministic", "true"});
  EXPECT_TRUE(c.checkpoint.enable);
  EXPECT_FALSE(c.metrics.enable_tensorboard);
  EXPECT_TRUE(c.training.deterministic);
  EXPECT_EQ(c.checkpoint.exclude_from_loading,
            (std::vector<std::string>{"optimizer", "dataloader"}));
  auto off = resolve_args({"--checkpoint.enable", "--checkpoint.no_enable"});
  EXPECT_FALSE(off.checkpoint.enable);
}

// Lists of lists (module_fqns_per_model_part): a TOML array of arrays, or on the command line
// the lists separated by ';'; both print back as TOML. Choices match in any case where the
// field says so (pipeline schedules, as TorchTitan), stored as the field spells them.
TEST(Config, ListsOfListsAndCaseInsensitiveChoices) {
  using Lists = std::vector<std::vector<std::string>>;
  const Lists want = {{"tok_embeddings", "layers.0"}, {"layers.1", "norm", "output"}};
  auto cli = resolve_args({"--parallelism.module_fqns_per_model_part",
                           "tok_embeddings,layers.0;layers.1,norm,output",
                           "--parallelism.pipeline_parallel_schedule", "zbvzerobubble"});
  EXPECT_EQ(cli.parallelism.module_fqns_per_model_part, want);
  EXPECT_EQ(cli.parallelism.pipeline_parallel_schedule, "ZBVZeroBubble");
  JobConfig toml;
  apply_toml(toml, "[parallelism]\nmodule_fqns_per_model_part = [[\"tok_embeddings\", "
                   "\"layers.0\"], [\"layers.1\", \"norm\", \"output\"]]\n", "test.toml");
  EXPECT_EQ(toml.parallelism.module_fqns_per_model_part, want);
  JobConfig back;
  apply_toml(back, to_toml(cli), "printed");
  EXPECT_EQ(back.parallelism.module_fqns_per_model_part, want);
  auto empty = resolve_args({"--parallelism.module_fqns_per_model_part", "a;;b"});
  EXPECT_EQ(empty.parallelism.module_fqns_per_model_part, (Lists{{"a"}, {}, {"b"}}));
  EXPECT_NE(error_of({"--parallelism.pipeline_parallel_schedule", "ZBV"})
                .find("allowed values (in any case): GPipe, 1F1B, Interleaved1F1B, ZBVZeroBubble"),
            std::string::npos);
}

TEST(Config, DottedModuleNameResolvesToFamily) {
  EXPECT_EQ(family_from_module("torchtitan_neuron.models.qwen3"), "qwen3");
  auto c = resolve_args({"--module", "torchtitan_neuron.models.qwen3", "--config",
                         "qwen3_debugmodel"});
  EXPECT_EQ(c.model.name, "qwen3");
  EXPECT_EQ(c.model.flavor, "debugmodel");
}

TEST(Config, UnknownKeySuggestsClosest) {
  auto msg = error_of({"--training.stpes", "3"});
  EXPECT_NE(msg.find("training.stpes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("did you mean 'training.steps'"), std::string::npos) << msg;
}

TEST(Config, WrongTypeNamesKeyAndType) {
  auto msg = error_of({"--training.steps", "ten"});
  EXPECT_NE(msg.find("training.steps"), std::string::npos) << msg;
  EXPECT_NE(msg.find("integer"), std::string::npos) << msg;
}

// A number its type cannot hold is named as such (it read "expected a number").
TEST(Config, NumbersTooLargeForTheirTypeSaySo) {
  auto lr = error_of({"--optimizer.lr", "1e999"});
  EXPECT_NE(lr.find("--optimizer.lr: 1e999 is out of range (a 64-bit float"), std::string::npos)
      << lr;
  auto steps = error_of({"--training.steps", "99999999999999999999"});
  EXPECT_NE(steps.find("--training.steps: 99999999999999999999 is out of range (a 64-bit "
                       "integer"),
            std::string::npos)
      << steps;
}

TEST(Config, OutOfRangeAndBadChoice) {
  auto range = error_of({"--training.local_batch_size", "0"});
  EXPECT_NE(range.find("training.local_batch_size"), std::string::npos) << range;
  EXPECT_NE(range.find(">= 1"), std::string::npos) << range;
  auto choice = error_of({"--lr_scheduler.decay_type", "exponential"});
  EXPECT_NE(choice.find("linear, sqrt, cosine"), std::string::npos) << choice;
  auto ac = error_of({"--activation_checkpoint.mode", "selective",
                      "--activation_checkpoint.selective_ac_option", "sometimes"});
  EXPECT_NE(ac.find("'op' or a positive integer"), std::string::npos) << ac;
}

TEST(Config, TomlErrorsNameFileLineAndKey) {
  auto dir = testing::make_temp_dir("titan_config");
  auto file = (dir / "bad.toml").string();
  std::ofstream(file) << "[training]\nsteps = 5\nsequence_len = 64\n";
  auto msg = error_of({"--job.config_file", file});
  EXPECT_NE(msg.find(file + ":3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("training.sequence_len"), std::string::npos) << msg;
  EXPECT_NE(msg.find("training.seq_len"), std::string::npos) << msg;
  std::ofstream(file) << "[training]\nsteps = \"many\"\n";
  msg = error_of({"--job.config_file", file});
  EXPECT_NE(msg.find("training.steps: expected an integer"), std::string::npos) << msg;
}

TEST(Config, ImpossibleLayoutNamesTheDegrees) {
  JobConfig c;
  c.parallelism.tensor_parallel_degree = 3;
  try {
    validate_for_world(c, 4);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel_degree (3)"), std::string::npos)
        << e.what();
  }
  c = JobConfig{};
  c.training.local_batch_size = 4;
  c.training.global_batch_size = 12;
  try {
    validate_for_world(c, 2);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("training.global_batch_size"), std::string::npos) << msg;
    EXPECT_NE(msg.find("training.local_batch_size"), std::string::npos) << msg;
  }
}

TEST(Config, UnknownFamilyListsTheKnownOnes) {
  auto msg = error_of({"--module", "torchtitan_neuron.models.llamaa3"});
  EXPECT_NE(msg.find("unknown model family 'llamaa3'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("llama3, qwen3"), std::string::npos) << msg;
}

TEST(Config, UnknownNamedConfigListsAvailable) {
  auto msg = error_of({"--module", "llama3", "--config", "llama3_tinymodel"});
  EXPECT_NE(msg.find("llama3_debugmodel"), std::string::npos) << msg;
}

TEST(Config, PrintedTomlRoundTrips) {
  auto c = resolve_args({"--module", "qwen3", "--config", "qwen3_debugmodel",
                         "--training.steps", "17", "--lr_scheduler.decay_ratio", "none"});
  JobConfig back;
  apply_toml(back, to_toml(c), "printed");
  EXPECT_EQ(to_toml(back), to_toml(c));
  EXPECT_EQ(back.training.steps, 17);
  EXPECT_FALSE(back.lr_scheduler.decay_ratio.has_value());
}

TEST(ConfigBinary, PrintsResolvedConfig) {
  auto r = testing::run_command(testing::titan_binary() +
                                " config --module llama3 --config llama3_debugmodel "
                                "--training.steps 10");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("steps = 10\n"), std::string::npos) << r.output;
}

TEST(ConfigBinary, BadInputExitsTwoBeforeAnyWorker) {
  auto dir = testing::make_temp_dir("titan_badcfg");
  for (std::string bad : {"--training.stepz 3", "--training.steps x", "--training.seq_len -5",
                          "--lr_scheduler.decay_type step",
                          "--parallelism.context_parallel_degree 2 --training.seq_len 66",
                          "--parallelism.context_parallel_rotate_method ring"}) {
    auto r = testing::run_command("cd " + dir.string() + " && NGPU=2 " +
                                  testing::titan_binary() + " launch " + bad);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("config error"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "outputs" / "logs")) << "a worker started";
  }
  auto r = testing::run_command("cd " + dir.string() + " && NGPU=3 " + testing::titan_binary() +
                                " launch --parallelism.tensor_parallel_degree 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("world size 3 is not divisible"), std::string::npos) << r.output;
}

TEST(ConfigBinary, TrainHelpListsEveryKey) {
  auto r = testing::run_command(testing::titan_binary() + " train --help");
  EXPECT_EQ(r.exit_code, 0);
  for (std::string key : {"--training.steps", "--parallelism.data_parallel_shard_degree",
                          "--checkpoint.keep_latest_k", "--comm.train_timeout_seconds"}) {
    EXPECT_NE(r.output.find(key), std::string::npos) << key;
  }
  EXPECT_NE(r.output.find("(default: 10000)"), std::string::npos);
}

// run_train.sh passes --module and --config before the user's arguments; --help anywhere prints
// the launcher's environment variables, then every key (issue 12: it was "unknown config key").
TEST(ConfigBinary, LaunchHelpListsTheEnvironmentAndEveryKey) {
  for (std::string flag : {"--help", "-h"}) {
    auto r = testing::run_command(testing::titan_binary() +
                                  " launch --module llama3 --config llama3_debugmodel " + flag);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (std::string text : {"NGPU", "RDZV_ENDPOINT", "LOG_RANK", "--training.steps",
                             "--parallelism.tensor_parallel_degree"}) {
      EXPECT_NE(r.output.find(text), std::string::npos) << flag << ": " << text;
    }
  }
  for (std::string command : {"config", "generate", "convert", "tokenize", "compare"}) {
    auto r = testing::run_command(testing::titan_binary() + " " + command + " --help");
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.output;
    EXPECT_NE(r.output.find("Usage: titan " + command), std::string::npos) << r.output;
  }
}

}  // namespace unit_config_config_test
}  // namespace titan::config
