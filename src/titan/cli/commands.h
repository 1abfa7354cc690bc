// Entry points of the `titan` subcommands (apps/titan.cpp dispatches to them). Each takes the
// arguments after the subcommand name and returns the process exit code.
#pragma once

#include <string>
#include <vector>

namespace titan::cli {

using Args = std::vector<std::string>;

/// `titan train`: one worker of a training run (ranks from torchrun's environment variables).
int train_command(const Args& args);
/// `titan launch`: run_train.sh's launcher; starts NGPU workers, fail-fast.
int launch_command(const Args& args);
/// `titan config`: prints the resolved config as TOML.
int config_command(const Args& args);
/// `titan comm-check`: one worker of a connectivity check (all-reduce and all-gather over the
/// world); run it through `titan launch --worker comm-check`.
int comm_check_command(const Args& args);
/// `titan generate`: greedy / sampled continuation or prompt loss of a Hugging Face model.
int generate_command(const Args& args);
/// `titan tokenize --tokenizer PATH (--text T | --file F)`: prints the ids of the text (no
/// BOS/EOS) as one JSON array on one line. Bad usage: message and exit code 2.
int tokenize_command(const Args& args);
/// `titan convert --to hf|titan ...`: converts between titan checkpoints and Hugging Face
/// folders (components/checkpoint/hf_interchange.h). Bad usage: message and exit code 2.
int convert_command(const Args& args);

/// `titan compare DIR_A DIR_B [--rtol R] [--force] [--plot FILE]`: per-step losses of two runs
/// side by side (tools/compare.h) and an SVG of both curves. Exit code 0 within tolerance, 1
/// diverged, 2 bad input (missing or malformed files, incomparable runs without --force).
int compare_command(const Args& args);

/// `titan validate [--steps N] ...`: the config shortened to N eager steps on NGPU ranks, run
/// and resumed from its halfway checkpoint; a pass/fail table (every rank steps, loss finite
/// and falling, checkpoints written, the reload bit-equal). Exit code 0 all pass, 1 a check
/// failed, 2 bad usage.
int validate_command(const Args& args);

/// `titan plan --world N --device D [--check] ...`: layouts for the config's model on N ranks of
/// D, tried in the recommended order with their memory per rank and verdicts
/// (train/layout_search.h). Exit code 0 a layout fits, 1 none does, 2 bad usage.
int plan_command(const Args& args);

/// Dispatches `argv` to a subcommand; maps ConfigError to exit code 2, other errors to 1.
int main(int argc, char** argv);

}  // namespace titan::cli
