// Builds the job config from its four layers: defaults < named config < TOML file
// (job.config_file) < command-line overrides, and validates the result.
#pragma once

#include <string>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::config {

/// Parsed command line: `--module M`, `--config C` and `--section.key value` overrides.
struct CommandLine {
  std::string module;       // family or dotted module name; empty = from the named config
  std::string config_name;  // registered config name or a path to a .toml file
  std::vector<std::pair<std::string, std::string>> overrides;  // ("training.steps", "10")
  bool help = false;  // --help or -h anywhere: print the usage instead of running
};

/// Splits `args` (no program name). Accepts `--a.b v`, `--a.b=v`, bare `--a.b` (boolean true),
/// `--a.no_b` (boolean false) and `--help` / `-h`. Throws ConfigError for an unknown key (with
/// the closest valid one) or a stray positional argument.
CommandLine parse_command_line(const std::vector<std::string>& args);

/// Applies TOML `text` (from `source`, a file name or "named config X") to `config`.
/// Throws ConfigError naming source, line and key for syntax errors, unknown sections or keys,
/// and wrong types.
void apply_toml(JobConfig& config, const std::string& text, const std::string& source);

/// The named config a command line without --config starts from: "<family>_debugmodel", the
/// family from --module (llama3 without one), as run_train.sh's CONFIG default, so that every
/// entry point (run_train.sh, titan launch, train, validate, plan, config) resolves the same
/// config from the same arguments. Empty when a --job.config_file override is given.
std::string default_config_name(const CommandLine& cli);

/// cli.config_name, else default_config_name(cli).
std::string base_config_name(const CommandLine& cli);

/// What a run computes, for banners and the log header: "llama3 debugmodel, parameters in
/// float32, activation checkpointing none, compile off". `compute_dtype`, when given, is the
/// dtype the layout computes in, named instead of training.mixed_precision_param (which it
/// says does not apply when they differ).
std::string describe_compute(const JobConfig& config, const std::string& compute_dtype = "");

/// Resolves the layers described by `cli` (from base_config_name(cli)) and validates the
/// result (see validate()).
JobConfig resolve(const CommandLine& cli);

/// Checks cross-key constraints that need no world size (choices, ranges and combinations).
/// Throws ConfigError naming the keys and allowed values.
void validate(const JobConfig& config);

/// data_parallel_shard_degree, -1 taken as the ranks the other degrees leave (the one place
/// this rule is written), unchecked: `world_size` over their product, rounded down.
int64_t shard_degree(const ParallelismSection& parallelism, int world_size);
/// shard_degree, checked: throws ConfigError naming the degrees when they do not multiply to
/// `world_size`.
int64_t resolve_shard_degree(const ParallelismSection& parallelism, int world_size);

/// Checks the parallel layout against `world_size` ranks: the product of the degrees (with
/// data_parallel_shard_degree = -1 resolved) and global_batch_size divisibility.
void validate_for_world(const JobConfig& config, int world_size);

/// The config as TOML, every key of every section in schema order.
std::string to_toml(const JobConfig& config);

/// `titan train --help` text: every key with type, default and help.
std::string help_text();

}  // namespace titan::config
