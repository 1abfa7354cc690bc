// The vocabulary of a BPE model: token id <-> token bytes (raw bytes, not the byte-level
// alphabet), with lookups by std::string_view that do not allocate.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace titan::components::tokenizer {

/// Immutable after loading; const methods are thread-safe.
class Vocab {
 public:
  /// Adds token `id` (>= 0) spelled by `bytes`. A token that is not `encodable` only decodes:
  /// find() never returns it (tokenizer.json entries that are not byte-level text).
  /// Returns false (and adds nothing) when the id, or the bytes of an encodable token, are
  /// already present.
  bool add(int32_t id, std::string_view bytes, bool encodable = true);

  /// Id of the encodable token spelled exactly by `bytes`.
  std::optional<int32_t> find(std::string_view bytes) const;

  /// True when `id` names a token.
  bool contains(int32_t id) const;

  /// Bytes of token `id`; requires contains(id).
  std::string_view bytes(int32_t id) const;

  /// Largest id plus one (0 when empty).
  int32_t end_id() const { return static_cast<int32_t>(spans_.size()); }

  /// Number of tokens.
  size_t size() const { return count_; }

 private:
  struct Span {
    uint32_t offset = 0;
    uint32_t length = 0;
    bool present = false;
  };
  std::string_view view(const Span& s) const { return {arena_.data() + s.offset, s.length}; }
  size_t slot_of(std::string_view bytes) const;
  void grow_table();

  std::string arena_;           // all token bytes, concatenated
  std::vector<Span> spans_;     // by id
  std::vector<int32_t> table_;  // open addressing (linear probing) of encodable ids, -1 = empty
  size_t encodable_ = 0;
  size_t count_ = 0;
};

}  // namespace titan::components::tokenizer
