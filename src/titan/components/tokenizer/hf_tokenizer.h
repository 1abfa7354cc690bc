// Loader of Hugging Face `tokenizer.json` files that hold a byte-level BPE model (Llama 3,
// Qwen3, DeepSeek-V3, GPT-2 style), read as the Rust `tokenizers` crate reads them.
#pragma once

#include <memory>
#include <string>

#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::tokenizer {

/// Loads the tokenizer.json at `path`. BOS/EOS come from `bos_token` / `eos_token` of the
/// tokenizer_config.json beside it (a string, an {"content": ...} object, or null; no file: no
/// BOS/EOS), and `split_special_tokens: true` there stops special tokens from being matched
/// in text. vocab_size() is the largest model or added id plus one.
/// Throws DataError naming the file and the field at fault: unreadable file, invalid JSON, a
/// model other than byte-level BPE (model.type, dropout, subword prefix/suffix,
/// a decoder other than ByteLevel), an unsupported normalizer or pre-tokenizer, a merge of
/// tokens not in the vocab, an added token with lstrip/rstrip/single_word, a BOS/EOS that is
/// not a token.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path);

}  // namespace titan::components::tokenizer
