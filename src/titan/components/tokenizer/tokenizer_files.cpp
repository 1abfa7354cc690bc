#include "titan/components/tokenizer/tokenizer_files.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "titan/errors.h"

namespace titan::components::tokenizer {

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: cannot open the file", path));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw DataError(fmt::format("{}: read error", path));
  return buffer.str();
}

json parse_json_file(const std::string& text, const std::string& path) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: invalid JSON at byte {}: {}", path, e.byte, e.what()));
  }
}

const json& required_field(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) {
    throw DataError(fmt::format("{}: expected an object, got {}", where, object.type_name()));
  }
  auto it = object.find(key);
  if (it == object.end()) throw DataError(fmt::format("{}: missing field '{}'", where, key));
  return *it;
}

const json& array_field(const json& object, const char* key, const std::string& where) {
  const json& value = required_field(object, key, where);
  if (!value.is_array()) {
    throw DataError(fmt::format("{}.{}: expected an array, got {}", where, key, value.type_name()));
  }
  return value;
}

std::string as_string(const json& value, const std::string& where) {
  if (!value.is_string()) {
    throw DataError(fmt::format("{}: expected a string, got {}", where, value.type_name()));
  }
  return value.get<std::string>();
}

std::string string_field(const json& object, const char* key, const std::string& where) {
  return as_string(required_field(object, key, where), where + "." + key);
}

bool bool_field(const json& object, const char* key, bool fallback, const std::string& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    throw DataError(fmt::format("{}.{}: expected a boolean, got {}", where, key, it->type_name()));
  }
  return it->get<bool>();
}

}  // namespace titan::components::tokenizer
