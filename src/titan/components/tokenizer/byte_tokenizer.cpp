#include "titan/components/tokenizer/byte_tokenizer.h"

#include <fmt/format.h>

#include "titan/errors.h"

namespace titan::components::tokenizer {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  text.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id > kEos) {
      throw DataError(fmt::format("byte tokenizer: cannot decode id {} (valid: 0..257)", id));
    }
    if (id < 256) text.push_back(static_cast<char>(id));
  }
  return text;
}

}  // namespace titan::components::tokenizer
