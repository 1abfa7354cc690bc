// Reading tokenizer files: whole text files, JSON documents, and typed JSON fields, with
// DataError messages that name the file, or the field by its path in the document
// ("model.merges[12]"), and what was expected.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace titan::components::tokenizer {

using nlohmann::json;

/// The contents of the text file at `path`. Throws DataError naming the file when it cannot be
/// read.
std::string read_text_file(const std::string& path);

/// Parses `text` (the contents of `path`). Throws DataError naming the file, with the parser's
/// line, column and byte offset.
json parse_json_file(const std::string& text, const std::string& path);

/// `object[key]`, which must exist (and `object` be an object). `where`: the path of `object`.
const json& required_field(const json& object, const char* key, const std::string& where);

/// `object[key]`, which must be an array.
const json& array_field(const json& object, const char* key, const std::string& where);

/// `object[key]` as a string; a missing field is an error.
std::string string_field(const json& object, const char* key, const std::string& where);

/// `object[key]` as a bool; a missing or null field gives `fallback`.
bool bool_field(const json& object, const char* key, bool fallback, const std::string& where);

/// `value` as a string, or DataError saying `where` must be a string.
std::string as_string(const json& value, const std::string& where);

}  // namespace titan::components::tokenizer
