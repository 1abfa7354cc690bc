#include "titan/cli/flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "titan/errors.h"

namespace titan::cli {
namespace {

bool contains(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

}  // namespace

Flags Flags::parse(const FlagSpec& spec, const Args& args) {
  Flags out;
  out.spec_ = &spec;
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << spec.usage;
    throw HelpShown{};
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (out.positionals_.size() == spec.max_positionals) {
        out.fail(fmt::format("unexpected argument '{}'", arg));
      }
      out.positionals_.push_back(arg);
      continue;
    }
    std::string key = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    }
    if (contains(spec.switches, key) && !value) {
      out.switches_.insert(key);
      continue;
    }
    if (spec.config_overrides && !contains(spec.valued, key)) {
      out.overrides_.push_back(arg);  // with its value when one follows (a bare boolean has none)
      if (!value && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        out.overrides_.push_back(args[++i]);
      }
      continue;
    }
    if (!contains(spec.valued, key)) {
      std::vector<std::string> all = spec.valued;
      all.insert(all.end(), spec.switches.begin(), spec.switches.end());
      out.fail(fmt::format("unknown option --{} (valid: --{})", key, fmt::join(all, ", --")));
    }
    if (!value) {
      if (i + 1 >= args.size()) out.fail(fmt::format("--{} needs a value", key));
      value = args[++i];
    }
    out.values_[key] = *value;
  }
  return out;
}

std::optional<std::string> Flags::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

const std::string& Flags::required(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end() || it->second.empty()) fail(fmt::format("--{} is required", key));
  return it->second;
}

int64_t Flags::get_int(const std::string& key, int64_t fallback) const {
  auto text = get(key);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno == ERANGE) {
    fail(fmt::format("--{}: expected an integer, got '{}'", key, *text));
  }
  return v;
}

double Flags::get_double(const std::string& key, double fallback) const {
  auto text = get(key);
  if (!text) return fallback;
  char* end = nullptr;
  double v = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || !std::isfinite(v)) {
    fail(fmt::format("--{}: expected a finite number, got '{}'", key, *text));
  }
  return v;
}

void Flags::fail(const std::string& message) const {
  throw ConfigError(fmt::format("{}: {}\n{}", spec_->command, message, spec_->usage));
}

}  // namespace titan::cli
