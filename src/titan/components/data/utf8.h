// Strict UTF-8 validation for dataset text (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF), so a corrupt file is reported where it is broken instead of being tokenized.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace titan::components::data {

/// Byte offset of the first byte that does not start or continue a well-formed UTF-8 sequence
/// in `bytes`, or nullopt when all of `bytes` is valid UTF-8. A sequence cut off by the end of
/// `bytes` is invalid at its first byte. Runs at memory speed on ASCII.
std::optional<size_t> find_invalid_utf8(std::string_view bytes);

/// `bytes` with each ill-formed part replaced by U+FFFD, one per maximal subpart (Unicode's
/// recommended practice, as Rust's String::from_utf8_lossy and so Hugging Face's decode): a
/// sequence cut off at the end is one U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace titan::components::data
