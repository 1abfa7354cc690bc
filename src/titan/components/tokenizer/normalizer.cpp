#include "titan/components/tokenizer/normalizer.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

namespace titan::components::tokenizer {
namespace {

utf8proc_option_t options_of(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNFC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case UnicodeForm::kNFD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case UnicodeForm::kNFKC:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case UnicodeForm::kNFKD:
      return static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return UTF8PROC_STABLE;
}

bool is_ascii(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (static_cast<unsigned char>(c) & 0x80) == 0; });
}

// `text` in `form`, or false when it is not valid UTF-8.
bool normalize(std::string_view text, UnicodeForm form, std::string& out) {
  utf8proc_uint8_t* result = nullptr;
  utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                   static_cast<utf8proc_ssize_t>(text.size()), &result, options_of(form));
  if (n < 0) return false;
  out.assign(reinterpret_cast<const char*>(result), static_cast<size_t>(n));
  std::free(result);
  return true;
}

}  // namespace

Normalizer::Normalizer(std::vector<UnicodeForm> forms) : forms_(std::move(forms)) {}

std::string_view Normalizer::apply(std::string_view text, std::string& storage) const {
  if (forms_.empty() || text.empty() || is_ascii(text)) return text;
  std::string current(text);
  for (UnicodeForm form : forms_) {
    std::string next;
    if (!normalize(current, form, next)) return text;
    current = std::move(next);
  }
  if (current == text) return text;
  storage = std::move(current);
  return storage;
}

}  // namespace titan::components::tokenizer
