// Standard base64 (RFC 4648 section 4, '+' '/' and '=' padding) decoding, for tiktoken files.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace titan::components::tokenizer {

/// The bytes `text` encodes, or nullopt when it is not padded base64 (length a multiple of 4,
/// alphabet A-Z a-z 0-9 + /, '=' only as the last one or two characters).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace titan::components::tokenizer
