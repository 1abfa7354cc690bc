// The tokenizer interface the data pipeline, generation and `titan tokenize` use, and the
// factory that picks an implementation from a path (tokenizer.json, tiktoken .model, a folder
// holding one) or the built-in byte-level tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace titan::components {

/// Text <-> token ids. Implementations are immutable after construction and thread-safe.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// Ids of `text` without BOS/EOS. Added/special tokens present in the text are matched.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  /// Bytes of `ids` joined (special tokens included as their text): the exact bytes, which may
  /// end inside a character.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  /// decode() as text, as Hugging Face's decode gives it: every ill-formed UTF-8 part (e.g. a
  /// character cut off by the last id) replaced by U+FFFD.
  std::string decode_text(const std::vector<int32_t>& ids) const;
  /// Number of ids (model vocab plus added tokens).
  virtual int64_t vocab_size() const = 0;
  virtual std::optional<int32_t> bos_id() const = 0;
  virtual std::optional<int32_t> eos_id() const = 0;
  /// Short description for logs and the run manifest ("byte", "hf:/path/tokenizer.json").
  virtual std::string describe() const = 0;
};

/// Opens the tokenizer at `path`: a tokenizer.json, a tiktoken .model file, or a folder holding
/// one (tokenizer_config.json beside it supplies BOS/EOS). An empty path or "byte" gives the
/// built-in byte tokenizer (ids 0..255 are bytes, 256 = BOS, 257 = EOS).
/// Throws DataError naming the file when it is missing or malformed.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace titan::components
