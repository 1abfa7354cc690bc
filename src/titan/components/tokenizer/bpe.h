// Byte-pair encoding of one pre-token word by merge rank (Sennrich et al. 2016, "Neural Machine
// Translation of Rare Words with Subword Units"; byte-level as in GPT-2 and tiktoken).
// The word starts as one symbol per byte; the adjacent pair with the lowest merge rank (the
// leftmost on a tie) is merged until no pair has a rank. A byte without a single-byte token is
// handled as Hugging Face's BPE handles a character missing from the vocabulary (its
// merge_word): spelled by `<0xHH>` tokens with byte_fallback, else the unknown token when there
// is one (consecutive ones fused into one with fuse_unk), else dropped, so that its neighbours
// become adjacent. A linked list of symbols plus a
// min-heap of candidate pairs makes this O(n log n) per word; a WordCache memoises words.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "titan/components/tokenizer/vocab.h"
#include "titan/components/tokenizer/word_cache.h"

namespace titan::components::tokenizer {

/// Adjacent tokens `left` `right` merge into `result`; lower `rank` merges first.
struct Merge {
  int32_t left;
  int32_t right;
  int32_t result;
  uint32_t rank;
};

struct BpeOptions {
  /// A word that is itself a token maps straight to it (HF `ignore_merges`; tiktoken always).
  bool ignore_merges = false;
  /// Every byte must have a single-byte token (tiktoken); otherwise missing ones are handled
  /// by the three options below.
  bool require_every_byte = false;
  /// HF `byte_fallback`: a missing byte becomes the `<0xHH>` tokens of the UTF-8 bytes of its
  /// byte-level character (HF looks them up for the character it sees), when all exist.
  bool byte_fallback = false;
  /// HF `unk_token`'s id: what a missing byte becomes otherwise; none: the byte is dropped.
  std::optional<int32_t> unk_id;
  /// HF `fuse_unk`: consecutive unknown bytes of a word become one unknown token.
  bool fuse_unk = false;
  /// Words remembered by the cache; words longer than 64 bytes are never cached.
  size_t cache_capacity = 1 << 16;
};

/// Immutable after construction; encode() is thread-safe.
class Bpe {
 public:
  /// `vocab`: the model's tokens (raw bytes); `merges`: pairs of ids in `vocab` (when a pair is
  /// listed twice the later entry wins, as in HF tokenizers).
  /// Throws DataError when options.require_every_byte and a byte 0x00..0xFF has no
  /// single-byte token in `vocab`. Logs one warning per missing byte the first time a word
  /// holds it.
  Bpe(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options);

  /// Appends the ids of `word` (the raw bytes of one pre-token) to `out`.
  void encode(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }
  /// Bytes that have neither a single-byte token nor byte-fallback tokens.
  int missing_bytes() const;

 private:
  struct Target {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  // The ids a byte starts as: its token, or its `<0xHH>` fallback tokens; none when missing.
  struct Spelling {
    std::array<int32_t, 2> ids{};
    uint8_t count = 0;
    bool fallback = false;
  };
  const Target* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  // Appends the starting ids of `word` (HF merge_word's Word before merging) to `ids`.
  void spell(std::string_view word, std::vector<int32_t>& ids) const;
  void warn_missing(uint8_t byte) const;
  Spelling fallback_spelling(uint8_t byte) const;

  Vocab vocab_;
  std::array<Spelling, 256> spellings_{};
  mutable std::array<std::atomic<bool>, 256> warned_{};
  std::unordered_map<uint64_t, Target> merges_;
  BpeOptions options_;
  WordCache cache_;
};

}  // namespace titan::components::tokenizer
