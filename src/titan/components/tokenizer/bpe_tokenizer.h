// The byte-level BPE tokenizer pipeline shared by Hugging Face tokenizer.json files and tiktoken
// files (their loaders build it): added tokens are cut out of the raw text, the rest is
// normalized, normalized added tokens are cut out, the remaining text is pre-tokenized and each
// piece is BPE-encoded. Decoding concatenates token bytes (added tokens as their content).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "titan/components/tokenizer/added_tokens.h"
#include "titan/components/tokenizer/bpe.h"
#include "titan/components/tokenizer/normalizer.h"
#include "titan/components/tokenizer/pretokenizer.h"
#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::tokenizer {

/// Everything a BpeTokenizer is made of.
struct BpeTokenizerParts {
  std::string description;                      // describe()
  Normalizer normalizer;                        // identity by default
  std::unique_ptr<PreTokenizer> pre_tokenizer;  // null: each text stretch is one piece
  std::unique_ptr<Bpe> model;
  std::vector<AddedToken> added_tokens;
  bool match_special_tokens = true;  // false: special added tokens are encoded as plain text
  std::optional<int32_t> bos;
  std::optional<int32_t> eos;
};

class BpeTokenizer final : public Tokenizer {
 public:
  /// Takes the parts; `model` must be set.
  explicit BpeTokenizer(BpeTokenizerParts parts);

  std::vector<int32_t> encode(std::string_view text) const override;
  /// Throws DataError naming the first id that is not a token.
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> bos_id() const override { return parts_.bos; }
  std::optional<int32_t> eos_id() const override { return parts_.eos; }
  std::string describe() const override { return parts_.description; }

 private:
  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;

  BpeTokenizerParts parts_;
  AddedTokenMatcher raw_matcher_;                           // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher_;                    // added tokens with normalized == true
  std::unordered_map<int32_t, std::string> added_content_;  // id -> content, for decode
  int64_t vocab_size_;
};

}  // namespace titan::components::tokenizer
