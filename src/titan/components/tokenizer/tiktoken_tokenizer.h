// Loader of tiktoken BPE files (one "base64(token bytes) rank" per line), such as Meta's
// Llama 3 `tokenizer.model`, set up as TorchTitan's tiktoken tokenizer sets it up: the Llama 3
// pre-tokenizer regex, BPE by rank over raw bytes, and Llama 3's 256 special tokens appended
// after the ranks (<|begin_of_text|>, <|end_of_text|>, <|reserved_special_token_0..3|>,
// <|start_header_id|>, <|end_header_id|>, <|reserved_special_token_4|>, <|eot_id|>,
// <|reserved_special_token_5..250|>).
#pragma once

#include <memory>
#include <string>

#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::tokenizer {

/// The Llama 3 pre-tokenizer pattern (tiktoken `pat_str` of Llama 3 and TorchTitan).
extern const char* const kLlama3Pattern;

/// Loads the tiktoken file at `path`. Ranks are token ids; the special tokens take the ids
/// after the largest rank (the number of lines when ranks are 0..n-1, as TorchTitan assigns
/// them); BOS = <|begin_of_text|>, EOS = <|end_of_text|>. Special tokens in the text are
/// matched (tiktoken's allowed_special="all"). A token that is itself a rank maps straight to
/// it, as in tiktoken. Empty lines are skipped.
/// Throws DataError naming the file and line: unreadable file, a line that is not
/// "base64 rank", bad base64, a rank that is not a non-negative integer, a repeated token or
/// rank, or a byte 0x00..0xFF without a single-byte token.
std::unique_ptr<Tokenizer> load_tiktoken_tokenizer(const std::string& path);

}  // namespace titan::components::tokenizer
