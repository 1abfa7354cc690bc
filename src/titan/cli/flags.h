// The one parser of the utility subcommands' flags (generate, convert, tokenize, compare, plan,
// validate):
// `--key value`, `--key=value`, bare `--switch`, positional arguments where the command takes
// them, and `--help` / `-h` (the usage printed, then HelpShown thrown: main() returns 0 for it,
// as argparse exits after its help). Bad usage is a ConfigError (exit code 2) naming the
// command and the flag, followed by the command's usage text.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "titan/cli/commands.h"

namespace titan::cli {

struct FlagSpec {
  std::string command;              // "generate"
  std::vector<std::string> valued;  // flags that take a value, without "--"
  std::vector<std::string> switches;  // flags that take none
  size_t max_positionals = 0;
  std::string usage;
  /// Other options (--module, --config, --section.key [value]) pass through to overrides()
  /// instead of being refused, for commands that also take a training config.
  bool config_overrides = false;
};

/// Thrown once a command's usage is printed for --help: the command is done, successfully.
struct HelpShown {};

class Flags {
 public:
  /// Parses `args` against `spec`. When the first argument is --help or -h: prints spec.usage
  /// to stdout and throws HelpShown (nothing else checked).
  static Flags parse(const FlagSpec& spec, const Args& args);

  bool has(const std::string& key) const { return values_.count(key) || switches_.count(key); }
  std::optional<std::string> get(const std::string& key) const;
  /// The value of `key`; ConfigError naming it when missing or empty.
  const std::string& required(const std::string& key) const;
  /// `key` as an integer / a finite number, or `fallback` when absent; ConfigError naming the
  /// flag and the text otherwise.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  /// With FlagSpec::config_overrides: the arguments left for config::parse_command_line.
  const Args& overrides() const { return overrides_; }
  /// A ConfigError for this command: "<command>: <message>" and the usage text.
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const FlagSpec* spec_ = nullptr;
  std::map<std::string, std::string> values_;
  std::set<std::string> switches_;
  std::vector<std::string> positionals_;
  Args overrides_;
};

}  // namespace titan::cli
