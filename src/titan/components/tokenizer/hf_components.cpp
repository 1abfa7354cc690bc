#include "titan/components/tokenizer/hf_components.h"

#include <fmt/format.h>

#include <map>

#include "titan/errors.h"

namespace titan::components::tokenizer {
namespace {

void collect_forms(const json& section, const std::string& where, std::vector<UnicodeForm>& forms) {
  static const std::map<std::string, UnicodeForm> kForms = {{"NFC", UnicodeForm::kNFC},
                                                            {"NFD", UnicodeForm::kNFD},
                                                            {"NFKC", UnicodeForm::kNFKC},
                                                            {"NFKD", UnicodeForm::kNFKD}};
  const std::string type = string_field(section, "type", where);
  if (type == "Sequence") {
    const json& list = array_field(section, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i) {
      collect_forms(list[i], fmt::format("{}.normalizers[{}]", where, i), forms);
    }
    return;
  }
  auto it = kForms.find(type);
  if (it == kForms.end()) {
    throw DataError(fmt::format(
        "{}: unsupported normalizer type '{}' (supported: NFC, NFD, NFKC, NFKD, Sequence)", where,
        type));
  }
  forms.push_back(it->second);
}

SplitBehavior behavior_from_name(const std::string& name, const std::string& where) {
  static const std::map<std::string, SplitBehavior> kBehaviors = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  auto it = kBehaviors.find(name);
  if (it == kBehaviors.end()) {
    throw DataError(fmt::format(
        "{}: unknown split behavior '{}' (expected Removed, Isolated, MergedWithPrevious, "
        "MergedWithNext or Contiguous)",
        where, name));
  }
  return it->second;
}

std::unique_ptr<PreTokenizer> split_from_json(const json& section, const std::string& where) {
  const json& pattern = required_field(section, "pattern", where);
  const std::string pattern_where = where + ".pattern";
  const bool literal = pattern.is_object() && pattern.contains("String");
  const std::string text = literal ? string_field(pattern, "String", pattern_where)
                                   : string_field(pattern, "Regex", pattern_where);
  const std::string behavior = string_field(section, "behavior", where);
  return std::make_unique<SplitPreTokenizer>(text, literal,
                                             behavior_from_name(behavior, where + ".behavior"),
                                             bool_field(section, "invert", false, where));
}

}  // namespace

Normalizer normalizer_from_json(const json& section, const std::string& where) {
  if (section.is_null()) return Normalizer();
  std::vector<UnicodeForm> forms;
  collect_forms(section, where, forms);
  return Normalizer(std::move(forms));
}

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const json& section,
                                                      const std::string& where) {
  if (section.is_null()) return nullptr;
  const std::string type = string_field(section, "type", where);
  if (type == "Split") return split_from_json(section, where);
  if (type == "ByteLevel") {
    return std::make_unique<ByteLevelPreTokenizer>(
        bool_field(section, "add_prefix_space", true, where),
        bool_field(section, "use_regex", true, where));
  }
  if (type == "Sequence") {
    const json& list = array_field(section, "pretokenizers", where);
    std::vector<std::unique_ptr<PreTokenizer>> stages;
    for (size_t i = 0; i < list.size(); ++i) {
      auto stage = pre_tokenizer_from_json(list[i], fmt::format("{}.pretokenizers[{}]", where, i));
      if (stage) stages.push_back(std::move(stage));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(stages));
  }
  throw DataError(
      fmt::format("{}: unsupported pre_tokenizer type '{}' (supported: Split, ByteLevel, Sequence)",
                  where, type));
}

}  // namespace titan::components::tokenizer
