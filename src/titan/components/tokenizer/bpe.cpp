#include "titan/components/tokenizer/bpe.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "titan/components/tokenizer/byte_level.h"
#include "titan/errors.h"
#include "titan/platform/logging.h"

namespace titan::components::tokenizer {
namespace {

constexpr size_t kMaxCachedWord = 64;

// One symbol of the word being merged; symbols form a doubly linked list by index.
struct Symbol {
  int32_t id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
  bool merged;   // absorbed into its left neighbour
};

// A pair (symbol `pos`, its next) that merges into `result` at `rank`.
struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t result;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

Bpe::Bpe(Vocab vocab, const std::vector<Merge>& merges, BpeOptions options)
    : vocab_(std::move(vocab)), options_(options), cache_(options.cache_capacity) {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    if (auto id = vocab_.find(std::string_view(&c, 1))) {
      spellings_[b] = {{*id, 0}, 1, false};
      continue;
    }
    if (options_.require_every_byte) {
      throw DataError(fmt::format("the vocabulary has no token for byte 0x{:02X}", b));
    }
    if (options_.byte_fallback) spellings_[b] = fallback_spelling(static_cast<uint8_t>(b));
  }
  merges_.reserve(merges.size());
  for (const Merge& m : merges) merges_[pair_key(m.left, m.right)] = {m.rank, m.result};
}

Bpe::Spelling Bpe::fallback_spelling(uint8_t byte) const {
  Spelling spelling;
  spelling.fallback = true;
  for (const unsigned char u : byte_level_char(byte)) {  // 1 or 2 UTF-8 bytes
    const auto id = vocab_.find(fmt::format("<0x{:02X}>", u));
    if (!id) return {};
    spelling.ids[spelling.count++] = *id;
  }
  return spelling;
}

int Bpe::missing_bytes() const {
  return static_cast<int>(std::count_if(spellings_.begin(), spellings_.end(),
                                        [](const Spelling& s) { return s.count == 0; }));
}

const Bpe::Target* Bpe::find_merge(int32_t left, int32_t right) const {
  auto it = merges_.find(pair_key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

void Bpe::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    const Spelling& spelling = spellings_[static_cast<uint8_t>(word[0])];
    if (spelling.count == 1 && !spelling.fallback) {
      out.push_back(spelling.ids[0]);
      return;
    }
  }
  if (options_.ignore_merges) {
    if (auto id = vocab_.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWord;
  if (cacheable && cache_.lookup(word, out)) return;
  const size_t first = out.size();
  merge_word(word, out);
  if (cacheable) cache_.insert(word, out.data() + first, out.data() + out.size());
}

void Bpe::spell(std::string_view word, std::vector<int32_t>& ids) const {
  std::optional<int32_t> unknown;  // HF's pending unknown token, added before the next token
  for (const char c : word) {
    const auto byte = static_cast<uint8_t>(c);
    const Spelling& spelling = spellings_[byte];
    if (spelling.count == 1 && !spelling.fallback) {
      if (unknown) ids.push_back(*unknown);
      unknown.reset();
      ids.push_back(spelling.ids[0]);
      continue;
    }
    warn_missing(byte);
    if (spelling.fallback) {  // HF leaves a pending unknown token pending here
      ids.insert(ids.end(), spelling.ids.begin(), spelling.ids.begin() + spelling.count);
    } else if (options_.unk_id) {
      if (unknown && !options_.fuse_unk) ids.push_back(*unknown);
      unknown = options_.unk_id;
    }
  }
  if (unknown) ids.push_back(*unknown);
}

void Bpe::warn_missing(uint8_t byte) const {
  if (warned_[byte].exchange(true)) return;
  const Spelling& spelling = spellings_[byte];
  log::warn("tokenizer: byte 0x{:02X} has no token in the vocabulary; as in Hugging Face "
            "tokenizers it becomes {}",
            byte,
            spelling.fallback ? fmt::format("its byte-fallback tokens (ids {})",
                                            fmt::join(spelling.ids.begin(),
                                                      spelling.ids.begin() + spelling.count, ", "))
            : options_.unk_id ? fmt::format("the unknown token (id {})", *options_.unk_id)
                              : std::string("nothing (it is dropped)"));
}

void Bpe::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Candidate> heap;
  thread_local std::vector<int32_t> ids;
  ids.clear();
  spell(word, ids);
  const auto n = static_cast<int32_t>(ids.size());
  if (n == 0) return;
  symbols.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, false};
  heap.clear();
  auto consider = [&](int32_t pos) {  // queue the pair starting at symbol `pos`, if it merges
    int32_t next = symbols[pos].next;
    if (next < 0) return;
    if (const Target* t = find_merge(symbols[pos].id, symbols[next].id)) {
      heap.push_back({t->rank, pos, t->result});
      std::push_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    }
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<Candidate>());
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[top.pos];
    if (left.merged || left.next < 0) continue;
    const Target* t = find_merge(left.id, symbols[left.next].id);
    if (t == nullptr || t->result != top.result || t->rank != top.rank) continue;  // stale
    Symbol& right = symbols[left.next];
    right.merged = true;
    left.id = top.result;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) consider(left.prev);
    consider(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace titan::components::tokenizer
