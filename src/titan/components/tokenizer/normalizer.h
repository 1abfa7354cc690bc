// Normalization of text before pre-tokenization, as the `normalizer` section of a Hugging Face
// tokenizer.json asks: Unicode normalization forms (utf8proc, Unicode Standard Annex #15),
// applied in sequence. No forms (null or an empty Sequence) leaves the text unchanged.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace titan::components::tokenizer {

enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };

/// Immutable after construction; apply() is thread-safe.
class Normalizer {
 public:
  /// The identity.
  Normalizer() = default;
  /// Applies `forms` in order.
  explicit Normalizer(std::vector<UnicodeForm> forms);

  /// The normalized `text`: either `text` itself (nothing to change; ASCII never changes) or a
  /// view of `storage`, which receives the new text. Text that is not valid UTF-8 is returned
  /// unchanged (BPE still encodes its bytes).
  std::string_view apply(std::string_view text, std::string& storage) const;

 private:
  std::vector<UnicodeForm> forms_;
};

}  // namespace titan::components::tokenizer
