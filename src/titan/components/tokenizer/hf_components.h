// Builds the normalizer and pre-tokenizer that the `normalizer` and `pre_tokenizer` sections of
// a Hugging Face tokenizer.json describe. Supported: normalizers NFC, NFD, NFKC, NFKD and
// Sequence; pre-tokenizers Split (Regex or String pattern, any behavior, invert), ByteLevel and
// Sequence. Anything else is a DataError naming the type and the supported ones.
#pragma once

#include <memory>
#include <string>

#include "titan/components/tokenizer/normalizer.h"
#include "titan/components/tokenizer/pretokenizer.h"
#include "titan/components/tokenizer/tokenizer_files.h"

namespace titan::components::tokenizer {

/// The normalizer of `section` (null: the identity). `where`: its path, for error messages.
Normalizer normalizer_from_json(const json& section, const std::string& where);

/// The pre-tokenizer of `section` (null gives nullptr: no splitting). `where`: its path.
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const json& section,
                                                      const std::string& where);

}  // namespace titan::components::tokenizer
