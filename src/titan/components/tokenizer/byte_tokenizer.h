// The built-in byte tokenizer: ids 0..255 are the bytes of the text, 256 = BOS, 257 = EOS.
// Needs no file; the default for tests and debug models.
#pragma once

#include "titan/components/tokenizer/tokenizer.h"

namespace titan::components::tokenizer {

class ByteTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;

  /// One id per byte of `text`.
  std::vector<int32_t> encode(std::string_view text) const override;
  /// Bytes of ids 0..255; BOS and EOS decode to nothing. Throws DataError for an id outside
  /// [0, 258).
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return 258; }
  std::optional<int32_t> bos_id() const override { return kBos; }
  std::optional<int32_t> eos_id() const override { return kEos; }
  std::string describe() const override { return "byte"; }
};

}  // namespace titan::components::tokenizer
