// GPT-2's byte-level alphabet: each byte 0..255 stands for one printable Unicode character, so
// that byte strings can be written as text in tokenizer.json vocabularies and merges
// (Radford et al. 2019, "Language Models are Unsupervised Multitask Learners"; the `ByteLevel`
// pre-tokenizer and decoder of Hugging Face tokenizers). titan runs BPE on raw bytes, so this
// mapping is only needed to read vocabularies and merges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace titan::components::tokenizer {

/// UTF-8 text of the character that stands for `byte` (e.g. 0x20 -> "Ġ", 'a' -> "a").
std::string_view byte_level_char(uint8_t byte);

/// Inverse of byte_level_char over a whole string: the raw bytes spelled by `text`, or nullopt
/// when `text` holds a character outside the 256-character alphabet (or is not valid UTF-8).
std::optional<std::string> byte_level_to_bytes(std::string_view text);

}  // namespace titan::components::tokenizer
