#include "titan/config/resolve.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "titan/config/mesh_dims.h"
#include "titan/config/named_configs.h"
#include "titan/config/schema.h"
#include "titan/errors.h"

namespace titan::config {
namespace {

const FieldSpec& require_field(const std::string& name, const std::string& where) {
  if (const FieldSpec* f = find_field(name)) return *f;
  throw ConfigError(fmt::format("{}unknown config key '{}'; did you mean '{}'? (titan train "
                                "--help lists every key)",
                                where, name, closest_field(name)));
}

bool is_bool_field(const std::string& name) {
  const FieldSpec* f = find_field(name);
  return f && f->type == FieldType::Bool;
}

const char* toml_type_name(toml::node_type type) {
  switch (type) {
    case toml::node_type::string: return "string";
    case toml::node_type::integer: return "integer";
    case toml::node_type::floating_point: return "float";
    case toml::node_type::boolean: return "boolean";
    case toml::node_type::array: return "array";
    case toml::node_type::table: return "table";
    default: return "date/time";
  }
}

// The strings of a TOML array of strings; nullopt for anything else.
std::optional<std::vector<std::string>> string_array(const toml::node& node) {
  const toml::array* arr = node.as_array();
  if (!arr) return std::nullopt;
  std::vector<std::string> items;
  for (const auto& el : *arr) {
    auto s = el.value_exact<std::string>();
    if (!s) return std::nullopt;
    items.push_back(*s);
  }
  return items;
}

// Converts one TOML node to a Value of the field's type.
Value toml_to_value(const FieldSpec& f, const toml::node& node, const std::string& where) {
  auto bad = [&]() -> Value {
    throw ConfigError(fmt::format("{}{}: expected {}, got a TOML {}", where, f.name(),
                                  type_name(f.type), toml_type_name(node.type())));
  };
  switch (f.type) {
    case FieldType::Bool:
      if (auto b = node.value_exact<bool>()) return *b;
      return bad();
    case FieldType::Int:
    case FieldType::OptionalInt:
      if (auto i = node.value_exact<int64_t>()) return *i;
      return bad();
    case FieldType::Float:
    case FieldType::OptionalFloat:
      if (auto d = node.value<double>()) return *d;
      return bad();
    case FieldType::String:
      if (auto s = node.value_exact<std::string>()) return *s;
      if (auto i = node.value_exact<int64_t>()) return std::to_string(*i);
      return bad();
    case FieldType::StringList: {
      if (auto s = node.value_exact<std::string>()) return parse_value(f, *s);
      auto items = string_array(node);
      if (!items) return bad();
      return *items;
    }
    case FieldType::StringLists: {
      if (auto s = node.value_exact<std::string>()) return parse_value(f, *s);
      const toml::array* arr = node.as_array();
      if (!arr) return bad();
      std::vector<std::vector<std::string>> lists;
      for (const auto& el : *arr) {
        auto items = string_array(el);
        if (!items) return bad();
        lists.push_back(*items);
      }
      return lists;
    }
  }
  return bad();
}

void set_checked(JobConfig& config, const FieldSpec& f, const Value& v) {
  f.set(config, check_value(f, v));
}

std::string read_file(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) throw ConfigError(fmt::format("{}: cannot read '{}'", what, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string names_of_family(const std::string& family) {
  std::string out;
  for (const auto& c : named_configs()) {
    if (c.family == family) out += (out.empty() ? "" : ", ") + c.name;
  }
  return out.empty() ? "(none)" : out;
}

}  // namespace

CommandLine parse_command_line(const std::vector<std::string>& args) {
  CommandLine cli;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      cli.help = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      throw ConfigError(fmt::format("unexpected argument '{}'; overrides look like "
                                    "--section.key value",
                                    arg));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto next_value = [&]() -> std::string {
      if (value) return *value;
      if (i + 1 >= args.size()) throw ConfigError(fmt::format("--{} needs a value", name));
      return args[++i];
    };
    if (name == "module") {
      cli.module = next_value();
      continue;
    }
    if (name == "config") {
      cli.config_name = next_value();
      continue;
    }
    // --section.no_key: boolean false.
    auto dot = name.find('.');
    if (dot != std::string::npos && name.compare(dot + 1, 3, "no_") == 0 && !value) {
      std::string positive = name.substr(0, dot + 1) + name.substr(dot + 4);
      if (is_bool_field(positive) && !find_field(name)) {
        cli.overrides.emplace_back(positive, "false");
        continue;
      }
    }
    const FieldSpec& f = require_field(name, "");
    if (f.type == FieldType::Bool && !value) {
      bool explicit_value = i + 1 < args.size() &&
                            (args[i + 1] == "true" || args[i + 1] == "false");
      cli.overrides.emplace_back(name, explicit_value ? args[++i] : "true");
      continue;
    }
    cli.overrides.emplace_back(name, next_value());
  }
  return cli;
}

void apply_toml(JobConfig& config, const std::string& text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw ConfigError(fmt::format("{}:{}: TOML syntax error: {}", source,
                                  e.source().begin.line, e.description()));
  }
  for (const auto& [section_key, section_node] : root) {
    std::string section(section_key.str());
    const toml::table* table = section_node.as_table();
    auto line = section_node.source().begin.line;
    if (!table) {
      throw ConfigError(fmt::format("{}:{}: '{}' must be a [section]; did you mean '{}'?",
                                    source, line, section, closest_field(section)));
    }
    for (const auto& [key, node] : *table) {
      std::string where = fmt::format("{}:{}: ", source, node.source().begin.line);
      const FieldSpec& f = require_field(section + "." + std::string(key.str()), where);
      Value v = toml_to_value(f, node, where);
      try {
        set_checked(config, f, v);
      } catch (const ConfigError& e) {
        throw ConfigError(where + e.what());
      }
    }
  }
}

std::string default_config_name(const CommandLine& cli) {
  for (const auto& [name, text] : cli.overrides) {
    if (name == "job.config_file") return "";
  }
  const std::string family = family_from_module(cli.module);
  return (family.empty() ? std::string("llama3") : family) + "_debugmodel";
}

std::string base_config_name(const CommandLine& cli) {
  return cli.config_name.empty() ? default_config_name(cli) : cli.config_name;
}

std::string describe_compute(const JobConfig& c, const std::string& compute_dtype) {
  std::string ac = c.activation_checkpoint.mode;
  if (ac == "selective") ac += " (" + c.activation_checkpoint.selective_ac_option + ")";
  const std::string compile =
      c.compile.enable ? fmt::format("on ({})", fmt::join(c.compile.components, ", ")) : "off";
  const std::string& param = c.training.mixed_precision_param;
  const std::string dtype =
      compute_dtype.empty() || compute_dtype == param
          ? param
          : fmt::format("{} (training.mixed_precision_param {} does not apply to this layout)",
                        compute_dtype, param);
  return fmt::format("{} {}, parameters in {}, activation checkpointing {}, compile {}",
                     c.model.name, c.model.flavor, dtype, ac, compile);
}

JobConfig resolve(const CommandLine& cli) {
  JobConfig config;
  std::string family = family_from_module(cli.module);
  const std::string config_name = base_config_name(cli);
  const auto& families = find_field("model.name")->choices;
  if (!family.empty() && std::find(families.begin(), families.end(), family) == families.end()) {
    std::string known;
    for (const auto& f : families) known += (known.empty() ? "" : ", ") + f;
    throw ConfigError(fmt::format("unknown model family '{}' (--module / MODULE '{}'); known "
                                  "families: {}",
                                  family, cli.module, known));
  }
  if (!config_name.empty()) {
    bool is_file = config_name.size() > 5 &&
                   config_name.substr(config_name.size() - 5) == ".toml";
    if (is_file) {
      apply_toml(config, read_file(config_name, "config"), config_name);
    } else {
      std::string lookup = family.empty() ? config_name.substr(0, config_name.find('_'))
                                          : family;
      auto named = find_named_config(lookup, config_name);
      if (!named) {
        throw ConfigError(fmt::format("--config (CONFIG): no named config '{}' for model "
                                      "family '{}'; available: {}",
                                      config_name, lookup, names_of_family(lookup)));
      }
      apply_toml(config, named->toml, "named config " + named->name);
    }
  }
  if (!family.empty()) {
    if (!config_name.empty() && config.model.name != family) {
      throw ConfigError(fmt::format("config '{}' is for model.name '{}', but --module is '{}'",
                                    config_name, config.model.name, family));
    }
    set_checked(config, *find_field("model.name"), family);
  }
  // The TOML file named on the command line sits between the named config and the overrides.
  for (const auto& [name, text] : cli.overrides) {
    if (name == "job.config_file") {
      apply_toml(config, read_file(text, "--job.config_file"), text);
      config.job.config_file = text;
    }
  }
  for (const auto& [name, text] : cli.overrides) {
    const FieldSpec& f = require_field(name, "");
    set_checked(config, f, parse_value(f, text));
  }
  validate(config);
  return config;
}

void validate(const JobConfig& c) {
  const auto& ac = c.activation_checkpoint;
  if (ac.mode == "selective" && ac.selective_ac_option != "op") {
    const std::string& opt = ac.selective_ac_option;
    bool number = !opt.empty() && std::all_of(opt.begin(), opt.end(), ::isdigit) && opt != "0";
    if (!number) {
      throw ConfigError(fmt::format("activation_checkpoint.selective_ac_option = '{}' is not "
                                    "allowed; allowed values: 'op' or a positive integer N",
                                    opt));
    }
  }
  if (c.lr_scheduler.decay_ratio && *c.lr_scheduler.decay_ratio > 1.0) {
    throw ConfigError(fmt::format("lr_scheduler.decay_ratio = {} is out of range; it must be in "
                                  "[0, 1]",
                                  *c.lr_scheduler.decay_ratio));
  }
  if (c.lr_scheduler.min_lr_factor > 1.0) {
    throw ConfigError(fmt::format("lr_scheduler.min_lr_factor = {} is out of range; it must be "
                                  "in [0, 1]",
                                  c.lr_scheduler.min_lr_factor));
  }
  if (c.optimizer.beta1 >= 1.0 || c.optimizer.beta2 >= 1.0) {
    throw ConfigError("optimizer.beta1 and optimizer.beta2 must be in [0, 1)");
  }
  if (c.checkpoint.last_save_in_hf && !c.checkpoint.last_save_model_only) {
    throw ConfigError("checkpoint.last_save_in_hf needs checkpoint.last_save_model_only = true "
                      "(Hugging Face files hold weights only)");
  }
}

namespace {

// The product of every degree but data_parallel_shard_degree's.
int64_t other_degrees(const ParallelismSection& p) {
  int64_t out = 1;
  for (const auto& d : kMeshDims) {
    if (d.dim != MeshDim::DpShard) out *= p.*d.degree;
  }
  return out;
}

}  // namespace

int64_t shard_degree(const ParallelismSection& p, int world_size) {
  const int64_t shard = p.data_parallel_shard_degree;
  return shard == -1 ? world_size / other_degrees(p) : shard;
}

int64_t resolve_shard_degree(const ParallelismSection& p, int world_size) {
  const int64_t others = other_degrees(p), shard = shard_degree(p, world_size);
  std::vector<std::string> factors;  // "tensor_parallel_degree (2)", in mesh order
  for (const auto& d : kMeshDims) {
    if (d.dim != MeshDim::DpShard || p.data_parallel_shard_degree != -1) {
      factors.push_back(fmt::format("{} ({})", d.key, p.*d.degree));
    }
  }
  if (p.data_parallel_shard_degree == -1 && world_size % others != 0) {
    throw ConfigError(fmt::format("world size {} is not divisible by {} = {}", world_size,
                                  fmt::join(factors, " x "), others));
  }
  if (others * shard != world_size) {
    throw ConfigError(fmt::format(
        "parallelism degrees multiply to {} but the world has {} ranks: {} must equal the world "
        "size (set data_parallel_shard_degree = -1 to use the leftover ranks)",
        others * shard, world_size, fmt::join(factors, " x ")));
  }
  return shard;
}

void validate_for_world(const JobConfig& c, int world_size) {
  const int64_t dp = c.parallelism.data_parallel_replicate_degree *
                     resolve_shard_degree(c.parallelism, world_size);
  int64_t per_step = c.training.local_batch_size * dp;
  int64_t global = c.training.global_batch_size;
  if (global != -1 && (global <= 0 || global % per_step != 0)) {
    throw ConfigError(fmt::format(
        "training.global_batch_size = {} must be a positive multiple of "
        "training.local_batch_size ({}) x data-parallel degree ({}) = {}",
        global, c.training.local_batch_size, dp, per_step));
  }
}

std::string to_toml(const JobConfig& config) {
  std::string out;
  std::string section;
  for (const auto& f : schema()) {
    if (f.section != section) {
      section = f.section;
      if (!out.empty()) out += '\n';
      out += fmt::format("[{}]\n", section);
    }
    std::string v = format_value(f.get(config));
    if (!v.empty()) out += fmt::format("{} = {}\n", f.key, v);
  }
  return out;
}

std::string help_text() {
  std::string out =
      "Usage: titan train [--module FAMILY] [--config NAME|FILE.toml] [--section.key value]...\n"
      "Without --config, the family's debug config applies (<family>_debugmodel; llama3's\n"
      "without --module), as under run_train.sh.\n"
      "Precedence: command line > --job.config_file > named config > defaults (below).\n"
      "Booleans: --section.key / --section.no_key. Lists: comma-separated.\n";
  std::string section;
  for (const auto& f : schema()) {
    if (f.section != section) {
      section = f.section;
      out += fmt::format("\n[{}]\n", section);
    }
    std::string def = format_value(f.get(JobConfig{}));
    out += fmt::format("  --{:<44} {} (default: {})\n", f.name(), f.help,
                       def.empty() ? "none" : def);
    if (!f.choices.empty()) {
      std::string choices;
      for (const auto& ch : f.choices) choices += (choices.empty() ? "" : ", ") + ch;
      out += fmt::format("  {:<46} allowed: {}\n", "", choices);
    }
  }
  return out;
}

}  // namespace titan::config
