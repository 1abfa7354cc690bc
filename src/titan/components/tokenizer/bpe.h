// Byte-pair encoding of one pre-token word by merge rank (Sennrich et al. 2016, "Neural Machine
// Translation of Rare Words with Subword Units"; byte-level as in GPT-2 and tiktoken).
// The word starts as one symbol per byte; the adjacent pair with the lowest merge rank (the
// leftmost on a tie) is merged until no pair has a rank. A linked list of symbols plus a
// min-heap of candidate pairs makes this O(n log n) per word; a WordCache memoises words.
#pragma once

#include <array>
#include <cstdint>
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
  /// Words remembered by the cache; words longer than 64 bytes are never cached.
  size_t cache_capacity = 1 << 16;
};

/// Immutable after construction; encode() is thread-safe.
class Bpe {
 public:
  /// `vocab`: the model's tokens (raw bytes); `merges`: pairs of ids in `vocab` (when a pair is
  /// listed twice the later entry wins, as in HF tokenizers).
  /// Throws DataError when a byte 0x00..0xFF has no single-byte token in `vocab`.
  Bpe(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options);

  /// Appends the ids of `word` (the raw bytes of one pre-token) to `out`.
  void encode(std::string_view word, std::vector<int32_t>& out) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  struct Target {
    uint32_t rank;
    int32_t result;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Target* find_merge(int32_t left, int32_t right) const;
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::array<int32_t, 256> byte_ids_{};
  std::unordered_map<uint64_t, Target> merges_;
  BpeOptions options_;
  WordCache cache_;
};

}  // namespace titan::components::tokenizer
