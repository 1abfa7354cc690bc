// The config schema: one FieldSpec per "section.key" with its type, help, allowed values and
// accessors into JobConfig. Parsing (TOML, CLI), printing and validation all walk this table.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::config {

enum class FieldType {
  Bool, Int, OptionalInt, Float, OptionalFloat, String, StringList, StringLists
};

/// A field value. Optional fields use std::monostate for "unset" (TorchTitan's None).
using Value = std::variant<std::monostate, bool, int64_t, double, std::string,
                           std::vector<std::string>, std::vector<std::vector<std::string>>>;

struct FieldSpec {
  std::string section;
  std::string key;
  FieldType type;
  std::string help;
  std::vector<std::string> choices;  // allowed strings; empty = any
  bool ignore_case = false;          // choices match in any case (stored as spelled here)
  std::optional<double> min;         // inclusive lower bound for numbers
  std::function<Value(const JobConfig&)> get;
  std::function<void(JobConfig&, const Value&)> set;

  std::string name() const { return section + "." + key; }
};

/// All fields, in the order they are printed.
const std::vector<FieldSpec>& schema();

/// The field named "section.key"; nullptr if there is none.
const FieldSpec* find_field(const std::string& name);

/// The valid name closest to `name` (edit distance), for "did you mean" messages.
std::string closest_field(const std::string& name);

/// Human name of a type ("integer", "list of strings", ...).
std::string type_name(FieldType type);

/// `value` as TOML text ("10", "\"adamw\"", "[\"a\", \"b\"]"); unset optionals give "".
std::string format_value(const Value& value);

/// Parses command-line text `text` for `field` (lists are comma-separated, lists of lists
/// separate the lists with ';', "none" unsets an optional). Throws ConfigError naming the key, the expected type and the text.
Value parse_value(const FieldSpec& field, const std::string& text);

/// Checks `value` against the field's choices and lower bound and returns it, a choice spelled
/// as the field spells it. Throws ConfigError naming the key and the allowed values.
Value check_value(const FieldSpec& field, const Value& value);

}  // namespace titan::config
